// The backward of an attention as one CPU step (format 1.18, and 1.20 in bf16 or f16;
// runtime/cpu/attention.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/half_float.h"
#include "runtime/cpu/attention.h"
#include "runtime/cpu/attention_plan.h"
#include "runtime/cpu/dnnl_matmul.h"
#include "runtime/cpu/matmul.h"
#include "runtime/cpu/score_rows.h"

namespace kiln::runtime::cpu {
namespace {

using attention_plan::batch_offset;
using attention_plan::BlasMatrix;
using attention_plan::pack_rows;
using attention_plan::Plan;
using attention_plan::View;

// Where a gradient goes: a view [batch.., rows, cols] of an output, as a GEMM's result C
// (rows adjacent) or its transpose (columns adjacent).
struct Target {
  View view;
  BlasMatrix matrix;
  format::DType type = format::DType::F32;  // bf16 or f16 in a backward of that precision (1.21)
  // C = op(A)·op(B), or C plus it with beta 1, at row `row` of batch index p: m x n, by k.
  Status gemm(const Plan& plan, int64_t p, int64_t row, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
              const float* a, int64_t lda, const float* b, int64_t ldb, int threads, float beta = 0.0f) const {
    float* c = reinterpret_cast<float*>(view.base) + batch_offset(plan, view, p) + row * view.row_stride();
    if (!matrix.transposed) return sgemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, c, matrix.ld, threads, beta);
    return sgemm(!tb, !ta, n, m, k, 1.0f, b, ldb, a, lda, c, matrix.ld, threads, beta);  // Cᵀ = op(B)ᵀ·op(A)ᵀ
  }
  // Its rows x cols of batch index p set to 0.
  void zero(const Plan& plan, int64_t p, int64_t rows, int64_t cols) const {
    float* c = reinterpret_cast<float*>(view.base) + batch_offset(plan, view, p);
    const int64_t lines = matrix.transposed ? cols : rows, length = matrix.transposed ? rows : cols;
    for (int64_t i = 0; i < lines; ++i) std::memset(c + i * matrix.ld, 0, static_cast<size_t>(length) * sizeof(float));
  }
};

struct Gradient {
  Plan plan;                       // the forward's: q, k, v, f, the blocks
  View d_out;                      // dO [batch.., T, Dv]
  BlasMatrix dom;                  // dO's block as a first operand
  BlasMatrix k_rows;               // k [S, D] as a second operand (the plan's km is kᵀ)
  float scale = 1;                 // every scaling of f: dS's factor
  Target d_query, d_key, d_value;  // dq [T, D], d(kᵀ) [D, S], dv [S, Dv]
  format::DType d_out_type = format::DType::F32;
  bool native = false;  // bf16: the products on oneDNN's bf16 primitive
};

// A bf16 or f16 backward's products, as run_half_block calls them: C [m, n] (f32, rows
// ldc apart) = A [m, k] · B, B's k rows of n or (trans_b) its n columns given as rows, C
// added to where `accumulate`. Operands of the precision's bits run on oneDNN's bf16
// primitive, f32 ones (values rounded to the precision) on sgemm.
template <class E>
Status product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const E* a, int64_t lda, const E* b,
               int64_t ldb, float* c, int64_t ldc, bool accumulate, int threads) {
  if constexpr (std::is_same_v<E, uint16_t>)
    return run_bf16_gemm({trans_b, m, n, k, lda, ldb, ldc, dnnl_f32, accumulate, trans_a}, a, b, c, threads);
  else return sgemm(trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, c, ldc, threads, accumulate ? 1.0f : 0.0f);
}

// Whether oneDNN has optimized bf16 kernels for every product of a block of `rows` rows
// (as run_half_block calls them).
bool native_products(const Plan& plan, int64_t rows) {
  const int64_t s = plan.keys, d = plan.head_dim, dv = plan.value_dim;
  for (const Bf16Gemm& gemm :
       {Bf16Gemm{true, rows, s, d, d, d, s}, Bf16Gemm{true, rows, s, dv, dv, dv, s},
        Bf16Gemm{false, rows, d, s, s, d, d}, Bf16Gemm{false, s, d, rows, s, d, d, dnnl_f32, true, true},
        Bf16Gemm{false, s, dv, rows, s, dv, dv, dnnl_f32, true, true}})
    if (bf16_gemm_implementation(gemm).empty()) return false;
  return true;
}

// `args` may be null (no run, for gradient_implementation).
Gradient gradient_of(const format::Attention& at, const AttentionTypes& types, uint8_t* const* args) {
  auto arg = [&](uint32_t i) { return args ? args[i] : nullptr; };
  Gradient g;
  g.plan = attention_plan::plan_of(at, types, args);
  g.d_out_type = types.d_out;
  g.plan.out = {};  // the forward's result: a backward writes dq, d(kᵀ) and dv instead
  const Plan& plan = g.plan;
  const uint32_t inputs = plan.reads;
  g.d_out = attention_plan::view_of(arg(inputs), at.d_out_offset(), at.d_out_strides());
  // The reader checked each: inside its f32 output, rows or columns adjacent.
  const uint32_t rank = static_cast<uint32_t>(plan.batch.size()) + 2;
  const int64_t rows[3] = {plan.queries, plan.head_dim, plan.keys},
                cols[3] = {plan.head_dim, plan.keys, plan.value_dim};
  Target* targets[3] = {&g.d_query, &g.d_key, &g.d_value};
  for (uint32_t i = 0; i < 3; ++i) {
    const auto* strides = at.gradient_strides();
    View view{arg(inputs + 1 + static_cast<uint32_t>(at.gradient_outputs()->Get(i))), at.gradient_offsets()->Get(i),
              std::vector<int64_t>(strides->begin() + i * rank, strides->begin() + (i + 1) * rank)};
    const BlasMatrix matrix = *format::blas_matrix(rows[i], cols[i], view.row_stride(), view.col_stride());
    *targets[i] = {std::move(view), matrix, types.gradients[i]};
  }
  // The reader checked that each is a matrix BLAS reads.
  g.dom = *format::blas_matrix(plan.queries, plan.value_dim, g.d_out.row_stride(), g.d_out.col_stride());
  g.k_rows = *format::blas_matrix(plan.keys, plan.head_dim, plan.k.row_stride(), plan.k.col_stride());
  g.scale = plan.alpha;
  for (const attention_plan::Transform& t : plan.transforms)
    if (t.kind == format::ScoreTransformKind::Scale) g.scale *= t.value;
  g.native = plan.half && plan.half_type == Half::BF16 && native_products(plan, plan.block_rows);
  return g;
}

// dS from dP over a block's rows (ld apart), in place: the softmax's gradient times f's
// scalings, 0 where f's masks replaced the score (the select's gradient).
void scores_gradient(const Gradient& g, int64_t p, int64_t r0, int64_t rows, int64_t keys, const float* probabilities,
                     float* dp, int64_t ld) {
  const Plan& plan = g.plan;
  for (int64_t i = 0; i < rows; ++i) {
    float* row = dp + i * ld;
    const int64_t query = r0 + i;
    softmax_gradient_row(probabilities + i * ld, row, keys, g.scale);
    for (const attention_plan::Transform& t : plan.transforms) {
      if (t.kind == format::ScoreTransformKind::Causal) {
        for (int64_t j = query + 1; j < keys; ++j) row[j] = 0;
      } else if (t.kind == format::ScoreTransformKind::Keep) {
        keep_in_row(row, keys, t.mask.base + batch_offset(plan, t.mask, p) + query * t.mask.row_stride(),
                    t.mask.col_stride(), 0.0f);
      }
    }
  }
}

// One block of query rows of batch index p, on keys [0, keys): P again, dP = dO·vᵀ, dS,
// then dq's rows = dS·k, d(kᵀ) += qᵀ·dS and dv += Pᵀ·dO. False (having written nothing)
// where a masked key's exp would not be 0 and the block must take every key.
Result<bool> run_block(const Gradient& g, int64_t p, int64_t r0, int64_t rows, int64_t keys,
                       std::vector<float>& probabilities, std::vector<float>& dp, int threads) {
  const Plan& plan = g.plan;
  const int64_t d = plan.head_dim, dv = plan.value_dim, s = plan.keys;
  const float* q =
      reinterpret_cast<const float*>(plan.q.base) + batch_offset(plan, plan.q, p) + r0 * plan.q.row_stride();
  const float* k = reinterpret_cast<const float*>(plan.k.base) + batch_offset(plan, plan.k, p);
  const float* v = reinterpret_cast<const float*>(plan.v.base) + batch_offset(plan, plan.v, p);
  const float* d_out =
      reinterpret_cast<const float*>(g.d_out.base) + batch_offset(plan, g.d_out, p) + r0 * g.d_out.row_stride();
  probabilities.resize(static_cast<size_t>(plan.block_rows * s));
  dp.resize(static_cast<size_t>(plan.block_rows * s));
  KILN_RETURN_IF_ERROR(sgemm(plan.qm.transposed, plan.km.transposed, rows, keys, d, plan.alpha, q, plan.qm.ld, k,
                             plan.km.ld, probabilities.data(), keys, threads));
  if (!attention_plan::scores_to_probabilities(plan, p, r0, rows, keys, probabilities.data(), keys)) return false;
  // A row of NaN (a NaN score, or every key masked with -inf) is NaN at every key in the
  // decomposition, which then reaches dv's every row: such a block takes every key.
  if (keys < plan.keys)
    for (int64_t i = 0; i < rows; ++i)
      if (std::isnan(probabilities[static_cast<size_t>(i * keys)])) return false;
  KILN_RETURN_IF_ERROR(sgemm(g.dom.transposed, !plan.vm.transposed, rows, keys, dv, 1.0f, d_out, g.dom.ld, v,
                             plan.vm.ld, dp.data(), keys, threads));
  scores_gradient(g, p, r0, rows, keys, probabilities.data(), dp.data(), keys);
  KILN_RETURN_IF_ERROR(
      g.d_query.gemm(plan, p, r0, false, g.k_rows.transposed, rows, d, keys, dp.data(), keys, k, g.k_rows.ld, threads));
  KILN_RETURN_IF_ERROR(g.d_key.gemm(plan, p, 0, !plan.qm.transposed, false, d, keys, rows, q, plan.qm.ld, dp.data(),
                                    keys, threads, 1.0f));
  KILN_RETURN_IF_ERROR(g.d_value.gemm(plan, p, 0, true, g.dom.transposed, keys, dv, rows, probabilities.data(), keys,
                                      d_out, g.dom.ld, threads, 1.0f));
  return true;
}

// Every block of batch index p: d(kᵀ) and dv summed over them from zero.
Status run_index(const Gradient& g, int64_t p, int threads) {
  const Plan& plan = g.plan;
  const int64_t d = plan.head_dim, dv = plan.value_dim, s = plan.keys;
  g.d_key.zero(plan, p, d, s);
  g.d_value.zero(plan, p, s, dv);
  thread_local std::vector<float> probabilities, dp;
  return attention_plan::for_blocks(plan, 0, plan.blocks, [&](int64_t r0, int64_t rows, int64_t keys) {
    return run_block(g, p, r0, rows, keys, probabilities, dp, threads);
  });
}

// The calling thread's buffers of the half form: E is the precision's bits (oneDNN's bf16
// products) or float (f32 values rounded to it, for sgemm).
template <class E>
struct HalfBuffers {
  std::vector<E> q, k, v, d_out;           // packed per batch index: q [T, D], k [S, D], v [S, Dv], dO [T, Dv]
  std::vector<E> probabilities, d_scores;  // a block's P and dS, rounded (rows `keys` apart)
  std::vector<float> tile, dp, dq;         // a block's P and dP in f32, its rows of dq
  std::vector<float> d_key, d_value;       // dk [S, D] and dv [S, Dv], summed over the blocks
  std::vector<uint8_t> row;
};

// n f32 values as operands: rounded to the precision, as its bits or as f32.
template <class E>
void to_operand(const Plan& plan, const float* from, E* to, int64_t n) {
  if constexpr (std::is_same_v<E, uint16_t>) {
    narrow_to_half(from, to, n, plan.half_type);
  } else {
    std::memcpy(to, from, static_cast<size_t>(n) * sizeof(float));
    round_to_half(to, n, plan.half_type);
  }
}

// Square tiles of a strided copy: each reads and writes a few lines of
// cache at a time (rows a power of two apart alias in L1 otherwise).
constexpr int64_t kTile = 16;

// store's copy into a view of elements E, each `convert`ed from f32.
template <class E, class Convert>
void store_elements(E* base, const Plan& plan, const View& view, int64_t p, int64_t r0, int64_t rows, int64_t cols,
                    const float* from, int64_t row_step, int64_t col_step, Convert convert) {
  base += batch_offset(plan, view, p) + r0 * view.row_stride();
  const int64_t rs = view.row_stride(), cs = view.col_stride();
  if (cs == 1 && col_step == 1) {
    for (int64_t i = 0; i < rows; ++i)
      if constexpr (std::is_same_v<E, float>)
        std::memcpy(base + i * rs, from + i * row_step, static_cast<size_t>(cols) * sizeof(float));
      else narrow_to_half(from + i * row_step, base + i * rs, cols, plan.half_type);
    return;
  }
  // Tile by tile, along the target's adjacent elements (d(kᵀ) lies with its columns adjacent).
  const bool by_rows = cs == 1 || rows == 1;
  for (int64_t i0 = 0; i0 < rows; i0 += kTile)
    for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const int64_t i1 = std::min(rows, i0 + kTile), j1 = std::min(cols, j0 + kTile);
      if (by_rows) {
        for (int64_t i = i0; i < i1; ++i)
          for (int64_t j = j0; j < j1; ++j) base[i * rs + j * cs] = convert(from[i * row_step + j * col_step]);
      } else {
        for (int64_t j = j0; j < j1; ++j)
          for (int64_t i = i0; i < i1; ++i) base[i * rs + j * cs] = convert(from[i * row_step + j * col_step]);
      }
    }
}

// Rows [r0, r0 + rows) x cols of a gradient of batch index p (its view, f32 or of the
// precision) from `from`, element (i, j) at from[i·row_step + j·col_step], rounded to the
// precision first.
void store(const Plan& plan, const Target& target, int64_t p, int64_t r0, int64_t rows, int64_t cols, float* from,
           int64_t row_step, int64_t col_step, int64_t count) {
  round_to_half(from, count, plan.half_type);
  if (target.type == format::DType::F32)
    store_elements(reinterpret_cast<float*>(target.view.base), plan, target.view, p, r0, rows, cols, from, row_step,
                   col_step, [](float x) { return x; });
  else if (plan.half_type == Half::BF16)
    store_elements(reinterpret_cast<uint16_t*>(target.view.base), plan, target.view, p, r0, rows, cols, from, row_step,
                   col_step, [](float x) { return float_to_bf16(x); });
  else
    store_elements(reinterpret_cast<uint16_t*>(target.view.base), plan, target.view, p, r0, rows, cols, from, row_step,
                   col_step, [](float x) { return float_to_f16(x); });
}

// run_block in bf16 or f16, on the operands `b` holds packed. Every product's operands and
// result are dense (a block's rows `keys` apart): oneDNN runs its AMX kernels only on
// those, and otherwise falls back to its AVX-512 GEMM (docs/cpu.md).
template <class E>
Result<bool> run_half_block(const Gradient& g, int64_t p, int64_t r0, int64_t rows, int64_t keys, HalfBuffers<E>& b,
                            int threads) {
  const Plan& plan = g.plan;
  const int64_t d = plan.head_dim, dv = plan.value_dim;
  float *tile = b.tile.data(), *dp = b.dp.data();
  E *probabilities = b.probabilities.data(), *d_scores = b.d_scores.data();
  const E *q = b.q.data() + r0 * d, *d_out = b.d_out.data() + r0 * dv;
  KILN_RETURN_IF_ERROR(product(false, true, rows, keys, d, q, d, b.k.data(), d, tile, keys, false, threads));
  constexpr bool bits = std::is_same_v<E, uint16_t>;  // P's bits written with P
  if (!attention_plan::scores_to_probabilities(plan, p, r0, rows, keys, tile, keys,
                                               bits ? reinterpret_cast<uint16_t*>(probabilities) : nullptr))
    return false;
  if (keys < plan.keys)
    for (int64_t i = 0; i < rows; ++i)
      if (std::isnan(tile[i * keys])) return false;
  if (!bits) to_operand(plan, tile, probabilities, rows * keys);
  KILN_RETURN_IF_ERROR(product(false, true, rows, keys, dv, d_out, dv, b.v.data(), dv, dp, keys, false, threads));
  round_to_half(dp, rows * keys, plan.half_type);
  scores_gradient(g, p, r0, rows, keys, tile, dp, keys);
  to_operand(plan, dp, d_scores, rows * keys);
  KILN_RETURN_IF_ERROR(
      product(false, false, rows, d, keys, d_scores, keys, b.k.data(), d, b.dq.data(), d, false, threads));
  store(plan, g.d_query, p, r0, rows, d, b.dq.data(), d, 1, rows * d);
  // dk [keys, D] += dSᵀ·q and dv [keys, Dv] += Pᵀ·dO: the keys' first rows, dense for any
  // count of keys.
  KILN_RETURN_IF_ERROR(product(true, false, keys, d, rows, d_scores, keys, q, d, b.d_key.data(), d, true, threads));
  KILN_RETURN_IF_ERROR(
      product(true, false, keys, dv, rows, probabilities, keys, d_out, dv, b.d_value.data(), dv, true, threads));
  return true;
}

// run_index in bf16 or f16: q, k, v and dO packed once, dk and dv summed in f32 and
// rounded once, as the graph's products round them.
template <class E>
Status run_half_index(const Gradient& g, int64_t p, int threads) {
  const Plan& plan = g.plan;
  const int64_t t = plan.queries, s = plan.keys, d = plan.head_dim, dv = plan.value_dim, rows = plan.block_rows;
  thread_local HalfBuffers<E> b;
  auto sized = [](auto& buffer, int64_t n) -> auto* {
    buffer.resize(static_cast<size_t>(n));
    return buffer.data();
  };
  pack_rows(plan, plan.q, plan.q_type, p, 0, t, d, sized(b.q, t * d), b.row);
  pack_rows(plan, plan.k, plan.k_type, p, 0, s, d, sized(b.k, s * d), b.row);
  pack_rows(plan, plan.v, plan.v_type, p, 0, s, dv, sized(b.v, s * dv), b.row);
  pack_rows(plan, g.d_out, g.d_out_type, p, 0, t, dv, sized(b.d_out, t * dv), b.row);
  sized(b.probabilities, rows * s);
  sized(b.d_scores, rows * s);
  sized(b.tile, rows * s);
  sized(b.dp, rows * s);
  sized(b.dq, rows * d);
  std::fill_n(sized(b.d_key, s * d), s * d, 0.0f);
  std::fill_n(sized(b.d_value, s * dv), s * dv, 0.0f);
  KILN_RETURN_IF_ERROR(attention_plan::for_blocks(plan, 0, plan.blocks, [&](int64_t r0, int64_t block, int64_t keys) {
    return run_half_block(g, p, r0, block, keys, b, threads);
  }));
  store(plan, g.d_key, p, 0, d, s, b.d_key.data(), 1, d, s * d);  // d(kᵀ)'s (i, j) is dk's (j, i)
  store(plan, g.d_value, p, 0, s, dv, b.d_value.data(), dv, 1, s * dv);
  return Status::Ok();
}

Status run_index_of(const Gradient& g, int64_t p, int threads) {
  if (!g.plan.half) return run_index(g, p, threads);
  return g.native ? run_half_index<uint16_t>(g, p, threads) : run_half_index<float>(g, p, threads);
}

}  // namespace

std::string attention_plan::gradient_implementation(const format::Attention& at, const AttentionTypes& types) {
  const Gradient g = gradient_of(at, types, nullptr);
  if (!g.plan.half) return {};
  const Plan& plan = g.plan;
  const int64_t d = plan.head_dim;
  if (g.native)
    return "products in bf16 on oneDNN (" +
           bf16_gemm_implementation(Bf16Gemm{true, plan.block_rows, plan.keys, d, d, d, plan.keys}) + ")";
  return std::string("products on sgemm over f32 values rounded to ") + (plan.half_type == Half::BF16 ? "bf16" : "f16");
}

Status run_attention_gradient(const format::Attention& at, const AttentionTypes& types, uint8_t* const* args,
                              int threads, ThreadPool* pool) {
  const Gradient g = gradient_of(at, types, args);
  int64_t indices = 1;
  for (int64_t d : g.plan.batch) indices *= d;
  // Batch indices across the threads, each GEMM on one, where there are as many as
  // threads (each index sums its own d(kᵀ) and dv); else one after another, each GEMM on
  // every thread.
  if (pool && threads > 1 && indices >= threads)
    return attention_plan::for_tasks(*pool, indices, [&](int64_t p) { return run_index_of(g, p, 1); });
  for (int64_t p = 0; p < indices; ++p) KILN_RETURN_IF_ERROR(run_index_of(g, p, threads));
  return Status::Ok();
}

}  // namespace kiln::runtime::cpu
