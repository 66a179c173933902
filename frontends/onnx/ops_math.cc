// Elementwise ONNX ops written as formulas of kiln's primitives: the hyperbolic functions,
// Tan, Sign, Round, Mod, Shrink, Celu.
#include <fmt/format.h>

#include "frontends/onnx/ops.h"

namespace kiln::onnx_import {

namespace {

using ir::Op;

Result<Value> unary(Context& ctx, const onnx::NodeProto& node, Op op, const Value& x) {
  return ctx.apply(node, op, {x});
}

using Formula = Result<Value> (*)(Context&, const onnx::NodeProto&, const Value&);

template <Formula formula>
Status convert(Context& ctx, const onnx::NodeProto& node) {
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  if (!ir::is_float(ctx.type_of(x).dtype) && node.op_type() != "Sign" && node.op_type() != "Shrink")
    return node_error(
        node, fmt::format("{} of {} is not supported (only floats)", node.op_type(), ctx.type_of(x).to_string()));
  KILN_ASSIGN_OR_RETURN(Value r, formula(ctx, node, x));
  return define_output(ctx, node, 0, r);
}

// (exp(x) -+ exp(-x)) / 2.
template <bool plus>
Result<Value> hyperbolic(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  KILN_ASSIGN_OR_RETURN(Value e, unary(ctx, node, Op::Exp, x));
  KILN_ASSIGN_OR_RETURN(Value nx, unary(ctx, node, Op::Neg, x));
  KILN_ASSIGN_OR_RETURN(Value en, unary(ctx, node, Op::Exp, nx));
  KILN_ASSIGN_OR_RETURN(Value s, ctx.apply(node, plus ? Op::Add : Op::Sub, {e, en}));
  return with_scalar(ctx, node, Op::Mul, s, 0.5);
}

// asinh(x) = log(x + sqrt(x² + 1)); acosh(x) = log(x + sqrt(x² - 1)).
template <bool plus>
Result<Value> inverse_hyperbolic(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  KILN_ASSIGN_OR_RETURN(Value sq, ctx.apply(node, Op::Mul, {x, x}));
  KILN_ASSIGN_OR_RETURN(Value shifted, with_scalar(ctx, node, plus ? Op::Add : Op::Sub, sq, 1.0));
  KILN_ASSIGN_OR_RETURN(Value root, unary(ctx, node, Op::Sqrt, shifted));
  KILN_ASSIGN_OR_RETURN(Value sum, ctx.apply(node, Op::Add, {x, root}));
  return unary(ctx, node, Op::Log, sum);
}

// atanh(x) = log((1 + x) / (1 - x)) / 2.
Result<Value> atanh(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  KILN_ASSIGN_OR_RETURN(Value up, with_scalar(ctx, node, Op::Add, x, 1.0));
  KILN_ASSIGN_OR_RETURN(Value nx, unary(ctx, node, Op::Neg, x));
  KILN_ASSIGN_OR_RETURN(Value down, with_scalar(ctx, node, Op::Add, nx, 1.0));
  KILN_ASSIGN_OR_RETURN(Value q, ctx.apply(node, Op::Div, {up, down}));
  KILN_ASSIGN_OR_RETURN(Value l, unary(ctx, node, Op::Log, q));
  return with_scalar(ctx, node, Op::Mul, l, 0.5);
}

Result<Value> tan(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  KILN_ASSIGN_OR_RETURN(Value s, unary(ctx, node, Op::Sin, x));
  KILN_ASSIGN_OR_RETURN(Value c, unary(ctx, node, Op::Cos, x));
  return ctx.apply(node, Op::Div, {s, c});
}

// sign(x): (x > 0) - (x < 0), in x's type.
Result<Value> sign(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  const ir::DType t = ctx.type_of(x).dtype;
  KILN_ASSIGN_OR_RETURN(Value pos, with_scalar(ctx, node, Op::Gt, x, 0.0));
  KILN_ASSIGN_OR_RETURN(Value neg, with_scalar(ctx, node, Op::Lt, x, 0.0));
  KILN_ASSIGN_OR_RETURN(Value p, cast(ctx, node, pos, t));
  KILN_ASSIGN_OR_RETURN(Value n, cast(ctx, node, neg, t));
  return ctx.apply(node, Op::Sub, {p, n});
}

Result<Value> round(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  return round_half_to_even(ctx, node, x);
}

Result<Value> shrink(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"bias", "lambd"}));
  KILN_ASSIGN_OR_RETURN(float bias, float_attribute(node, "bias", 0.0f));
  KILN_ASSIGN_OR_RETURN(float lambd, float_attribute(node, "lambd", 0.5f));
  KILN_ASSIGN_OR_RETURN(Value low, with_scalar(ctx, node, Op::Lt, x, -lambd));
  KILN_ASSIGN_OR_RETURN(Value high, with_scalar(ctx, node, Op::Gt, x, lambd));
  KILN_ASSIGN_OR_RETURN(Value plus, with_scalar(ctx, node, Op::Add, x, bias));
  KILN_ASSIGN_OR_RETURN(Value minus, with_scalar(ctx, node, Op::Sub, x, bias));
  KILN_ASSIGN_OR_RETURN(Value zero, ctx.broadcast_to(node, scalar(0.0, ctx.type_of(x).dtype), ctx.type_of(x).shape));
  KILN_ASSIGN_OR_RETURN(Value upper, ctx.apply(node, Op::Select, {high, minus, zero}));
  return ctx.apply(node, Op::Select, {low, plus, upper});
}

// celu(x) = max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
Result<Value> celu(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"alpha"}));
  KILN_ASSIGN_OR_RETURN(float alpha, float_attribute(node, "alpha", 1.0f));
  KILN_ASSIGN_OR_RETURN(Value scaled, with_scalar(ctx, node, Op::Div, x, alpha));
  KILN_ASSIGN_OR_RETURN(Value e, unary(ctx, node, Op::Exp, scaled));
  KILN_ASSIGN_OR_RETURN(Value em1, with_scalar(ctx, node, Op::Sub, e, 1.0));
  KILN_ASSIGN_OR_RETURN(Value neg, with_scalar(ctx, node, Op::Mul, em1, alpha));
  KILN_ASSIGN_OR_RETURN(Value low, with_scalar(ctx, node, Op::Minimum, neg, 0.0));
  KILN_ASSIGN_OR_RETURN(Value high, unary(ctx, node, Op::Relu, x));
  return ctx.apply(node, Op::Add, {high, low});
}

// Mod: fmod=1 is C's fmod (the sign of x); fmod=0, integers only, Python's % (the sign of y).
// Both from the truncated remainder x - y * trunc(x / y).
Status convert_mod(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"fmod"}));
  KILN_ASSIGN_OR_RETURN(int64_t fmod, int_attribute(node, "fmod", 0));
  KILN_ASSIGN_OR_RETURN(Value a, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value b, ctx.input(node, 1));
  KILN_ASSIGN_OR_RETURN(auto ab, ctx.broadcast_pair(node, a, b));
  const auto& [x, y] = ab;
  const ir::DType t = ctx.type_of(x).dtype;
  const bool is_float = ir::is_float(t);
  if (is_float && !fmod) return node_error(node, "fmod 0 on floats is not allowed by ONNX");
  KILN_ASSIGN_OR_RETURN(Value q, ctx.apply(node, Op::Div, {x, y}));
  if (is_float) {  // trunc(q) = q < 0 ? ceil(q) : floor(q)
    KILN_ASSIGN_OR_RETURN(Value neg, with_scalar(ctx, node, Op::Lt, q, 0.0));
    KILN_ASSIGN_OR_RETURN(Value c, unary(ctx, node, Op::Ceil, q));
    KILN_ASSIGN_OR_RETURN(Value f, unary(ctx, node, Op::Floor, q));
    KILN_ASSIGN_OR_RETURN(q, ctx.apply(node, Op::Select, {neg, c, f}));
  }
  KILN_ASSIGN_OR_RETURN(Value yq, ctx.apply(node, Op::Mul, {y, q}));
  KILN_ASSIGN_OR_RETURN(Value r, ctx.apply(node, Op::Sub, {x, yq}));
  if (!fmod) {  // where r != 0 and its sign differs from y's, r + y
    KILN_ASSIGN_OR_RETURN(Value nonzero, with_scalar(ctx, node, Op::Ne, r, 0.0));
    KILN_ASSIGN_OR_RETURN(Value r_neg, with_scalar(ctx, node, Op::Lt, r, 0.0));
    KILN_ASSIGN_OR_RETURN(Value y_neg, with_scalar(ctx, node, Op::Lt, y, 0.0));
    KILN_ASSIGN_OR_RETURN(Value differ, ctx.apply(node, Op::Ne, {r_neg, y_neg}));
    KILN_ASSIGN_OR_RETURN(Value fix, ctx.apply(node, Op::And, {nonzero, differ}));
    KILN_ASSIGN_OR_RETURN(Value shifted, ctx.apply(node, Op::Add, {r, y}));
    KILN_ASSIGN_OR_RETURN(r, ctx.apply(node, Op::Select, {fix, shifted, r}));
  }
  return define_output(ctx, node, 0, r);
}

constexpr OpConverter kConverters[] = {
    {"Acosh", convert<inverse_hyperbolic<false>>},
    {"Asinh", convert<inverse_hyperbolic<true>>},
    {"Atanh", convert<atanh>},
    {"Celu", convert<celu>},
    {"Cosh", convert<hyperbolic<true>>},
    {"Mod", convert_mod},
    {"Round", convert<round>},
    {"Shrink", convert<shrink>},
    {"Sign", convert<sign>},
    {"Sinh", convert<hyperbolic<false>>},
    {"Tan", convert<tan>},
};

}  // namespace

std::span<const OpConverter> math_converters() { return kConverters; }

}  // namespace kiln::onnx_import
