// The one every-op list: an application of each op of ir/ops.def through the model API.
// The op conformance test walks each through every layer, the model test checks each
// builds the op it names, and the backends' all-ops graphs hold them all. Unary
// elementwise ops (ir/ops.def's Unary rows) come from the table; every other op has its
// example written here, and an op without one fails op_conformance_test by name.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "compiler/model.h"

namespace kiln::testing {

/// What an example draws on, all in one model: x f32[2,3]; pos, x made positive (for
/// log, sqrt, pow); flags bool[2,3]; i i32[2] indices in range; p a param f32[3].
struct ExampleInputs {
  Model& m;
  Tensor x, pos, flags, i, p;
};

/// An op and how to apply it. Names of params an example declares start with its op's
/// name, so that examples share one model.
struct OpExample {
  ir::Op op;
  std::function<Tensor(ExampleInputs&)> build;
};

/// The inputs, declared in `m`.
inline ExampleInputs example_inputs(Model& m) {
  Tensor x = m.input("x", {2, 3});
  Tensor pos = abs(x) + 0.25;
  return {m, x, pos, gt(x, x * 0.0), m.input("i", {2}, ir::DType::I32), m.param("p", {3}, Init::uniform(0.5, 1.5))};
}

/// Values for the inputs (and the params of every example).
inline std::map<std::string, ir::Tensor> example_arguments(const Model& m) {
  std::map<std::string, ir::Tensor> args = m.initial_values();
  args["x"] = ir::Tensor::from_doubles({ir::DType::F32, {2, 3}}, {0.5, -1.25, 2.0, -0.75, 0.0, 1.5});
  args["i"] = ir::Tensor::from_ints({ir::DType::I32, {2}}, {2, 0});
  return args;
}

/// Every op's example, in the order of ir/ops.def.
inline std::vector<OpExample> op_examples() {
  using ir::Op;
  using E = ExampleInputs;
  std::map<Op, std::function<Tensor(E&)>> by_op = {
      {Op::Add, [](E& e) { return e.x + e.p; }},
      {Op::And, [](E& e) { return logical_and(e.flags, lt(e.x, e.p)); }},
      {Op::Argmax, [](E& e) { return argmax(e.x, 1); }},
      {Op::Attention,
       [](E& e) {
         // x as queries, keys and values ([2,3]: T = S = 2, D = E = 3), causal; and with
         // a mask that drops each query's own key, at scale 0.5.
         Tensor off_diagonal = ne(e.m.iota({2, 2}, 0), e.m.iota({2, 2}, 1));
         return attention(e.x, e.x, e.x, 0, true) + attention(e.x, e.x * 0.5, e.x, off_diagonal, 0.5);
       }},
      {Op::AvgPool,
       [](E& e) {
         // x as [1, 2, 3] (N, C, one spatial dim), windows of 2 with the end padded.
         return reshape(avg_pool(reshape(e.x, {1, 2, 3}), {2}, {{1}, {0, 1}, {}, false, false}), {2, 3});
       }},
      {Op::BatchNorm, [](E& e) { return batch_norm(e.x, e.p * 0.0 + 1.0, e.p, e.p * 0.5, e.p); }},
      {Op::Broadcast,
       [](E& e) {
         return broadcast(e.p, {2, 3}, {1});
       }},
      {Op::Call,
       [](E& e) {
         return e.m.function("twice", {e.x}, [](Model&, const std::vector<Tensor>& in) { return in[0] * 2.0; });
       }},
      {Op::Cast, [](E& e) { return cast(e.x, ir::DType::F64); }},
      {Op::Concat,
       [](E& e) {
         return concat({e.x, e.x * 2.0}, 0);
       }},
      {Op::Constant,
       [](E& e) {
         return e.m.constant({1, 2, 3}, {3});
       }},
      {Op::Conv,
       [](E& e) {
         // x as [1, 2, 3] convolved with 3 output channels of 2 taps over 2 channels, padded.
         Tensor w = reshape(concat({e.p, e.p, e.p, e.p}, 0), {3, 2, 2});
         return reshape(conv(reshape(e.x, {1, 2, 3}), w, {{1}, {1, 0}, {}, 1}), {3, 3});
       }},
      {Op::ConvInputGrad,
       [](E& e) {
         // The gradients of the conv example above, at dy [1, 3, 3] made of x and p.
         Tensor dy = reshape(concat({e.x, reshape(e.p, {1, 3})}, 0), {1, 3, 3});
         Tensor w = reshape(concat({e.p, e.p, e.p, e.p}, 0), {3, 2, 2});
         ir::Attrs attrs;
         attrs.set("shape", ir::Shape{1, 2, 3});
         attrs.set("pads", std::vector<int64_t>{1, 0});
         return reshape(e.m.apply(Op::ConvInputGrad, {dy, w}, attrs), {2, 3});
       }},
      {Op::ConvWeightGrad,
       [](E& e) {
         Tensor dy = reshape(concat({e.x, reshape(e.p, {1, 3})}, 0), {1, 3, 3});
         ir::Attrs attrs;
         attrs.set("shape", ir::Shape{3, 2, 2});
         attrs.set("pads", std::vector<int64_t>{1, 0});
         return reshape(e.m.apply(Op::ConvWeightGrad, {reshape(e.x, {1, 2, 3}), dy}, attrs), {3, 4});
       }},
      {Op::CrossEntropy, [](E& e) { return cross_entropy(e.x, e.i); }},
      {Op::Div, [](E& e) { return e.x / e.p; }},
      {Op::Eq, [](E& e) { return eq(e.x, e.x); }},
      {Op::Gather, [](E& e) { return gather(e.x, e.i, 1); }},
      {Op::Ge, [](E& e) { return ge(e.x, e.p); }},
      {Op::Gelu, [](E& e) { return gelu(e.x); }},
      {Op::Gt, [](E& e) { return gt(e.x, e.p); }},
      {Op::Iota,
       [](E& e) {
         return e.m.iota({2, 2}, 1);
       }},
      {Op::LayerNorm, [](E& e) { return layer_norm(e.x, e.p, e.p); }},
      {Op::Le, [](E& e) { return le(e.x, e.p); }},
      {Op::Linear,
       [](E& e) {
         return linear(e.x, e.m.param("linear.w", {3, 4}, Init::normal()), e.m.param("linear.b", {4}, Init::normal()));
       }},
      {Op::LogSoftmax, [](E& e) { return log_softmax(e.x, 0); }},
      {Op::Lt, [](E& e) { return lt(e.x, e.p); }},
      {Op::Matmul,
       [](E& e) {
         return matmul(e.x, transpose(e.x, {1, 0}));
       }},
      {Op::MaxPool,
       [](E& e) {
         return reshape(max_pool(reshape(e.x, {1, 2, 3}), {2}, {{1}, {1, 0}, {}, false, false}), {2, 3});
       }},
      {Op::Maximum, [](E& e) { return maximum(e.x, e.p); }},
      {Op::Minimum, [](E& e) { return minimum(e.x, e.p); }},
      {Op::MseLoss, [](E& e) { return mse_loss(e.x, e.x * 0.5); }},
      {Op::Mul, [](E& e) { return e.x * e.p; }},
      {Op::Ne, [](E& e) { return ne(e.x, e.p); }},
      {Op::Or, [](E& e) { return logical_or(e.flags, lt(e.x, e.p)); }},
      {Op::Pad,
       [](E& e) {
         return pad(e.x, {1, -1, 0, 1}, 0.5);
       }},
      {Op::Pow, [](E& e) { return pow(e.pos, e.x); }},
      {Op::ReduceMax, [](E& e) { return reduce_max(e.x, {1}, true); }},
      {Op::ReduceMin, [](E& e) { return reduce_min(e.x, {-1}); }},
      {Op::ReduceSum, [](E& e) { return reduce_sum(e.x, {0}); }},
      {Op::Reshape,
       [](E& e) {
         return reshape(e.x, {3, 2});
       }},
      {Op::ScatterAdd, [](E& e) { return scatter_add(e.x, e.i, gather(e.x, e.i, 1), 1); }},
      {Op::Select, [](E& e) { return select(e.flags, e.x, e.p); }},
      {Op::Silu, [](E& e) { return silu(e.x); }},
      {Op::Slice,
       [](E& e) {
         return slice(e.x, {0, 1}, {2, 3}, {1, 2});
       }},
      {Op::Softmax, [](E& e) { return softmax(e.x); }},
      {Op::Sub, [](E& e) { return e.x - e.p; }},
      {Op::Transpose,
       [](E& e) {
         return transpose(e.x, {1, 0});
       }},
  };
  // The unary ops, from the table: each through the function the table declares for it.
#define KILN_API_Unary(Enum, fn)                                                                           \
  by_op[Op::Enum] = [](E& e) {                                                                             \
    const ir::OperandTypes types = ir::op_operand_types(Op::Enum);                                         \
    return fn(types == ir::OperandTypes::Bool ? e.flags : types == ir::OperandTypes::Float ? e.pos : e.x); \
  };
#define KILN_API_Custom
#define KILN_OP(Enum, name, arity, kind, attrs, operands, math, gradient, api) KILN_API_##api
#include "ir/ops.def"
#undef KILN_OP
#undef KILN_API_Custom
#undef KILN_API_Unary
  std::vector<OpExample> examples;
  for (Op op : ir::all_ops())
    if (by_op.count(op)) examples.push_back({op, by_op[op]});
  return examples;
}

}  // namespace kiln::testing
