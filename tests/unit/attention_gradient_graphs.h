// Training graphs whose attention's backward is one step (passes/attention_split.h, ir/attention_match.h's
// AttentionGradientMatch), with the arguments their checks differentiate with respect to: run against the
// interpreter on the CPU (attention_gradient_test.cc) and on CUDA's kernels (cuda_attention_gpu_test.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::testing {

struct AttentionGradientGraph {
  std::string name;
  std::string text;  // its first result is the loss
  std::vector<std::string> wrt;
  uint64_t seed = 0;
  double bound = 2;  // of the seeded arguments
};

inline std::vector<AttentionGradientGraph> attention_gradient_graphs() {
  return {
      // Causal; 300 queries (in blocks of 109 rows on the CPU, 64 on CUDA, the last partial); keys past each block's
      // last query left out.
      {"the op, causal",
       R"(graph @g(%q: f32[1,2,300,8], %k: f32[1,2,300,8], %v: f32[1,2,300,8], %w: f32[1,2,300,8]) {
    %y: f32[1,2,300,8] = attention(%q, %k, %v) {causal=true, scale=0.5}
    %yw: f32[1,2,300,8] = mul(%y, %w)
    %l: f32[] = reduce_sum(%yw) {axes=[0,1,2,3]}
    return %l
  })",
       {"q", "k", "v"},
       1},
      // Not causal, 300 queries by 40 keys: blocks of 256 rows on the CPU (whole rows of
      // keys, however few), the last partial.
      {"not causal, 300 queries",
       R"(graph @g(%q: f32[1,2,300,8], %k: f32[1,2,40,8], %v: f32[1,2,40,8], %w: f32[1,2,300,8]) {
    %y: f32[1,2,300,8] = attention(%q, %k, %v) {scale=0.4}
    %yw: f32[1,2,300,8] = mul(%y, %w)
    %l: f32[] = reduce_sum(%yw) {axes=[0,1,2,3]}
    return %l
  })",
       {"q", "k", "v"},
       13},
      // Cross attention with a bool mask per key, v narrower than q.
      {"cross attention, bool mask",
       R"(graph @g(%q: f32[2,2,7,8], %k: f32[2,2,33,8], %v: f32[2,2,33,5], %m: bool[7,33], %w: f32[2,2,7,5]) {
    %y: f32[2,2,7,5] = attention(%q, %k, %v, %m) {scale=0.3}
    %yw: f32[2,2,7,5] = mul(%y, %w)
    %l: f32[] = reduce_sum(%yw) {axes=[0,1,2,3]}
    return %l
  })",
       {"q", "k", "v"},
       2},
      // One qkv projection sliced into heads, j <= i from iotas with a finite fill, a scaling: the gradients flow back
      // into the projection's weight through the heads' concat. Inputs within 0.5: at 2, the scores (about 40)
      // saturate the softmax, whose gradient then cancels, and the fused step and the unfused kernels both land 5e-6
      // (max-norm) from an f64 run, beyond the per-element bound against the f32 interpreter.
      {"GPT-2 heads",
       R"(graph @g(%x: f32[2,40,24], %w: f32[24,72], %t: f32[2,40,24]) {
    %qkv: f32[2,40,72] = matmul(%x, %w)
    %q0: f32[2,40,24] = slice(%qkv) {starts=[0,0,0], ends=[2,40,24]}
    %k0: f32[2,40,24] = slice(%qkv) {starts=[0,0,24], ends=[2,40,48]}
    %v0: f32[2,40,24] = slice(%qkv) {starts=[0,0,48], ends=[2,40,72]}
    %q1: f32[2,40,3,8] = reshape(%q0) {shape=[2,40,3,8]}
    %k1: f32[2,40,3,8] = reshape(%k0) {shape=[2,40,3,8]}
    %v1: f32[2,40,3,8] = reshape(%v0) {shape=[2,40,3,8]}
    %q: f32[2,3,40,8] = transpose(%q1) {perm=[0,2,1,3]}
    %kt: f32[2,3,8,40] = transpose(%k1) {perm=[0,2,3,1]}
    %v: f32[2,3,40,8] = transpose(%v1) {perm=[0,2,1,3]}
    %s: f32[2,3,40,40] = matmul(%q, %kt)
    %c: f32[] = constant {value=0.35}
    %ss: f32[2,3,40,40] = mul(%s, %c)
    %i: i64[40,40] = iota {shape=[40,40], axis=0}
    %j: i64[40,40] = iota {shape=[40,40], axis=1}
    %keep: bool[40,40] = ge(%i, %j)
    %kb: bool[2,3,40,40] = broadcast(%keep) {shape=[2,3,40,40], dims=[2,3]}
    %fill: f32[] = constant {value=-1e9}
    %sk: f32[2,3,40,40] = select(%kb, %ss, %fill)
    %p: f32[2,3,40,40] = softmax(%sk) {axis=-1}
    %o: f32[2,3,40,8] = matmul(%p, %v)
    %ot: f32[2,40,3,8] = transpose(%o) {perm=[0,2,1,3]}
    %y: f32[2,40,24] = reshape(%ot) {shape=[2,40,24]}
    %d: f32[2,40,24] = sub(%y, %t)
    %dd: f32[2,40,24] = mul(%d, %d)
    %l: f32[] = reduce_sum(%dd) {axes=[0,1,2]}
    return %l
  })",
       {"w", "x"},
       3,
       0.5},
      // BERT's: an additive mask read through its broadcast.
      {"BERT additive mask",
       R"(graph @g(%q: f32[2,2,20,4], %k: f32[2,2,20,4], %v: f32[2,2,20,4], %bias: f32[2,20], %w: f32[2,2,20,4]) {
    %kt: f32[2,2,4,20] = transpose(%k) {perm=[0,1,3,2]}
    %s: f32[2,2,20,20] = matmul(%q, %kt)
    %c: f32[] = constant {value=2.0}
    %ss: f32[2,2,20,20] = div(%s, %c)
    %b: f32[2,2,20,20] = broadcast(%bias) {shape=[2,2,20,20], dims=[0,3]}
    %sb: f32[2,2,20,20] = add(%ss, %b)
    %p: f32[2,2,20,20] = softmax(%sb) {axis=-1}
    %o: f32[2,2,20,4] = matmul(%p, %v)
    %ow: f32[2,2,20,4] = mul(%o, %w)
    %l: f32[] = reduce_sum(%ow) {axes=[0,1,2,3]}
    return %l
  })",
       {"q", "k", "v"},
       4},
      // Fills of -1 beside scores of up to 32: the masked keys' P is not 0, so each block takes every key, and the
      // select's gradient zeroes theirs. Keys shared by the batch (a broadcast k, whose gradient the graph then sums
      // over it).
      {"fill -1, shared keys",
       R"(graph @g(%q: f32[3,1,100,4], %k: f32[1,1,100,4], %v: f32[3,1,100,4], %w: f32[3,1,100,4]) {
    %q10: f32[3,1,100,4] = mul(%q, %q)
    %kt: f32[1,1,4,100] = transpose(%k) {perm=[0,1,3,2]}
    %s: f32[3,1,100,100] = matmul(%q10, %kt)
    %i: i64[100,100] = iota {shape=[100,100], axis=0}
    %j: i64[100,100] = iota {shape=[100,100], axis=1}
    %keep: bool[100,100] = le(%j, %i)
    %kb: bool[3,1,100,100] = broadcast(%keep) {shape=[3,1,100,100], dims=[2,3]}
    %fill: f32[] = constant {value=-1.0}
    %sk: f32[3,1,100,100] = select(%kb, %s, %fill)
    %p: f32[3,1,100,100] = softmax(%sk) {axis=-1}
    %o: f32[3,1,100,4] = matmul(%p, %v)
    %ow: f32[3,1,100,4] = mul(%o, %w)
    %l: f32[] = reduce_sum(%ow) {axes=[0,1,2,3]}
    return %l
  })",
       {"q", "k", "v"},
       5},
      // lt(j, i) of iotas (keys before the query; row 0 keeps none, so it takes the fill) folds to a bool constant,
      // which each step's copy of it reads: compared by content.
      {"mask folded to a constant",
       R"(graph @g(%q: f32[2,8,4], %k: f32[2,8,4], %v: f32[2,8,4], %w: f32[2,8,4]) {
    %kt: f32[2,4,8] = transpose(%k) {perm=[0,2,1]}
    %s: f32[2,8,8] = matmul(%q, %kt)
    %i: i64[8,8] = iota {shape=[8,8], axis=0}
    %j: i64[8,8] = iota {shape=[8,8], axis=1}
    %keep: bool[8,8] = lt(%j, %i)
    %kb: bool[2,8,8] = broadcast(%keep) {shape=[2,8,8], dims=[1,2]}
    %fill: f32[] = constant {value=-1.0}
    %sk: f32[2,8,8] = select(%kb, %s, %fill)
    %p: f32[2,8,8] = softmax(%sk) {axis=-1}
    %o: f32[2,8,4] = matmul(%p, %v)
    %ow: f32[2,8,4] = mul(%o, %w)
    %l: f32[] = reduce_sum(%ow) {axes=[0,1,2]}
    return %l
  })",
       {"q", "k", "v"},
       7},
      // Keys from 3 on, then causal, both with -inf: queries 0 to 2 keep no key, so their P is NaN, which Pᵀ·dO
      // spreads into dv at every key, past the block's last query too (the block then takes every key).
      {"a row masked whole",
       R"(graph @g(%q: f32[1,4,4], %k: f32[1,8,4], %v: f32[1,8,2], %w: f32[1,4,2]) {
    %kt: f32[1,4,8] = transpose(%k) {perm=[0,2,1]}
    %s: f32[1,4,8] = matmul(%q, %kt)
    %ninf: f32[] = constant {value=-inf}
    %j0: i64[4,8] = iota {shape=[4,8], axis=1}
    %three: i64[] = constant {value=3}
    %threes: i64[4,8] = broadcast(%three) {shape=[4,8], dims=[]}
    %m: bool[4,8] = ge(%j0, %threes)
    %mb: bool[1,4,8] = broadcast(%m) {shape=[1,4,8], dims=[1,2]}
    %sk: f32[1,4,8] = select(%mb, %s, %ninf)
    %i: i64[4,8] = iota {shape=[4,8], axis=0}
    %j: i64[4,8] = iota {shape=[4,8], axis=1}
    %c: bool[4,8] = le(%j, %i)
    %cb: bool[1,4,8] = broadcast(%c) {shape=[1,4,8], dims=[1,2]}
    %sc: f32[1,4,8] = select(%cb, %sk, %ninf)
    %p: f32[1,4,8] = softmax(%sc) {axis=-1}
    %y: f32[1,4,2] = matmul(%p, %v)
    %yw: f32[1,4,2] = mul(%y, %w)
    %l: f32[] = reduce_sum(%yw) {axes=[0,1,2]}
    return %l
  })",
       {"q", "k", "v"},
       9},
      // Query rows 0 to 4 keep no key, with float's lowest as the fill: their P is 1/S at
      // every key (the fill minus itself), where a log-sum-exp of the fill would lose the
      // sum's log (P 1 rather than 1/S). Two blocks of query rows, keys past a whole tile.
      {"rows masked whole with float's lowest",
       R"(graph @g(%q: f32[2,70,8], %k: f32[2,40,8], %v: f32[2,40,8], %w: f32[2,70,8]) {
    %kt: f32[2,8,40] = transpose(%k) {perm=[0,2,1]}
    %s: f32[2,70,40] = matmul(%q, %kt)
    %c: f32[] = constant {value=0.3}
    %ss: f32[2,70,40] = mul(%s, %c)
    %i: i64[70,40] = iota {shape=[70,40], axis=0}
    %five: i64[] = constant {value=5}
    %fives: i64[70,40] = broadcast(%five) {shape=[70,40], dims=[]}
    %keep: bool[70,40] = ge(%i, %fives)
    %kb: bool[2,70,40] = broadcast(%keep) {shape=[2,70,40], dims=[1,2]}
    %fill: f32[] = constant {value=-3.4028234663852886e+38}
    %sk: f32[2,70,40] = select(%kb, %ss, %fill)
    %p: f32[2,70,40] = softmax(%sk) {axis=-1}
    %o: f32[2,70,8] = matmul(%p, %v)
    %ow: f32[2,70,8] = mul(%o, %w)
    %l: f32[] = reduce_sum(%ow) {axes=[0,1,2]}
    return %l
  })",
       {"q", "k", "v"},
       11},
      // Causal with a fill of -1e9 after an additive mask of -1e9 on query rows 0 to 2: those
      // rows' P is 1/S at every key, past the diagonal too, so the second kernel takes the
      // query tiles before its first key.
      {"rows masked whole by -1e9, causal",
       R"(graph @g(%q: f32[1,100,8], %k: f32[1,100,8], %v: f32[1,100,8], %w: f32[1,100,8]) {
    %kt: f32[1,8,100] = transpose(%k) {perm=[0,2,1]}
    %s: f32[1,100,100] = matmul(%q, %kt)
    %i: i64[100,100] = iota {shape=[100,100], axis=0}
    %j: i64[100,100] = iota {shape=[100,100], axis=1}
    %three: i64[] = constant {value=3}
    %threes: i64[100,100] = broadcast(%three) {shape=[100,100], dims=[]}
    %live: bool[100,100] = ge(%i, %threes)
    %zero: f32[] = constant {value=0.0}
    %big: f32[] = constant {value=-1e9}
    %zeros: f32[100,100] = broadcast(%zero) {shape=[100,100], dims=[]}
    %bigs: f32[100,100] = broadcast(%big) {shape=[100,100], dims=[]}
    %bias: f32[100,100] = select(%live, %zeros, %bigs)
    %bb: f32[1,100,100] = broadcast(%bias) {shape=[1,100,100], dims=[1,2]}
    %sb: f32[1,100,100] = add(%s, %bb)
    %keep: bool[100,100] = le(%j, %i)
    %kb: bool[1,100,100] = broadcast(%keep) {shape=[1,100,100], dims=[1,2]}
    %sk: f32[1,100,100] = select(%kb, %sb, %big)
    %p: f32[1,100,100] = softmax(%sk) {axis=-1}
    %o: f32[1,100,8] = matmul(%p, %v)
    %ow: f32[1,100,8] = mul(%o, %w)
    %l: f32[] = reduce_sum(%ow) {axes=[0,1,2]}
    return %l
  })",
       {"q", "k", "v"},
       12},
      // Head dims of 128 and 96 (CUDA's largest, four and three columns of 32 a thread), an
      // additive mask per key, 70 queries and 90 keys: two blocks of each kernel, the last partial.
      {"head dims 128 and 96",
       R"(graph @g(%q: f32[1,2,70,128], %k: f32[1,2,90,128], %v: f32[1,2,90,96], %m: f32[70,90], %w: f32[1,2,70,96]) {
    %kt: f32[1,2,128,90] = transpose(%k) {perm=[0,1,3,2]}
    %s: f32[1,2,70,90] = matmul(%q, %kt)
    %c: f32[] = constant {value=0.09}
    %ss: f32[1,2,70,90] = mul(%s, %c)
    %mb: f32[1,2,70,90] = broadcast(%m) {shape=[1,2,70,90], dims=[2,3]}
    %sm: f32[1,2,70,90] = add(%ss, %mb)
    %p: f32[1,2,70,90] = softmax(%sm) {axis=-1}
    %y: f32[1,2,70,96] = matmul(%p, %v)
    %yw: f32[1,2,70,96] = mul(%y, %w)
    %l: f32[] = reduce_sum(%yw) {axes=[0,1,2,3]}
    return %l
  })",
       {"q", "k", "v"},
       10,
       1},
  };
}

/// A training graph whose q, k, v and dO are stored in `precision` (bf16 or f16), as in
/// bench/cuda_checks/train_attention_*.kir: the gradients autodiff writes for q, k and v
/// are of that type too, which the backward's step writes (format 1.21). Causal, 100
/// queries and keys (two blocks of CUDA's kernels, the last partial), heads of 24
/// (padded to 32 in CUDA's tiles).
inline std::string half_stored_attention_gradient(const std::string& precision) {
  std::string text = R"(graph @g(%q: H[2,3,100,24], %k: H[2,3,100,24], %v: H[2,3,100,24], %dy: H[2,3,100,24]) {
    %qf: f32[2,3,100,24] = cast(%q) {to=f32}
    %kf: f32[2,3,100,24] = cast(%k) {to=f32}
    %vf: f32[2,3,100,24] = cast(%v) {to=f32}
    %y: f32[2,3,100,24] = attention(%qf, %kf, %vf) {causal=true, scale=0.2}
    %dyf: f32[2,3,100,24] = cast(%dy) {to=f32}
    %yd: f32[2,3,100,24] = mul(%y, %dyf)
    %l: f32[] = reduce_sum(%yd) {axes=[0,1,2,3]}
    return %l
  })";
  for (size_t at = text.find("H["); at != std::string::npos; at = text.find("H[", at)) text.replace(at, 1, precision);
  return text;
}

}  // namespace kiln::testing
