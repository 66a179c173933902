// bf16 and f16 matmuls with their bias and activation applied to the f32 sums (format
// 1.14, CPU): autocast's cast after the product, the bias, the activation and the cast
// back join the library call. Built twice (tests/BUILD): with oneDNN (bf16 on its
// primitive with post-ops) and without it (widened to f32 for sgemm, then kiln's post-ops).
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "passes/pipeline.h"
#include "runtime/format/artifact.h"
#include "tests/unit/half_precisions.h"
#include "tests/unit/run_util.h"

using namespace kiln;

namespace {

// A GELU FFN and a SiLU layer: biases are f32 params (autocast keeps them f32), weights
// params that only matmuls read (stored in the precision).
constexpr const char* kFfn = R"(graph @ffn(%x: f32[2,24,32], param %w1: f32[32,64], param %b1: f32[64],
                                    param %w2: f32[64,16], param %b2: f32[16], param %w3: f32[16,16],
                                    param %b3: f32[16]) {
  %h: f32[2,24,64] = matmul(%x, %w1)
  %bb1: f32[2,24,64] = broadcast(%b1) {shape=[2,24,64], dims=[2]}
  %z: f32[2,24,64] = add(%h, %bb1)
  %g: f32[2,24,64] = gelu(%z)
  %o: f32[2,24,16] = matmul(%g, %w2)
  %bb2: f32[2,24,16] = broadcast(%b2) {shape=[2,24,16], dims=[2]}
  %y: f32[2,24,16] = add(%o, %bb2)
  %s: f32[2,24,16] = silu(%y)
  %p: f32[2,24,16] = matmul(%s, %w3)
  %bb3: f32[2,24,16] = broadcast(%b3) {shape=[2,24,16], dims=[2]}
  %q: f32[2,24,16] = add(%p, %bb3)
  return %q
})";

CompileOptions options_for(const std::map<std::string, ir::Tensor>& args, const char* precision) {
  CompileOptions options;
  options.precision = precision;
  for (const auto& [name, t] : args)
    if (name != "x") options.weights[name] = t;
  return options;
}

}  // namespace

TEST_CASE("half-precision matmuls apply bias and activation to their f32 sums, near the interpreter",
          "[precision][epilogue]") {
  ir::Graph g = kiln::testing::parse_ok(kFfn);
  const auto args = kiln::testing::seeded_arguments(g, 21, 0.5);
  const auto want = kiln::testing::eval_ok(g, args);
  for (const kiln::testing::HalfPrecision& p : kiln::testing::kHalfPrecisions) {
    INFO(p.name);
    auto bytes = compile_to_artifact(g, options_for(args, p.name));
    if (!bytes.ok()) FAIL(bytes.error().message);
    auto view = format::read_artifact(*bytes, "cpu-x86_64");
    if (!view.ok()) FAIL(view.error().message);
    // Each matmul step: its post-ops, and the types of A and C.
    std::vector<std::vector<format::PostOpKind>> chains;
    std::vector<std::pair<format::DType, format::DType>> types;
    const auto* values = view->metadata().values();
    for (const format::Step* s : *view->metadata().steps()) {
      if (!s->matmul()) continue;
      std::vector<format::PostOpKind> chain;
      if (s->matmul()->post_ops())
        for (const format::PostOp* op : *s->matmul()->post_ops()) chain.push_back(op->kind());
      chains.push_back(chain);
      types.emplace_back(values->Get(s->inputs()->Get(0))->dtype(), values->Get(s->outputs()->Get(0))->dtype());
    }
    using K = format::PostOpKind;
    const format::DType half = p.stored;
    REQUIRE(chains.size() == 3);
    CHECK(chains[0] == std::vector<K>{K::Bias, K::GeluErf});
    CHECK(chains[1] == std::vector<K>{K::Bias, K::Silu});
    CHECK(chains[2] == std::vector<K>{K::Bias});
    CHECK(types[0] == std::pair{half, half});  // read by the next matmul: written in the precision
    CHECK(types[1] == std::pair{half, half});
    CHECK(types[2] == std::pair{half, format::DType::F32});  // the result
    // Inputs and weights rounded to p bits, sums of 16 to 64 terms: a few units of 2^-p of
    // the values' scale (about 1), as //tests:precision_test allows.
    const double bound = 8 * std::ldexp(1.0, -p.mantissa_bits);
    for (int threads : {1, 4}) {
      INFO(threads << " threads");
      auto got = kiln::testing::compile_and_run(g, args, options_for(args, p.name), {threads});
      if (!got.ok()) FAIL(got.error().message);
      kiln::testing::check_same(*got, want, bound, bound);
    }
  }
}

TEST_CASE("a half-precision matmul's epilogue rounds once, after the bias", "[precision][epilogue]") {
  // Sums of eighths are exact in f32; the bias of 1/1024 is below one unit of bf16 and f16
  // at values of 2 to 4 but moves them where it is added before the rounding: the f32 sums
  // plus the bias, rounded once, are what the call writes.
  ir::Graph g = kiln::testing::parse_ok(R"(graph @g(%x: f32[4,8], param %w: f32[8,8], param %b: f32[8]) {
    %h: f32[4,8] = matmul(%x, %w)
    %bb: f32[4,8] = broadcast(%b) {shape=[4,8], dims=[1]}
    %z: f32[4,8] = add(%h, %bb)
    %r: f32[4,8] = relu(%z)
    %y: f32[4,8] = matmul(%r, %w)
    return %y, %r
  })");
  auto args = kiln::testing::seeded_arguments(g, 3, 2);
  for (auto& [name, t] : args)
    for (double& v : t.floats) v = name == "b" ? 1.0 / 1024 : std::round(v * 8) / 8;
  const auto exact = kiln::testing::eval_ok(g, args);  // f64, then f32
  for (const kiln::testing::HalfPrecision& p : kiln::testing::kHalfPrecisions) {
    INFO(p.name);
    auto got = kiln::testing::compile_and_run(g, args, options_for(args, p.name));
    if (!got.ok()) FAIL(got.error().message);
    // %r is a result, so the relu's output is f32: the product's f32 sum plus the bias.
    const ir::Tensor& r = (*got)[1];
    int off = 0;
    for (int64_t e = 0; e < r.size(); ++e) off += r.get(e) != static_cast<float>(exact[1].get(e));
    CHECK(off == 0);
  }
}
