// bf16 and f16 convolutions as library steps on the CPU (format 1.15): autocast casts
// conv, conv_input_grad and conv_weight_grad like matmuls, and their epilogues apply to the
// f32 sums. Built twice (tests/BUILD): with oneDNN (bf16 on its primitives where the CPU
// has an optimized kernel, else widened to f32) and without it (widened, then im2col and
// sgemm), each against the interpreter.
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "compiler/nn.h"
#include "compiler/train.h"
#include "runtime/format/artifact.h"
#include "tests/unit/half_precisions.h"
#include "tests/unit/run_util.h"

using namespace kiln;

namespace {

// A small image network with every kind of convolution the CPU's library takes: a first
// one of 3 input channels, a residual one, a depthwise one with a clip (ReLU6), a grouped
// one of stride 2 with SiLU and a 1x1 one without bias, a max pool between.
constexpr const char* kNetwork = R"(graph @cnn(%x: f32[2,3,10,10], param %w1: f32[8,3,3,3], param %b1: f32[8],
                                    param %w2: f32[8,8,3,3], param %b2: f32[8], param %wd: f32[8,1,3,3],
                                    param %bd: f32[8], param %wg: f32[16,4,3,3], param %bg: f32[16],
                                    param %wp: f32[8,16,1,1]) {
  %c1: f32[2,8,10,10] = conv(%x, %w1) {pads=[1,1,1,1]}
  %bb1: f32[2,8,10,10] = broadcast(%b1) {shape=[2,8,10,10], dims=[1]}
  %z1: f32[2,8,10,10] = add(%c1, %bb1)
  %r1: f32[2,8,10,10] = relu(%z1)
  %c2: f32[2,8,10,10] = conv(%r1, %w2) {pads=[1,1,1,1]}
  %bb2: f32[2,8,10,10] = broadcast(%b2) {shape=[2,8,10,10], dims=[1]}
  %z2: f32[2,8,10,10] = add(%c2, %bb2)
  %s2: f32[2,8,10,10] = add(%z2, %r1)
  %r2: f32[2,8,10,10] = relu(%s2)
  %p: f32[2,8,5,5] = max_pool(%r2) {window=[2,2], strides=[2,2]}
  %cd: f32[2,8,5,5] = conv(%p, %wd) {pads=[1,1,1,1], groups=8}
  %bbd: f32[2,8,5,5] = broadcast(%bd) {shape=[2,8,5,5], dims=[1]}
  %zd: f32[2,8,5,5] = add(%cd, %bbd)
  %zero: f32[] = constant {value=0.0}
  %six: f32[] = constant {value=6.0}
  %lo: f32[2,8,5,5] = broadcast(%zero) {shape=[2,8,5,5], dims=[]}
  %hi: f32[2,8,5,5] = broadcast(%six) {shape=[2,8,5,5], dims=[]}
  %m: f32[2,8,5,5] = maximum(%zd, %lo)
  %r3: f32[2,8,5,5] = minimum(%m, %hi)
  %cg: f32[2,16,3,3] = conv(%r3, %wg) {strides=[2,2], pads=[1,1,1,1], groups=2}
  %bbg: f32[2,16,3,3] = broadcast(%bg) {shape=[2,16,3,3], dims=[1]}
  %zg: f32[2,16,3,3] = add(%cg, %bbg)
  %r4: f32[2,16,3,3] = silu(%zg)
  %y: f32[2,8,3,3] = conv(%r4, %wp)
  return %y, %r2
})";

// The gradients of a dilated 1-D convolution and of a 2-D one of stride 2, as a training
// step's backward writes them.
constexpr const char* kGradients = R"(graph @grads(%x: f32[2,4,16], %w: f32[6,4,3], %dy: f32[2,6,12],
                                      %x2: f32[2,4,7,7], %w2: f32[6,4,3,3], %dy2: f32[2,6,4,4]) {
  %dx: f32[2,4,16] = conv_input_grad(%dy, %w) {shape=[2,4,16], dilations=[2], pads=[0,0]}
  %dw: f32[6,4,3] = conv_weight_grad(%x, %dy) {shape=[6,4,3], dilations=[2], pads=[0,0]}
  %dx2: f32[2,4,7,7] = conv_input_grad(%dy2, %w2) {shape=[2,4,7,7], strides=[2,2], pads=[1,1,1,1]}
  %dw2: f32[6,4,3,3] = conv_weight_grad(%x2, %dy2) {shape=[6,4,3,3], strides=[2,2], pads=[1,1,1,1]}
  return %dx, %dw, %dx2, %dw2
})";

CompileOptions options_for(const char* precision) {
  CompileOptions options;
  options.precision = precision;
  return options;
}

// Each convolution step of the compiled graph: its kind, its input and result types, its
// post-ops.
struct ConvStep {
  format::ConvKind kind;
  format::DType in, out;
  std::vector<format::PostOpKind> post_ops;
};

std::vector<ConvStep> conv_steps(const ir::Graph& g, const char* precision) {
  CompileOptions options = options_for(precision);
  for (const auto& [name, t] : kiln::testing::seeded_arguments(g, 1, 0.5))
    for (const ir::Arg& a : g.args)
      if (a.kind == ir::ArgKind::Param && g.value_name(a.value) == name) options.weights[name] = t;
  auto bytes = compile_to_artifact(g, options);
  if (!bytes.ok()) FAIL(bytes.error().message);
  auto view = format::read_artifact(*bytes, "cpu-x86_64");
  if (!view.ok()) FAIL(view.error().message);
  std::vector<ConvStep> steps;
  const auto* values = view->metadata().values();
  for (const format::Step* s : *view->metadata().steps()) {
    if (!s->conv()) continue;
    ConvStep c{
        s->conv()->kind(), values->Get(s->inputs()->Get(0))->dtype(), values->Get(s->outputs()->Get(0))->dtype(), {}};
    if (s->conv()->post_ops())
      for (const format::PostOp* p : *s->conv()->post_ops()) c.post_ops.push_back(p->kind());
    steps.push_back(c);
  }
  return steps;
}

}  // namespace

TEST_CASE("half-precision convolutions are library steps with their epilogues, near the interpreter",
          "[precision][conv]") {
  ir::Graph g = kiln::testing::parse_ok(kNetwork);
  const auto args = kiln::testing::seeded_arguments(g, 31, 0.5);
  const auto want = kiln::testing::eval_ok(g, args);
  using K = format::PostOpKind;
  for (const kiln::testing::HalfPrecision& p : kiln::testing::kHalfPrecisions) {
    INFO(p.name);
    const format::DType half = p.stored;
    const std::vector<ConvStep> steps = conv_steps(g, p.name);
    REQUIRE(steps.size() == 5);
    for (const ConvStep& s : steps) CHECK(s.in == half);
    // Read by the next convolution only: written in the precision. The first one's relu
    // is also the residual (f32), and the residual's result is a graph result; the last
    // one's product is widened by a kernel for the result.
    CHECK(steps[0].post_ops == std::vector<K>{K::Bias, K::Relu});
    CHECK(steps[0].out == format::DType::F32);
    CHECK(steps[1].post_ops == std::vector<K>{K::Bias, K::Add, K::Relu});
    CHECK(steps[1].out == format::DType::F32);
    CHECK(steps[2].post_ops == std::vector<K>{K::Bias, K::Clip});
    CHECK(steps[2].out == half);
    CHECK(steps[3].post_ops == std::vector<K>{K::Bias, K::Silu});
    CHECK(steps[3].out == half);
    CHECK(steps[4].post_ops.empty());
    CHECK(steps[4].out == half);
    // Inputs and weights rounded to p bits, sums of 9 to 72 terms of values about 1/4:
    // a few units of 2^-p, as //tests:precision_test allows; four layers chained.
    const double bound = 16 * std::ldexp(1.0, -p.mantissa_bits);
    for (int threads : {1, 4}) {
      INFO(threads << " threads");
      auto got = kiln::testing::compile_and_run(g, args, options_for(p.name), {threads});
      if (!got.ok()) FAIL(got.error().message);
      kiln::testing::check_same(*got, want, bound, bound);
    }
  }
}

TEST_CASE("half-precision convolution gradients are library steps, near the interpreter", "[precision][conv]") {
  ir::Graph g = kiln::testing::parse_ok(kGradients);
  const auto args = kiln::testing::seeded_arguments(g, 32, 0.5);
  const auto want = kiln::testing::eval_ok(g, args);
  for (const kiln::testing::HalfPrecision& p : kiln::testing::kHalfPrecisions) {
    INFO(p.name);
    const std::vector<ConvStep> steps = conv_steps(g, p.name);
    REQUIRE(steps.size() == 4);
    for (const ConvStep& s : steps) {
      CHECK(s.in == p.stored);
      CHECK(s.out == p.stored);
    }
    int data = 0, weights = 0;
    for (const ConvStep& s : steps) {
      data += s.kind == format::ConvKind::BackwardData;
      weights += s.kind == format::ConvKind::BackwardWeights;
    }
    CHECK(data == 2);
    CHECK(weights == 2);
    // The weight gradients sum 2·12 and 2·16 products: their scale is a few units.
    const double bound = 16 * std::ldexp(1.0, -p.mantissa_bits);
    for (int threads : {1, 4}) {
      INFO(threads << " threads");
      auto got = kiln::testing::compile_and_run(g, args, options_for(p.name), {threads});
      if (!got.ok()) FAIL(got.error().message);
      kiln::testing::check_same(*got, want, bound, 2 * bound);
    }
  }
}

TEST_CASE("a half-precision convolution's epilogue rounds once, after the bias", "[precision][conv]") {
  // Sums of sixty-fourths are exact in f32; the bias of 1/1024 is below one unit of bf16
  // and f16 at values of 2 to 4 but moves them where it is added before the rounding: the
  // f32 sums plus the bias, rounded once, are what the call writes.
  ir::Graph g = kiln::testing::parse_ok(R"(graph @g(%x: f32[1,4,6,6], param %w: f32[4,4,3,3], param %b: f32[4]) {
    %c: f32[1,4,6,6] = conv(%x, %w) {pads=[1,1,1,1]}
    %bb: f32[1,4,6,6] = broadcast(%b) {shape=[1,4,6,6], dims=[1]}
    %z: f32[1,4,6,6] = add(%c, %bb)
    %r: f32[1,4,6,6] = relu(%z)
    %y: f32[1,4,6,6] = conv(%r, %w) {pads=[1,1,1,1]}
    return %y, %r
  })");
  auto args = kiln::testing::seeded_arguments(g, 3, 2);
  for (auto& [name, t] : args)
    for (double& v : t.floats) v = name == "b" ? 1.0 / 1024 : std::round(v * 8) / 8;
  const auto exact = kiln::testing::eval_ok(g, args);  // f64, then f32
  for (const kiln::testing::HalfPrecision& p : kiln::testing::kHalfPrecisions) {
    INFO(p.name);
    auto got = kiln::testing::compile_and_run(g, args, options_for(p.name));
    if (!got.ok()) FAIL(got.error().message);
    // %r is a result, so the relu's output is f32: the product's f32 sums plus the bias.
    const ir::Tensor& r = (*got)[1];
    int off = 0;
    for (int64_t e = 0; e < r.size(); ++e) off += r.get(e) != static_cast<float>(exact[1].get(e));
    CHECK(off == 0);
  }
}

TEST_CASE("bf16 mixed precision trains a CNN on bf16 convolutions, forward and backward", "[precision][conv][train]") {
  // Which of two 4x4 corners of an 8x8 image is bright, by a conv, a pool and a linear layer.
  const int n = 16;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> noise(0.0, 0.3);
  std::vector<double> pixels;
  std::vector<int64_t> labels;
  for (int i = 0; i < n; ++i) {
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c) pixels.push_back(noise(rng) + ((i % 2 ? r >= 4 && c >= 4 : r < 4 && c < 4) ? 1 : 0));
    labels.push_back(i % 2);
  }
  const std::map<std::string, ir::Tensor> data = {
      {"x", ir::Tensor::from_doubles({ir::DType::F32, {n, 1, 8, 8}}, pixels)},
      {"labels", ir::Tensor::from_ints({ir::DType::I32, {n}}, labels)}};
  Model m("corners", 3);
  Tensor x = m.input("x", {n, 1, 8, 8});
  Tensor y = m.input("labels", {n}, ir::DType::I32);
  nn::Conv2d conv1(m, "conv1", 1, 8, {3, 3}, {.padding = {1, 1}}), conv2(m, "conv2", 8, 8, {3, 3}, {.padding = {1, 1}});
  nn::MaxPool2d pool({2, 2});
  nn::Flatten flatten;
  nn::Linear fc(m, "fc", 8 * 4 * 4, 2);
  m.output(cross_entropy(fc(flatten(pool(relu(conv2(relu(conv1(x))))))), y), "loss");
  auto step = build_train_step(m, Sgd{0.05}, MixedPrecision::bf16());
  if (!step.ok()) FAIL(step.error().message);
  int bf16_convs = 0;
  for (const ir::Node& n : step->graph.nodes)
    bf16_convs += (n.op == ir::Op::Conv || n.op == ir::Op::ConvInputGrad || n.op == ir::Op::ConvWeightGrad) &&
                  step->graph.type(n.result).dtype == ir::DType::BF16;
  CHECK(bf16_convs == 5);  // two forward, conv2's input gradient, both weight gradients
  // For CUDA they become im2col and bf16 matmuls (NVRTC only, no GPU needed).
  CompileOptions cuda;
  cuda.target = "cuda";
  auto cuda_artifact = compile_to_artifact(step->graph, cuda);
  if (!cuda_artifact.ok()) FAIL(cuda_artifact.error().message);
  // One step compiled, from the initial state, against the interpreter's: bf16's rounding
  // of the products (2^-8 relative, a few of them chained).
  std::map<std::string, ir::Tensor> args = data;
  for (const auto& [name, value] : step->initial_state) args[name] = value;
  const auto want = kiln::testing::eval_ok(step->graph, args);
  auto got = kiln::testing::compile_and_run(step->graph, args, {});
  if (!got.ok()) FAIL(got.error().message);
  REQUIRE(got->size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("result " << i);
    REQUIRE(got->at(i).type == want[i].type);
    for (int64_t k = 0; k < want[i].size(); ++k)
      CHECK(std::abs(got->at(i).get(k) - want[i].get(k)) <= 1e-3 + 0.02 * std::abs(want[i].get(k)));
  }
  // And it learns: 40 runs of the compiled step, which keeps its state.
  CompileOptions options;
  auto artifact = compile_to_artifact(step->graph, options);
  if (!artifact.ok()) FAIL(artifact.error().message);
  auto model = runtime::Model::load_bytes(std::move(*artifact));
  if (!model.ok()) FAIL(model.error().message);
  for (const auto& [name, value] : step->initial_state)
    REQUIRE((*model)->write_state(name, kiln::testing::host(value, name)).ok());
  const std::map<std::string, runtime::HostTensor> inputs = {
      {"x", kiln::testing::host(data.at("x"), "x")}, {"labels", kiln::testing::host(data.at("labels"), "labels")}};
  std::vector<double> losses;
  for (int i = 0; i < 40; ++i) {
    auto out = (*model)->run(inputs);
    if (!out.ok()) FAIL(out.error().message);
    losses.push_back(kiln::testing::tensor_of(out->at(0)).get(0));
  }
  INFO("loss: first " << losses.front() << ", last " << losses.back());
  CHECK(losses.back() * 4 <= losses.front());
}
