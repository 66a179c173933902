#include "tools/kiln/versions.h"

#include <fmt/format.h>

#include "runtime/model.h"

namespace kiln::cli {

std::string runtime_versions() {
  auto driver = runtime::cuda_driver_version();
  return fmt::format("runtime: kiln {}\nartifact format: {}\nCUDA driver: {}\n", runtime::runtime_version(),
                     runtime::artifact_format_versions(),
                     driver.ok() ? *driver : "none (" + driver.error().message + ")");
}

}  // namespace kiln::cli
