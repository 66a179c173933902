// Graphs that use every op and every element type, shared by the backends' tests.
#pragma once

#include <cmath>
#include <set>

#include "compiler/model.h"
#include "tests/unit/test_util.h"

namespace kiln::testing {

/// A graph with (nearly) every op of the table, and its arguments (params included).
inline std::pair<ir::Graph, std::map<std::string, ir::Tensor>> all_ops_graph() {
  Model m("all_ops", 9);
  Tensor x = m.input("x", {2, 3});
  Tensor i = m.input("i", {2}, ir::DType::I32);
  Tensor p = m.param("p", {3}, Init::uniform(0.5, 1.5));
  Tensor pos = abs(x) + 0.25;  // for log, sqrt, rsqrt and pow
  std::vector<Tensor> outs = {
      neg(x), abs(x), exp(x), log(pos), sqrt(pos), rsqrt(pos), sin(x), cos(x), tanh(x), sigmoid(x), relu(x), erf(x),
      floor(x * 3.0), ceil(x * 3.0), cast(logical_not(gt(x, p)), ir::DType::F32), pow(pos, x), maximum(x, p), minimum(x, p),
      cast(eq(x, x), ir::DType::F32), cast(ne(x, p), ir::DType::F32), cast(lt(x, p), ir::DType::F32), cast(le(x, p), ir::DType::F32),
      cast(ge(x, p), ir::DType::F32), cast(logical_and(gt(x, 0.0 * x), lt(x, p)), ir::DType::F32),
      cast(logical_or(gt(x, p), lt(x, 0.0 * x)), ir::DType::F32), select(gt(x, 0.0 * x), x, p), x / p, x + p, x - p,
      reduce_sum(x, {0}), reduce_max(x, {1}, true), reduce_min(x, {-1}), mean(x, {0, 1}), cast(argmax(x, 1), ir::DType::F32),
      reshape(x, {3, 2}), transpose(x, {1, 0}), slice(x, {0, 1}, {2, 3}, {1, 2}), concat({x, x * 2.0}, 0), gather(x, i, 1),
      scatter_add(x, i, gather(x, i, 1), 1), matmul(x, transpose(x, {1, 0})), softmax(x), log_softmax(x, 0), layer_norm(x, p, p),
      gelu(x), gelu(x, true), silu(x), linear(x, m.param("w", {3, 4}, Init::normal()), m.param("b", {4}, Init::normal())),
      mse_loss(x, x * 0.5), cross_entropy(x, i), cast(m.iota({2, 2}, 1), ir::DType::F32), broadcast(p, {2, 3}, {1}),
      m.function("twice", {x}, [](Model&, const std::vector<Tensor>& in) { return in[0] * 2.0; }),
  };
  for (Tensor& t : outs) m.output(t);
  auto g = m.build();
  if (!g.ok()) FAIL(g.error().message);
  std::set<ir::Op> used;
  for (const ir::Node& n : g->nodes) used.insert(n.op);
  CHECK(used.size() >= ir::all_ops().size() - 1);  // every op but constant-only forms
  auto args = seeded_arguments(*g, 77);
  args["i"] = ir::Tensor::from_ints({ir::DType::I32, {2}}, {2, 0});
  for (const auto& [name, value] : m.initial_values()) args[name] = value;
  return {*g, args};
}

/// Rows too long to keep in registers on the GPU (40000 elements): softmax and
/// log_softmax in f32 and f64 over rows holding -inf (some elements, then all of them)
/// and +inf, layer_norm, and a sum over all 160000 elements; with its arguments.
inline std::pair<ir::Graph, std::map<std::string, ir::Tensor>> long_rows_graph() {
  Model m("long_rows", 3);
  Tensor x = m.input("x", {4, 40000});
  Tensor p = m.param("p", {40000}, Init::uniform(0.5, 1.5));
  Tensor row = cast(m.iota({4, 40000}, 0), ir::DType::F32);
  auto is_row = [&](double r) { return eq(row, row * 0.0 + r); };
  Tensor zero = x * 0.0;
  Tensor masked = select(is_row(2), x - INFINITY,
                         select(logical_and(is_row(1), lt(x, zero - 0.6)), x - INFINITY, select(logical_and(is_row(3), gt(x, zero + 0.999)), x + INFINITY, x)));
  Tensor wide = cast(masked, ir::DType::F64);
  for (Tensor t : {softmax(masked), log_softmax(masked), softmax(wide), log_softmax(wide), layer_norm(x, p, p), reduce_sum(x, {0, 1}), mean(x, {0})})
    m.output(t);
  auto g = m.build();
  if (!g.ok()) FAIL(g.error().message);
  auto args = seeded_arguments(*g, 40000);
  for (const auto& [name, value] : m.initial_values()) args[name] = value;
  return {*g, args};
}

/// A graph computing in every element type: f64, f16, bf16, i32, i64, bool.
inline ir::Graph dtypes_graph() {
  return parse_ok(R"(graph @dtypes(%a: f64[4], %h: f16[4], %b: bf16[4], %i: i32[4], %l: i64[4], %t: bool[4]) {
  %a2: f64[4] = mul(%a, %a)
  %h2: f16[4] = exp(%h)
  %b2: bf16[4] = tanh(%b)
  %two: i32[] = constant {value=2}
  %i2: i32[4] = div(%i, %two)
  %l2: i64[4] = mul(%l, %l)
  %t2: bool[4] = not(%t)
  %c: f32[4] = cast(%h2) {to=f32}
  %s: f64[] = reduce_sum(%a2) {axes=[0]}
  %m: i64[] = reduce_max(%l2) {axes=[0]}
  %hb: bf16[4] = cast(%h) {to=bf16}
  return %a2, %h2, %b2, %i2, %l2, %t2, %c, %s, %m, %hb
}
)");
}

/// Checks dtypes_graph's outputs: f16 and bf16 carry 11 and 8 significant bits.
inline void check_dtypes_close(const std::vector<ir::Tensor>& got, const std::vector<ir::Tensor>& expected) {
  REQUIRE(got.size() == expected.size());
  for (size_t k = 0; k < expected.size(); ++k) {
    std::vector<double> want;
    for (int64_t e = 0; e < expected[k].size(); ++e) want.push_back(expected[k].get(e));
    double tol = expected[k].type.dtype == ir::DType::BF16 ? 1e-2 : expected[k].type.dtype == ir::DType::F16 ? 2e-3 : 1e-6;
    check_close(got[k], expected[k].type.to_string(), want, tol, tol);
  }
}

}  // namespace kiln::testing
