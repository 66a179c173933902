// Attention graphs that tests of both precisions and both targets run
// (attention_runtime_test.cc in f32, attention_half_test.cc in bf16 and f16 on the CPU,
// cuda_attention_graphs.h's list on CUDA).
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <string>

namespace kiln::testing {

/// BERT's form: `heads` heads of `head_dim` sliced out of one f32 projection of
/// [batch, tokens, 3·heads·head_dim], divided by sqrt(head_dim), plus an additive f32 mask
/// per (batch, key).
inline std::string bert_attention_graph(int batch, int tokens, int heads, int head_dim) {
  const int width = heads * head_dim;
  return fmt::format(R"(graph @g(%qkv: f32[{0},{1},{5}], %bias: f32[{0},{1}]) {{
  %q: f32[{0},{1},{4}] = slice(%qkv) {{starts=[0,0,0], ends=[{0},{1},{4}]}}
  %k: f32[{0},{1},{4}] = slice(%qkv) {{starts=[0,0,{4}], ends=[{0},{1},{6}]}}
  %v: f32[{0},{1},{4}] = slice(%qkv) {{starts=[0,0,{6}], ends=[{0},{1},{5}]}}
  %qh: f32[{0},{1},{2},{3}] = reshape(%q) {{shape=[{0},{1},{2},{3}]}}
  %kh: f32[{0},{1},{2},{3}] = reshape(%k) {{shape=[{0},{1},{2},{3}]}}
  %vh: f32[{0},{1},{2},{3}] = reshape(%v) {{shape=[{0},{1},{2},{3}]}}
  %qt: f32[{0},{2},{1},{3}] = transpose(%qh) {{perm=[0,2,1,3]}}
  %kt: f32[{0},{2},{3},{1}] = transpose(%kh) {{perm=[0,2,3,1]}}
  %vt: f32[{0},{2},{1},{3}] = transpose(%vh) {{perm=[0,2,1,3]}}
  %s: f32[{0},{2},{1},{1}] = matmul(%qt, %kt)
  %d: f32[] = constant {{value={7}}}
  %sd: f32[{0},{2},{1},{1}] = div(%s, %d)
  %bb: f32[{0},{2},{1},{1}] = broadcast(%bias) {{shape=[{0},{2},{1},{1}], dims=[0,3]}}
  %sm: f32[{0},{2},{1},{1}] = add(%sd, %bb)
  %p: f32[{0},{2},{1},{1}] = softmax(%sm) {{axis=-1}}
  %o: f32[{0},{2},{1},{3}] = matmul(%p, %vt)
  return %o
}})",
                     batch, tokens, heads, head_dim, width, 3 * width, 2 * width, std::sqrt(double(head_dim)));
}

/// The CPU tests' instance: 2 x 20 tokens, 4 heads of 6.
inline const std::string kBertAttentionGraph = bert_attention_graph(2, 20, 4, 6);

/// Several masks: a padding mask per (batch, key) and keys strictly before the query
/// (from iotas; query 0 keeps none), both bool with a fill of -1e9, then an additive mask
/// per (query, key) and one per score; 70 queries over 90 keys, heads of 16.
inline const std::string kSeveralMasksAttentionGraph =
    R"(graph @g(%q: f32[2,2,70,16], %k: f32[2,2,90,16], %v: f32[2,2,90,16], %pad: bool[2,90], %a: f32[70,90], %b: f32[2,2,70,90]) {
  %kt: f32[2,2,16,90] = transpose(%k) {perm=[0,1,3,2]}
  %s: f32[2,2,70,90] = matmul(%q, %kt)
  %c: f32[] = constant {value=0.25}
  %ss: f32[2,2,70,90] = mul(%s, %c)
  %padb: bool[2,2,70,90] = broadcast(%pad) {shape=[2,2,70,90], dims=[0,3]}
  %fill: f32[] = constant {value=-1e9}
  %s1: f32[2,2,70,90] = select(%padb, %ss, %fill)
  %i: i64[70,90] = iota {shape=[70,90], axis=0}
  %j: i64[70,90] = iota {shape=[70,90], axis=1}
  %before: bool[70,90] = lt(%j, %i)
  %beforeb: bool[2,2,70,90] = broadcast(%before) {shape=[2,2,70,90], dims=[2,3]}
  %s2: f32[2,2,70,90] = select(%beforeb, %s1, %fill)
  %ab: f32[2,2,70,90] = broadcast(%a) {shape=[2,2,70,90], dims=[2,3]}
  %s3: f32[2,2,70,90] = add(%s2, %ab)
  %s4: f32[2,2,70,90] = add(%s3, %b)
  %p: f32[2,2,70,90] = softmax(%s4) {axis=-1}
  %o: f32[2,2,70,16] = matmul(%p, %v)
  return %o
})";

}  // namespace kiln::testing
