// Target names as artifacts record them, shared by the compiler and the runtime.
#pragma once

#include <string_view>

#include "base/parse_number.h"

namespace kiln::format {

/// The target of CPU artifacts.
inline constexpr std::string_view kCpuTarget = "cpu-x86_64";
/// The prefix of CUDA artifacts' targets ("cuda-sm_90": the lowest architecture they hold code for).
inline constexpr std::string_view kCudaTargetPrefix = "cuda-";

/// The number of a GPU architecture name: 90 for "sm_90", "compute_90" or "cuda-sm_90";
/// 0 when what follows the last '_' is not a number from 1 to 9999.
inline int cuda_arch_number(std::string_view arch) {
  const size_t underscore = arch.rfind('_');
  if (underscore == std::string_view::npos) return 0;
  const auto number = parse_integer(arch.substr(underscore + 1));
  return number && *number >= 1 && *number <= 9999 ? static_cast<int>(*number) : 0;
}

}  // namespace kiln::format
