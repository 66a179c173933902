# lit configuration for kiln's text tests: `# RUN: kiln opt %s ... | FileCheck %s`.
import os

import lit.formats

config.name = "kiln"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".kir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(os.environ.get("TEST_TMPDIR", "/tmp"), "lit")

# run_lit.sh puts kiln, FileCheck and not first on PATH.
config.environment["PATH"] = os.environ["KILN_LIT_PATH"] + os.pathsep + "/usr/bin:/bin"
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "cli", "Inputs")))

# lit passes the tests only the environment it is told to: forward what the test
# configuration sets for the tools (.bazelrc's asan config points KILN_LIBDNNL at no
# library, since LeakSanitizer's tracer crashes on oneDNN's OpenMP threads at exit).
for name in ("KILN_LIBDNNL", "ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS"):
    if name in os.environ:
        config.environment[name] = os.environ[name]
