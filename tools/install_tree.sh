#!/bin/bash
# Lays out an installed kiln under PREFIX from files already built (tools/install.sh builds
# them; //tests:embedding_test passes them from Bazel's runfiles):
#   PREFIX/bin/kiln, kiln-run
#   PREFIX/lib/libkiln_runtime.so, libkiln_compiler.so, libkiln_serving.so
#   PREFIX/include/kiln/...            the public headers, at their repository paths
#   PREFIX/lib/pkgconfig/kiln-runtime.pc, kiln-compiler.pc, kiln-serving.pc
#   PREFIX/lib/cmake/kiln/kilnConfig.cmake, kilnConfigVersion.cmake
#   PREFIX/share/kiln/kiln.BUILD       for a Bazel workspace's new_local_repository
#   PREFIX/share/kiln/bazel/NAME/      offline stand-ins for the repositories Bazel 4 would
#                                      download (rules_cc, rules_java, remote_coverage_tools)
# usage: install_tree.sh PREFIX VERSION --bazel-repos DIR... --bin FILE... --lib FILE... --include FILE...
# (headers are given by their repository-relative paths, from the current directory; the
# DIRs are kiln's third_party stand-ins, each installed under its own name).
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: install_tree.sh PREFIX VERSION --bazel-repos DIR... --bin FILE... --lib FILE... --include FILE..." >&2
  exit 2
fi
prefix=$1
version=$2
shift 2
mkdir -p "$prefix/bin" "$prefix/lib/pkgconfig" "$prefix/lib/cmake/kiln" "$prefix/include/kiln" "$prefix/share/kiln"
prefix=$(cd "$prefix" && pwd)
kind=""
for arg in "$@"; do
  case $arg in
    --bin|--lib|--include|--bazel-repos) kind=${arg#--}; continue ;;
  esac
  case $kind in
    bin) install -m 755 "$arg" "$prefix/bin/$(basename "$arg")" ;;
    lib) install -m 755 "$arg" "$prefix/lib/$(basename "$arg")" ;;
    include) install -D -m 644 "$arg" "$prefix/include/kiln/$arg" ;;
    bazel-repos) mkdir -p "$prefix/share/kiln/bazel" && cp -rL "$arg" "$prefix/share/kiln/bazel/" && chmod -R u+w "$prefix/share/kiln/bazel" ;;
    *) echo "install_tree.sh: '$arg' comes before --bin, --lib or --include" >&2; exit 2 ;;
  esac
done

for lib in runtime compiler serving; do
  case $lib in
    runtime) description="loads and runs compiled .kiln artifacts"; requires="" ;;
    compiler) description="the model-definition API, the text IR and compile_to_artifact"; requires="Requires: kiln-runtime = $version" ;;
    serving) description="an HTTP server of artifacts (KServe v2 protocol)"; requires="Requires: kiln-runtime = $version" ;;
  esac
  cat > "$prefix/lib/pkgconfig/kiln-$lib.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include/kiln

Name: kiln-$lib
Description: kiln's $lib: $description
Version: $version
$requires
Cflags: -std=c++20 -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lkiln_$lib
PC
done

cat > "$prefix/lib/cmake/kiln/kilnConfig.cmake" <<'CMAKE'
# find_package(kiln) defines the imported targets kiln::runtime (load and run artifacts),
# kiln::compiler (the model-definition API and compile_to_artifact) and kiln::serving (an
# HTTP server of artifacts), C++20.
get_filename_component(_kiln_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
foreach(_kiln_lib runtime compiler serving)
  if(NOT TARGET kiln::${_kiln_lib})
    add_library(kiln::${_kiln_lib} SHARED IMPORTED)
    set_target_properties(kiln::${_kiln_lib} PROPERTIES
      IMPORTED_LOCATION "${_kiln_prefix}/lib/libkiln_${_kiln_lib}.so"
      INTERFACE_INCLUDE_DIRECTORIES "${_kiln_prefix}/include/kiln"
      INTERFACE_COMPILE_FEATURES cxx_std_20)
  endif()
endforeach()
set_property(TARGET kiln::compiler PROPERTY INTERFACE_LINK_LIBRARIES kiln::runtime)
set_property(TARGET kiln::serving PROPERTY INTERFACE_LINK_LIBRARIES kiln::runtime)
unset(_kiln_lib)
unset(_kiln_prefix)
CMAKE
cat > "$prefix/lib/cmake/kiln/kilnConfigVersion.cmake" <<CMAKE
# kiln $version: compatible with requests for the same major version, not newer.
set(PACKAGE_VERSION "$version")
string(REGEX MATCH "^[0-9]+" _kiln_major "\${PACKAGE_VERSION}")
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION OR NOT PACKAGE_FIND_VERSION_MAJOR STREQUAL _kiln_major)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
CMAKE

cat > "$prefix/share/kiln/kiln.BUILD" <<'BUILD'
# The installed kiln for a Bazel workspace (docs/embedding.md):
#   new_local_repository(name = "kiln", path = "PREFIX", build_file = "PREFIX/share/kiln/kiln.BUILD")
# then depend on "@kiln//:runtime", "@kiln//:compiler" or "@kiln//:serving". C++20.
cc_library(
    name = "runtime",
    srcs = ["lib/libkiln_runtime.so"],
    hdrs = glob(["include/kiln/**/*.h"]),
    strip_include_prefix = "include/kiln",
    visibility = ["//visibility:public"],
)

cc_library(
    name = "compiler",
    srcs = ["lib/libkiln_compiler.so"],
    hdrs = glob(["include/kiln/**/*.h", "include/kiln/**/*.def"]),
    strip_include_prefix = "include/kiln",
    visibility = ["//visibility:public"],
    deps = [":runtime"],
)

cc_library(
    name = "serving",
    srcs = ["lib/libkiln_serving.so"],
    hdrs = glob(["include/kiln/**/*.h"]),
    strip_include_prefix = "include/kiln",
    visibility = ["//visibility:public"],
    deps = [":runtime"],
)
BUILD
echo "installed kiln $version in $prefix"
