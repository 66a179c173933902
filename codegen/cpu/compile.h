// A fused, planned program's kernels as one ELF shared object.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "ir/graph.h"

namespace kiln::codegen::cpu {

/// How to compile.
struct CompileOptions {
  /// The CPU to select instructions for and tune for (codegen/cpu/cpu_target.h):
  /// "native" is the host's.
  std::string cpu = "native";
  /// The linker that turns the object into a shared object.
  std::string linker = "/usr/bin/ld.lld-19";
  /// A kernel whose outputs total at least this many bytes writes them with non-temporal
  /// (streaming) stores, which bypass the cache: right for outputs too large to stay in
  /// it, wrong for small ones the next kernel would read from cache.
  int64_t streaming_store_bytes = int64_t{16} << 20;
};

/// A program's kernels for one CPU.
struct KernelLibrary {
  std::vector<uint8_t> elf;  ///< an ELF shared object
  /// The CPU features beyond x86-64 its code may use (CpuTarget::required).
  std::vector<std::string> cpu_features;
};

/// Emits the program's kernels as LLVM IR (codegen/cpu/kernel_emitter.h), optimizes
/// them at O3 (loop vectorization, with glibc's libmvec as the vector math library),
/// and links them into an ELF shared object that depends on libc, libm and libmvec only.
/// An unknown or 32-bit CPU is an error before LLVM sees it.
Result<KernelLibrary> compile_kernels(const ir::Graph& planned, const CompileOptions& options = {});

}  // namespace kiln::codegen::cpu
