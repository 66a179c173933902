// CUDA's kernels for an attention's backward (ir/attention_match.h, AttentionGradientMatch;
// ir::cuda_runs_attention_gradient), which compute P again from q and k rather than read
// the [.., T, S] matrix, in the way of FlashAttention-2's backward (Dao 2023,
// arXiv:2307.08691) but without atomics, so that every run gives the same bytes.
#pragma once

#include <string>

#include "base/result.h"
#include "codegen/cuda/kernel_emitter.h"
#include "ir/attention_match.h"
#include "ir/graph.h"

namespace kiln::codegen::cuda {

/// Appends to `out` the two f32 kernels of backward step `step` (the one fusion made of
/// `m`), whose parameters are the step's inputs as the artifact lists them (q, k, v, each
/// mask's operand in f's order, dO), its outputs, then the step's arena scratch
/// (ir::cuda_attention_gradient_scratch_bytes):
/// - `symbol`_partial, a block of 128 threads a block of 64 query rows: the forward's
///   online softmax over the keys, each row's maximum, 1 / sum and Σ P∘dP into the
///   scratch, then a second pass over the keys for dS = f'(P ∘ (dP − Σ P∘dP)) and
///   dq = dS·k;
/// - `symbol`, a block of 128 threads a block of 64 keys: over every block of 32 query
///   rows, P and dS again from the scratch's row values, d(kᵀ) += qᵀ·dS and dv += Pᵀ·dO.
/// Each thread holds 4x4 of a tile's scores (f32 FMAs) and 4 rows of its block's
/// gradients; operands pass through dynamic shared memory (Launch::shared_bytes and
/// partial_shared_bytes: 69 and 60 KB at head dims of 64, 121 and 113 KB at 128).
/// Where f ends in a causal mask, the first kernel leaves out the tiles past a block's
/// last query as the forward's kernel does, and the second the query tiles before its
/// first key unless some row's exp(fill − max) / sum is not 0 in f32 (dv then takes
/// them).
Result<Launch> emit_attention_gradient_kernels(const ir::Graph& g, const ir::Step& step,
                                               const ir::AttentionGradientMatch& m, const std::string& symbol,
                                               std::string& out);

}  // namespace kiln::codegen::cuda
