// CUDA C++ for the kernel steps of a fused, planned program.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "ir/graph.h"

namespace kiln::codegen::cuda {

/// How a kernel step is launched: threads per block, and the most blocks that have work
/// (the runtime launches at most what the GPU holds at once; kernels loop over the rest).
struct Launch {
  int block_threads = 0;
  int64_t grid_blocks = 0;
  /// A split reduction step's first kernel (ir::kCudaSplit), or zeros.
  int partial_block_threads = 0;
  int64_t partial_grid_blocks = 0;
  /// Dynamic shared memory per block, in bytes (the f32 attention kernel's arrays), and
  /// per block of the first kernel (an attention backward's).
  int shared_bytes = 0;
  int partial_shared_bytes = 0;
};

/// The kernels of a program, as CUDA C++ without the prelude.
struct ProgramSource {
  std::string kernels;
  /// Per step of the program (library steps but attention's: zero).
  std::vector<Launch> launches;
  /// Per step, the function it launches (its first kernel: this + "_partial"): its own
  /// (`symbol_prefix` + the step's name), or an earlier step's whose kernels are the same
  /// text; empty for library steps that launch none.
  std::vector<std::string> symbols;
};

/// The device helpers every program starts with (no #include; NVRTC needs no headers).
std::string_view prelude();

/// Emits one `extern "C" __global__` function per kernel step (loop, reduction,
/// scatter), named `symbol_prefix` + the step's name, whose parameters are device
/// pointers to the step's inputs and then its outputs (every size is a constant):
///  - loop kernels: a grid-stride loop, with 16-byte vector loads and stores when every
///    value has the iteration shape and the pointers are aligned (checked at run time);
///  - reduction kernels: one block per row (one warp per row for rows of up to 1024
///    elements), warp shuffles, and rows kept in registers where they fit, so each row
///    is read from memory once whatever the number of reductions over it;
///  - scatter_add: one block, updates applied in order (repeated indices add up);
///  - a reduction step that ir::reduction_split splits under ir::kCudaSplit: a first
///    kernel, named with "_partial" after the step's, sums each part (Columns: a thread
///    per column and part, reads coalesced across columns; Rows: a block per part) into
///    a double of the scratch, which both kernels take as a last parameter
///    (`double* parts_scratch`); the step's kernel adds each row's parts in a fixed
///    order and finishes the row;
///  - an attention library step (ir/attention_match.h): attention_kernel.h's kernel.
/// Steps whose kernels would be the same text but for their names (a model's repeated
/// blocks) share the first one's: the program holds each kernel once.
Result<ProgramSource> emit_kernels(const ir::Graph& planned, std::string_view symbol_prefix = "kiln_");

/// The whole program: prelude() then emit_kernels(planned).kernels.
Result<ProgramSource> emit_program(const ir::Graph& planned);

}  // namespace kiln::codegen::cuda
