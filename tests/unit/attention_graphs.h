// Attention graphs that tests of both precisions run (attention_runtime_test.cc in f32,
// attention_half_test.cc in bf16 and f16).
#pragma once

namespace kiln::testing {

/// BERT's form: heads sliced out of one f32 projection, divided by sqrt(D), plus an
/// additive f32 mask per (batch, key).
inline constexpr const char* kBertAttentionGraph = R"(graph @g(%qkv: f32[2,20,72], %bias: f32[2,20]) {
  %q: f32[2,20,24] = slice(%qkv) {starts=[0,0,0], ends=[2,20,24]}
  %k: f32[2,20,24] = slice(%qkv) {starts=[0,0,24], ends=[2,20,48]}
  %v: f32[2,20,24] = slice(%qkv) {starts=[0,0,48], ends=[2,20,72]}
  %qh: f32[2,20,4,6] = reshape(%q) {shape=[2,20,4,6]}
  %kh: f32[2,20,4,6] = reshape(%k) {shape=[2,20,4,6]}
  %vh: f32[2,20,4,6] = reshape(%v) {shape=[2,20,4,6]}
  %qt: f32[2,4,20,6] = transpose(%qh) {perm=[0,2,1,3]}
  %kt: f32[2,4,6,20] = transpose(%kh) {perm=[0,2,3,1]}
  %vt: f32[2,4,20,6] = transpose(%vh) {perm=[0,2,1,3]}
  %s: f32[2,4,20,20] = matmul(%qt, %kt)
  %d: f32[] = constant {value=2.449489742783178}
  %sd: f32[2,4,20,20] = div(%s, %d)
  %bb: f32[2,4,20,20] = broadcast(%bias) {shape=[2,4,20,20], dims=[0,3]}
  %sm: f32[2,4,20,20] = add(%sd, %bb)
  %p: f32[2,4,20,20] = softmax(%sm) {axis=-1}
  %o: f32[2,4,20,6] = matmul(%p, %vt)
  return %o
})";

}  // namespace kiln::testing
