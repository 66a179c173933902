// Half precision on the CPU: f16 and bf16 matmuls (f32 accumulation, the result rounded
// to nearest even) against the interpreter's exactly rounded ones, and models compiled
// with --precision=bf16|f16 (the autocast pass) against the f32 interpreter. Tolerances
// come from the precision: p mantissa bits (8 for bf16, 11 for f16) round a result to
// within 2^-p of it, and f32 accumulation may move it across a rounding boundary, so one
// unit in the last place, 2^(1-p), bounds a matmul's error against the interpreter.
#include <fmt/format.h>
#include <cmath>
#include <map>
#include <string>

#include "base/half_float.h"
#include "compiler/compile.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "runtime/format/artifact.h"
#include "tests/unit/autocast_graph.h"
#include "tests/unit/op_graphs.h"
#include "tests/unit/run_util.h"

using namespace kiln;

namespace {

struct Precision {
  ir::DType dtype;
  const char* name;
  int mantissa_bits;
};
constexpr Precision kPrecisions[] = {{ir::DType::BF16, "bf16", 8}, {ir::DType::F16, "f16", 11}};

// The element type of each argument of the graph's artifact, by name.
std::map<std::string, format::DType> artifact_arg_types(const ir::Graph& g, const CompileOptions& options) {
  auto artifact = compile_to_artifact(g, options);
  if (!artifact.ok()) FAIL(artifact.error().message);
  auto view = format::read_artifact(*artifact);
  REQUIRE(view.ok());
  std::map<std::string, format::DType> types;
  for (const format::Argument* a : *view->metadata().args()) {
    const format::Value* v = view->metadata().values()->Get(a->value());
    types[v->name()->str()] = v->dtype();
  }
  return types;
}

}  // namespace

TEST_CASE("f32 to f16 and bf16 round to nearest even, as the interpreter does, at every edge", "[precision]") {
  const float cases[] = {0.0f,         -0.0f,    1.0f,    1.00048828125f, 1.00146484375f, 65504.0f,
                         65519.99f,    65520.0f, 1e-8f,   2.9802322e-8f,  6.097555e-5f,   6.1035156e-5f,
                         -3.14159265f, 1e30f,    -1e-40f, INFINITY,       -INFINITY,      3.3895314e38f};
  for (float f : cases) {
    INFO(f);
    CHECK(f16_to_float(float_to_f16(f)) == static_cast<float>(ir::f16_value(ir::f16_bits(f))));
    CHECK(bf16_to_float(float_to_bf16(f)) == static_cast<float>(ir::bf16_value(ir::bf16_bits(f))));
  }
  CHECK(std::isnan(f16_to_float(float_to_f16(NAN))));
  CHECK(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  // Every f16 and bf16 value widens exactly and narrows back to itself.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float f16 = f16_to_float(bits), bf16 = bf16_to_float(bits);
    if (!std::isnan(f16)) CHECK(float_to_f16(f16) == bits);
    if (!std::isnan(bf16)) CHECK(float_to_bf16(bf16) == bits);
  }
}

TEST_CASE("f16 and bf16 matmuls of every batch pattern against the interpreter, within one unit in the last place",
          "[precision][matmul]") {
  const char* shapes[][3] = {
      {"2,3,5,7", "7,4", "2,3,5,4"},  // batch dims only A has: one GEMM of 30 rows
      {"3,5,7", "3,7,4", "3,5,4"},    // batched
      {"64,96", "96,48", "64,48"},    // one GEMM, larger
  };
  for (const Precision& p : kPrecisions)
    for (const auto& s : shapes) {
      const std::string text = fmt::format(R"(graph @mm(%a: {0}[{1}], %b: {0}[{2}]) {{
  %c: {0}[{3}] = matmul(%a, %b)
  return %c
}}
)",
                                           p.name, s[0], s[1], s[2]);
      INFO(text);
      ir::Graph g = kiln::testing::parse_ok(text);
      auto args = kiln::testing::seeded_arguments(g, 3);
      auto got = kiln::testing::compile_and_run(g, args, {});
      if (!got.ok()) FAIL(got.error().message);
      kiln::testing::check_same(*got, kiln::testing::eval_ok(g, args), std::ldexp(1.0, 1 - p.mantissa_bits), 1e-5);
    }
}

TEST_CASE("--precision=bf16|f16: params only matmuls read are stored in it, and the model stays near f32",
          "[precision][autocast]") {
  // A GELU MLP with a softmax head: matmuls in half precision, the rest in f32.
  ir::Graph g = kiln::testing::parse_ok(R"(graph @mlp(%x: f32[32,64], param %w1: f32[64,128], param %b1: f32[128],
                                             param %w2: f32[128,10]) {
  %h: f32[32,128] = matmul(%x, %w1)
  %bb: f32[32,128] = broadcast(%b1) {shape=[32,128], dims=[1]}
  %z: f32[32,128] = add(%h, %bb)
  %a: f32[32,128] = gelu(%z) {approximate="tanh"}
  %o: f32[32,10] = matmul(%a, %w2)
  %p: f32[32,10] = softmax(%o) {axis=-1}
  return %p, %o
}
)");
  auto args = kiln::testing::seeded_arguments(g, 11, 0.5);
  auto want = kiln::testing::eval_ok(g, args);
  for (const Precision& p : kPrecisions) {
    INFO(p.name);
    CompileOptions options;
    options.precision = p.name;
    for (const auto& [name, t] : args)
      if (name != "x") options.weights[name] = t;
    std::map<std::string, format::DType> arg_types = artifact_arg_types(g, options);
    const format::DType half = p.dtype == ir::DType::BF16 ? format::DType::BF16 : format::DType::F16;
    CHECK(arg_types["w1"] == half);
    CHECK(arg_types["w2"] == half);
    CHECK(arg_types["b1"] == format::DType::F32);  // read by an add
    CHECK(arg_types["x"] == format::DType::F32);
    auto got = kiln::testing::compile_and_run(g, args, options);
    if (!got.ok()) FAIL(got.error().message);
    // Inputs and weights rounded to p bits, products summed over 64 and 128 terms: a few
    // units of 2^-p of the values' scale (about 1 here).
    const double bound = 8 * std::ldexp(1.0, -p.mantissa_bits);
    kiln::testing::check_same(*got, want, bound, bound);
  }
  CompileOptions bad;
  bad.precision = "f8";
  auto refused = compile_to_artifact(g, bad);
  REQUIRE(!refused.ok());
  CHECK(refused.error().message == "compile: unknown precision 'f8' (expected f32, bf16 or f16)");
}

TEST_CASE("a weight a matmul and a lookup read (tied embeddings) is stored once, in the precision",
          "[precision][autocast]") {
  // GPT-2's tied embedding: looked up by the ids and multiplied by for the logits; %u is
  // also added to (an f32 op), so it keeps f32 with a copy in the precision for its matmul.
  ir::Graph g = kiln::testing::parse_ok(R"(graph @tied(%ids: i32[8], param %wte: f32[10,16], param %u: f32[16,16]) {
  %h: f32[8,16] = gather(%wte, %ids)
  %hu: f32[8,16] = matmul(%h, %u)
  %wt: f32[16,10] = transpose(%wte) {perm=[1,0]}
  %logits: f32[8,10] = matmul(%hu, %wt)
  %u2: f32[16,16] = add(%u, %u)
  return %logits, %u2
}
)");
  auto args = kiln::testing::seeded_arguments(g, 5, 0.5);
  args["ids"] = ir::Tensor::from_ints({ir::DType::I32, {8}}, {0, 9, 3, 3, 7, 1, 5, 2});
  for (const Precision& p : kPrecisions) {
    INFO(p.name);
    CompileOptions options;
    options.precision = p.name;
    options.weights = {{"wte", args.at("wte")}, {"u", args.at("u")}};
    const format::DType half = p.dtype == ir::DType::BF16 ? format::DType::BF16 : format::DType::F16;
    const std::string copy = std::string("u.") + p.name;
    CHECK(artifact_arg_types(g, options) ==
          std::map<std::string, format::DType>{
              {"ids", format::DType::I32}, {"wte", half}, {"u", format::DType::F32}, {copy, half}});
    // Against the interpreter on the graph as compiled: the lookup reads rounded weights.
    const ir::Graph cast = kiln::testing::autocast_graph(g, p.name);
    auto cast_args = args;
    cast_args["wte"] = ir::Tensor::from_doubles(cast.type(cast.args[1].value), args.at("wte").floats);
    cast_args[copy] = ir::Tensor::from_doubles(cast.type(cast.args[3].value), args.at("u").floats);
    auto want = kiln::testing::eval_ok(cast, cast_args);
    auto got = kiln::testing::compile_and_run(g, args, options);
    if (!got.ok()) FAIL(got.error().message);
    const double bound = 4 * std::ldexp(1.0, -p.mantissa_bits);
    kiln::testing::check_same(*got, want, bound, bound);
  }
}

TEST_CASE("every op in f16 and bf16, compiled fused and unfused, against the interpreter's rounding of each op",
          "[precision][ops]") {
  auto [f32_graph, f32_args] = kiln::testing::all_ops_graph();
  for (const Precision& p : kPrecisions) {
    INFO(p.name);
    ir::Graph g = kiln::testing::in_precision(f32_graph, p.dtype);
    REQUIRE(ir::verify(g).ok());
    auto args = kiln::testing::in_precision(f32_args, p.dtype);
    auto want = kiln::testing::eval_ok(g, args);
    // The interpreter rounds every op's result to p bits; fused kernels round only what
    // they store, so a chain of a few ops may differ by a few units in the last place.
    const double ulps = 4 * std::ldexp(1.0, 1 - p.mantissa_bits);
    for (bool fuse : {true, false}) {
      INFO(fuse);
      CompileOptions options;
      options.fuse = fuse;
      auto got = kiln::testing::compile_and_run(g, args, options);
      if (!got.ok()) FAIL(got.error().message);
      kiln::testing::check_same(*got, want, ulps, ulps);
    }
  }
}

TEST_CASE("a --precision=bf16 model run from 8 threads at once gives each input's single-thread bytes",
          "[precision][threads]") {
  // The bf16 matmuls run on oneDNN's matmul primitive where it is installed, a stream per
  // calling thread.
  ir::Graph g = kiln::testing::parse_ok(R"(graph @mm(%x: f32[3,32,48], param %w: f32[48,64]) {
  %y: f32[3,32,64] = matmul(%x, %w)
  return %y
}
)");
  CompileOptions options;
  options.precision = "bf16";
  options.weights["w"] = kiln::testing::seeded_arguments(g, 2).at("w");
  auto artifact = compile_to_artifact(g, options);
  REQUIRE(artifact.ok());
  auto model = runtime::Model::load_bytes(std::move(*artifact));
  REQUIRE(model.ok());
  const int threads = 8, runs = 10;
  const auto expected = kiln::testing::outputs_one_thread(**model, "x", {3, 32, 48}, threads * runs);
  CHECK(kiln::testing::mismatches_across_threads(**model, "x", {3, 32, 48}, threads, runs, expected) == 0);
}
