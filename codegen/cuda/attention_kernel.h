// CUDA's kernel for an attention step (ir/attention_match.h, the runner kCuda): softmax(f(q·kᵀ))·v
// in one pass over the keys (online softmax, as FlashAttention: Dao et al. 2022,
// arXiv:2205.14135), so the [.., T, S] scores never reach memory.
#pragma once

#include <string>

#include "base/result.h"
#include "codegen/cuda/kernel_emitter.h"
#include "ir/attention_match.h"
#include "ir/graph.h"

namespace kiln::codegen::cuda {

/// Keys per tile of the attention kernel.
constexpr int kAttentionKeyTile = 64;

/// Variants of the bf16/f16 kernel, for comparisons on a GPU until one has weighed them,
/// read from the environment when such a kernel is compiled (another value than these is
/// then an error):
/// - KILN_CUDA_ATTENTION_WARP_ROWS: query rows a warp, 16 (unset) or 32, which applies at
///   head dims up to 64 (two mma row blocks a warp, so each k and v fragment read from
///   shared memory serves both, as in FlashAttention-2);
/// - KILN_CUDA_ATTENTION_ASYNC_HEAD_DIM: the largest head dim whose k and v tiles are
///   copied by cp.async, 64 (unset) or 128.
struct AttentionVariant {
  int warp_rows = 16;
  int async_head_dim = 64;
};
Result<AttentionVariant> attention_variant();

/// Appends to `out` the kernel `symbol` of attention step `step` (the one fusion made of
/// `m`; ir::cuda_runs_attention(m) holds): its parameters are the step's inputs as the
/// artifact lists them (q, k, v, then each mask's operand in f's order) and then its
/// output. A block of 4 warps takes 64 query rows of one batch index (128 with 32 rows a
/// warp; a grid-stride loop over them all): q's rows stay in registers as mma.sync
/// fragments, each tile of 64 keys of k and v goes through shared memory (k as it lies, v
/// transposed), the scores are
/// rounded to the precision, f runs on them in f32 and the softmax merges them into the
/// rows' running maximum and sum; P, rounded to the precision, multiplies v's tile into
/// f32 sums that are divided by the sum at the end and rounded to the precision. Where f
/// ends in a causal mask, the tiles past a block's last query are left out as long as
/// every row's exp(fill − max) is 0 in f32 (else they are taken, so the result is the
/// decomposition's either way).
Result<Launch> emit_attention_kernel(const ir::Graph& g, const ir::Step& step, const ir::AttentionMatch& m,
                                     const std::string& symbol, std::string& out);

}  // namespace kiln::codegen::cuda
