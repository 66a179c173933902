// The backward of an attention as one CPU step (format 1.18; runtime/cpu/attention.h).
#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/cpu/attention.h"
#include "runtime/cpu/attention_plan.h"
#include "runtime/cpu/matmul.h"
#include "runtime/cpu/score_rows.h"

namespace kiln::runtime::cpu {
namespace {

using attention_plan::batch_offset;
using attention_plan::BlasMatrix;
using attention_plan::Plan;
using attention_plan::View;

// Where a gradient goes: a view [batch.., rows, cols] of an output, as a GEMM's result C
// (rows adjacent) or its transpose (columns adjacent).
struct Target {
  View view;
  BlasMatrix matrix;
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
};

Gradient gradient_of(const format::Attention& at, uint8_t* const* args) {
  Gradient g;
  g.plan = attention_plan::plan_of(at, AttentionTypes{}, args);
  g.plan.out = {};  // the forward's result: a backward writes dq, d(kᵀ) and dv instead
  const Plan& plan = g.plan;
  const uint32_t inputs = plan.reads;
  g.d_out = attention_plan::view_of(args[inputs], at.d_out_offset(), at.d_out_strides());
  // The reader checked each: inside its f32 output, rows or columns adjacent.
  const uint32_t rank = static_cast<uint32_t>(plan.batch.size()) + 2;
  const int64_t rows[3] = {plan.queries, plan.head_dim, plan.keys},
                cols[3] = {plan.head_dim, plan.keys, plan.value_dim};
  Target* targets[3] = {&g.d_query, &g.d_key, &g.d_value};
  for (uint32_t i = 0; i < 3; ++i) {
    const auto* strides = at.gradient_strides();
    View view{args[inputs + 1 + static_cast<uint32_t>(at.gradient_outputs()->Get(i))], at.gradient_offsets()->Get(i),
              std::vector<int64_t>(strides->begin() + i * rank, strides->begin() + (i + 1) * rank)};
    const BlasMatrix matrix = *format::blas_matrix(rows[i], cols[i], view.row_stride(), view.col_stride());
    *targets[i] = {std::move(view), matrix};
  }
  // The reader checked that each is a matrix BLAS reads.
  g.dom = *format::blas_matrix(plan.queries, plan.value_dim, g.d_out.row_stride(), g.d_out.col_stride());
  g.k_rows = *format::blas_matrix(plan.keys, plan.head_dim, plan.k.row_stride(), plan.k.col_stride());
  g.scale = plan.alpha;
  for (const attention_plan::Transform& t : plan.transforms)
    if (t.kind == format::ScoreTransformKind::Scale) g.scale *= t.value;
  return g;
}

// dS from dP over a block's rows, in place: the softmax's gradient times f's scalings,
// 0 where f's masks replaced the score (the select's gradient).
void scores_gradient(const Gradient& g, int64_t p, int64_t r0, int64_t rows, int64_t keys, const float* probabilities,
                     float* dp) {
  const Plan& plan = g.plan;
  for (int64_t i = 0; i < rows; ++i) {
    float* row = dp + i * keys;
    const int64_t query = r0 + i;
    softmax_gradient_row(probabilities + i * keys, row, keys, g.scale);
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
  scores_gradient(g, p, r0, rows, keys, probabilities.data(), dp.data());
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

}  // namespace

Status run_attention_gradient(const format::Attention& at, uint8_t* const* args, int threads, ThreadPool* pool) {
  const Gradient g = gradient_of(at, args);
  int64_t indices = 1;
  for (int64_t d : g.plan.batch) indices *= d;
  // Batch indices across the threads, each GEMM on one, where there are as many as
  // threads (each index sums its own d(kᵀ) and dv); else one after another, each GEMM on
  // every thread.
  if (pool && threads > 1 && indices >= threads)
    return attention_plan::for_tasks(*pool, indices, [&](int64_t p) { return run_index(g, p, 1); });
  for (int64_t p = 0; p < indices; ++p) KILN_RETURN_IF_ERROR(run_index(g, p, threads));
  return Status::Ok();
}

}  // namespace kiln::runtime::cpu
