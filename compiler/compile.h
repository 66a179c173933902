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
  /// "cpu" (the CUDA backend comes later).
  std::string target = "cpu";
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
/// generates the kernels, and writes the artifact: the plan, the steps, the kernels as an
/// ELF shared object, the weights and the graph's text IR.
Result<std::vector<uint8_t>> compile_to_artifact(const ir::Graph& graph, const CompileOptions& options);

}  // namespace kiln
