// Computations on params alone folded at compile time (compiler/param_folding.h): a
// standardized convolution weight (batch norm over the weight itself, as BiT writes it)
// becomes one param; what only moves a param, what grows past it, what reads an input
// and what constants alone give stay computed; an artifact with folds runs as the graph.
#include <algorithm>
#include <map>
#include <string>

#include "compiler/param_folding.h"
#include "tests/unit/run_util.h"

namespace kiln {
namespace {

ir::Tensor ramp(const ir::Shape& shape, double scale, double offset) {
  std::vector<double> v(static_cast<size_t>(ir::num_elements(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = offset + scale * static_cast<double>(i % 17);
  return ir::Tensor::from_doubles({ir::DType::F32, shape}, v);
}

bool has_op(const ir::Graph& g, ir::Op op) {
  return std::any_of(g.nodes.begin(), g.nodes.end(), [&](const ir::Node& n) { return n.op == op; });
}

constexpr const char* kStandardized = R"(graph @standardized(%x: f32[1,4,6,6], param %w: f32[8,4,3,3],
    param %g: f32[8], param %b: f32[8], param %bias: f32[8]) {
  %r: f32[1,8,36] = reshape(%w) {shape=[1,8,36]}
  %sum: f32[8] = reduce_sum(%r) {axes=[0,2], keepdims=false}
  %n1: f32[] = constant {value=36.0}
  %n: f32[8] = broadcast(%n1) {shape=[8], dims=[]}
  %mean: f32[8] = div(%sum, %n)
  %mb: f32[1,8,36] = broadcast(%mean) {shape=[1,8,36], dims=[1]}
  %d: f32[1,8,36] = sub(%r, %mb)
  %d2: f32[1,8,36] = mul(%d, %d)
  %ss: f32[8] = reduce_sum(%d2) {axes=[0,2], keepdims=false}
  %var: f32[8] = div(%ss, %n)
  %bn: f32[1,8,36] = batch_norm(%r, %g, %b, %mean, %var) {epsilon=1e-5}
  %ws: f32[8,4,3,3] = reshape(%bn) {shape=[8,4,3,3]}
  %c: f32[1,8,4,4] = conv(%x, %ws)
  %bb: f32[1,8,4,4] = broadcast(%bias) {shape=[1,8,4,4], dims=[1]}
  %y: f32[1,8,4,4] = add(%c, %bb)
  return %y
})";

std::map<std::string, ir::Tensor> standardized_weights() {
  return {{"w", ramp({8, 4, 3, 3}, 0.1, -0.7)},
          {"g", ramp({8}, 0.2, 0.5)},
          {"b", ramp({8}, -0.1, 0.3)},
          {"bias", ramp({8}, 0.05, -0.2)}};
}

TEST_CASE("a weight standardized by a batch norm over itself folds into one param", "[compile]") {
  ir::Graph g = testing::parse_ok(kStandardized);
  std::map<std::string, ir::Tensor> weights = standardized_weights();
  std::map<std::string, ir::Tensor> args = weights;
  args["x"] = testing::wave_input({1, 4, 6, 6}, 2);
  const std::vector<ir::Tensor> expected = testing::eval_ok(g, args);
  REQUIRE(computes_on_params(g, weights));
  CHECK(fold_param_computations(g, weights) == 1);
  // The weight is the conv's own param now; the bias, only broadcast, stays.
  CHECK(!has_op(g, ir::Op::BatchNorm));
  CHECK(!has_op(g, ir::Op::ReduceSum));
  REQUIRE(g.find_arg("ws.folded") != nullptr);
  CHECK(g.find_arg("ws.folded")->kind == ir::ArgKind::Param);
  CHECK(g.find_arg("w") == nullptr);
  CHECK(weights.count("ws.folded") == 1);
  CHECK(weights.count("w") == 0);
  CHECK(weights.count("bias") == 1);
  CHECK(!computes_on_params(g, weights));
  std::map<std::string, ir::Tensor> folded_args = weights;
  folded_args["x"] = args["x"];
  testing::check_same(testing::eval_ok(g, folded_args), expected, 1e-6, 1e-6);
}

TEST_CASE("an artifact with a folded weight runs as the graph does", "[compile]") {
  std::map<std::string, ir::Tensor> args = standardized_weights();
  args["x"] = testing::wave_input({1, 4, 6, 6}, 3);
  testing::check_against_interpreter("standardized", testing::parse_ok(kStandardized), args);
}

TEST_CASE("moved params, growing values, inputs and constants alone stay computed", "[compile]") {
  ir::Graph g = testing::parse_ok(R"(graph @stays(%x: f32[4,8], param %w: f32[6,8], param %s: f32[6],
      param %q: i8[8,8]) {
  %wt: f32[8,6] = transpose(%w) {perm=[1,0]}
  %y: f32[4,6] = matmul(%x, %wt)
  %sb: f32[4,6] = broadcast(%s) {shape=[4,6], dims=[1]}
  %sw: f32[4,6] = mul(%sb, %sb)
  %z: f32[4,6] = add(%y, %sw)
  %xs: f32[4,8] = mul(%x, %x)
  %i: i64[4,6] = iota {shape=[4,6], axis=0}
  %j: i64[4,6] = iota {shape=[4,6], axis=1}
  %lower: bool[4,6] = ge(%i, %j)
  %zero1: f32[] = constant {value=0.0}
  %zero: f32[4,6] = broadcast(%zero1) {shape=[4,6], dims=[]}
  %m: f32[4,6] = select(%lower, %z, %zero)
  %qf: f32[8,8] = cast(%q) {to=f32}
  %u: f32[4,8] = matmul(%xs, %qf)
  return %m, %u
})");
  std::map<std::string, ir::Tensor> weights = {
      {"w", ramp({6, 8}, 0.1, 0)}, {"s", ramp({6}, 0.1, 0)}, {"q", ir::Tensor::zeros({ir::DType::I8, {8, 8}})}};
  CHECK(!computes_on_params(g, weights));
  CHECK(fold_param_computations(g, weights) == 0);
  CHECK(weights.size() == 3);
}

}  // namespace
}  // namespace kiln
