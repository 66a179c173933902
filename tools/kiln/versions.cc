#include "tools/kiln/versions.h"

#include <fmt/format.h>

#include "runtime/model.h"

namespace kiln::cli {

std::string runtime_versions() {
  auto driver = runtime::cuda_driver_version();
  return fmt::format("runtime: kiln {}\nartifact format: {}\nCPU matmuls: {}\nCUDA driver: {}\n",
                     runtime::runtime_version(), runtime::artifact_format_versions(), runtime::cpu_matmul_library(),
                     driver.ok() ? *driver : "none (" + driver.error().message + ")");
}

}  // namespace kiln::cli
