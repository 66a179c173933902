// What `kiln --version` and `kiln-run --version` print.
#pragma once

#include <string>

namespace kiln::cli {

/// The runtime's version, the artifact formats it reads, and the NVIDIA driver's CUDA
/// version (or why there is none), a line each.
std::string runtime_versions();

}  // namespace kiln::cli
