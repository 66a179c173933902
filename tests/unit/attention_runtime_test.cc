// Attention as one library step on the CPU (ir/attention_match.h, runtime/cpu/attention.h):
// each way a model writes it, against the interpreter, and the rows kernels it runs on.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "runtime/cpu/score_rows.h"
#include "runtime/format/artifact.h"
#include "tests/unit/attention_graphs.h"
#include "tests/unit/run_util.h"

using namespace kiln;

namespace {

// How many steps of the graph's CPU artifact are attentions.
int attention_steps(const ir::Graph& g, const std::map<std::string, ir::Tensor>& args) {
  const std::vector<uint8_t> bytes = kiln::testing::compiled_artifact(g, kiln::testing::param_weights(g, args));
  auto view = format::read_artifact(bytes, "cpu-x86_64");
  if (!view.ok()) FAIL(view.error().message);
  int count = 0;
  for (const format::Step* s : *view->metadata().steps()) count += s->attention() != nullptr;
  return count;
}

void check_attention(const std::string& text, uint64_t seed, int attentions = 1) {
  INFO(text);
  ir::Graph g = kiln::testing::parse_ok(text);
  const auto args = kiln::testing::seeded_arguments(g, seed, 2);
  CHECK(attention_steps(g, args) == attentions);
  kiln::testing::check_against_interpreter("attention", g, args);
  // On one thread (blocks one after another) and on four.
  const auto expected = kiln::testing::eval_ok(g, args);
  for (int threads : {1, 4}) {
    INFO(threads << " threads");
    auto got = kiln::testing::compile_and_run(g, args, {}, {threads});
    if (!got.ok()) FAIL(got.error().message);
    kiln::testing::check_same(*got, expected);
  }
}

void check_rows_kernels();

}  // namespace

TEST_CASE("the attention op, causal or with a mask, runs as one step with the interpreter's values",
          "[runtime][attention]") {
  check_attention(R"(graph @g(%q: f32[2,3,40,16], %k: f32[2,3,40,16], %v: f32[2,3,40,16]) {
    %y: f32[2,3,40,16] = attention(%q, %k, %v) {causal=true}
    return %y
  })",
                  1);
  // 300 queries: blocks of 109 rows, the last one partial; keys past each block's last
  // query left out.
  check_attention(R"(graph @g(%q: f32[1,2,300,8], %k: f32[1,2,300,8], %v: f32[1,2,300,8]) {
    %y: f32[1,2,300,8] = attention(%q, %k, %v) {causal=true, scale=0.5}
    return %y
  })",
                  2);
  // Not causal, 600 queries: blocks of 256 rows (the last one partial) over every key.
  check_attention(R"(graph @g(%q: f32[1,2,600,8], %k: f32[1,2,50,8], %v: f32[1,2,50,8]) {
    %y: f32[1,2,600,8] = attention(%q, %k, %v) {scale=0.4}
    return %y
  })",
                  7);
  // Cross attention with a bool mask per key (none masked whole) and v narrower than q.
  check_attention(R"(graph @g(%q: f32[2,2,7,8], %k: f32[2,2,33,8], %v: f32[2,2,33,5], %m: bool[7,33]) {
    %y: f32[2,2,7,5] = attention(%q, %k, %v, %m) {scale=0.3}
    return %y
  })",
                  3);
}

TEST_CASE("attention written out (heads read in place, scaled, masked) runs as one step", "[runtime][attention]") {
  check_attention(kiln::testing::kBertAttentionGraph, 4);
  check_attention(kiln::testing::kSeveralMasksAttentionGraph, 6);
  // GPT-2's form: j <= i from iotas, a finite fill, keys and values shared by the batch.
  check_attention(R"(graph @g(%q: f32[3,2,64,8], %k: f32[1,2,64,8], %v: f32[2,64,8]) {
    %kt: f32[1,2,8,64] = transpose(%k) {perm=[0,1,3,2]}
    %s: f32[3,2,64,64] = matmul(%q, %kt)
    %c: f32[] = constant {value=0.35}
    %ss: f32[3,2,64,64] = mul(%c, %s)
    %i: i64[64,64] = iota {shape=[64,64], axis=0}
    %j: i64[64,64] = iota {shape=[64,64], axis=1}
    %keep: bool[64,64] = ge(%i, %j)
    %kb: bool[3,2,64,64] = broadcast(%keep) {shape=[3,2,64,64], dims=[2,3]}
    %fill: f32[] = constant {value=-1e9}
    %sk: f32[3,2,64,64] = select(%kb, %ss, %fill)
    %p: f32[3,2,64,64] = softmax(%sk) {axis=-1}
    %o: f32[3,2,64,8] = matmul(%p, %v)
    return %o
  })",
                  5);
}

TEST_CASE("attention writes its result with the heads merged back, in place", "[runtime][attention]") {
  // [B, H, T, D] -> [B, T, H·D]: rows of D elements H·D apart; 300 queries in three blocks.
  check_attention(R"(graph @g(%q: f32[2,3,300,4], %k: f32[2,3,300,4], %v: f32[2,3,300,4]) {
    %o: f32[2,3,300,4] = attention(%q, %k, %v) {causal=true}
    %ot: f32[2,300,3,4] = transpose(%o) {perm=[0,2,1,3]}
    %y: f32[2,300,12] = reshape(%ot) {shape=[2,300,12]}
    return %y
  })",
                  9);
}

TEST_CASE("a causal fill that does not vanish in exp makes a block take every key", "[runtime][attention]") {
  // Scores of up to 40 and a fill of -1: exp(-1 - max) is far from 0, so the keys left out
  // count, and each block runs over all of them.
  check_attention(R"(graph @g(%q: f32[1,1,40,4], %k: f32[1,1,40,4], %v: f32[1,1,40,4]) {
    %kt: f32[1,1,4,40] = transpose(%k) {perm=[0,1,3,2]}
    %s: f32[1,1,40,40] = matmul(%q, %kt)
    %c: f32[] = constant {value=5.0}
    %ss: f32[1,1,40,40] = mul(%s, %c)
    %i: i64[40,40] = iota {shape=[40,40], axis=0}
    %j: i64[40,40] = iota {shape=[40,40], axis=1}
    %keep: bool[40,40] = ge(%i, %j)
    %kb: bool[1,1,40,40] = broadcast(%keep) {shape=[1,1,40,40], dims=[2,3]}
    %fill: f32[] = constant {value=-1.0}
    %sk: f32[1,1,40,40] = select(%kb, %ss, %fill)
    %p: f32[1,1,40,40] = softmax(%sk) {axis=-1}
    %o: f32[1,1,40,4] = matmul(%p, %v)
    return %o
  })",
                  6);
}

TEST_CASE("one loaded model with attention, 8 threads x 25 runs, each equal to its single-thread result",
          "[runtime][attention][threads]") {
  // The per-thread score buffers of concurrent runs never mix.
  const std::string text = R"(graph @g(%x: f32[2,48,24]) {
    %h: f32[2,48,4,6] = reshape(%x) {shape=[2,48,4,6]}
    %q: f32[2,4,48,6] = transpose(%h) {perm=[0,2,1,3]}
    %y: f32[2,4,48,6] = attention(%q, %q, %q) {causal=true}
    return %y
  })";
  ir::Graph g = kiln::testing::parse_ok(text);
  CHECK(attention_steps(g, {}) == 1);
  auto bytes = compile_to_artifact(g, {});
  if (!bytes.ok()) FAIL(bytes.error().message);
  auto model = runtime::Model::load_bytes(std::move(*bytes), {2});
  if (!model.ok()) FAIL(model.error().message);
  const auto single = kiln::testing::outputs_one_thread(**model, "x", {2, 48, 24}, 200);
  CHECK(kiln::testing::mismatches_across_threads(**model, "x", {2, 48, 24}, 8, 25, single) == 0);
}

TEST_CASE("a row masked whole gives NaN, as the decomposed softmax does", "[runtime][attention]") {
  const std::string text = R"(graph @g(%q: f32[1,1,3,4], %k: f32[1,1,5,4], %v: f32[1,1,5,4], %m: bool[3,5]) {
    %y: f32[1,1,3,4] = attention(%q, %k, %v, %m)
    return %y
  })";
  ir::Graph g = kiln::testing::parse_ok(text);
  auto args = kiln::testing::seeded_arguments(g, 7);
  args["m"] = kiln::testing::tensor(ir::DType::Bool, {3, 5}, {1, 0, 1, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1});
  CHECK(attention_steps(g, args) == 1);
  const auto expected = kiln::testing::eval_ok(g, args);
  auto got = kiln::testing::compile_and_run(g, args, {});
  if (!got.ok()) FAIL(got.error().message);
  kiln::testing::check_same(*got, expected);
  CHECK(std::isnan((*got)[0].get(4)));  // row 1
  CHECK(!std::isnan((*got)[0].get(0)));
}

TEST_CASE("softmax's result read elsewhere (a training graph's backward) leaves attention to three steps",
          "[runtime][attention]") {
  const std::string text = R"(graph @g(%q: f32[2,8,4], %k: f32[2,4,8], %v: f32[2,8,4]) {
    %s: f32[2,8,8] = matmul(%q, %k)
    %p: f32[2,8,8] = softmax(%s) {axis=-1}
    %o: f32[2,8,4] = matmul(%p, %v)
    return %o, %p
  })";
  ir::Graph g = kiln::testing::parse_ok(text);
  const auto args = kiln::testing::seeded_arguments(g, 8);
  CHECK(attention_steps(g, args) == 0);
  kiln::testing::check_against_interpreter("attention", g, args);
}

TEST_CASE("the rows kernels: exp within 2 units in the last place, softmax's edge cases", "[runtime][attention]") {
  // Each compiled instance this CPU runs: the fastest (AVX-512 here), AVX2, plain x86-64.
  for (auto instance :
       {runtime::cpu::RowInstance::Fastest, runtime::cpu::RowInstance::Avx2, runtime::cpu::RowInstance::Generic}) {
    INFO("instance " << static_cast<int>(instance));
    runtime::cpu::use_row_instance(instance);
    check_rows_kernels();
  }
  runtime::cpu::use_row_instance(runtime::cpu::RowInstance::Fastest);
}

TEST_CASE("the rows kernels' scalings and masks, in every instance", "[runtime][attention]") {
  for (auto instance :
       {runtime::cpu::RowInstance::Fastest, runtime::cpu::RowInstance::Avx2, runtime::cpu::RowInstance::Generic}) {
    INFO("instance " << static_cast<int>(instance));
    runtime::cpu::use_row_instance(instance);
    for (int n = 1; n < 40; ++n) {
      std::vector<float> row(static_cast<size_t>(n)), mask(static_cast<size_t>(2 * n));
      std::vector<uint8_t> keep(static_cast<size_t>(2 * n));
      for (int j = 0; j < 2 * n; ++j) {
        mask[j] = 0.25f * j;
        keep[j] = j % 3 != 0;
      }
      for (int j = 0; j < n; ++j) row[j] = 1.0f + j;
      runtime::cpu::scale_row(row.data(), n, 2.0f);
      runtime::cpu::add_to_row(row.data(), n, mask.data(), 2);
      runtime::cpu::keep_in_row(row.data(), n, keep.data(), 1, -7.0f);
      for (int j = 0; j < n; ++j) CHECK(row[j] == (keep[j] ? 2.0f * (1.0f + j) + 0.5f * j : -7.0f));
      CHECK(runtime::cpu::row_max(row.data(), n) == *std::max_element(row.begin(), row.end()));
    }
  }
  runtime::cpu::use_row_instance(runtime::cpu::RowInstance::Fastest);
}

namespace {

// exp against std::exp over the range, softmax over rows of every length up to 19 (vectors
// and tails) with -inf entries, and a row masked whole.
void check_rows_kernels() {
  std::vector<float> x;
  for (float v = -100.0f; v <= 100.0f; v += 0.0137f) x.push_back(v);
  x.insert(x.end(), {0.0f, -0.0f, 88.7f, 89.0f, -87.0f, -88.0f, -1e30f, std::numeric_limits<float>::infinity(),
                     -std::numeric_limits<float>::infinity(), std::nanf("")});
  std::vector<float> e = x;
  runtime::cpu::exp_in_place(e.data(), static_cast<int64_t>(e.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("exp(" << x[i] << ") = " << e[i]);
    const double want = std::exp(static_cast<double>(x[i]));
    if (std::isnan(x[i])) CHECK(std::isnan(e[i]));
    else if (want > std::numeric_limits<float>::max()) CHECK(std::isinf(e[i]));
    else if (want < std::numeric_limits<float>::min()) CHECK(e[i] <= std::numeric_limits<float>::min());
    else CHECK(std::fabs(e[i] - want) <= 2.4e-7 * want);  // 2 units of 2^-23
  }
  // Rows of every length up to 19 (vectors of 8 and tails), with -inf entries.
  for (int n = 1; n < 20; ++n) {
    std::vector<float> row(static_cast<size_t>(n));
    for (int j = 0; j < n; ++j) row[j] = j % 3 == 1 ? -INFINITY : 0.3f * j;
    std::vector<double> want(row.begin(), row.end());
    double max = -INFINITY, sum = 0;
    for (double w : want) max = std::max(max, w);
    for (double& w : want) sum += (w = std::exp(w - max));
    runtime::cpu::softmax_row(row.data(), n, runtime::cpu::row_max(row.data(), n));
    for (int j = 0; j < n; ++j) CHECK(std::fabs(row[j] - want[j] / sum) <= 1e-6);
  }
  std::vector<float> masked(5, -INFINITY);
  runtime::cpu::softmax_row(masked.data(), 5, runtime::cpu::row_max(masked.data(), 5));
  for (float m : masked) CHECK(std::isnan(m));
}

}  // namespace
