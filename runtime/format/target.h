// Names artifacts record, written by the compiler and read by the runtime: targets, and
// the symbols of CPU kernels.
#pragma once

#include <string>
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

/// The entry point of a kernel step: "kiln_" + the step's name.
inline std::string kernel_symbol(std::string_view step_name) { return "kiln_" + std::string(step_name); }

/// The first kernel of a split reduction step (format 1.4), which sums the parts of its
/// rows into scratch before the step's kernel runs: KERNEL_partial.
inline std::string partial_kernel_symbol(std::string_view kernel) { return std::string(kernel) + "_partial"; }

/// A loop step's kernel over activations in one of oneDNN's layouts (format 1.10,
/// Step.channel_layouts): KERNEL_c<block> in blocks of channels, KERNEL_channels_last for 0.
inline std::string channel_layout_kernel_symbol(std::string_view kernel, int block) {
  return std::string(kernel) + (block == 0 ? "_channels_last" : "_c" + std::to_string(block));
}

/// The constant beside a CPU kernel that gives its argument count and each argument's
/// bytes (format 1.2): KERNEL_signature.
inline std::string kernel_signature_symbol(std::string_view kernel) { return std::string(kernel) + "_signature"; }

}  // namespace kiln::format
