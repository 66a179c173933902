// Graphs that use every op and every element type, shared by the backends' tests.
#pragma once

#include <cmath>
#include <set>

#include "compiler/model.h"
#include "tests/unit/op_examples.h"
#include "tests/unit/test_util.h"

namespace kiln::testing {

/// A graph with every op of the table (each example of tests/unit/op_examples.h, and a
/// few variants: gelu's tanh form, mean), and its arguments (params included).
inline std::pair<ir::Graph, std::map<std::string, ir::Tensor>> all_ops_graph() {
  Model m("all_ops", 9);
  ExampleInputs in = example_inputs(m);
  for (const OpExample& example : op_examples()) m.output(example.build(in));
  m.output(gelu(in.x, true));
  m.output(mean(in.x, {0, 1}));
  auto g = m.build();
  if (!g.ok()) FAIL(g.error().message);
  std::set<ir::Op> used;
  for (const ir::Node& n : g->nodes) used.insert(n.op);
  CHECK(used.size() == ir::all_ops().size());
  return {*g, example_arguments(m)};
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
                         select(logical_and(is_row(1), lt(x, zero - 0.6)), x - INFINITY,
                                select(logical_and(is_row(3), gt(x, zero + 0.999)), x + INFINITY, x)));
  Tensor wide = cast(masked, ir::DType::F64);
  for (Tensor t : {softmax(masked), log_softmax(masked), softmax(wide), log_softmax(wide), layer_norm(x, p, p),
                   reduce_sum(x, {0, 1}), mean(x, {0})})
    m.output(t);
  auto g = m.build();
  if (!g.ok()) FAIL(g.error().message);
  auto args = seeded_arguments(*g, 40000);
  for (const auto& [name, value] : m.initial_values()) args[name] = value;
  return {*g, args};
}

/// A graph computing in every element type: f64, f16, bf16, i32, i64, bool.
inline ir::Graph dtypes_graph() {
  return parse_ok(
      R"(graph @dtypes(%a: f64[4], %h: f16[4], %b: bf16[4], %i: i32[4], %l: i64[4], %t: bool[4], %q: u8[4], %p: i8[4]) {
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
  %one: u8[] = constant {value=1}
  %q2: u8[4] = sub(%q, %one)
  %q3: u8[4] = mul(%q2, %q2)
  %qs: u8[] = reduce_sum(%q2) {axes=[0]}
  %qf: f32[4] = cast(%q2) {to=f32}
  %p2: i8[4] = neg(%p)
  %pq: i8[4] = cast(%q2) {to=i8}
  return %a2, %h2, %b2, %i2, %l2, %t2, %c, %s, %m, %hb, %q3, %qs, %qf, %p2, %pq
}
)");
}

/// The graph with every f32 value (arguments, results of nodes, casts to f32) in `to`:
/// the all-ops graph in half precision.
inline ir::Graph in_precision(ir::Graph g, ir::DType to) {
  for (ir::Value& v : g.values)
    if (v.type.dtype == ir::DType::F32) v.type.dtype = to;
  for (ir::Node& n : g.nodes)
    if (n.op == ir::Op::Cast && n.attrs.get_dtype("to") == ir::DType::F32) n.attrs.set("to", to);
  for (ir::Graph& f : g.functions) f = in_precision(std::move(f), to);
  return g;
}

/// Arguments to match: f32 values rounded to `to`.
inline std::map<std::string, ir::Tensor> in_precision(const std::map<std::string, ir::Tensor>& args, ir::DType to) {
  std::map<std::string, ir::Tensor> rounded;
  for (const auto& [name, t] : args)
    rounded[name] = t.type.dtype == ir::DType::F32 ? ir::Tensor::from_doubles({to, t.type.shape}, t.floats) : t;
  return rounded;
}

/// Checks dtypes_graph's outputs: f16 and bf16 carry 11 and 8 significant bits.
inline void check_dtypes_close(const std::vector<ir::Tensor>& got, const std::vector<ir::Tensor>& expected) {
  REQUIRE(got.size() == expected.size());
  for (size_t k = 0; k < expected.size(); ++k) {
    std::vector<double> want;
    for (int64_t e = 0; e < expected[k].size(); ++e) want.push_back(expected[k].get(e));
    double tol = expected[k].type.dtype == ir::DType::BF16  ? 1e-2
                 : expected[k].type.dtype == ir::DType::F16 ? 2e-3
                                                            : 1e-6;
    check_close(got[k], expected[k].type.to_string(), want, tol, tol);
  }
}

}  // namespace kiln::testing
