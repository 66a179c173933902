// The public compile API: a graph in, a .kiln artifact out.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "ir/graph.h"
#include "ir/tensor.h"

namespace kiln {

/// The CPUs artifacts are compiled for unless told otherwise. The third is left out of
/// programs whose kernels never round to bf16 (its code would be x86-64-v4's).
inline constexpr std::string_view kDefaultCpus = "x86-64-v3,x86-64-v4,x86-64-v4+avx512bf16";

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
  /// The CPUs to compile for, comma-separated: "native" (this machine's), "x86-64-v3",
  /// or any 64-bit x86 CPU LLVM knows, each optionally with features it adds
  /// ("x86-64-v4+avx512bf16"). One kernel library per CPU goes into the artifact, and the
  /// runtime loads the one with the most features its CPU has. The default runs on any
  /// CPU with AVX2 and FMA (x86-64-v3: Haswell, Zen 1 and later), uses AVX-512 where
  /// there is one (x86-64-v4), which is as fast as native on the fusion suite, and
  /// AVX512-BF16's conversion to bf16 where a CPU has it (Cooper Lake, Sapphire Rapids,
  /// Zen 4 and later) (docs/cpu.md).
  std::string cpu = std::string(kDefaultCpus);
  /// False compiles the unfused baseline (every op its own kernel).
  bool fuse = true;
  /// Kernels whose outputs total at least this many bytes write them with streaming
  /// (non-temporal) stores; see codegen::cpu::CompileOptions.
  int64_t streaming_store_bytes = int64_t{16} << 20;
  /// Values of the graph's params, and initial values of its state (zero without one),
  /// by name (compiler/weights.h).
  std::map<std::string, ir::Tensor> weights;
  /// The imported model's names of inputs and outputs, by kiln name (`kiln compile
  /// M.onnx`): the artifact keeps them, and `kiln inspect` shows them.
  std::map<std::string, std::string> source_names;
  /// Round floating weights of another floating type to their argument's type.
  bool convert_weight_dtypes = false;
  /// Ignore weights that name no param or state (else they are an error).
  bool allow_unused_weights = false;
  /// CUDA: let f32 matmuls use TF32 tensor cores (inputs rounded to 10 mantissa bits,
  /// f32 accumulation), as PyTorch's set_float32_matmul_precision("high") does. Off by
  /// default: matmuls then give f32 results (docs/cuda.md has the tolerance it costs).
  bool allow_tf32 = false;
  /// "f32" (the default: the graph's own types), or "bf16" or "f16": the autocast pass
  /// (passes/autocast.h) runs first, so matmuls take half-precision operands with f32
  /// accumulation and everything else computes in f32; params that only matmuls read are
  /// stored in the half precision (their f32 weights rounded to it).
  std::string precision = "f32";
  /// Marks the first dim of every input and output as a batch whose rows the graph
  /// computes independently (the artifact's `batch`, format 1.6), so that `kiln serve`
  /// packs the rows of concurrent requests into one run. The graph must have no state,
  /// and every input and output must lead with the same dim.
  bool batch = false;
};

/// Runs the default pipeline (decompose, canonicalize, cse, dce, fusion, memory-plan),
/// generates the kernels, and writes the artifact: the plan, the steps, the kernels (an
/// ELF shared object for the CPU; cubin per architecture and PTX for CUDA), the weights
/// and the graph's text IR.
Result<std::vector<uint8_t>> compile_to_artifact(const ir::Graph& graph, const CompileOptions& options);

/// The names of a --cpu list ("x86-64-v3,x86-64-v4"), each checked (before LLVM sees it);
/// errors name the CPU and say what is accepted.
Result<std::vector<std::string>> cpu_list(const std::string& cpus);

/// The versions of what the compiler is built with: "LLVM 19.1.7", "NVRTC 13.0".
std::string llvm_version();
std::string nvrtc_version();

/// Whether `target` names a target compile_to_artifact generates code for ("cpu",
/// "cuda"); the error lists them.
Status check_target(std::string_view target);

/// Whether `precision` is one CompileOptions::precision takes (f32, bf16, f16); the error
/// lists them.
Status check_precision(std::string_view precision);

/// The CPU names a --cpu list may hold besides "native", as LLVM lists them.
std::vector<std::string> known_cpus();
/// The features a --cpu name may add ("+avx512bf16"): those the runtime checks.
std::vector<std::string> known_cpu_features();

/// The CUDA C++ program compile_to_artifact hands NVRTC for this graph (for reading).
Result<std::string> cuda_source(const ir::Graph& graph, const CompileOptions& options);

}  // namespace kiln
