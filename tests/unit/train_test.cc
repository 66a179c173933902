// Optimizers as graph ops, the training-step graph, and end-to-end training through the
// reference interpreter.
#include <random>

#include "compiler/nn.h"
#include "compiler/train.h"
#include "tests/unit/test_util.h"

using namespace kiln;
using ir::DType;
using kiln::testing::check_close;

namespace {

// loss = sum(w * x): the gradient with respect to w is x, whatever w is.
std::unique_ptr<Model> linear_loss() {
  auto m = std::make_unique<Model>("lin");
  Tensor x = m->input("x", {2});
  Tensor w = m->param("w", {2}, Init::ones());
  m->output(reduce_sum(w * x, {0}), "loss");
  return m;
}

std::map<std::string, ir::Tensor> x_input() { return {{"x", kiln::testing::tensor(DType::F32, {2}, {0.5, -2})}}; }

}  // namespace

TEST_CASE("the training step graph makes weights and slots state and returns their next values", "[train]") {
  auto m = linear_loss();
  auto step = build_train_step(*m, Adam{});
  REQUIRE(step.ok());
  CHECK(step->state_names == std::vector<std::string>{"w", "adam.step", "adam.m.w", "adam.v.w"});
  std::string text = ir::print(step->graph);
  CHECK(text.rfind("graph @lin(%x: f32[2], state %w: f32[2], state %adam.step: f32[], state %adam.m.w: f32[2], "
                   "state %adam.v.w: f32[2]) {\n",
                   0) == 0);
  CHECK(text.find("return %loss, %w.next, %adam.step.next, %adam.m.w.next, %adam.v.w.next\n") != std::string::npos);
  CHECK(ir::print(kiln::testing::parse_ok(text)) == text);
}

TEST_CASE("SGD with momentum and weight decay, two steps by hand", "[train]") {
  auto m = linear_loss();
  auto step = build_train_step(*m, Sgd{0.1, 0.9, 0.0});
  REQUIRE(step.ok());
  auto state = step->initial_state;
  REQUIRE(run_train_step(*step, state, x_input()).ok());
  // v1 = g = [0.5, -2]; w1 = 1 - 0.1 v1
  check_close(state["w"], "f32[2]", {0.95, 1.2});
  REQUIRE(run_train_step(*step, state, x_input()).ok());
  // v2 = 0.9 v1 + g = 1.9 g; w2 = w1 - 0.1 v2
  check_close(state["w"], "f32[2]", {0.95 - 0.095, 1.2 + 0.38});
  check_close(state["sgd.velocity.w"], "f32[2]", {0.95, -3.8});

  auto decayed = build_train_step(*m, Sgd{0.1, 0, 0.5});
  REQUIRE(decayed.ok());
  auto s2 = decayed->initial_state;
  auto loss = run_train_step(*decayed, s2, x_input());
  REQUIRE(loss.ok());
  CHECK(*loss == Approx(-1.5));
  check_close(s2["w"], "f32[2]", {1 - 0.1 * (0.5 + 0.5), 1 - 0.1 * (-2 + 0.5)});
}

TEST_CASE("Adam and AdamW with bias correction, by hand", "[train]") {
  auto m = linear_loss();
  // Step 1 with bias correction: m_hat = g, v_hat = g^2, so the update is lr * g / (|g| + eps).
  auto adam = build_train_step(*m, Adam{0.1});
  REQUIRE(adam.ok());
  auto state = adam->initial_state;
  REQUIRE(run_train_step(*adam, state, x_input()).ok());
  check_close(state["w"], "f32[2]", {0.9, 1.1}, 1e-6);
  check_close(state["adam.step"], "f32[]", {1});
  check_close(state["adam.m.w"], "f32[2]", {0.05, -0.2});
  check_close(state["adam.v.w"], "f32[2]", {0.001 * 0.25, 0.001 * 4});
  // Step 2, same gradient: m = 0.19 g, v = 0.001999 g^2; corrections 0.19 and 0.001999.
  REQUIRE(run_train_step(*adam, state, x_input()).ok());
  check_close(state["w"], "f32[2]", {0.8, 1.2}, 1e-5);

  auto adamw = build_train_step(*m, Adam::adamw(0.1, 0.5));
  REQUIRE(adamw.ok());
  auto s2 = adamw->initial_state;
  REQUIRE(run_train_step(*adamw, s2, x_input()).ok());
  // p -= lr (sign(g) + wd p) with p = 1.
  check_close(s2["w"], "f32[2]", {1 - 0.1 * (1 + 0.5), 1 - 0.1 * (-1 + 0.5)}, 1e-6);

  auto l2 = build_train_step(*m, Adam{0.1, 0.9, 0.999, 1e-8, 0.5});
  REQUIRE(l2.ok());
  auto s3 = l2->initial_state;
  REQUIRE(run_train_step(*l2, s3, x_input()).ok());
  // L2 decay goes into g = x + 0.5 w = [1, -1.5]: still one lr step along its sign.
  check_close(s3["w"], "f32[2]", {0.9, 1.1}, 1e-6);
}

TEST_CASE("Adam's cosine decay: the learning rate falls along a half cosine to 0 and stays there", "[train]") {
  auto m = linear_loss();
  Adam cosine{0.1};
  cosine.cosine_decay_steps = 2;
  auto step = build_train_step(*m, cosine);
  REQUIRE(step.ok());
  auto state = step->initial_state;
  // The same gradient every step, so each step moves w by its learning rate along -sign(g):
  // 0.1, then 0.1 (1 + cos(pi / 2)) / 2 = 0.05, then 0.
  const std::vector<std::vector<double>> expected = {{0.9, 1.1}, {0.85, 1.15}, {0.85, 1.15}, {0.85, 1.15}};
  for (const auto& w : expected) {
    REQUIRE(run_train_step(*step, state, x_input()).ok());
    check_close(state["w"], "f32[2]", w, 1e-5);
  }
  check_close(state["adam.step"], "f32[]", {4});
}

TEST_CASE("training-step errors say what is wrong", "[train][errors]") {
  Model none("none");
  none.output(reduce_sum(none.input("x", {2}), {0}), "loss");
  CHECK(build_train_step(none, Sgd{}).error().message ==
        "training step of @none: the model has no floating-point params to train");
  Model vec("vec");
  Tensor w = vec.param("w", {2}, Init::ones());
  vec.output(w * 2.0, "not_a_loss");
  CHECK(
      build_train_step(vec, Sgd{}).error().message ==
      "training step of @vec: autodiff: the first result %not_a_loss must be a floating-point scalar loss, got f32[2]");
  Model st("st");
  st.state("s", {1});
  st.output(reduce_sum(st.param("w", {2}), {0}));
  CHECK(build_train_step(st, Sgd{}).error().message ==
        "training step of @st: the model has state %s without an update; declare trained weights with param (the "
        "step makes them state), and state the model updates with Model::update");
}

TEST_CASE("a 2-layer MLP learns a separable problem with Adam through the interpreter", "[train][e2e]") {
  // Three Gaussian blobs in 4-D, well apart; a fixed seed makes the run reproducible.
  const int n = 240, features = 4, classes = 3;
  std::mt19937_64 rng(2024);
  std::normal_distribution<double> noise(0.0, 0.7);
  std::vector<double> xs;
  std::vector<int64_t> labels;
  for (int i = 0; i < n; ++i) {
    int c = i % classes;
    for (int f = 0; f < features; ++f) xs.push_back((f == c ? 3.0 : 0.0) + noise(rng));
    labels.push_back(c);
  }
  std::map<std::string, ir::Tensor> data = {
      {"x", ir::Tensor::from_doubles({DType::F32, {n, features}}, xs)},
      {"labels", ir::Tensor::from_ints({DType::I32, {n}}, labels)},
  };

  Model m("classifier", /*seed=*/7);
  Tensor x = m.input("x", {n, features});
  Tensor y = m.input("labels", {n}, DType::I32);
  nn::Sequential net = nn::mlp(m, "mlp", {features, 16, classes});
  Tensor logits = net(x);
  m.output(cross_entropy(logits, y), "loss");
  m.output(logits, "logits");

  auto step = build_train_step(m, Adam{0.02});
  if (!step.ok()) FAIL(step.error().message);
  auto state = step->initial_state;
  std::vector<double> losses;
  for (int i = 0; i < 200; ++i) {
    auto loss = run_train_step(*step, state, data);
    if (!loss.ok()) FAIL(loss.error().message);
    losses.push_back(*loss);
  }
  INFO("loss: first " << losses.front() << ", last " << losses.back());
  CHECK(losses.back() * 10 <= losses.front());

  // Accuracy of the trained weights with the model's own (inference) graph.
  auto inputs = data;
  for (const auto& [name, value] : state)
    if (m.initial_values().count(name)) inputs[name] = value;
  auto out = kiln::testing::eval_ok(*m.build(), inputs);
  const ir::Tensor& scores = out[1];
  int correct = 0;
  for (int i = 0; i < n; ++i) {
    int best = 0;
    for (int c = 1; c < classes; ++c)
      if (scores.floats[i * classes + c] > scores.floats[i * classes + best]) best = c;
    correct += best == labels[i];
  }
  INFO("accuracy " << correct << "/" << n);
  CHECK(correct >= 0.95 * n);
}
