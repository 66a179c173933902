#include "runtime/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/cpu/matmul.h"
#include "runtime/cpu/score_rows.h"

namespace kiln::runtime::cpu {
namespace {

using format::BlasMatrix;

// A view over [batch.., rows, cols]: its base, offset and strides.
struct View {
  uint8_t* base = nullptr;
  int64_t offset = 0;
  std::vector<int64_t> strides;
  int64_t row_stride() const { return strides[strides.size() - 2]; }
  int64_t col_stride() const { return strides.back(); }
};

View view_of(uint8_t* base, int64_t offset, const flatbuffers::Vector<int64_t>* strides) {
  return {base, offset, std::vector<int64_t>(strides->begin(), strides->end())};
}

struct Transform {
  format::ScoreTransformKind kind;
  float value;
  View mask;  // Add and Keep
};

struct Plan {
  std::vector<int64_t> batch;
  int64_t queries, keys, head_dim, value_dim, block_rows, blocks;
  View q, k, v;
  BlasMatrix qm, km, vm;              // q [T, D]; kᵀ [D, S] as the second operand; v [S, Dv]
  float alpha = 1;                    // the leading scalings, applied by the first GEMM
  std::vector<Transform> transforms;  // the rest of f
  bool skip_masked = false;           // f ends in a causal mask: keys past a block's last query are left out
  float fill = 0;                     // that mask's value
  View out;                           // [batch.., T, Dv], its last stride 1
};

// The element offset of batch index p in a view (its batch dims first).
int64_t batch_offset(const Plan& plan, const View& view, int64_t p) {
  int64_t offset = view.offset;
  for (size_t d = plan.batch.size(); d-- > 0;) {
    offset += p % plan.batch[d] * view.strides[d];
    p /= plan.batch[d];
  }
  return offset;
}

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
  for (int64_t i = 0; i < rows; ++i) {
    float* row = tile.data() + i * keys;
    const int64_t query = r0 + i;
    for (const Transform& t : plan.transforms) {
      switch (t.kind) {
        case format::ScoreTransformKind::Scale: scale_row(row, keys, t.value); break;
        case format::ScoreTransformKind::Add:
          add_to_row(
              row, keys,
              reinterpret_cast<const float*>(t.mask.base) + batch_offset(plan, t.mask, p) + query * t.mask.row_stride(),
              t.mask.col_stride());
          break;
        case format::ScoreTransformKind::Keep:
          keep_in_row(row, keys, t.mask.base + batch_offset(plan, t.mask, p) + query * t.mask.row_stride(),
                      t.mask.col_stride(), t.value);
          break;
        case format::ScoreTransformKind::Causal:
          for (int64_t j = query + 1; j < keys; ++j) row[j] = t.value;
          break;
      }
    }
    // The keys left out score `fill`: exact where exp(fill - max) is 0 in f32.
    const float max = row_max(row, keys);
    if (keys < plan.keys && plan.fill != -INFINITY && !(plan.fill - max < -104.0f)) return false;
    softmax_row(row, keys, max);
  }
  float* out = reinterpret_cast<float*>(plan.out.base) + batch_offset(plan, plan.out, p) + r0 * plan.out.row_stride();
  const int64_t ldc = plan.queries == 1 ? plan.value_dim : plan.out.row_stride();
  KILN_RETURN_IF_ERROR(sgemm(false, plan.vm.transposed, rows, plan.value_dim, keys, 1.0f, tile.data(), keys, v,
                             plan.vm.ld, out, ldc, threads));
  return true;
}

// Blocks [first, last) of batch index p.
Status run_blocks(const Plan& plan, int64_t p, int64_t first, int64_t last, int threads) {
  thread_local std::vector<float> tile;
  for (int64_t block = first; block < last; ++block) {
    const int64_t r0 = block * plan.block_rows, rows = std::min(plan.block_rows, plan.queries - r0);
    const int64_t keys = plan.skip_masked ? std::min(plan.keys, r0 + rows) : plan.keys;
    KILN_ASSIGN_OR_RETURN(bool done, run_block(plan, p, r0, rows, keys, tile, threads));
    if (done) continue;
    if (Result<bool> whole = run_block(plan, p, r0, rows, plan.keys, tile, threads); !whole.ok()) return whole.error();
  }
  return Status::Ok();
}

}  // namespace

int64_t attention_block_rows(int64_t queries, int64_t keys) {
  const int64_t rows = std::clamp<int64_t>(32768 / std::max<int64_t>(keys, 1), 16, 256);
  return std::min(rows, queries);
}

Status run_attention(const format::Attention& at, uint8_t* const* args, int threads, ThreadPool* pool) {
  Plan plan;
  plan.batch.assign(at.batch()->begin(), at.batch()->end());
  plan.queries = at.queries();
  plan.keys = at.keys();
  plan.head_dim = at.head_dim();
  plan.value_dim = at.value_dim();
  plan.q = view_of(args[0], at.q_offset(), at.q_strides());
  plan.k = view_of(args[1], at.k_offset(), at.k_strides());
  plan.v = view_of(args[2], at.v_offset(), at.v_strides());
  // The reader checked that each is a matrix BLAS reads.
  plan.qm = *format::blas_matrix(plan.queries, plan.head_dim, plan.q.row_stride(), plan.q.col_stride());
  plan.km = *format::blas_matrix(plan.head_dim, plan.keys, plan.k.col_stride(), plan.k.row_stride());
  plan.vm = *format::blas_matrix(plan.keys, plan.value_dim, plan.v.row_stride(), plan.v.col_stride());
  uint32_t inputs = 3;
  bool leading = true;
  if (at.transforms())
    for (const format::ScoreTransform* t : *at.transforms()) {
      if (leading && t->kind() == format::ScoreTransformKind::Scale) {
        plan.alpha *= static_cast<float>(t->value());
        continue;
      }
      leading = false;
      Transform transform{t->kind(), static_cast<float>(t->value()), {}};
      if (t->input() >= 0) transform.mask = view_of(args[inputs++], t->offset(), t->strides());
      plan.transforms.push_back(std::move(transform));
    }
  if (!plan.transforms.empty() && plan.transforms.back().kind == format::ScoreTransformKind::Causal) {
    plan.skip_masked = true;
    plan.fill = plan.transforms.back().value;
  }
  if (at.out_strides()) {
    plan.out = view_of(args[inputs], 0, at.out_strides());
  } else {  // packed
    plan.out = {args[inputs], 0, std::vector<int64_t>(plan.batch.size() + 2, 1)};
    int64_t stride = plan.value_dim;
    for (size_t d = plan.out.strides.size() - 1; d-- > 0;) {
      plan.out.strides[d] = stride;
      stride *= d < plan.batch.size() ? plan.batch[d] : plan.queries;
    }
  }
  plan.block_rows = attention_block_rows(plan.queries, plan.keys);
  plan.blocks = (plan.queries + plan.block_rows - 1) / plan.block_rows;
  int64_t indices = 1;
  for (int64_t d : plan.batch) indices *= d;
  // Batch indices across the threads, each GEMM on one, where there are as many as
  // threads; else blocks across them; else one after another, each GEMM on every thread.
  const bool by_index = indices >= threads;
  const int64_t tasks = by_index ? indices : indices * plan.blocks;
  if (pool && threads > 1 && tasks >= threads) {
    std::mutex failed_mutex;
    Status failed = Status::Ok();
    pool->parallel_for(tasks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const Status s = by_index ? run_blocks(plan, task, 0, plan.blocks, 1)
                                  : run_blocks(plan, task / plan.blocks, task % plan.blocks, task % plan.blocks + 1, 1);
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(failed_mutex);
          if (failed.ok()) failed = s;
        }
      }
    });
    return failed;
  }
  for (int64_t p = 0; p < indices; ++p) KILN_RETURN_IF_ERROR(run_blocks(plan, p, 0, plan.blocks, threads));
  return Status::Ok();
}

}  // namespace kiln::runtime::cpu
