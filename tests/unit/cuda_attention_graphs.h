// Attention graphs that CUDA's kernel (codegen/cuda/attention_kernel.h) runs in bf16 and
// f16 (and its f32 kernel those of cuda_f32_attention_graphs below): compiled by NVRTC in
// CI (cuda_attention_test.cc), run against the interpreter in the GPU tier
// (cuda_attention_gpu_test.cc). Between them they take each path of the kernel: query
// rows and keys past a whole tile, q, k and v read from f32, as bf16 values and through
// the heads of a projection, head dims 16 to 128 and 40 and 24 (padded to the mma's 16),
// each mask kind, a causal fill whose exp
// is not 0 (the tiles past the diagonal are then taken), rows whose every key takes a
// mask's fill (-1e9, or float's lowest), and bf16 k and v copied to shared
// memory by cp.async, in whole tiles and past the keys. Both tests also take the bf16/f16
// kernel's variants (AttentionVariantSet below).
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/attention_graphs.h"

namespace kiln::testing {

// The bf16/f16 kernel's variants (codegen/cuda/attention_kernel.h): query rows a warp and
// the largest head dim copied by cp.async; the first is the default.
struct AttentionVariantSpec {
  const char* warp_rows;
  const char* async_head_dim;
};
inline constexpr AttentionVariantSpec kAttentionVariants[] = {{"16", "64"}, {"32", "64"}, {"16", "128"}};

// Sets an environment variable while it lives, then restores what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (saved_) setenv(name_, saved_->c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

// Sets a variant's environment while it lives.
class AttentionVariantSet {
 public:
  explicit AttentionVariantSet(const AttentionVariantSpec& v)
      : warp_rows_("KILN_CUDA_ATTENTION_WARP_ROWS", v.warp_rows),
        async_head_dim_("KILN_CUDA_ATTENTION_ASYNC_HEAD_DIM", v.async_head_dim) {}

 private:
  ScopedEnv warp_rows_, async_head_dim_;
};

// Causal attention over bf16 q [batch, T, D], k [batch, S, D] and v [batch, S, Dv], the
// casts around the op as autocast writes them (`batch`: "[B,H" for example).
inline std::string causal_bf16_attention(const std::string& batch, int t, int s, int d, int dv, double scale) {
  auto type = [&](const char* dtype, int rows, int cols) {
    return std::string(dtype) + batch + "," + std::to_string(rows) + "," + std::to_string(cols) + "]";
  };
  return "graph @g(%q: " + type("bf16", t, d) + ", %k: " + type("bf16", s, d) + ", %v: " + type("bf16", s, dv) +
         ") {\n  %qf: " + type("f32", t, d) + " = cast(%q) {to=f32}\n  %kf: " + type("f32", s, d) +
         " = cast(%k) {to=f32}\n  %vf: " + type("f32", s, dv) + " = cast(%v) {to=f32}\n  %yf: " + type("f32", t, dv) +
         " = attention(%qf, %kf, %vf) {causal=true, scale=" + std::to_string(scale) +
         "}\n  %y: " + type("bf16", t, dv) + " = cast(%yf) {to=bf16}\n  return %y\n}";
}

// Written-out attention whose mask keeps keys strictly before the query (a select from
// iotas, with `fill` elsewhere): the first query's row takes the fill at every key.
inline std::string strict_causal_attention(const std::string& fill) {
  return R"(graph @g(%q: f32[1,2,70,32], %k: f32[1,2,70,32], %v: f32[1,2,70,32]) {
  %kt: f32[1,2,32,70] = transpose(%k) {perm=[0,1,3,2]}
  %s: f32[1,2,70,70] = matmul(%q, %kt)
  %i: i64[70,70] = iota {shape=[70,70], axis=0}
  %j: i64[70,70] = iota {shape=[70,70], axis=1}
  %keep: bool[70,70] = lt(%j, %i)
  %kb: bool[1,2,70,70] = broadcast(%keep) {shape=[1,2,70,70], dims=[2,3]}
  %fill: f32[] = constant {value=)" +
         fill + R"(}
  %sk: f32[1,2,70,70] = select(%kb, %s, %fill)
  %p: f32[1,2,70,70] = softmax(%sk) {axis=-1}
  %o: f32[1,2,70,32] = matmul(%p, %v)
  return %o
})";
}

inline std::vector<std::pair<std::string, std::string>> cuda_attention_graphs() {
  return {
      {"the op, causal, 300 queries, D=64", R"(graph @g(%q: f32[1,2,300,64], %k: f32[1,2,300,64], %v: f32[1,2,300,64]) {
  %y: f32[1,2,300,64] = attention(%q, %k, %v) {causal=true, scale=0.125}
  return %y
})"},
      {"cross attention, a bool mask, D=48, Dv=32",
       R"(graph @g(%q: f32[2,2,70,48], %k: f32[2,2,130,48], %v: f32[2,2,130,32], %m: bool[70,130]) {
  %y: f32[2,2,70,32] = attention(%q, %k, %v, %m) {scale=0.2}
  return %y
})"},
      {"BERT's form: heads sliced out of a projection, an additive mask, D=16", bert_attention_graph(2, 80, 4, 16)},
      {"two bool masks and two additive ones, D=16", kSeveralMasksAttentionGraph},
      {"GPT-2's causal select with a fill of 0, whose exp counts, D=32",
       R"(graph @g(%q: f32[1,3,150,32], %k: f32[1,3,150,32], %v: f32[1,3,150,32]) {
  %kt: f32[1,3,32,150] = transpose(%k) {perm=[0,1,3,2]}
  %s: f32[1,3,150,150] = matmul(%q, %kt)
  %i: i64[150,150] = iota {shape=[150,150], axis=0}
  %j: i64[150,150] = iota {shape=[150,150], axis=1}
  %keep: bool[150,150] = ge(%i, %j)
  %kb: bool[1,3,150,150] = broadcast(%keep) {shape=[1,3,150,150], dims=[2,3]}
  %fill: f32[] = constant {value=0}
  %sk: f32[1,3,150,150] = select(%kb, %s, %fill)
  %p: f32[1,3,150,150] = softmax(%sk) {axis=-1}
  %o: f32[1,3,150,32] = matmul(%p, %v)
  return %o
})"},
      {"a strictly causal select with a fill of -1e9: the first row masked whole, the average of v's rows",
       strict_causal_attention("-1000000000.0")},
      {"the same with float's lowest as the fill (what Hugging Face's models use)",
       strict_causal_attention("-3.4028235e38")},
      {"bf16 q, k and v read as they lie (the casts around the op fold in bf16), causal, S < T",
       causal_bf16_attention("[2,3", 100, 77, 32, 16, 0.17)},
      {"bf16, causal, D=64, whole tiles of keys (cp.async without bounds; loops left early with a copy in flight)",
       causal_bf16_attention("[1,2", 256, 256, 64, 64, 0.125)},
      {"bf16, causal, D=128, keys past a tile (cp.async where the variant copies D=128 so)",
       causal_bf16_attention("[1,2", 200, 200, 128, 128, 0.09)},
      {"bf16, causal, D=96 and Dv=80 (12 and 10 chunks of 16 bytes a row where cp.async copies them)",
       causal_bf16_attention("[2", 130, 150, 96, 80, 0.1)},
      {"heads of 40 and values of 24 (padded to the mma's 16), causal, keys past a tile",
       R"(graph @g(%q: f32[1,2,90,40], %k: f32[1,2,90,40], %v: f32[1,2,90,24]) {
  %y: f32[1,2,90,24] = attention(%q, %k, %v) {causal=true, scale=0.158}
  return %y
})"},
      {"no mask, D=Dv=128, keys past a tile", R"(graph @g(%q: f32[3,100,128], %k: f32[3,200,128], %v: f32[3,200,128]) {
  %y: f32[3,100,128] = attention(%q, %k, %v) {scale=0.088}
  return %y
})"},
  };
}

// Attention graphs that CUDA's f32 kernel (codegen/cuda/attention_f32_kernel.h) runs as
// compiled without --precision: those above read as f32 (head dims up to 128), a causal mask over
// fewer keys than queries with scores whose exp underflows, and dims that are multiples
// of 4 but not of 16 across two batch dims, with query rows and keys past a tile.
inline std::vector<std::pair<std::string, std::string>> cuda_f32_attention_graphs() {
  std::vector<std::pair<std::string, std::string>> graphs;
  for (auto& [name, text] : cuda_attention_graphs())
    if (text.find("bf16") == std::string::npos) graphs.emplace_back(name, text);
  graphs.emplace_back("causal with fewer keys than queries, scores in the hundreds (exp underflows)",
                      R"(graph @g(%q: f32[1,2,130,32], %k: f32[1,2,90,32], %v: f32[1,2,90,32]) {
  %y: f32[1,2,130,32] = attention(%q, %k, %v) {causal=true, scale=12.0}
  return %y
})");
  graphs.emplace_back("no mask, D=20, Dv=12, keys past a tile",
                      R"(graph @g(%q: f32[2,3,70,20], %k: f32[2,3,45,20], %v: f32[2,3,45,12]) {
  %y: f32[2,3,70,12] = attention(%q, %k, %v) {scale=0.3}
  return %y
})");
  return graphs;
}

}  // namespace kiln::testing
