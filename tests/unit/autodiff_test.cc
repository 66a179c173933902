// Gradients against central finite differences in f64 (eps 1e-6, atol 1e-5, rtol 1e-3)
// for every differentiable op and the attribute combinations that matter, and clear
// errors where no gradient exists.
#include <fmt/format.h>
#include <functional>
#include <numeric>
#include <random>

#include "compiler/model.h"
#include "compiler/nn.h"
#include "passes/autodiff.h"
#include "tests/unit/gradient_check.h"
#include "tests/unit/test_util.h"

using namespace kiln;
using ir::DType;

namespace {

using kiln::testing::check_gradients;
using kiln::testing::Range;

// Values bounded away from 0 (for abs, relu, division) with either sign.
const Range kAwayFromZero{0.3, 2};
const Range kPositive{0.2, 3};

Tensor signed_away_from_zero(Model& m, Tensor x) {  // x * [+1, -1, +1, ...]
  std::vector<double> signs;
  for (int64_t k = 0; k < ir::num_elements(x.shape()); ++k) signs.push_back(k % 2 ? -1 : 1);
  return x * m.constant(signs, x.shape(), DType::F64);
}

}  // namespace

TEST_CASE("unary ops: every differentiable one of ir/ops.def", "[autodiff]") {
  // Float ops on positive values (inside log's, sqrt's and rsqrt's domains); numeric ones
  // (abs, relu, neg) on values of either sign, away from the kink at 0.
  int checked = 0;
#define KILN_API_Unary(Enum, fn)                                                                               \
  if (ir::op_gradient(ir::Op::Enum) == ir::GradientKind::Rule) {                                               \
    ++checked;                                                                                                 \
    if (ir::op_operand_types(ir::Op::Enum) == ir::OperandTypes::Float)                                         \
      check_gradients(                                                                                         \
          #fn, {{2, 3}}, [](Model&, auto& x) { return fn(x[0]); }, kPositive);                                 \
    else                                                                                                       \
      check_gradients(                                                                                         \
          #fn, {{2, 3}}, [](Model& m, auto& x) { return fn(signed_away_from_zero(m, x[0])); }, kAwayFromZero); \
  }
#define KILN_API_Custom
#define KILN_OP(Enum, name, arity, kind, attrs, operands, math, gradient, api) KILN_API_##api
#include "ir/ops.def"
#undef KILN_OP
#undef KILN_API_Custom
#undef KILN_API_Unary
  CHECK(checked >= 12);
  check_gradients("sin on either sign", {{2, 3}}, [](Model&, auto& x) { return sin(x[0]); });
  check_gradients("cos(cos(x))", {{5}}, [](Model&, auto& x) { return cos(cos(x[0])); });
}

TEST_CASE("binary ops, with scalar operands on either side", "[autodiff]") {
  check_gradients("add", {{2, 3}, {2, 3}}, [](Model&, auto& x) { return x[0] + x[1]; });
  check_gradients("sub", {{2, 3}, {2, 3}}, [](Model&, auto& x) { return x[0] - x[1]; });
  check_gradients("mul", {{2, 3}, {2, 3}}, [](Model&, auto& x) { return x[0] * x[1]; });
  check_gradients(
      "div", {{2, 3}, {2, 3}}, [](Model&, auto& x) { return x[0] / x[1]; }, kPositive);
  check_gradients(
      "pow", {{2, 3}, {2, 3}}, [](Model&, auto& x) { return pow(x[0], x[1]); }, kPositive);
  check_gradients("maximum", {{2, 3}, {2, 3}}, [](Model&, auto& x) { return maximum(x[0], x[1]); });
  check_gradients("minimum", {{2, 3}, {2, 3}}, [](Model&, auto& x) { return minimum(x[0], x[1]); });
  check_gradients("scalar + tensor", {{}, {2, 3}}, [](Model&, auto& x) { return x[0] + x[1]; });
  check_gradients("tensor - scalar", {{2, 3}, {}}, [](Model&, auto& x) { return x[0] - x[1]; });
  check_gradients("scalar * tensor", {{}, {4}}, [](Model&, auto& x) { return x[0] * x[1]; });
  check_gradients(
      "tensor / scalar", {{4}, {}}, [](Model&, auto& x) { return x[0] / x[1]; }, kPositive);
  check_gradients("maximum with a scalar", {{4}, {}}, [](Model&, auto& x) { return maximum(x[0], x[1]); });
  check_gradients("numpy broadcast [2,3] + [3]", {{2, 3}, {3}}, [](Model&, auto& x) { return x[0] * x[1]; });
  check_gradients("numpy broadcast [2,1] * [1,3]", {{2, 1}, {1, 3}}, [](Model&, auto& x) { return x[0] * x[1]; });
  check_gradients("a value used twice", {{3}}, [](Model&, auto& x) { return x[0] * x[0] + exp(x[0]); });
}

TEST_CASE("select and cast", "[autodiff]") {
  auto cond = [](Model& m) { return cast(m.constant({1, 0, 1, 0, 0, 1}, {2, 3}, DType::I32), DType::Bool); };
  check_gradients("select", {{2, 3}, {2, 3}}, [cond](Model& m, auto& x) { return select(cond(m), x[0], x[1]); });
  check_gradients("select with a scalar branch", {{2, 3}, {}},
                  [cond](Model& m, auto& x) { return select(cond(m), x[0], x[1]); });
  check_gradients(
      "select on a comparison of the input", {{2, 3}},
      [](Model& m, auto& x) { return select(gt(x[0], m.scalar(0, DType::F64)), x[0], x[0] * 0.1); }, kAwayFromZero);
  check_gradients("cast f64 -> f64", {{3}}, [](Model&, auto& x) { return cast(x[0], DType::F64) * 2.0; });
}

TEST_CASE("reductions over axes, with and without keepdims", "[autodiff]") {
  for (bool keep : {false, true}) {
    for (std::vector<int64_t> axes : {std::vector<int64_t>{0}, {1}, {-1}, {0, 2}, {0, 1, 2}}) {
      std::string what = fmt::format("axes={} keepdims={}", ir::shape_string(axes), keep);
      check_gradients("reduce_sum " + what, {{2, 3, 2}}, [=](Model&, auto& x) { return reduce_sum(x[0], axes, keep); });
      check_gradients("reduce_max " + what, {{2, 3, 2}}, [=](Model&, auto& x) { return reduce_max(x[0], axes, keep); });
      check_gradients("reduce_min " + what, {{2, 3, 2}}, [=](Model&, auto& x) { return reduce_min(x[0], axes, keep); });
    }
  }
  check_gradients("mean", {{3, 4}}, [](Model&, auto& x) { return mean(x[0], {1}); });
}

TEST_CASE("movement ops", "[autodiff]") {
  check_gradients("reshape", {{2, 6}}, [](Model&, auto& x) { return sin(reshape(x[0], {3, 2, 2})); });
  check_gradients("transpose", {{2, 3, 4}}, [](Model&, auto& x) { return sin(transpose(x[0], {2, 0, 1})); });
  check_gradients("broadcast dims=[1]", {{3}}, [](Model&, auto& x) { return sin(broadcast(x[0], {2, 3}, {1})); });
  check_gradients("broadcast dims=[0]", {{2}}, [](Model&, auto& x) { return sin(broadcast(x[0], {2, 3}, {0})); });
  check_gradients("broadcast dims=[2,0]", {{4, 2}}, [](Model&, auto& x) {
    return sin(broadcast(x[0], {2, 3, 4}, {2, 0}));
  });
  check_gradients("broadcast size-1 expansion", {{1, 3}}, [](Model&, auto& x) {
    return sin(broadcast(x[0], {4, 3}, {0, 1}));
  });
  check_gradients("broadcast of a scalar", {{}}, [](Model&, auto& x) { return sin(broadcast(x[0], {2, 2}, {})); });
  check_gradients("slice", {{4, 5}}, [](Model&, auto& x) { return sin(slice(x[0], {1, 0}, {3, 4})); });
  check_gradients("slice with strides", {{5, 7}}, [](Model&, auto& x) {
    return sin(slice(x[0], {0, 1}, {5, 7}, {2, 3}));
  });
  check_gradients("slice with strides and a stop before the end", {{9}},
                  [](Model&, auto& x) { return sin(slice(x[0], {1}, {6}, {2})); });
  check_gradients("concat axis 0", {{1, 3}, {2, 3}}, [](Model&, auto& x) {
    return sin(concat({x[0], x[1], x[0]}, 0));
  });
  check_gradients("concat axis 1", {{2, 1}, {2, 2}}, [](Model&, auto& x) { return sin(concat({x[0], x[1]}, 1)); });
  auto idx = [](Model& m) { return m.constant({2, 0, 2, -1}, {2, 2}, DType::I64); };
  check_gradients("gather axis 0 (repeated indices)", {{3, 2}},
                  [idx](Model& m, auto& x) { return sin(gather(x[0], idx(m), 0)); });
  check_gradients("gather axis 1", {{2, 3}}, [idx](Model& m, auto& x) { return sin(gather(x[0], idx(m), 1)); });
  check_gradients("scatter_add", {{3, 2}, {2, 2, 2}},
                  [idx](Model& m, auto& x) { return sin(scatter_add(x[0], idx(m), x[1], 0)); });
}

TEST_CASE("matmul, plain and batched with broadcasting", "[autodiff]") {
  check_gradients("matmul [2,3]x[3,4]", {{2, 3}, {3, 4}}, [](Model&, auto& x) { return matmul(x[0], x[1]); });
  check_gradients("matmul [2,2,3]x[2,3,2]", {{2, 2, 3}, {2, 3, 2}}, [](Model&, auto& x) { return matmul(x[0], x[1]); });
  check_gradients("matmul [2,1,2,3]x[3,3,2]", {{2, 1, 2, 3}, {3, 3, 2}},
                  [](Model&, auto& x) { return matmul(x[0], x[1]); });
  check_gradients("matmul [2,3]x[4,3,2]", {{2, 3}, {4, 3, 2}}, [](Model&, auto& x) { return matmul(x[0], x[1]); });
}

TEST_CASE("composites: direct rules and through decomposition", "[autodiff]") {
  check_gradients("softmax", {{3, 4}}, [](Model&, auto& x) { return softmax(x[0]); });
  check_gradients("softmax axis 0", {{3, 4}}, [](Model&, auto& x) { return softmax(x[0], 0); });
  check_gradients("log_softmax", {{3, 4}}, [](Model&, auto& x) { return log_softmax(x[0]); });
  check_gradients("log_softmax axis 1 of 3", {{2, 3, 2}}, [](Model&, auto& x) { return log_softmax(x[0], 1); });
  check_gradients("layer_norm", {{3, 4}, {4}, {4}}, [](Model&, auto& x) { return layer_norm(x[0], x[1], x[2]); });
  check_gradients("layer_norm over two dims", {{2, 3, 2}, {3, 2}, {3, 2}},
                  [](Model&, auto& x) { return layer_norm(x[0], x[1], x[2], 1); });
  check_gradients("gelu", {{2, 3}}, [](Model&, auto& x) { return gelu(x[0]); });
  check_gradients("gelu tanh", {{2, 3}}, [](Model&, auto& x) { return gelu(x[0], true); });
  check_gradients("silu", {{2, 3}}, [](Model&, auto& x) { return silu(x[0]); });
  check_gradients("linear", {{2, 3}, {3, 4}, {4}}, [](Model&, auto& x) { return linear(x[0], x[1], x[2]); });
  check_gradients("mse_loss", {{2, 3}, {2, 3}}, [](Model&, auto& x) { return mse_loss(x[0], x[1]); });
  check_gradients("attention", {{2, 3, 4}, {2, 5, 4}, {2, 5, 2}},
                  [](Model&, auto& x) { return attention(x[0], x[1], x[2]); });
  check_gradients("attention causal, scaled", {{2, 4, 3}, {2, 4, 3}, {2, 4, 3}},
                  [](Model&, auto& x) { return attention(x[0], x[1], x[2], 0.7, true); });
  check_gradients("attention with a mask", {{3, 4}, {5, 4}, {5, 2}}, [](Model& m, auto& x) {
    Tensor keep = ne(m.iota({3, 5}, 0), m.iota({3, 5}, 1));
    return attention(x[0], x[1], x[2], keep);
  });
  check_gradients("cross_entropy", {{3, 4}}, [](Model& m, auto& x) {
    return cross_entropy(x[0], m.constant({3, 0, 1}, {3}, DType::I32));
  });
}

TEST_CASE("whole models", "[autodiff]") {
  check_gradients("MLP with cross-entropy", {{4, 5}, {5, 6}, {6}, {6, 3}, {3}}, [](Model& m, auto& x) {
    Tensor h = gelu(linear(x[0], x[1], x[2]));
    return cross_entropy(linear(h, x[3], x[4]), m.constant({0, 2, 1, 2}, {4}, DType::I64));
  });
  check_gradients("layer_norm -> softmax block", {{3, 4}, {4}, {4}, {4, 4}},
                  [](Model&, auto& x) { return softmax(matmul(layer_norm(x[0], x[1], x[2]), x[3])); });
}

TEST_CASE("custom functions: their backward is used, and checks out against finite differences", "[autodiff]") {
  // softplus(x) = log(1 + exp(x)) with its analytic backward sigmoid(x) * g.
  auto softplus = [](Model&, const std::vector<Tensor>& in) { return log(exp(in[0]) + 1.0); };
  auto softplus_backward = [](Model&, const std::vector<Tensor>& in, Tensor g) {
    return std::vector<Tensor>{g * sigmoid(in[0])};
  };
  check_gradients("custom-backward softplus", {{2, 3}},
                  [&](Model& m, auto& x) { return m.function("softplus", {x[0]}, softplus, softplus_backward); });
  check_gradients("custom-backward function of two inputs inside a model", {{3, 4}, {4, 2}}, [&](Model& m, auto& x) {
    auto mm = [](Model&, const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
    auto mm_backward = [](Model&, const std::vector<Tensor>& in, Tensor g) {
      return std::vector<Tensor>{matmul(g, transpose(in[1], {1, 0})), matmul(transpose(in[0], {1, 0}), g)};
    };
    return softmax(m.function("mm", {x[0], x[1]}, mm, mm_backward));
  });
  check_gradients("function without a backward: differentiated through its body", {{5}},
                  [&](Model& m, auto& x) { return m.function("plain_softplus", {x[0]}, softplus); });

  // A straight-through estimator: floor has no gradient, its custom backward passes g on.
  Model m("ste");
  Tensor x = m.input("x", {3});
  Tensor q = m.function(
      "quantize", {x}, [](Model&, const std::vector<Tensor>& in) { return floor(in[0]); },
      [](Model&, const std::vector<Tensor>&, Tensor g) { return std::vector<Tensor>{g}; });
  m.output(reduce_sum(q * m.constant({1, 2, 3}, {3}), {0}), "loss");
  ir::Graph g = *m.build();
  REQUIRE(passes::AutodiffPass({"x"}).run(g).ok());
  auto r = kiln::testing::eval_ok(g, {{"x", kiln::testing::tensor(DType::F32, {3}, {0.5, 1.5, -2.5})}});
  kiln::testing::check_close(r[0], "f32[]", {0 + 2 - 9});
  kiln::testing::check_close(r[1], "f32[3]", {1, 2, 3});
}

TEST_CASE("no gradient through comparisons, argmax, floor, ceil or integers", "[autodiff][errors]") {
  auto error_for = [](const std::string& text, std::vector<std::string> wrt) {
    ir::Graph g = kiln::testing::parse_ok(text);
    auto r = passes::AutodiffPass(std::move(wrt)).run(g);
    REQUIRE(!r.ok());
    return r.error().message;
  };
  CHECK(
      error_for(
          "graph @g(%x: f32[3]) {\n  %f: f32[3] = floor(%x)\n  %l: f32[] = reduce_sum(%f) {axes=[0]}\n  return %l\n}",
          {"x"}) ==
      "autodiff: the gradient of %l with respect to %x flows through %f = floor(%x), and floor is not differentiable");
  CHECK(error_for("graph @g(%x: f32[3]) {\n  %z: f32[] = constant {value=0.0}\n  %c: bool[3] = gt(%x, %z)\n"
                  "  %f: f32[3] = cast(%c) {to=f32}\n  %l: f32[] = reduce_sum(%f) {axes=[0]}\n  return %l\n}",
                  {"x"}) ==
        "autodiff: the gradient of %l with respect to %x flows through %c = gt(%x, %z), and its result %c is bool[3], "
        "which has no gradient");
  CHECK(error_for("graph @g(%x: f32[2,3]) {\n  %a: i64[2] = argmax(%x) {axis=1}\n  %f: f32[2] = cast(%a) {to=f32}\n"
                  "  %l: f32[] = reduce_sum(%f) {axes=[0]}\n  return %l\n}",
                  {"x"}) ==
        "autodiff: the gradient of %l with respect to %x flows through %a = argmax(%x), and its result %a is i64[2], "
        "which has no gradient");
  CHECK(error_for("graph @g(%x: f32[3], %i: i32[3]) {\n  %l: f32[] = reduce_sum(%x) {axes=[0]}\n  return %l\n}",
                  {"i"}) == "autodiff: argument %i is i32[3]; only floating-point values have gradients");
  CHECK(error_for("graph @g(%x: f32[3]) {\n  %l: f32[] = reduce_sum(%x) {axes=[0]}\n  return %l\n}", {"y"}) ==
        "autodiff: @g has no argument %y (arguments: x)");
  CHECK(error_for("graph @g(%x: f32[3]) {\n  return %x\n}", {"x"}) ==
        "autodiff: the first result %x must be a floating-point scalar loss, got f32[3]");
}

TEST_CASE("arguments the loss does not use get zero gradients; equal gradients get their own names", "[autodiff]") {
  ir::Graph g = kiln::testing::parse_ok(
      "graph @g(%x: f32[2], %y: f32[2], %u: f32[3]) {\n  %s: f32[2] = add(%x, %y)\n  %l: f32[] = reduce_sum(%s) "
      "{axes=[0]}\n  return %l\n}");
  REQUIRE(passes::AutodiffPass({"x", "y", "u"}).run(g).ok());
  auto r = kiln::testing::eval_ok(g, {{"x", kiln::testing::tensor(DType::F32, {2}, {1, 2})},
                                      {"y", kiln::testing::tensor(DType::F32, {2}, {3, 4})},
                                      {"u", kiln::testing::tensor(DType::F32, {3}, {1, 1, 1})}});
  kiln::testing::check_close(r[1], "f32[2]", {1, 1});
  kiln::testing::check_close(r[2], "f32[2]", {1, 1});
  kiln::testing::check_close(r[3], "f32[3]", {0, 0, 0});
  std::string text = ir::print(g);
  CHECK(text.find("return %l, %grad_x, %grad_y, %grad_u") != std::string::npos);
}
