// The model-definition API: graphs it builds, broadcasting, initialisers, errors.
#include <cmath>
#include <set>

#include "compiler/model.h"
#include "compiler/nn.h"
#include "tests/unit/test_util.h"

using namespace kiln;
using kiln::testing::check_close;

TEST_CASE("an MLP built with nn prints as text IR and evaluates", "[model]") {
  Model m("mlp", 7);
  Tensor x = m.input("x", {2, 4});
  nn::Sequential net = nn::mlp(m, "fc", {4, 8, 3});
  m.output(softmax(net(x)), "probs");
  auto g = m.build();
  REQUIRE(g.ok());
  std::string text = ir::print(*g);
  CHECK(text.rfind("graph @mlp(%x: f32[2,4], param %fc.0.weight: f32[4,8], param %fc.0.bias: f32[8], "
                   "param %fc.1.weight: f32[8,3], param %fc.1.bias: f32[3]) {\n",
                   0) == 0);
  CHECK(text.find("= linear(%x, %fc.0.weight, %fc.0.bias)") != std::string::npos);
  CHECK(text.find("= relu(") != std::string::npos);
  CHECK(text.find("%probs: f32[2,3] = softmax(") != std::string::npos);
  CHECK(ir::print(kiln::testing::parse_ok(text)) == text);

  auto inputs = m.initial_values();
  inputs["x"] = kiln::testing::tensor(ir::DType::F32, {2, 4}, {1, 2, 3, 4, -1, -2, -3, -4});
  ir::Tensor probs = kiln::testing::eval_ok(*g, inputs)[0];
  for (int row = 0; row < 2; ++row)
    CHECK(probs.floats[row * 3] + probs.floats[row * 3 + 1] + probs.floats[row * 3 + 2] == Approx(1.0).epsilon(1e-6));
}

TEST_CASE("RMSNorm divides by the root mean square and scales, with no mean subtracted", "[model]") {
  Model m("rms", 1);
  Tensor x = m.input("x", {2, 4});
  nn::RMSNorm norm(m, "norm", 4, 1e-6);
  m.output(norm(x), "y");
  auto g = m.build();
  REQUIRE(g.ok());
  auto inputs = m.initial_values();
  CHECK(inputs.at("norm.weight").floats == std::vector<double>{1, 1, 1, 1});
  inputs["norm.weight"] = kiln::testing::tensor(ir::DType::F32, {4}, {1, 2, 1, 0.5});
  inputs["x"] = kiln::testing::tensor(ir::DType::F32, {2, 4}, {1, 2, 3, 4, 2, 2, 2, 2});
  ir::Tensor y = kiln::testing::eval_ok(*g, inputs)[0];
  // Row 0: mean of squares 7.5; row 1: 4, so x / 2.
  const double r = 1 / std::sqrt(7.5 + 1e-6), s = 1 / std::sqrt(4 + 1e-6);
  const std::vector<double> expected{r, 4 * r, 3 * r, 2 * r, 2 * s, 4 * s, 2 * s, s};
  for (size_t k = 0; k < expected.size(); ++k) CHECK(y.floats[k] == Approx(expected[k]).epsilon(1e-6));
}

TEST_CASE("numpy-style broadcasting becomes explicit broadcast ops", "[model]") {
  Model m("b");
  Tensor a = m.input("a", {2, 3});
  Tensor b = m.input("b", {3});
  Tensor c = m.input("c", {2, 1});
  m.output(a + b, "ab");
  m.output(a * c, "ac");
  m.output(2.0 - a, "s");
  std::string text = ir::print(*m.build());
  CHECK(text.find("broadcast(%b) {shape=[2,3], dims=[1]}") != std::string::npos);
  CHECK(text.find("broadcast(%c) {shape=[2,3], dims=[0,1]}") != std::string::npos);
  CHECK(text.find("constant {value=2.0}") != std::string::npos);
  auto r = kiln::testing::eval_ok(*m.build(), {{"a", kiln::testing::tensor(ir::DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6})},
                                               {"b", kiln::testing::tensor(ir::DType::F32, {3}, {10, 20, 30})},
                                               {"c", kiln::testing::tensor(ir::DType::F32, {2, 1}, {-1, 2})}});
  check_close(r[0], "f32[2,3]", {11, 22, 33, 14, 25, 36});
  check_close(r[1], "f32[2,3]", {-1, -2, -3, 8, 10, 12});
  check_close(r[2], "f32[2,3]", {1, 0, -1, -2, -3, -4});
}

TEST_CASE("initialisers are seeded, per name, and follow their distributions", "[model]") {
  auto weights = [](uint64_t seed, bool swap) {
    Model m("w", seed);
    if (swap) m.param("other", {3}, Init::normal());
    m.param("w", {200, 100}, Init::xavier_uniform());
    if (!swap) m.param("other", {3}, Init::normal());
    return m.initial_values().at("w").floats;
  };
  CHECK(weights(1, false) == weights(1, true));
  CHECK(weights(1, false) != weights(2, false));
  double limit = std::sqrt(6.0 / 300), max_abs = 0, mean = 0;
  for (double v : weights(3, false)) {
    max_abs = std::max(max_abs, std::fabs(v));
    mean += v / 20000;
  }
  CHECK(max_abs <= limit);
  CHECK(max_abs > 0.95 * limit);
  CHECK(std::fabs(mean) < 0.01);

  Model m("n", 5);
  m.param("k", {1000, 50}, Init::kaiming_normal());
  m.param("u", {4}, Init::uniform(2, 3));
  m.state("z", {2}, Init::zeros());
  m.param("o", {2}, Init::ones());
  double sum = 0, sq = 0;
  for (double v : m.initial_values().at("k").floats) {
    sum += v;
    sq += v * v;
  }
  double n = 50000, var = sq / n - (sum / n) * (sum / n);
  CHECK(var == Approx(2.0 / 1000).epsilon(0.05));
  for (double v : m.initial_values().at("u").floats) CHECK((v >= 2 && v < 3));
  CHECK(m.initial_values().at("z").floats == std::vector<double>{0, 0});
  CHECK(m.initial_values().at("o").floats == std::vector<double>{1, 1});
}

TEST_CASE("the first shape error is kept and returned by build()", "[model][errors]") {
  Model m("bad");
  Tensor a = m.input("a", {2, 3});
  Tensor b = m.input("b", {4, 5});
  Tensor y = relu(matmul(a, b));  // invalid from here on, no crash
  CHECK(!y.valid());
  m.output(y);
  auto g = m.build();
  REQUIRE(!g.ok());
  CHECK(g.error().message == "model @bad: matmul: contracting dims differ: f32[2,3] x f32[4,5]");

  Model d("dup");
  d.input("x", {1});
  d.input("x", {1});
  CHECK(d.build().error().message == "model @dup: argument %x is declared twice");

  Model e("empty");
  e.input("x", {1});
  CHECK(e.build().error().message == "model @empty: no outputs; call output() first");

  Model s("shapes");
  m.output(s.input("p", {2, 3}) + s.input("q", {4}));
  CHECK(s.build().error().message ==
        "model @shapes: add: operand shapes differ: f32[2,3], f32[4] (broadcast explicitly with 'broadcast')");
}

TEST_CASE("functions print as func blocks, run through calls, and carry their backward", "[model]") {
  Model m("f");
  Tensor x = m.input("x", {3});
  auto square = [](Model&, const std::vector<Tensor>& in) { return in[0] * in[0]; };
  auto twice = [](Model&, const std::vector<Tensor>& in, Tensor g) { return std::vector<Tensor>{g * in[0] * 2.0}; };
  Tensor y = m.function("square", {x}, square, twice);
  m.output(m.function("square", {y}, square, twice) + m.function("plain", {x}, square), "z");
  auto g = m.build();
  if (!g.ok()) FAIL(g.error().message);
  std::string text = ir::print(*g);
  CHECK(text.rfind("func @square(%in0: f32[3]) {\n", 0) == 0);
  CHECK(text.find("func @square.backward(%in0: f32[3], %in1: f32[3]) {\n") != std::string::npos);
  CHECK(text.find("func @plain(%in0: f32[3])") != std::string::npos);
  CHECK(text.find("= call(%x) {callee=\"square\", backward=\"square.backward\"}") != std::string::npos);
  CHECK(text.find("= call(%x) {callee=\"plain\"}") != std::string::npos);
  CHECK(ir::print(kiln::testing::parse_ok(text)) == text);
  auto r = kiln::testing::eval_ok(*g, {{"x", kiln::testing::tensor(ir::DType::F32, {3}, {1, 2, -3})}});
  check_close(r[0], "f32[3]", {2, 20, 90});

  Model bad("bad");
  Tensor b = bad.input("b", {2, 3});
  bad.output(bad.function("f", {b}, [](Model&, const std::vector<Tensor>& in) { return matmul(in[0], in[0]); }));
  CHECK(bad.build().error().message ==
        "model @bad: function @f: model @f: matmul: contracting dims differ: f32[2,3] x f32[2,3]");
}

TEST_CASE("a Model moves, and the Tensors made before the move follow it", "[model]") {
  auto make = [] {
    Model m("moved", 7);
    Tensor x = m.input("x", {2, 3});
    nn::Linear fc(m, "fc", 3, 4);
    return std::pair{std::move(m), fc(x)};
  };
  auto [m, y] = make();
  CHECK(y.model() == &m);
  m.output(relu(y), "out");
  std::vector<Model> models;
  models.push_back(std::move(m));
  Model& kept = models.back();
  CHECK(y.model() == &kept);
  auto g = kept.build();
  if (!g.ok()) FAIL(g.error().message);
  CHECK(g->name == "moved");
  CHECK(kept.initial_values().count("fc.weight") == 1);
  Model other("other");
  other = std::move(kept);
  CHECK(y.model() == &other);
  CHECK(other.build().ok());
}
