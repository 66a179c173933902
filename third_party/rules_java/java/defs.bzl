"""Offline stand-in for rules_java: forwards to Bazel's native Java rules."""

def java_binary(**kwargs):
    native.java_binary(**kwargs)

def java_library(**kwargs):
    native.java_library(**kwargs)

def java_import(**kwargs):
    native.java_import(**kwargs)

def java_test(**kwargs):
    native.java_test(**kwargs)

def java_plugin(**kwargs):
    native.java_plugin(**kwargs)

def java_toolchain(**kwargs):
    native.java_toolchain(**kwargs)

def java_runtime(**kwargs):
    native.java_runtime(**kwargs)
