#include "runtime/cpu/attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/cpu/attention_plan.h"
#include "runtime/cpu/dnnl_matmul.h"
#include "runtime/cpu/matmul.h"
#include "runtime/cpu/score_rows.h"

namespace kiln::runtime::cpu {
namespace {

using attention_plan::batch_offset;
using attention_plan::BlasMatrix;
using attention_plan::for_blocks;
using attention_plan::pack_rows;
using attention_plan::Plan;
using attention_plan::plan_of;
using attention_plan::scores_to_probabilities;
using attention_plan::View;

// One block of query rows of batch index p: scores for keys [0, keys), f, softmax, times v.
// Returns false (having written nothing) where a masked key's exp would not be 0 and the
// block must take every key.
Result<bool> run_block(const Plan& plan, int64_t p, int64_t r0, int64_t rows, int64_t keys, std::vector<float>& tile,
                       int threads) {
  const float* q =
      reinterpret_cast<const float*>(plan.q.base) + batch_offset(plan, plan.q, p) + r0 * plan.q.row_stride();
  const float* k = reinterpret_cast<const float*>(plan.k.base) + batch_offset(plan, plan.k, p);
  const float* v = reinterpret_cast<const float*>(plan.v.base) + batch_offset(plan, plan.v, p);
  tile.resize(static_cast<size_t>(plan.block_rows * plan.keys));
  KILN_RETURN_IF_ERROR(sgemm(plan.qm.transposed, plan.km.transposed, rows, keys, plan.head_dim, plan.alpha, q,
                             plan.qm.ld, k, plan.km.ld, tile.data(), keys, threads));
  if (!scores_to_probabilities(plan, p, r0, rows, keys, tile.data(), keys)) return false;
  float* out = reinterpret_cast<float*>(plan.out.base) + batch_offset(plan, plan.out, p) + r0 * plan.out.row_stride();
  const int64_t ldc = plan.queries == 1 ? plan.value_dim : plan.out.row_stride();
  KILN_RETURN_IF_ERROR(sgemm(false, plan.vm.transposed, rows, plan.value_dim, keys, 1.0f, tile.data(), keys, v,
                             plan.vm.ld, out, ldc, threads));
  return true;
}

// A block's two bf16 products (`rows` queries by `keys` keys), as run_half_block calls them:
// every operand and result dense (rows `keys` or Dv apart), which oneDNN's AMX kernels
// take; strided ones it runs on its AVX-512 GEMM at about half the rate (docs/cpu.md).
Bf16Gemm scores_product(const Plan& plan, int64_t rows, int64_t keys) {
  const int64_t d = plan.head_dim;
  return {true, rows, keys, d, d, d, keys, dnnl_f32};
}
Bf16Gemm values_product(const Plan& plan, int64_t rows, int64_t keys) {
  const int64_t dv = plan.value_dim;
  return {false, rows, dv, keys, keys, dv, dv, plan.out_type == format::DType::F32 ? dnnl_f32 : dnnl_bf16};
}

// oneDNN's kernel for a block's bf16 products, where it has an optimized one for both; "".
std::string native_implementation(const Plan& plan) {
  const std::string scores = bf16_gemm_implementation(scores_product(plan, plan.block_rows, plan.keys));
  if (scores.empty() || bf16_gemm_implementation(values_product(plan, plan.block_rows, plan.keys)).empty()) return {};
  return scores;
}

// The calling thread's buffers of the half-precision form.
struct HalfBuffers {
  std::vector<uint16_t> q, k, v, probabilities;  // native: bf16 operands, packed (P's rows `keys` apart)
  std::vector<float> wide_q, wide_k, wide_v;     // widened: f32 values of the precision, packed
  std::vector<float> tile, out;
  std::vector<uint8_t> row;  // a gathered row of q, k or v
};

// The half form of run_block: q's block and P rounded to the precision, products in f32
// (native: bf16 operands on oneDNN's primitive; else their f32 values on sgemm), the
// result rounded to the precision and stored in the output's type. k and v are packed in
// `buffers` already.
Result<bool> run_half_block(const Plan& plan, int64_t p, int64_t r0, int64_t rows, int64_t keys, HalfBuffers& buffers,
                            int threads) {
  const int64_t d = plan.head_dim, dv = plan.value_dim, ld = plan.keys;
  buffers.tile.resize(static_cast<size_t>(plan.block_rows * std::max(ld, dv)));  // the scores, then the result
  float* tile = buffers.tile.data();
  uint8_t* out_bytes = plan.out.base + (batch_offset(plan, plan.out, p) + r0 * plan.out.row_stride()) *
                                           (plan.out_type == format::DType::F32 ? 4 : 2);
  const int64_t ldc = plan.queries == 1 ? dv : plan.out.row_stride();
  const bool wide_out = plan.out_type == format::DType::F32;
  if (plan.native) {
    buffers.q.resize(static_cast<size_t>(plan.block_rows * d));
    buffers.probabilities.resize(static_cast<size_t>(plan.block_rows * ld));
    pack_rows(plan, plan.q, plan.q_type, p, r0, rows, d, buffers.q.data(), buffers.row);
    KILN_RETURN_IF_ERROR(
        run_bf16_gemm(scores_product(plan, rows, keys), buffers.q.data(), buffers.k.data(), tile, threads));
    if (!scores_to_probabilities(plan, p, r0, rows, keys, tile, keys, buffers.probabilities.data())) return false;
    // The result's rows dense in the tile's first bytes (the scores are spent), then out.
    const int64_t element = wide_out ? 4 : 2;
    KILN_RETURN_IF_ERROR(
        run_bf16_gemm(values_product(plan, rows, keys), buffers.probabilities.data(), buffers.v.data(), tile, threads));
    for (int64_t i = 0; i < rows; ++i) {
      uint8_t* to = out_bytes + i * ldc * element;
      std::memcpy(to, reinterpret_cast<uint8_t*>(tile) + i * dv * element, static_cast<size_t>(dv * element));
      if (wide_out) round_to_half(reinterpret_cast<float*>(to), dv, plan.half_type);
    }
    return true;
  }
  buffers.wide_q.resize(static_cast<size_t>(plan.block_rows * d));
  pack_rows(plan, plan.q, plan.q_type, p, r0, rows, d, buffers.wide_q.data(), buffers.row);
  KILN_RETURN_IF_ERROR(
      sgemm(false, true, rows, keys, d, 1.0f, buffers.wide_q.data(), d, buffers.wide_k.data(), d, tile, ld, threads));
  if (!scores_to_probabilities(plan, p, r0, rows, keys, tile, ld)) return false;
  for (int64_t i = 0; i < rows; ++i) round_to_half(tile + i * ld, keys, plan.half_type);
  buffers.out.resize(static_cast<size_t>(plan.block_rows * dv));
  float* result = wide_out ? reinterpret_cast<float*>(out_bytes) : buffers.out.data();
  const int64_t ld_result = wide_out ? ldc : dv;
  KILN_RETURN_IF_ERROR(
      sgemm(false, false, rows, dv, keys, 1.0f, tile, ld, buffers.wide_v.data(), dv, result, ld_result, threads));
  for (int64_t i = 0; i < rows; ++i) {
    if (wide_out) round_to_half(result + i * ld_result, dv, plan.half_type);
    else narrow_to_half(result + i * ld_result, reinterpret_cast<uint16_t*>(out_bytes) + i * ldc, dv, plan.half_type);
  }
  return true;
}
// Blocks [first, last) of batch index p in the half form: k and v packed once.
Status run_half_blocks(const Plan& plan, int64_t p, int64_t first, int64_t last, int threads) {
  thread_local HalfBuffers buffers;
  const int64_t s = plan.keys, d = plan.head_dim, dv = plan.value_dim;
  if (plan.native) {
    buffers.k.resize(static_cast<size_t>(s * d));
    buffers.v.resize(static_cast<size_t>(s * dv));
    pack_rows(plan, plan.k, plan.k_type, p, 0, s, d, buffers.k.data(), buffers.row);
    pack_rows(plan, plan.v, plan.v_type, p, 0, s, dv, buffers.v.data(), buffers.row);
  } else {
    buffers.wide_k.resize(static_cast<size_t>(s * d));
    buffers.wide_v.resize(static_cast<size_t>(s * dv));
    pack_rows(plan, plan.k, plan.k_type, p, 0, s, d, buffers.wide_k.data(), buffers.row);
    pack_rows(plan, plan.v, plan.v_type, p, 0, s, dv, buffers.wide_v.data(), buffers.row);
  }
  return for_blocks(plan, first, last, [&](int64_t r0, int64_t rows, int64_t keys) {
    return run_half_block(plan, p, r0, rows, keys, buffers, threads);
  });
}

// Blocks [first, last) of batch index p.
Status run_blocks(const Plan& plan, int64_t p, int64_t first, int64_t last, int threads) {
  if (plan.half) return run_half_blocks(plan, p, first, last, threads);
  thread_local std::vector<float> tile;
  return for_blocks(plan, first, last, [&](int64_t r0, int64_t rows, int64_t keys) {
    return run_block(plan, p, r0, rows, keys, tile, threads);
  });
}

}  // namespace

int64_t attention_block_rows(int64_t queries, int64_t keys, bool half, bool causal) {
  keys = std::max<int64_t>(keys, 1);
  if (half) return std::min(std::clamp<int64_t>(262144 / keys, 16, 128), queries);
  // Each sgemm packs its k or v operand again, once per block: blocks take as many rows as
  // keep the scores within 4 MiB. A causal block of r rows also multiplies the keys up to
  // its last query, about r/2 more per row than the row needs: there sqrt(8·keys) rows
  // balance the two, and never fewer than 128 KiB of scores hold (docs/cpu.md).
  int64_t rows = std::clamp<int64_t>((int64_t{1} << 20) / keys, 16, 256);
  if (causal) {
    const auto balanced = static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(std::sqrt(8.0 * keys))));
    rows = std::min(rows, std::max(std::clamp<int64_t>(32768 / keys, 16, 256), balanced));
  }
  return std::min(rows, queries);
}

namespace attention_plan {

Plan plan_of(const format::Attention& at, const AttentionTypes& types, uint8_t* const* args) {
  auto arg = [&](uint32_t i) { return args ? args[i] : nullptr; };
  Plan plan;
  plan.half = at.precision() != format::DType::F32;
  plan.half_type = at.precision() == format::DType::F16 ? Half::F16 : Half::BF16;
  plan.q_type = types.q;
  plan.k_type = types.k;
  plan.v_type = types.v;
  plan.out_type = types.out;
  plan.batch.assign(at.batch()->begin(), at.batch()->end());
  plan.queries = at.queries();
  plan.keys = at.keys();
  plan.head_dim = at.head_dim();
  plan.value_dim = at.value_dim();
  plan.q = view_of(arg(0), at.q_offset(), at.q_strides());
  plan.k = view_of(arg(1), at.k_offset(), at.k_strides());
  plan.v = view_of(arg(2), at.v_offset(), at.v_strides());
  // The reader checked that each is a matrix BLAS reads.
  plan.qm = *format::blas_matrix(plan.queries, plan.head_dim, plan.q.row_stride(), plan.q.col_stride());
  plan.km = *format::blas_matrix(plan.head_dim, plan.keys, plan.k.col_stride(), plan.k.row_stride());
  plan.vm = *format::blas_matrix(plan.keys, plan.value_dim, plan.v.row_stride(), plan.v.col_stride());
  uint32_t inputs = 3;
  bool leading = true;
  if (at.transforms())
    for (const format::ScoreTransform* t : *at.transforms()) {
      // (In half precision the scores are rounded before f: no scaling folds into q·kᵀ.)
      if (leading && !plan.half && t->kind() == format::ScoreTransformKind::Scale) {
        plan.alpha *= static_cast<float>(t->value());
        continue;
      }
      leading = false;
      Transform transform{t->kind(), static_cast<float>(t->value()), {}};
      if (t->input() >= 0) transform.mask = view_of(arg(inputs++), t->offset(), t->strides());
      plan.transforms.push_back(std::move(transform));
    }
  if (!plan.transforms.empty() && plan.transforms.back().kind == format::ScoreTransformKind::Causal) {
    plan.skip_masked = true;
    plan.fill = plan.transforms.back().value;
  }
  plan.reads = inputs;
  if (at.out_strides()) {
    plan.out = view_of(arg(inputs), 0, at.out_strides());
  } else {  // packed
    plan.out = {arg(inputs), 0, std::vector<int64_t>(plan.batch.size() + 2, 1)};
    int64_t stride = plan.value_dim;
    for (size_t d = plan.out.strides.size() - 1; d-- > 0;) {
      plan.out.strides[d] = stride;
      stride *= d < plan.batch.size() ? plan.batch[d] : plan.queries;
    }
  }
  plan.block_rows = attention_block_rows(plan.queries, plan.keys, plan.half, plan.skip_masked);
  plan.blocks = (plan.queries + plan.block_rows - 1) / plan.block_rows;
  if (plan.half && at.precision() == format::DType::BF16) {
    // A causal block's keys in steps of a sixteenth of them (at least 64), so that a few
    // distinct products serve every block.
    plan.key_granule = std::max<int64_t>(64, (plan.keys / 16 + 63) / 64 * 64);
    plan.native = !native_implementation(plan).empty();
  }
  return plan;
}

}  // namespace attention_plan

std::string attention_implementation(const format::Attention& call, const AttentionTypes& types) {
  if (call.gradient()) return attention_plan::gradient_implementation(call, types);
  const Plan plan = plan_of(call, types, nullptr);
  if (!plan.half) return {};
  const std::string type = plan.half_type == Half::BF16 ? "bf16" : "f16";
  if (plan.native) return "products in bf16 on oneDNN (" + native_implementation(plan) + ")";
  return "products on sgemm over f32 values rounded to " + type;
}

Status run_attention(const format::Attention& at, const AttentionTypes& types, uint8_t* const* args, int threads,
                     ThreadPool* pool) {
  const Plan plan = plan_of(at, types, args);
  int64_t indices = 1;
  for (int64_t d : plan.batch) indices *= d;
  // Batch indices across the threads, each GEMM on one, where there are as many as
  // threads; else blocks across them; else one after another, each GEMM on every thread.
  const bool by_index = indices >= threads;
  const int64_t tasks = by_index ? indices : indices * plan.blocks;
  if (pool && threads > 1 && tasks >= threads)
    return attention_plan::for_tasks(*pool, tasks, [&](int64_t task) {
      return by_index ? run_blocks(plan, task, 0, plan.blocks, 1)
                      : run_blocks(plan, task / plan.blocks, task % plan.blocks, task % plan.blocks + 1, 1);
    });
  for (int64_t p = 0; p < indices; ++p) KILN_RETURN_IF_ERROR(run_blocks(plan, p, 0, plan.blocks, threads));
  return Status::Ok();
}

}  // namespace kiln::runtime::cpu
