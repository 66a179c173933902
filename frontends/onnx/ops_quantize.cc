// Linear quantization: QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear, written with kiln's primitives
// (the byte types i8 and u8, round half to even, and casts, which saturate).
#include <fmt/format.h>

#include "frontends/onnx/ops.h"

namespace kiln::onnx_import {

namespace {

using ir::Op;

// A scale or zero point as an operand of x's rank: a scalar as it is, a 1-D one of x's
// extent at `axis` (per-axis quantization; the axis matters only then) reshaped to lie
// along that axis.
Result<Value> along_axis(Context& ctx, const onnx::NodeProto& node, const Value& v, const ir::Shape& x_shape,
                         int64_t axis, const char* what) {
  const ir::TensorType t = ctx.type_of(v);
  if (t.rank() == 0 || (t.rank() == 1 && t.shape[0] == 1)) return v;
  KILN_ASSIGN_OR_RETURN(axis, normalize_axis(node, axis, static_cast<int64_t>(x_shape.size())));
  if (t.rank() != 1 || t.shape[0] != x_shape[static_cast<size_t>(axis)])
    return node_error(node, fmt::format("the {} {} is neither a scalar nor one value per element of axis {} of {}",
                                        what, t.to_string(), axis, ir::shape_string(x_shape)));
  ir::Shape along(x_shape.size(), 1);
  along[static_cast<size_t>(axis)] = t.shape[0];
  return reshaped(ctx, node, v, along);
}

// y = saturate(round_half_to_even(x / scale) + zero_point), in the zero point's type (u8
// when there is none); kiln's cast from a float to a byte saturates.
Status quantize_linear(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axis"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value scale, ctx.input(node, 1));
  const ir::TensorType xt = ctx.type_of(x);
  if (!ir::is_float(xt.dtype) || ctx.type_of(scale).dtype != xt.dtype)
    return node_error(node, fmt::format("expected a floating-point input and a scale of its type, got {} and {}",
                                        xt.to_string(), ctx.type_of(scale).to_string()));
  KILN_ASSIGN_OR_RETURN(int64_t axis, int_attribute(node, "axis", 1));
  ir::DType to = ir::DType::U8;
  std::optional<Value> zero_point;
  if (Context::has_input(node, 2)) {
    KILN_ASSIGN_OR_RETURN(Value zp, ctx.input(node, 2));
    to = ctx.type_of(zp).dtype;
    if (to != ir::DType::U8 && to != ir::DType::I8)
      return node_error(node,
                        fmt::format("the zero point is {}; kiln quantizes to u8 and i8", ctx.type_of(zp).to_string()));
    KILN_ASSIGN_OR_RETURN(Value as_float, cast(ctx, node, zp, xt.dtype));
    KILN_ASSIGN_OR_RETURN(zero_point, along_axis(ctx, node, as_float, xt.shape, axis, "zero point"));
  }
  KILN_ASSIGN_OR_RETURN(Value s, along_axis(ctx, node, scale, xt.shape, axis, "scale"));
  KILN_ASSIGN_OR_RETURN(Value scaled, binary(ctx, node, Op::Div, x, s));
  KILN_ASSIGN_OR_RETURN(Value q, round_half_to_even(ctx, node, scaled));
  if (zero_point) {
    KILN_ASSIGN_OR_RETURN(q, binary(ctx, node, Op::Add, q, *zero_point));
  }
  KILN_ASSIGN_OR_RETURN(Value y, cast(ctx, node, q, to));  // a float to a byte saturates
  return define_output(ctx, node, 0, y);
}

// y = (x - zero_point) * scale, in the scale's type.
Status dequantize_linear(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axis"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value scale, ctx.input(node, 1));
  const ir::TensorType xt = ctx.type_of(x);
  const ir::DType to = ctx.type_of(scale).dtype;
  if (!ir::is_int(xt.dtype) || !ir::is_float(to))
    return node_error(node, fmt::format("expected an integer input and a floating-point scale, got {} and {}",
                                        xt.to_string(), ctx.type_of(scale).to_string()));
  KILN_ASSIGN_OR_RETURN(int64_t axis, int_attribute(node, "axis", 1));
  KILN_ASSIGN_OR_RETURN(Value y, cast(ctx, node, x, to));
  if (Context::has_input(node, 2)) {
    KILN_ASSIGN_OR_RETURN(Value zp, ctx.input(node, 2));
    if (ctx.type_of(zp).dtype != xt.dtype)
      return node_error(node, fmt::format("the zero point {} is not of the input's type {}",
                                          ctx.type_of(zp).to_string(), xt.to_string()));
    KILN_ASSIGN_OR_RETURN(Value as_float, cast(ctx, node, zp, to));
    KILN_ASSIGN_OR_RETURN(Value along, along_axis(ctx, node, as_float, xt.shape, axis, "zero point"));
    KILN_ASSIGN_OR_RETURN(y, binary(ctx, node, Op::Sub, y, along));
  }
  KILN_ASSIGN_OR_RETURN(Value s, along_axis(ctx, node, scale, xt.shape, axis, "scale"));
  KILN_ASSIGN_OR_RETURN(Value out, binary(ctx, node, Op::Mul, y, s));
  return define_output(ctx, node, 0, out);
}

// u8 quantization of x with a scale and zero point from its range, which always holds 0:
// scale = (max(x, 0) - min(x, 0)) / 255, zero point = saturate(round(-min(x, 0) / scale)).
Status dynamic_quantize_linear(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType xt = ctx.type_of(x);
  if (xt.dtype != ir::DType::F32) return node_error(node, fmt::format("expected an f32 input, got {}", xt.to_string()));
  std::vector<int64_t> axes(static_cast<size_t>(xt.rank()));
  for (int64_t d = 0; d < xt.rank(); ++d) axes[static_cast<size_t>(d)] = d;
  ir::Attrs all;
  all.set("axes", std::move(axes));
  KILN_ASSIGN_OR_RETURN(Value max, ctx.apply(node, Op::ReduceMax, {x}, all));
  KILN_ASSIGN_OR_RETURN(Value min, ctx.apply(node, Op::ReduceMin, {x}, all));
  KILN_ASSIGN_OR_RETURN(Value high, with_scalar(ctx, node, Op::Maximum, max, 0.0));
  KILN_ASSIGN_OR_RETURN(Value low, with_scalar(ctx, node, Op::Minimum, min, 0.0));
  KILN_ASSIGN_OR_RETURN(Value range, ctx.apply(node, Op::Sub, {high, low}));
  KILN_ASSIGN_OR_RETURN(Value scale, with_scalar(ctx, node, Op::Div, range, 255.0));
  // -min(x, 0) <= the range, so the zero point lies in [0, 255] before any saturation.
  KILN_ASSIGN_OR_RETURN(Value neg_low, ctx.apply(node, Op::Neg, {low}));
  KILN_ASSIGN_OR_RETURN(Value zp_unrounded, ctx.apply(node, Op::Div, {neg_low, scale}));
  KILN_ASSIGN_OR_RETURN(Value zp, round_half_to_even(ctx, node, zp_unrounded));
  KILN_ASSIGN_OR_RETURN(Value scaled, binary(ctx, node, Op::Div, x, scale));
  KILN_ASSIGN_OR_RETURN(Value rounded, round_half_to_even(ctx, node, scaled));
  KILN_ASSIGN_OR_RETURN(Value shifted, binary(ctx, node, Op::Add, rounded, zp));
  KILN_ASSIGN_OR_RETURN(Value y, cast(ctx, node, shifted, ir::DType::U8));  // saturating
  KILN_ASSIGN_OR_RETURN(Value zero_point, cast(ctx, node, zp, ir::DType::U8));
  KILN_RETURN_IF_ERROR(define_output(ctx, node, 0, y));
  KILN_RETURN_IF_ERROR(define_output(ctx, node, 1, scale));
  return define_output(ctx, node, 2, zero_point);
}

constexpr OpConverter kConverters[] = {
    {"DequantizeLinear", dequantize_linear},
    {"DynamicQuantizeLinear", dynamic_quantize_linear},
    {"QuantizeLinear", quantize_linear},
};

}  // namespace

std::span<const OpConverter> quantize_converters() { return kConverters; }

}  // namespace kiln::onnx_import
