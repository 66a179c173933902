// Graphs whose reductions split into parts (ir/reduction_split.h) on the CPU and on CUDA,
// for the split tests of both targets.
#pragma once

namespace kiln::testing {

// A bias gradient as a training step has it: the sum over rows of a fused product, a
// full-shape output written on the way, and a momentum-like epilogue per column.
inline constexpr const char* kBiasGradient = R"(graph @g(%x: f32[5000,300], %b: f32[300], %m: f32[300]) {
  %bb: f32[5000,300] = broadcast(%b) {shape=[5000,300], dims=[1]}
  %h: f32[5000,300] = add(%x, %bb)
  %t: f32[5000,300] = tanh(%h)
  %d: f32[5000,300] = mul(%t, %x)
  %s: f32[300] = reduce_sum(%d) {axes=[0]}
  %c: f32[] = constant {value=0.9}
  %mc: f32[300] = mul(%m, %c)
  %m2: f32[300] = add(%mc, %s)
  return %d, %m2
}
)";

// A mean over each of 3 long rows, and a full sum of 3M elements kept as [1,1].
inline constexpr const char* kLongRows = R"(graph @g(%x: f32[3,1048576], %y: f32[1536,2048]) {
  %s: f32[3] = reduce_sum(%x) {axes=[1]}
  %n: f32[] = constant {value=1048576}
  %nb: f32[3] = broadcast(%n) {shape=[3], dims=[]}
  %mean: f32[3] = div(%s, %nb)
  %t: f32[1,1] = reduce_sum(%y) {axes=[0,1], keepdims=true}
  return %mean, %t
}
)";

// A mean squared error beside the difference it is taken of, both results (a training
// step's loss and the residual its backward reads): one full sum of 3M elements with a
// full-shape output, which the partial kernel writes (on the CPU, in parts of 2^14, each
// walked twice; on CUDA in one walk).
inline constexpr const char* kLossBesideOutput = R"(graph @g(%x: f32[1536,2048], %y: f32[1536,2048]) {
  %d: f32[1536,2048] = sub(%x, %y)
  %sq: f32[1536,2048] = mul(%d, %d)
  %s: f32[] = reduce_sum(%sq) {axes=[0,1]}
  %n: f32[] = constant {value=3.1789145e-07}
  %loss: f32[] = mul(%s, %n)
  return %d, %loss
}
)";

// Sums over dims inside kept ones, each a batch of column sums: a grouped-query
// attention's key gradient summed over each group of 3 heads ([B, KV, G, T, D] over G, not
// split on the CPU, split on CUDA); a [2, 512, 1024] product summed over its middle dim
// beside the product itself (split on both, in parts of whole operand rows); [4, 3, 5, 64]
// over its two middle dims; and a sum whose rows after the reduced dim are too short to
// walk by columns ([6, 7, 8] over its middle dim: rows of 7 strided elements).
inline constexpr const char* kInnerColumns =
    R"(graph @g(%k: f32[8,2,3,256,64], %x: f32[2,512,1024], %y: f32[2,512,1024], %z: f32[4,3,5,64], %w: f32[6,7,8]) {
  %dk: f32[8,2,256,64] = reduce_sum(%k) {axes=[2]}
  %xy: f32[2,512,1024] = mul(%x, %y)
  %s: f32[2,1024] = reduce_sum(%xy) {axes=[1]}
  %z2: f32[4,64] = reduce_sum(%z) {axes=[1,2]}
  %w1: f32[6,8] = reduce_sum(%w) {axes=[1]}
  return %dk, %xy, %s, %z2, %w1
}
)";

}  // namespace kiln::testing
