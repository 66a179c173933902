// The CPU a kernel library is compiled for, checked before LLVM sees its name: LLVM
// aborts on a 32-bit CPU and warns six times on an unknown one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace kiln::codegen::cpu {

/// A resolved CPU: what LLVM gets, and what the code may need of the CPU that runs it.
struct CpuTarget {
  std::string name;      ///< as given: "x86-64-v3", "native", "znver4"
  std::string llvm_cpu;  ///< the LLVM CPU ("znver4" for native on such a machine)
  /// Every ISA feature of the CPU, "+name" for those in format::kCpuFeatureBits (or the
  /// baseline) and "-name" for the others, so no instruction the runtime cannot check is
  /// ever emitted.
  std::string llvm_features;
  /// The checkable features the code may use beyond the x86-64 baseline, sorted: what
  /// the artifact records and the runtime checks.
  std::vector<std::string> required;
};

/// Resolves "native" (this machine's CPU and features), "x86-64", "x86-64-v2/v3/v4" or any
/// 64-bit x86 CPU LLVM knows ("skylake-avx512", "znver4", ...), each optionally followed by
/// features it adds ("x86-64-v4+avx512bf16"). Errors name the CPU or feature and say what
/// is accepted.
Result<CpuTarget> resolve_cpu(std::string_view name);

/// "LLVM 19.1.7": the LLVM the code generator is built with.
std::string llvm_version();

/// The CPU names resolve_cpu accepts besides "native", as LLVM lists them.
std::vector<std::string> known_cpus();
/// The features a name may add with "+" (those the runtime checks), sorted.
std::vector<std::string> known_cpu_features();

}  // namespace kiln::codegen::cpu
