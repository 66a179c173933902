// CUDA's kernel for an f32 attention step (ir/attention_match.h, the runner kCuda, head
// dims up to ir::kCudaF32AttentionMaxHeadDim): the same online softmax as the tensor-core
// kernel of attention_kernel.h, on f32 FMAs, since an f32 product may not round its
// operands (TF32) unless asked. Internal to codegen/cuda: emit_attention_kernel calls it.
#pragma once

#include <string>

#include "base/result.h"
#include "codegen/cuda/kernel_emitter.h"
#include "ir/attention_match.h"
#include "ir/graph.h"

namespace kiln::codegen::cuda {

/// Query rows per block of the f32 kernel.
constexpr int kAttentionF32QueryRows = 64;

/// Appends to `out` the kernel `symbol` of f32 attention step `step` (parameters as
/// emit_attention_kernel's). A block of 128 threads takes 64 query rows of one batch index
/// (a grid-stride loop over them all), kept in shared memory; each tile of 32 keys of k and
/// v goes through shared memory too; each thread computes a 4x4 block of the tile's scores
/// (f32 FMAs in the order of d), f on them and the rows' running maximum and sum, and adds
/// P·v into its 4 rows' outputs; P passes through shared memory between the two. The four
/// arrays are the launch's dynamic shared memory (Launch::shared_bytes: 43.5 KB at head
/// dims of 64, 76.5 KB at 128). Where f ends in a causal mask, the tiles past the block's
/// last query are left out as the tensor-core kernel leaves them out.
Result<Launch> emit_f32_attention_kernel(const ir::Graph& g, const ir::Step& step, const ir::AttentionMatch& m,
                                         const std::string& symbol, std::string& out);

}  // namespace kiln::codegen::cuda
