// Attention in bf16 and f16 as one library step on the CPU (format 1.14): autocast's casts
// between the matmuls and the f32 softmax join the step, which rounds where the cast graph
// rounds. Checked against the interpreter run on the autocast graph itself (every cast
// rounded exactly), each way a model writes attention. Built twice (tests/BUILD): with
// oneDNN (bf16 products on its primitive where the CPU has one) and without it (every
// product widened to f32 for OpenBLAS's sgemm).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "base/half_float.h"
#include "passes/autodiff.h"
#include "runtime/cpu/score_rows.h"
#include "runtime/format/artifact.h"
#include "tests/unit/attention_gradient_graphs.h"
#include "tests/unit/attention_graphs.h"
#include "tests/unit/autocast_graph.h"
#include "tests/unit/half_precisions.h"
#include "tests/unit/run_util.h"

using namespace kiln;

namespace {

CompileOptions options_for(const ir::Graph& g, const std::map<std::string, ir::Tensor>& args, const char* precision) {
  CompileOptions options;
  options.precision = precision;
  options.weights = kiln::testing::param_weights(g, args);
  return options;
}

// The attention steps of the graph's CPU artifact at `precision`: how many, and the
// element types of the first one's q, k, v and result.
struct Steps {
  int count = 0;
  std::vector<format::DType> types;
  format::DType precision = format::DType::F32;
};

Steps attention_steps(const ir::Graph& g, const std::map<std::string, ir::Tensor>& args, const char* precision) {
  auto bytes = compile_to_artifact(g, options_for(g, args, precision));
  if (!bytes.ok()) FAIL(bytes.error().message);
  auto view = format::read_artifact(*bytes, "cpu-x86_64");
  if (!view.ok()) FAIL(view.error().message);
  Steps steps;
  const auto* values = view->metadata().values();
  for (const format::Step* s : *view->metadata().steps()) {
    if (!s->attention()) continue;
    if (steps.count++ == 0) {
      for (uint32_t i = 0; i < 3; ++i) steps.types.push_back(values->Get(s->inputs()->Get(i))->dtype());
      steps.types.push_back(values->Get(s->outputs()->Get(0))->dtype());
      steps.precision = s->attention()->precision();
    }
  }
  return steps;
}

// g compiled at `precision` and run on 1 and 4 threads: each result within `bound`
// (relative and absolute) of `want`.
void check_runs(const ir::Graph& g, const std::map<std::string, ir::Tensor>& args, const char* precision,
                const std::vector<ir::Tensor>& want, double bound) {
  for (int threads : {1, 4}) {
    INFO(threads << " threads");
    auto got = kiln::testing::compile_and_run(g, args, options_for(g, args, precision), {threads});
    if (!got.ok()) FAIL(got.error().message);
    kiln::testing::check_same(*got, want, bound, bound);
  }
}

// Inputs of scale 0.5 keep the scores near 1, where one unit of the precision moves a
// probability by a few of its own units.
void check_half_attention(const std::string& text, uint64_t seed, std::vector<format::DType> f32_types = {}) {
  INFO(text);
  ir::Graph g = kiln::testing::parse_ok(text);
  const auto args = kiln::testing::seeded_arguments(g, seed, 0.5);
  for (const kiln::testing::HalfPrecision& p : kiln::testing::kHalfPrecisions) {
    INFO(p.name);
    const format::DType half = p.stored;
    const Steps steps = attention_steps(g, args, p.name);
    CHECK(steps.count == 1);
    CHECK(steps.precision == half);
    if (!f32_types.empty()) {  // each type given as F32 or (any other) the precision
      REQUIRE(steps.types.size() == f32_types.size());
      for (size_t i = 0; i < f32_types.size(); ++i)
        CHECK(steps.types[i] == (f32_types[i] == format::DType::F32 ? format::DType::F32 : half));
    }
    const auto want = kiln::testing::autocast_values(g, args, p.name);
    // The step accumulates in f32 and rounds where the interpreter rounds the exact value:
    // where the two fall on either side of a rounding boundary, a score or probability
    // moves by one unit; a few units of 2^-p at the values' scale (1) bound the result.
    check_runs(g, args, p.name, want, 8 * std::ldexp(1.0, -p.mantissa_bits));
  }
}

}  // namespace

TEST_CASE("bf16 and f16 attention ops run as one step with the autocast graph's values", "[runtime][attention][half]") {
  // 300 queries: blocks of 128 rows, the last one partial; causal keys rounded up.
  check_half_attention(R"(graph @g(%q: f32[1,2,300,8], %k: f32[1,2,300,8], %v: f32[1,2,300,8]) {
    %y: f32[1,2,300,8] = attention(%q, %k, %v) {causal=true, scale=0.5}
    return %y
  })",
                       1, {format::DType::F32, format::DType::F32, format::DType::F32, format::DType::F32});
  // Fewer keys than v's columns: the block's result, dense in the scores' buffer first, is
  // wider than its rows of scores.
  check_half_attention(R"(graph @g(%q: f32[1,2,40,16], %k: f32[1,2,6,16], %v: f32[1,2,6,24]) {
    %y: f32[1,2,40,24] = attention(%q, %k, %v)
    return %y
  })",
                       6);
  // Cross attention with a bool mask per key and v narrower than q.
  check_half_attention(R"(graph @g(%q: f32[2,2,7,8], %k: f32[2,2,33,8], %v: f32[2,2,33,5], %m: bool[7,33]) {
    %y: f32[2,2,7,5] = attention(%q, %k, %v, %m) {scale=0.3}
    return %y
  })",
                       2);
}

TEST_CASE("half attention written out: heads read in place and cast by the step, masks, q read by columns",
          "[runtime][attention][half]") {
  check_half_attention(kiln::testing::kBertAttentionGraph, 3);
  check_half_attention(kiln::testing::kSeveralMasksAttentionGraph, 7);
  // GPT-2's form with q stored transposed ([.., D, T]: read a column at a time), a finite
  // fill, and keys shared by the batch.
  check_half_attention(R"(graph @g(%qd: f32[3,2,8,64], %k: f32[1,2,64,8], %v: f32[2,64,8]) {
    %q: f32[3,2,64,8] = transpose(%qd) {perm=[0,1,3,2]}
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
                       4);
}

TEST_CASE("half attention reads weights stored in the precision and writes the heads merged for the next matmul",
          "[runtime][attention][half]") {
  // k and v are params only matmuls read: stored in the precision. The result, heads
  // merged back, feeds a matmul: the step writes it in the precision, and the casts
  // between go.
  check_half_attention(R"(graph @g(%x: f32[2,40,12], param %k: f32[2,3,16,4], param %v: f32[2,3,16,4],
                                   param %w: f32[12,6]) {
    %h: f32[2,40,3,4] = reshape(%x) {shape=[2,40,3,4]}
    %q: f32[2,3,40,4] = transpose(%h) {perm=[0,2,1,3]}
    %o: f32[2,3,40,4] = attention(%q, %k, %v)
    %ot: f32[2,40,3,4] = transpose(%o) {perm=[0,2,1,3]}
    %m: f32[2,40,12] = reshape(%ot) {shape=[2,40,12]}
    %y: f32[2,40,6] = matmul(%m, %w)
    return %y
  })",
                       5, {format::DType::F32, format::DType::BF16, format::DType::BF16, format::DType::BF16});
}

TEST_CASE("half attention rounds the scores before f and the softmax, as the cast graph does",
          "[runtime][attention][half]") {
  // Eighths of up to 4 make q·kᵀ exact in f32 (each product a multiple of 1/64, four of
  // them), so the step and the interpreter round the same scores: of up to 64, which
  // bf16 and f16 move by far more than the bound below once exp spreads them.
  ir::Graph g = kiln::testing::parse_ok(R"(graph @g(%q: f32[1,2,8,4], %k: f32[1,2,8,4], %v: f32[1,2,8,4]) {
    %y: f32[1,2,8,4] = attention(%q, %k, %v)
    return %y
  })");
  auto args = kiln::testing::seeded_arguments(g, 9, 4);
  for (auto& [name, t] : args)
    for (double& x : t.floats) x = std::round(x * 8) / 8;
  for (const kiln::testing::HalfPrecision& p : kiln::testing::kHalfPrecisions) {
    INFO(p.name);
    const auto want = kiln::testing::eval_ok(kiln::testing::autocast_graph(g, p.name), args);
    auto got = kiln::testing::compile_and_run(g, args, options_for(g, args, p.name));
    if (!got.ok()) FAIL(got.error().message);
    const double unit = std::ldexp(1.0, 1 - p.mantissa_bits);
    kiln::testing::check_same(*got, want, unit, unit);
  }
}

TEST_CASE("a half attention model, 8 threads x 25 runs, each equal to its single-thread result",
          "[runtime][attention][half][threads]") {
  const std::string text = R"(graph @g(%x: f32[2,300,24]) {
    %h: f32[2,300,4,6] = reshape(%x) {shape=[2,300,4,6]}
    %q: f32[2,4,300,6] = transpose(%h) {perm=[0,2,1,3]}
    %y: f32[2,4,300,6] = attention(%q, %q, %q) {causal=true}
    return %y
  })";
  ir::Graph g = kiln::testing::parse_ok(text);
  for (const kiln::testing::HalfPrecision& p : kiln::testing::kHalfPrecisions) {
    INFO(p.name);
    CHECK(attention_steps(g, {}, p.name).count == 1);
    auto bytes = compile_to_artifact(g, options_for(g, {}, p.name));
    if (!bytes.ok()) FAIL(bytes.error().message);
    auto model = runtime::Model::load_bytes(std::move(*bytes), {2});
    if (!model.ok()) FAIL(model.error().message);
    const auto single = kiln::testing::outputs_one_thread(**model, "x", {2, 300, 24}, 200);
    CHECK(kiln::testing::mismatches_across_threads(**model, "x", {2, 300, 24}, 8, 25, single) == 0);
  }
}

TEST_CASE("a bf16 or f16 training graph's attention backward is one step with the autocast graph's gradients",
          "[runtime][attention][half]") {
  // Format 1.20: the backward computes P again, rounding where the cast graph rounds (P,
  // dP, dS, every product's result), its products' operands in the precision.
  for (const std::string name : {"the op, causal", "GPT-2 heads", "BERT additive mask", "head dims 128 and 96"}) {
    INFO(name);
    const auto& graphs = kiln::testing::attention_gradient_graphs();
    const auto graph = std::find_if(graphs.begin(), graphs.end(), [&](const auto& x) { return x.name == name; });
    REQUIRE(graph != graphs.end());
    ir::Graph g = kiln::testing::parse_ok(graph->text);
    REQUIRE(passes::AutodiffPass(graph->wrt).run(g).ok());
    const auto args = kiln::testing::seeded_arguments(g, graph->seed, 0.5);
    for (const kiln::testing::HalfPrecision& p : kiln::testing::kHalfPrecisions) {
      INFO(p.name);
      auto bytes = compile_to_artifact(g, options_for(g, args, p.name));
      if (!bytes.ok()) FAIL(bytes.error().message);
      auto view = format::read_artifact(*bytes, "cpu-x86_64");
      if (!view.ok()) FAIL(view.error().message);
      int forward = 0, backward = 0;
      for (const format::Step* s : *view->metadata().steps())
        if (s->attention()) {
          CHECK(s->attention()->precision() == p.stored);
          ++(s->attention()->gradient() ? backward : forward);
        }
      CHECK(forward == 1);
      CHECK(backward == 1);
      const auto want = kiln::testing::autocast_values(g, args, p.name);
      // A rounding of dS or P that falls the other way moves a gradient by one unit of the
      // precision at its scale, summed over the keys.
      check_runs(g, args, p.name, want, 16 * std::ldexp(1.0, -p.mantissa_bits));
    }
  }
}

TEST_CASE("a backward whose q, k, v and dO are stored in bf16 or f16 writes its gradients in that type",
          "[runtime][attention][half]") {
  // Format 1.21: the gradients autodiff writes for half inputs are half too (the products'
  // results, d(kᵀ) through a transpose between casts), which the step writes.
  for (const kiln::testing::HalfPrecision& p : kiln::testing::kHalfPrecisions) {
    INFO(p.name);
    ir::Graph g = kiln::testing::parse_ok(kiln::testing::half_stored_attention_gradient(p.name));
    REQUIRE(passes::AutodiffPass({"q", "k", "v"}).run(g).ok());
    const auto args = kiln::testing::seeded_arguments(g, 21, 0.5);
    auto bytes = compile_to_artifact(g, options_for(g, args, p.name));
    if (!bytes.ok()) FAIL(bytes.error().message);
    auto view = format::read_artifact(*bytes, "cpu-x86_64");
    if (!view.ok()) FAIL(view.error().message);
    int backward = 0;
    const auto* values = view->metadata().values();
    for (const format::Step* s : *view->metadata().steps())
      if (s->attention() && s->attention()->gradient()) {
        ++backward;
        REQUIRE(s->outputs()->size() == 3);
        for (uint32_t o = 0; o < 3; ++o) CHECK(values->Get(s->outputs()->Get(o))->dtype() == p.stored);
      }
    CHECK(backward == 1);
    check_runs(g, args, p.name, kiln::testing::autocast_values(g, args, p.name),
               16 * std::ldexp(1.0, -p.mantissa_bits));
  }
}

TEST_CASE("a profile names what runs a half attention's products, forward and backward", "[runtime][attention][half]") {
  ir::Graph g = kiln::testing::parse_ok(R"(graph @g(%q: f32[1,2,64,16], %k: f32[1,2,64,16], %v: f32[1,2,64,16]) {
    %y: f32[1,2,64,16] = attention(%q, %k, %v) {causal=true}
    %yy: f32[1,2,64,16] = mul(%y, %y)
    %l: f32[] = reduce_sum(%yy) {axes=[0,1,2,3]}
    return %l
  })");
  REQUIRE(passes::AutodiffPass({"q", "k", "v"}).run(g).ok());
  for (const kiln::testing::HalfPrecision& p : kiln::testing::kHalfPrecisions) {
    INFO(p.name);
    auto bytes = compile_to_artifact(g, options_for(g, {}, p.name));
    if (!bytes.ok()) FAIL(bytes.error().message);
    auto model = runtime::Model::load_bytes(std::move(*bytes), {1});
    if (!model.ok()) FAIL(model.error().message);
    int steps = 0;
    for (const runtime::StepInfo& step : (*model)->steps()) {
      if (!step.name.starts_with("attention")) continue;
      ++steps;
      INFO(step.name << ": " << step.implementation);
      // Without oneDNN (the second build) every product widens; with it, bf16 ones run on
      // its primitive where the CPU has a bf16 kernel (AVX512-BF16 or AMX here).
      const bool widened = std::string(p.name) == "f16" || std::getenv("KILN_LIBDNNL") != nullptr;
      if (widened) CHECK(step.implementation == std::string("products on sgemm over f32 values rounded to ") + p.name);
      else CHECK(step.implementation.starts_with("products in bf16 on oneDNN ("));
    }
    CHECK(steps == 2);
  }
}

TEST_CASE("the rows kernels round, narrow and widen bf16 and f16 as base/half_float.h does, in every instance",
          "[runtime][attention][half]") {
  // Every bf16 and f16 value, and floats between them (ties, the largest finite, overflow,
  // subnormals, NaN).
  std::vector<float> x;
  for (uint32_t h = 0; h < 65536; ++h) {
    x.push_back(bf16_to_float(static_cast<uint16_t>(h)));
    x.push_back(f16_to_float(static_cast<uint16_t>(h)));
    x.push_back(bits_float((h << 16) | 0x8000u));  // a bf16 tie
    x.push_back(bits_float((h << 13) | 0x1000u));  // an f16 tie, and others
    x.push_back(bits_float(h * 65537u + 12345u));
  }
  x.insert(x.end(), {65504.0f, 65519.0f, 65520.0f, 1e-8f, -3e-6f, 6.0e-8f, 3.4e38f, -INFINITY, std::nanf("")});
  const int64_t n = static_cast<int64_t>(x.size());
  for (auto instance :
       {runtime::cpu::RowInstance::Fastest, runtime::cpu::RowInstance::Avx2, runtime::cpu::RowInstance::Generic}) {
    INFO("instance " << static_cast<int>(instance));
    runtime::cpu::use_row_instance(instance);
    for (auto type : {runtime::cpu::Half::BF16, runtime::cpu::Half::F16}) {
      const bool bf16 = type == runtime::cpu::Half::BF16;
      INFO((bf16 ? "bf16" : "f16"));
      std::vector<uint16_t> narrow(x.size());
      std::vector<float> rounded = x, widened(x.size());
      runtime::cpu::narrow_to_half(x.data(), narrow.data(), n, type);
      runtime::cpu::round_to_half(rounded.data(), n, type);
      runtime::cpu::widen_half(narrow.data(), widened.data(), n, type);
      int wrong = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const uint16_t want = bf16 ? float_to_bf16(x[i]) : float_to_f16(x[i]);
        const float want_value = bf16 ? bf16_to_float(want) : f16_to_float(want);
        if (std::isnan(x[i])) {  // any NaN
          wrong += !(std::isnan(widened[i]) && std::isnan(rounded[i]));
          continue;
        }
        wrong += narrow[i] != want || float_bits(widened[i]) != float_bits(want_value) ||
                 float_bits(rounded[i]) != float_bits(want_value);
      }
      CHECK(wrong == 0);
    }
  }
  runtime::cpu::use_row_instance(runtime::cpu::RowInstance::Fastest);
}
