// A library attention step on the CPU (format 1.12): out = softmax(f(q·kᵀ))·v per batch
// index, a block of query rows at a time: the block's scores go to a buffer of the thread
// that stays in cache, f and the softmax run over it, and a second GEMM multiplies it by v
// into the output's rows (packed, or through its strides). The [.., T, S] matrix is never
// stored. Where f ends in a causal mask, keys past the
// block's last query are neither multiplied nor summed (their exp is 0).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "base/result.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/format/artifact.h"

namespace kiln::runtime::cpu {

/// The element types of q, k, v and the output, and a backward's dO (each f32 or the
/// call's precision; a backward's outputs are f32).
struct AttentionTypes {
  format::DType q = format::DType::F32, k = format::DType::F32, v = format::DType::F32, out = format::DType::F32,
                d_out = format::DType::F32;
  /// A backward's outputs that dq, d(kᵀ) and dv go to: f32, or (1.21) of its precision.
  std::array<format::DType, 3> gradients = {format::DType::F32, format::DType::F32, format::DType::F32};
};

/// Runs `call` with q, k, v and the masks' inputs, then the output, in `args`, its blocks
/// split across `pool`'s threads (each GEMM single-threaded) or, with too few blocks or no
/// pool, one after another on `threads` threads. In bf16 or f16 (format 1.14) q's block,
/// k and v are packed into buffers of the thread in that type (bf16 where oneDNN has an
/// optimized bf16 product for the shapes) or as f32 values rounded to it (for sgemm).
Status run_attention(const format::Attention& call, const AttentionTypes& types, uint8_t* const* args, int threads,
                     ThreadPool* pool);

/// Runs the backward `call` (format 1.18, `call.gradient()`): `args` holds q, k, v, the
/// masks' inputs and dO, then the outputs dq, d(kᵀ) and dv are written into. Per batch
/// index, a block of query rows at a time: P again as the forward computes it, dP = dO·vᵀ
/// and dS = f'(P ∘ (dP − Σ dP ∘ P)) in buffers of the thread, dq's rows = dS·k, and
/// d(kᵀ) += qᵀ·dS and dv += Pᵀ·dO over the blocks; keys past a causal block's last query
/// are left out as the forward leaves them. Batch indices split across `pool`'s threads.
/// In bf16 or f16 (format 1.20, autocast's form) every product's operands and result are
/// rounded to the precision, as the graph's casts round them (P, dP, dS, q, k, v, dO, and
/// dq, d(kᵀ), dv once summed): on oneDNN's bf16 primitive where it has an optimized one
/// for the shapes, else on sgemm over f32 values rounded to the precision.
Status run_attention_gradient(const format::Attention& call, const AttentionTypes& types, uint8_t* const* args,
                              int threads, ThreadPool* pool);

/// What runs a call's products in bf16 or f16 (a forward's or a backward's): "products in
/// bf16 on oneDNN (KERNEL)" or "products on sgemm over f32 values rounded to f16"; "" for f32.
std::string attention_implementation(const format::Attention& call, const AttentionTypes& types);

/// Query rows per block for `keys` keys: in f32 as many as keep a block's scores within
/// 4 MiB (16 to 256 rows), a causal block at most sqrt(8·keys) (but never fewer than within
/// 128 KiB); in bf16 and f16, where each block also packs its q rows and calls oneDNN
/// twice, up to 128 rows within 1 MiB (16 to 128; docs/benchmarks.md).
int64_t attention_block_rows(int64_t queries, int64_t keys, bool half = false, bool causal = false);

}  // namespace kiln::runtime::cpu
