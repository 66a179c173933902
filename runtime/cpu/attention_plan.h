// What the CPU's attention steps share (runtime/cpu/attention.cc, the forward, and
// attention_gradient.cc, the backward): a call's plan, and f and the softmax over a block
// of score rows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/result.h"
#include "runtime/cpu/attention.h"
#include "runtime/cpu/score_rows.h"
#include "runtime/format/artifact.h"

namespace kiln::runtime::cpu::attention_plan {

using format::BlasMatrix;

// A view over [batch.., rows, cols]: its base, offset and strides.
struct View {
  uint8_t* base = nullptr;
  int64_t offset = 0;
  std::vector<int64_t> strides;
  int64_t row_stride() const { return strides[strides.size() - 2]; }
  int64_t col_stride() const { return strides.back(); }
};

inline View view_of(uint8_t* base, int64_t offset, const flatbuffers::Vector<int64_t>* strides) {
  return {base, offset, std::vector<int64_t>(strides->begin(), strides->end())};
}

struct Transform {
  format::ScoreTransformKind kind;
  float value;
  View mask;  // Add and Keep
};

struct Plan {
  // Format 1.14: the matmuls' type; in bf16 or f16, each operand's type (f32 or that one).
  bool half = false;
  Half half_type = Half::BF16;
  bool native = false;      // bf16 products on oneDNN's primitive, else widened to f32 for sgemm
  int64_t key_granule = 1;  // native: causal key counts rounded up to it (fewer distinct products)
  format::DType q_type = format::DType::F32, k_type = format::DType::F32, v_type = format::DType::F32,
                out_type = format::DType::F32;
  std::vector<int64_t> batch;
  int64_t queries, keys, head_dim, value_dim, block_rows, blocks;
  View q, k, v;
  BlasMatrix qm, km, vm;              // q [T, D]; kᵀ [D, S] as the second operand; v [S, Dv]
  float alpha = 1;                    // the leading scalings, applied by the first GEMM
  std::vector<Transform> transforms;  // the rest of f
  bool skip_masked = false;           // f ends in a causal mask: keys past a block's last query are left out
  float fill = 0;                     // that mask's value
  View out;                           // [batch.., T, Dv], its last stride 1
  uint32_t reads = 3;                 // the step's inputs q, k, v and the masks' (a backward's dO next)
};

// The element offset of batch index p in a view (its batch dims first).
int64_t batch_offset(const Plan& plan, const View& view, int64_t p);

// f and the softmax over a block's rows of scores (rounded to the precision first, in the
// half form), for keys [0, keys), in place and also rounded into `half_out` (rows ld
// apart) where given; false where a masked key's exp would not be 0.
bool scores_to_probabilities(const Plan& plan, int64_t p, int64_t r0, int64_t rows, int64_t keys, float* tile,
                             int64_t ld, uint16_t* half_out = nullptr);

// Rows [r0, r0 + rows) of a [.., rows, cols] view of batch index p, of element type
// `type` (f32 or the precision), packed into `to`: the precision's bits (uint16_t), or
// f32 values rounded to it (float).
template <class To>
void pack_rows(const Plan& plan, const View& view, format::DType type, int64_t p, int64_t r0, int64_t rows,
               int64_t cols, To* to, std::vector<uint8_t>& row);

// Blocks [first, last) through `run_block(r0, rows, keys)`: where f ends in a causal mask,
// each on the keys up to its last query (rounded up to the plan's granule), and again on
// every key where that returns false (a masked key's exp would not be 0).
template <class RunBlock>
Status for_blocks(const Plan& plan, int64_t first, int64_t last, const RunBlock& run_block) {
  for (int64_t block = first; block < last; ++block) {
    const int64_t r0 = block * plan.block_rows, rows = std::min(plan.block_rows, plan.queries - r0);
    const int64_t needed = (r0 + rows + plan.key_granule - 1) / plan.key_granule * plan.key_granule;
    const int64_t keys = plan.skip_masked ? std::min(plan.keys, needed) : plan.keys;
    KILN_ASSIGN_OR_RETURN(bool done, run_block(r0, rows, keys));
    if (done) continue;
    if (Result<bool> whole = run_block(r0, rows, plan.keys); !whole.ok()) return whole.error();
  }
  return Status::Ok();
}

// The plan of a call; `args` may be null (no run, for attention_implementation). Defined
// in attention.cc, beside the bf16 products it picks between.
Plan plan_of(const format::Attention& at, const AttentionTypes& types, uint8_t* const* args);

// attention_implementation of a backward (defined in attention_gradient.cc).
std::string gradient_implementation(const format::Attention& at, const AttentionTypes& types);

// run(task) for tasks [0, n) across `pool`'s threads: the first failure.
Status for_tasks(ThreadPool& pool, int64_t n, const std::function<Status(int64_t)>& run);

}  // namespace kiln::runtime::cpu::attention_plan
