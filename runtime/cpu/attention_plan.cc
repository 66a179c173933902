#include "runtime/cpu/attention_plan.h"

#include <cmath>
#include <cstring>
#include <mutex>
#include <type_traits>

namespace kiln::runtime::cpu::attention_plan {

// The element offset of batch index p in a view (its batch dims first).
int64_t batch_offset(const Plan& plan, const View& view, int64_t p) {
  int64_t offset = view.offset;
  for (size_t d = plan.batch.size(); d-- > 0;) {
    offset += p % plan.batch[d] * view.strides[d];
    p /= plan.batch[d];
  }
  return offset;
}

// f and the softmax over a block's rows of scores (rounded to the precision first, in the
// half form), for keys [0, keys), also written rounded into `half_out` (rows ld apart)
// where given; false where a masked key's exp would not be 0.
bool scores_to_probabilities(const Plan& plan, int64_t p, int64_t r0, int64_t rows, int64_t keys, float* tile,
                             int64_t ld, uint16_t* half_out) {
  for (int64_t i = 0; i < rows; ++i) {
    float* row = tile + i * ld;
    const int64_t query = r0 + i;
    // Where f ends in a causal mask, the keys past the query only take its fill: f and the
    // softmax run over the keys up to the query, and the rest are 0 where the fill's exp
    // is (fill - max < -104: below f32's smallest subnormal), as it is for keys past
    // `keys` (and a row whose max leaves it otherwise takes every key).
    const int64_t valid = plan.skip_masked ? std::min(keys, query + 1) : keys;
    if (plan.half) round_to_half(row, valid, plan.half_type);
    for (const Transform& t : plan.transforms) {
      switch (t.kind) {
        case format::ScoreTransformKind::Scale: scale_row(row, valid, t.value); break;
        case format::ScoreTransformKind::Add:
          add_to_row(
              row, valid,
              reinterpret_cast<const float*>(t.mask.base) + batch_offset(plan, t.mask, p) + query * t.mask.row_stride(),
              t.mask.col_stride());
          break;
        case format::ScoreTransformKind::Keep:
          keep_in_row(row, valid, t.mask.base + batch_offset(plan, t.mask, p) + query * t.mask.row_stride(),
                      t.mask.col_stride(), t.value);
          break;
        case format::ScoreTransformKind::Causal:
          for (int64_t j = query + 1; j < keys; ++j) row[j] = t.value;
          break;
      }
    }
    float max = row_max(row, valid);
    const bool vanishes = plan.fill - max < -104.0f;
    int64_t n = valid;
    if (valid < keys && !vanishes) {  // the masked keys count: the whole row (the fill is there)
      n = keys;
      max = row_max(row, keys);
    }
    // The keys left out of the block score `fill` too.
    if (keys < plan.keys && plan.fill != -INFINITY && !(plan.fill - max < -104.0f)) return false;
    if (half_out) {
      softmax_row_to_half(row, n, max, half_out + i * ld, plan.half_type);
      std::fill(half_out + i * ld + n, half_out + i * ld + keys, uint16_t{0});
    } else {
      softmax_row(row, n, max);
    }
    std::fill(row + n, row + keys, 0.0f);
  }
  return true;
}

template <class To>
void pack_rows(const Plan& plan, const View& view, format::DType type, int64_t p, int64_t r0, int64_t rows,
               int64_t cols, To* to, std::vector<uint8_t>& row) {
  const bool wide = type == format::DType::F32;
  const int64_t element = wide ? 4 : 2, base = batch_offset(plan, view, p);
  row.resize(static_cast<size_t>(cols * element));
  // Rows apart by more than a page (heads read in place out of a projection) defeat the
  // hardware prefetcher: each row's lines are asked for a few rows ahead.
  constexpr int64_t kAhead = 16;
  const bool prefetch = view.col_stride() == 1 && view.row_stride() * element > 1024;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* from = view.base + (base + (r0 + r) * view.row_stride()) * element;
    if (prefetch && r + kAhead < rows)
      for (int64_t byte = 0; byte < cols * element; byte += 64)
        __builtin_prefetch(from + kAhead * view.row_stride() * element + byte);
    To* out = to + r * cols;
    if (view.col_stride() != 1) {  // a column-major view: the row gathered first
      const int64_t step = view.col_stride() * element;
      for (int64_t c = 0; c < cols; ++c)
        std::memcpy(row.data() + c * element, from + c * step, static_cast<size_t>(element));
      from = row.data();
    }
    if constexpr (std::is_same_v<To, uint16_t>) {
      if (wide) narrow_to_half(reinterpret_cast<const float*>(from), out, cols, plan.half_type);
      else std::memcpy(out, from, static_cast<size_t>(cols) * 2);
    } else if (wide) {
      std::memcpy(out, from, static_cast<size_t>(cols) * 4);
      round_to_half(out, cols, plan.half_type);
    } else {
      widen_half(reinterpret_cast<const uint16_t*>(from), out, cols, plan.half_type);
    }
  }
}

template void pack_rows(const Plan&, const View&, format::DType, int64_t, int64_t, int64_t, int64_t, uint16_t*,
                        std::vector<uint8_t>&);
template void pack_rows(const Plan&, const View&, format::DType, int64_t, int64_t, int64_t, int64_t, float*,
                        std::vector<uint8_t>&);

Status for_tasks(ThreadPool& pool, int64_t n, const std::function<Status(int64_t)>& run) {
  std::mutex failed_mutex;
  Status failed = Status::Ok();
  pool.parallel_for(n, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task)
      if (Status s = run(task); !s.ok()) {
        std::lock_guard<std::mutex> lock(failed_mutex);
        if (failed.ok()) failed = s;
      }
  });
  return failed;
}

}  // namespace kiln::runtime::cpu::attention_plan
