// Elementwise ONNX ops: arithmetic and comparisons with numpy broadcasting, activations,
// Cast, Clip, Where.
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "frontends/onnx/ops.h"

namespace kiln::onnx_import {

namespace {

using ir::Op;

// Opsets before 7 broadcast only where the `broadcast` attribute says so (and along
// `axis`, which kiln does not take); from 7 on, as numpy does.
Status check_legacy_broadcast(Context& ctx, const onnx::NodeProto& node) {
  if (ctx.opset() >= 7) return check_attributes(node, {});
  if (attribute(node, "axis")) return node_error(node, "attribute 'axis' (legacy broadcasting) is not supported");
  return check_attributes(node, {"broadcast", "consumed_inputs"});
}

template <Op op>
Status convert_binary(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_legacy_broadcast(ctx, node));
  KILN_ASSIGN_OR_RETURN(Value a, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value b, ctx.input(node, 1));
  KILN_ASSIGN_OR_RETURN(Value r, binary(ctx, node, op, a, b));
  return define_output(ctx, node, 0, r);
}

// Max, Min, Sum: any number of inputs, folded left to right.
template <Op op>
Status convert_variadic(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_legacy_broadcast(ctx, node));
  KILN_ASSIGN_OR_RETURN(Value r, ctx.input(node, 0));
  for (int i = 1; i < node.input_size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value b, ctx.input(node, i));
    KILN_ASSIGN_OR_RETURN(r, binary(ctx, node, op, r, b));
  }
  return define_output(ctx, node, 0, r);
}

Status convert_mean(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_legacy_broadcast(ctx, node));
  KILN_ASSIGN_OR_RETURN(Value sum, ctx.input(node, 0));
  for (int i = 1; i < node.input_size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value b, ctx.input(node, i));
    KILN_ASSIGN_OR_RETURN(sum, binary(ctx, node, Op::Add, sum, b));
  }
  KILN_ASSIGN_OR_RETURN(Value r, binary(ctx, node, Op::Div, sum, scalar(node.input_size(), ctx.type_of(sum).dtype)));
  return define_output(ctx, node, 0, r);
}

// Pow: the exponent may have another type than the base; it is cast to the base's.
Status convert_pow(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_legacy_broadcast(ctx, node));
  KILN_ASSIGN_OR_RETURN(Value a, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value b, ctx.input(node, 1));
  const ir::DType dtype = ctx.type_of(a).dtype;
  if (!ir::is_float(dtype)) return node_error(node, "Pow of an integer base is not supported");
  KILN_ASSIGN_OR_RETURN(b, cast(ctx, node, b, dtype));
  KILN_ASSIGN_OR_RETURN(Value r, binary(ctx, node, Op::Pow, a, b));
  return define_output(ctx, node, 0, r);
}

// Xor of bools: a != b.
Status convert_xor(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_legacy_broadcast(ctx, node));
  KILN_ASSIGN_OR_RETURN(Value a, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value b, ctx.input(node, 1));
  KILN_ASSIGN_OR_RETURN(Value r, binary(ctx, node, Op::Ne, a, b));
  return define_output(ctx, node, 0, r);
}

Status convert_cast_like(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"saturate"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value like, ctx.input(node, 1));
  ir::Attrs attrs;
  attrs.set("to", ctx.type_of(like).dtype);
  KILN_ASSIGN_OR_RETURN(Value r, ctx.apply(node, Op::Cast, {x}, std::move(attrs)));
  return define_output(ctx, node, 0, r);
}

template <Op op>
Status convert_unary(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"consumed_inputs"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value r, ctx.apply(node, op, {x}));
  return define_output(ctx, node, 0, r);
}

Status convert_identity(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  return define_output(ctx, node, 0, x);
}

// f(x) built from x and scalars of x's type.
using Formula = Result<Value> (*)(Context& ctx, const onnx::NodeProto& node, const Value& x);

template <Formula formula>
Status convert_formula(Context& ctx, const onnx::NodeProto& node) {
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value r, formula(ctx, node, x));
  return define_output(ctx, node, 0, r);
}

Result<Value> reciprocal(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  return binary(ctx, node, Op::Div, scalar(1.0, ctx.type_of(x).dtype), x);
}

Result<Value> softplus(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  // log(1 + exp(x)), as max(x, 0) + log(1 + exp(-|x|)) so large x does not overflow.
  KILN_ASSIGN_OR_RETURN(Value ax, ctx.apply(node, Op::Abs, {x}));
  KILN_ASSIGN_OR_RETURN(Value nax, ctx.apply(node, Op::Neg, {ax}));
  KILN_ASSIGN_OR_RETURN(Value e, ctx.apply(node, Op::Exp, {nax}));
  KILN_ASSIGN_OR_RETURN(Value e1, with_scalar(ctx, node, Op::Add, e, 1.0));
  KILN_ASSIGN_OR_RETURN(Value l, ctx.apply(node, Op::Log, {e1}));
  KILN_ASSIGN_OR_RETURN(Value relu, ctx.apply(node, Op::Relu, {x}));
  return ctx.apply(node, Op::Add, {relu, l});
}

Result<Value> thresholded_relu(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"alpha"}));
  KILN_ASSIGN_OR_RETURN(float alpha, float_attribute(node, "alpha", 1.0f));
  KILN_ASSIGN_OR_RETURN(Value above, with_scalar(ctx, node, Op::Gt, x, alpha));
  KILN_ASSIGN_OR_RETURN(Value zero, ctx.broadcast_to(node, scalar(0.0, ctx.type_of(x).dtype), ctx.type_of(x).shape));
  return ctx.apply(node, Op::Select, {above, x, zero});
}

Result<Value> softsign(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  KILN_ASSIGN_OR_RETURN(Value ax, ctx.apply(node, Op::Abs, {x}));
  KILN_ASSIGN_OR_RETURN(Value d, with_scalar(ctx, node, Op::Add, ax, 1.0));
  return ctx.apply(node, Op::Div, {x, d});
}

// where(x > 0, x, negative(x)).
Result<Value> split_at_zero(Context& ctx, const onnx::NodeProto& node, const Value& x, const Value& negative) {
  KILN_ASSIGN_OR_RETURN(Value positive, with_scalar(ctx, node, Op::Gt, x, 0.0));
  return ctx.apply(node, Op::Select, {positive, x, negative});
}

Result<Value> leaky_relu(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"alpha"}));
  KILN_ASSIGN_OR_RETURN(float alpha, float_attribute(node, "alpha", 0.01f));
  KILN_ASSIGN_OR_RETURN(Value scaled, with_scalar(ctx, node, Op::Mul, x, alpha));
  return split_at_zero(ctx, node, x, scaled);
}

// alpha * (exp(x) - 1) where x <= 0.
Result<Value> elu_negative(Context& ctx, const onnx::NodeProto& node, const Value& x, double alpha) {
  KILN_ASSIGN_OR_RETURN(Value e, ctx.apply(node, Op::Exp, {x}));
  KILN_ASSIGN_OR_RETURN(Value em1, with_scalar(ctx, node, Op::Sub, e, 1.0));
  return with_scalar(ctx, node, Op::Mul, em1, alpha);
}

Result<Value> elu(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"alpha"}));
  KILN_ASSIGN_OR_RETURN(float alpha, float_attribute(node, "alpha", 1.0f));
  KILN_ASSIGN_OR_RETURN(Value negative, elu_negative(ctx, node, x, alpha));
  return split_at_zero(ctx, node, x, negative);
}

Result<Value> selu(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"alpha", "gamma"}));
  KILN_ASSIGN_OR_RETURN(float alpha, float_attribute(node, "alpha", 1.67326319217681884765625f));
  KILN_ASSIGN_OR_RETURN(float gamma, float_attribute(node, "gamma", 1.05070102214813232421875f));
  KILN_ASSIGN_OR_RETURN(Value negative, elu_negative(ctx, node, x, alpha));
  KILN_ASSIGN_OR_RETURN(Value e, split_at_zero(ctx, node, x, negative));
  return with_scalar(ctx, node, Op::Mul, e, gamma);
}

// max(0, min(1, alpha * x + beta)).
Result<Value> hard_sigmoid_of(Context& ctx, const onnx::NodeProto& node, const Value& x, double alpha, double beta) {
  KILN_ASSIGN_OR_RETURN(Value ax, with_scalar(ctx, node, Op::Mul, x, alpha));
  KILN_ASSIGN_OR_RETURN(Value axb, with_scalar(ctx, node, Op::Add, ax, beta));
  KILN_ASSIGN_OR_RETURN(Value lo, with_scalar(ctx, node, Op::Minimum, axb, 1.0));
  return with_scalar(ctx, node, Op::Maximum, lo, 0.0);
}

Result<Value> hard_sigmoid(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"alpha", "beta"}));
  KILN_ASSIGN_OR_RETURN(float alpha, float_attribute(node, "alpha", 0.2f));
  KILN_ASSIGN_OR_RETURN(float beta, float_attribute(node, "beta", 0.5f));
  return hard_sigmoid_of(ctx, node, x, alpha, beta);
}

Result<Value> hard_swish(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  KILN_ASSIGN_OR_RETURN(Value h, hard_sigmoid_of(ctx, node, x, 1.0 / 6.0, 0.5));
  return ctx.apply(node, Op::Mul, {x, h});
}

Result<Value> gelu(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"approximate"}));
  KILN_ASSIGN_OR_RETURN(std::string approximate, string_attribute(node, "approximate", "none"));
  if (approximate != "none" && approximate != "tanh")
    return node_error(node, fmt::format("approximate '{}' is neither none nor tanh", approximate));
  ir::Attrs attrs;
  attrs.set("approximate", approximate);
  return ctx.apply(node, Op::Gelu, {x}, std::move(attrs));
}

Result<Value> is_nan(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  return ctx.apply(node, Op::Ne, {x, x});
}

Result<Value> is_inf(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"detect_negative", "detect_positive"}));
  KILN_ASSIGN_OR_RETURN(int64_t negative, int_attribute(node, "detect_negative", 1));
  KILN_ASSIGN_OR_RETURN(int64_t positive, int_attribute(node, "detect_positive", 1));
  const double inf = std::numeric_limits<double>::infinity();
  if (negative && positive) {
    KILN_ASSIGN_OR_RETURN(Value ax, ctx.apply(node, Op::Abs, {x}));
    return with_scalar(ctx, node, Op::Eq, ax, inf);
  }
  return with_scalar(ctx, node, Op::Eq, x, positive ? inf : negative ? -inf : std::nan(""));
}

Status convert_cast(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"to", "saturate"}));
  KILN_ASSIGN_OR_RETURN(int64_t to, int_attribute(node, "to", std::nullopt));
  KILN_ASSIGN_OR_RETURN(ir::DType dtype, dtype_of(static_cast<int32_t>(to), where(node) + "attribute 'to'"));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  ir::Attrs attrs;
  attrs.set("to", dtype);
  KILN_ASSIGN_OR_RETURN(Value r, ctx.apply(node, Op::Cast, {x}, std::move(attrs)));
  return define_output(ctx, node, 0, r);
}

// Clip: bounds as attributes before opset 11, as optional inputs after.
Status convert_clip(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"min", "max"}));
  KILN_ASSIGN_OR_RETURN(Value r, ctx.input(node, 0));
  const ir::DType dtype = ctx.type_of(r).dtype;
  for (int bound = 0; bound < 2; ++bound) {
    std::optional<Value> limit;
    if (ctx.opset() < 11) {
      const char* name = bound == 0 ? "min" : "max";
      if (attribute(node, name)) {
        KILN_ASSIGN_OR_RETURN(float v, float_attribute(node, name, std::nullopt));
        limit = scalar(v, dtype);
      }
    } else if (Context::has_input(node, bound + 1)) {
      KILN_ASSIGN_OR_RETURN(limit, ctx.input(node, bound + 1));
    }
    if (limit) {
      KILN_ASSIGN_OR_RETURN(r, binary(ctx, node, bound == 0 ? Op::Maximum : Op::Minimum, r, *limit));
    }
  }
  return define_output(ctx, node, 0, r);
}

Status convert_where(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  KILN_ASSIGN_OR_RETURN(Value c, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value a, ctx.input(node, 1));
  KILN_ASSIGN_OR_RETURN(Value b, ctx.input(node, 2));
  KILN_ASSIGN_OR_RETURN(auto ab, ctx.broadcast_pair(node, a, b));
  KILN_ASSIGN_OR_RETURN(auto ca, ctx.broadcast_pair(node, c, ab.first));
  KILN_ASSIGN_OR_RETURN(auto cb, ctx.broadcast_pair(node, ca.first, ab.second));
  KILN_ASSIGN_OR_RETURN(Value a2, ctx.broadcast_to(node, ca.second, ctx.type_of(cb.first).shape));
  KILN_ASSIGN_OR_RETURN(Value r, ctx.apply(node, Op::Select, {cb.first, a2, cb.second}));
  return define_output(ctx, node, 0, r);
}

constexpr OpConverter kConverters[] = {
    {"Abs", convert_unary<Op::Abs>},
    {"Add", convert_binary<Op::Add>},
    {"And", convert_binary<Op::And>},
    {"Cast", convert_cast},
    {"CastLike", convert_cast_like},
    {"Ceil", convert_unary<Op::Ceil>},
    {"Clip", convert_clip},
    {"Cos", convert_unary<Op::Cos>},
    {"Div", convert_binary<Op::Div>},
    {"Elu", convert_formula<elu>},
    {"Equal", convert_binary<Op::Eq>},
    {"Erf", convert_unary<Op::Erf>},
    {"Exp", convert_unary<Op::Exp>},
    {"Floor", convert_unary<Op::Floor>},
    {"Gelu", convert_formula<gelu>},
    {"Greater", convert_binary<Op::Gt>},
    {"GreaterOrEqual", convert_binary<Op::Ge>},
    {"HardSigmoid", convert_formula<hard_sigmoid>},
    {"HardSwish", convert_formula<hard_swish>},
    {"Identity", convert_identity},
    {"IsInf", convert_formula<is_inf>},
    {"IsNaN", convert_formula<is_nan>},
    {"LeakyRelu", convert_formula<leaky_relu>},
    {"Less", convert_binary<Op::Lt>},
    {"LessOrEqual", convert_binary<Op::Le>},
    {"Log", convert_unary<Op::Log>},
    {"Max", convert_variadic<Op::Maximum>},
    {"Mean", convert_mean},
    {"Min", convert_variadic<Op::Minimum>},
    {"Mul", convert_binary<Op::Mul>},
    {"Neg", convert_unary<Op::Neg>},
    {"Not", convert_unary<Op::Not>},
    {"Or", convert_binary<Op::Or>},
    {"Pow", convert_pow},
    {"Reciprocal", convert_formula<reciprocal>},
    {"Relu", convert_unary<Op::Relu>},
    {"Selu", convert_formula<selu>},
    {"Sigmoid", convert_unary<Op::Sigmoid>},
    {"Sin", convert_unary<Op::Sin>},
    {"Softplus", convert_formula<softplus>},
    {"Softsign", convert_formula<softsign>},
    {"Sqrt", convert_unary<Op::Sqrt>},
    {"Sub", convert_binary<Op::Sub>},
    {"Sum", convert_variadic<Op::Add>},
    {"Tanh", convert_unary<Op::Tanh>},
    {"ThresholdedRelu", convert_formula<thresholded_relu>},
    {"Where", convert_where},
    {"Xor", convert_xor},
};

}  // namespace

std::span<const OpConverter> elementwise_converters() { return kConverters; }

}  // namespace kiln::onnx_import
