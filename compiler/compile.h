// The public compile API: a graph in, a .kiln artifact out.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "ir/graph.h"
#include "ir/tensor.h"

namespace kiln {

/// How to compile.
struct CompileOptions {
  /// "cpu" or "cuda".
  std::string target = "cpu";
  /// CUDA: the architectures to compile cubin for; PTX of the newest is added for GPUs
  /// newer than all of them.
  std::vector<std::string> cuda_archs = {"sm_90"};
  /// CUDA: reuse NVRTC results from the on-disk cache (codegen/cuda/nvrtc_compile.h).
  bool use_compile_cache = true;
  /// CUDA: print cache hits and misses and NVRTC's time on stderr.
  bool verbose = false;
  /// The CPU to compile for; "native" is this machine's.
  std::string cpu = "native";
  /// False compiles the unfused baseline (every op its own kernel).
  bool fuse = true;
  /// Kernels whose outputs total at least this many bytes write them with streaming
  /// (non-temporal) stores; see codegen::cpu::CompileOptions.
  int64_t streaming_store_bytes = int64_t{16} << 20;
  /// Values of the graph's params, by name.
  std::map<std::string, ir::Tensor> weights;
};

/// Runs the default pipeline (decompose, canonicalize, cse, dce, fusion, memory-plan),
/// generates the kernels, and writes the artifact: the plan, the steps, the kernels (an
/// ELF shared object for the CPU; cubin per architecture and PTX for CUDA), the weights
/// and the graph's text IR.
Result<std::vector<uint8_t>> compile_to_artifact(const ir::Graph& graph, const CompileOptions& options);

/// The CUDA C++ program compile_to_artifact hands NVRTC for this graph (for reading).
Result<std::string> cuda_source(const ir::Graph& graph, const CompileOptions& options);

}  // namespace kiln
