// Mixed-precision training steps (build_train_step with MixedPrecision): f32 master
// weights as state, half-precision matmuls forward and backward, and f16's dynamic loss
// scaling as graph ops, through the interpreter and the compiled runtime.
#include <random>

#include "compiler/compile.h"
#include "compiler/nn.h"
#include "compiler/train.h"
#include "ir/printer.h"
#include "tests/unit/run_util.h"

using namespace kiln;
using ir::DType;

namespace {

// Three Gaussian blobs in 4-D, well apart, and a 2-layer MLP classifying them.
struct Blobs {
  std::map<std::string, ir::Tensor> data;
  std::unique_ptr<Model> model;
};

Blobs blobs(int n = 120) {
  const int features = 4, classes = 3;
  std::mt19937_64 rng(2024);
  std::normal_distribution<double> noise(0.0, 0.7);
  std::vector<double> xs;
  std::vector<int64_t> labels;
  for (int i = 0; i < n; ++i) {
    for (int f = 0; f < features; ++f) xs.push_back((f == i % classes ? 3.0 : 0.0) + noise(rng));
    labels.push_back(i % classes);
  }
  Blobs b;
  b.data = {{"x", ir::Tensor::from_doubles({DType::F32, {n, features}}, xs)},
            {"labels", ir::Tensor::from_ints({DType::I32, {n}}, labels)}};
  b.model = std::make_unique<Model>("classifier", 7);
  Tensor x = b.model->input("x", {n, features});
  Tensor y = b.model->input("labels", {n}, DType::I32);
  nn::Sequential net = nn::mlp(*b.model, "mlp", {features, 16, classes});
  b.model->output(cross_entropy(net(x), y), "loss");
  return b;
}

// One compiled step from `state`: the loss and the next state, by name.
std::pair<double, std::map<std::string, ir::Tensor>> compiled_step(const TrainStep& step,
                                                                   const std::map<std::string, ir::Tensor>& state,
                                                                   const std::map<std::string, ir::Tensor>& data) {
  std::map<std::string, ir::Tensor> args = data;
  for (const auto& [name, value] : state) args[name] = value;
  auto out = kiln::testing::compile_and_run(step.graph, args, {});
  if (!out.ok()) FAIL(out.error().message);
  std::map<std::string, ir::Tensor> next;
  for (size_t i = 0; i < step.state_names.size(); ++i) next[step.state_names[i]] = (*out)[1 + i];
  return {(*out)[0].get(0), next};
}

}  // namespace

TEST_CASE("bf16 mixed precision: f32 master weights, bf16 matmuls forward and backward, and it learns",
          "[train][mixed]") {
  Blobs b = blobs();
  auto step = build_train_step(*b.model, Adam{0.02}, MixedPrecision::bf16());
  if (!step.ok()) FAIL(step.error().message);
  const std::string text = ir::print(step->graph);
  CHECK(text.find("state %mlp.0.weight: f32[4,16]") != std::string::npos);
  CHECK(text.find("amp.scale") == std::string::npos);  // bf16 needs no loss scaling
  int bf16_matmuls = 0;
  for (const ir::Node& n : step->graph.nodes)
    bf16_matmuls += n.op == ir::Op::Matmul && step->graph.type(n.result).dtype == DType::BF16;
  CHECK(bf16_matmuls >= 5);  // two forward; the input gradient of the second and both weight gradients
  auto state = step->initial_state;
  std::vector<double> losses;
  for (int i = 0; i < 150; ++i) {
    auto loss = run_train_step(*step, state, b.data);
    if (!loss.ok()) FAIL(loss.error().message);
    losses.push_back(*loss);
  }
  INFO("loss: first " << losses.front() << ", last " << losses.back());
  CHECK(losses.back() * 10 <= losses.front());
  // A compiled step from the trained state agrees with the interpreter's, within bf16's
  // rounding of the matmuls (2^-8 relative, a few of them chained).
  auto interpreted = state;
  auto loss = run_train_step(*step, interpreted, b.data);
  REQUIRE(loss.ok());
  auto [compiled_loss, compiled] = compiled_step(*step, state, b.data);
  CHECK(std::abs(compiled_loss - *loss) <= 0.05 * std::abs(*loss) + 1e-3);
  for (const std::string& name : step->state_names) {
    INFO(name);
    const ir::Tensor &want = interpreted.at(name), &got = compiled.at(name);
    REQUIRE(got.type == want.type);
    for (int64_t k = 0; k < want.size(); ++k)
      CHECK(std::abs(got.get(k) - want.get(k)) <= 1e-3 + 0.02 * std::abs(want.get(k)));
  }
}

TEST_CASE("f16 loss scaling: the scale grows after good steps, and an overflow skips the step and backs off",
          "[train][mixed]") {
  Blobs b = blobs(30);
  MixedPrecision mixed = MixedPrecision::f16();
  mixed.growth_interval = 3;
  auto step = build_train_step(*b.model, Sgd{0.1}, mixed);
  if (!step.ok()) FAIL(step.error().message);
  CHECK(step->state_names.back() == "amp.growth_tracker");
  auto state = step->initial_state;
  CHECK(state.at("amp.scale").get(0) == 65536);
  // At 2^16 the weight gradients (sums over 30 samples) overflow f16 at once, as they do
  // in PyTorch: GradScaler's first steps back off.
  auto first = run_train_step(*step, state, b.data);
  REQUIRE(first.ok());
  CHECK(state.at("amp.scale").get(0) == 32768);
  CHECK(state.at("amp.growth_tracker").get(0) == 0);
  state["amp.scale"] = ir::Tensor::from_doubles({DType::F32, {}}, {256});
  for (int i = 1; i <= 3; ++i) {
    auto loss = run_train_step(*step, state, b.data);
    REQUIRE(loss.ok());
    CHECK(std::isfinite(*loss));
    CHECK(state.at("amp.growth_tracker").get(0) == (i % 3));
    CHECK(state.at("amp.scale").get(0) == (i < 3 ? 256 : 512));
  }
  // A scale whose gradients overflow f16 (the backward's matmuls): no weight moves, the
  // scale halves, the count starts over; through the interpreter and compiled alike.
  state["amp.scale"] = ir::Tensor::from_doubles({DType::F32, {}}, {1e30});
  state["amp.growth_tracker"] = ir::Tensor::from_doubles({DType::F32, {}}, {2});
  auto [compiled_loss, compiled] = compiled_step(*step, state, b.data);
  auto before = state;
  auto loss = run_train_step(*step, state, b.data);
  REQUIRE(loss.ok());
  CHECK(std::isfinite(*loss));  // the unscaled loss
  for (auto* after : {&state, &compiled}) {
    CHECK(after->at("amp.scale").get(0) == Approx(5e29));
    CHECK(after->at("amp.growth_tracker").get(0) == 0);
    for (const std::string& name : step->state_names)
      if (name.rfind("amp.", 0) != 0)
        CHECK(ir::tensor_to_bytes(after->at(name)) == ir::tensor_to_bytes(before.at(name)));
  }
  CHECK(compiled_loss == Approx(*loss).epsilon(1e-3));
}

TEST_CASE("mixed-precision errors say what is wrong", "[train][mixed][errors]") {
  Blobs b = blobs(6);
  MixedPrecision f32;
  f32.compute = DType::F32;
  CHECK(build_train_step(*b.model, Sgd{}, f32).error().message ==
        "training step of @classifier: mixed precision computes in bf16 or f16, not f32");
  MixedPrecision bad = MixedPrecision::f16();
  bad.growth_interval = 0;
  CHECK(
      build_train_step(*b.model, Sgd{}, bad).error().message ==
      "training step of @classifier: loss scaling needs initial_scale > 0, growth_factor >= 1, 0 < backoff_factor < 1 "
      "and growth_interval >= 1");
}
