// Normalization ONNX ops: BatchNormalization (inference), LayerNormalization,
// InstanceNormalization, MeanVarianceNormalization.
#include <fmt/format.h>

#include "frontends/onnx/ops.h"

namespace kiln::onnx_import {

namespace {

using ir::Op;

// (x - mean) / sqrt(var + epsilon) over `axes` (kept as dims of 1), with the mean and
// 1 / sqrt(var + epsilon) it used.
struct Normalized {
  Value y, mean, inv_std;
};

Result<Normalized> normalize(Context& ctx, const onnx::NodeProto& node, const Value& x,
                             const std::vector<int64_t>& axes, double epsilon) {
  const ir::TensorType t = ctx.type_of(x);
  int64_t count = 1;
  for (int64_t a : axes) count *= t.shape[static_cast<size_t>(a)];
  auto mean_of = [&](const Value& v) -> Result<Value> {
    ir::Attrs attrs;
    attrs.set("axes", axes);
    attrs.set("keepdims", true);
    KILN_ASSIGN_OR_RETURN(Value sum, ctx.apply(node, Op::ReduceSum, {v}, std::move(attrs)));
    return binary(ctx, node, Op::Div, sum, scalar(static_cast<double>(count), t.dtype));
  };
  Normalized n;
  KILN_ASSIGN_OR_RETURN(n.mean, mean_of(x));
  KILN_ASSIGN_OR_RETURN(Value centered, binary(ctx, node, Op::Sub, x, n.mean));
  KILN_ASSIGN_OR_RETURN(Value squares, ctx.apply(node, Op::Mul, {centered, centered}));
  KILN_ASSIGN_OR_RETURN(Value variance, mean_of(squares));
  KILN_ASSIGN_OR_RETURN(Value shifted, binary(ctx, node, Op::Add, variance, scalar(epsilon, t.dtype)));
  KILN_ASSIGN_OR_RETURN(n.inv_std, ctx.apply(node, Op::Rsqrt, {shifted}));
  KILN_ASSIGN_OR_RETURN(n.y, binary(ctx, node, Op::Mul, centered, n.inv_std));
  return n;
}

Status convert_batch_norm(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(
      check_attributes(node, {"epsilon", "momentum", "spatial", "training_mode", "consumed_inputs", "is_test"}));
  KILN_ASSIGN_OR_RETURN(int64_t training, int_attribute(node, "training_mode", 0));
  if (training != 0 || node.output_size() > 1)
    return node_error(node,
                      "training mode (batch statistics, running-mean outputs) is not supported; export for inference");
  KILN_ASSIGN_OR_RETURN(int64_t spatial, int_attribute(node, "spatial", 1));
  if (spatial != 1) return node_error(node, "spatial 0 is not supported");
  KILN_ASSIGN_OR_RETURN(float epsilon, float_attribute(node, "epsilon", 1e-5f));
  std::vector<Value> operands;
  for (int i = 0; i < 5; ++i) {
    KILN_ASSIGN_OR_RETURN(Value v, ctx.input(node, i));
    operands.push_back(v);
  }
  ir::Attrs attrs;
  attrs.set("epsilon", static_cast<double>(epsilon));
  KILN_ASSIGN_OR_RETURN(Value y, ctx.apply(node, Op::BatchNorm, operands, std::move(attrs)));
  return define_output(ctx, node, 0, y);
}

// LayerNormalization over the dims from `axis` on, computed in stash_type (FLOAT unless
// the node says otherwise) where that is wider than x's type: an f16 or bf16 x is widened
// to f32, normalized, scaled and shifted there and rounded once, as onnxruntime does (the
// op's function body rounds the normalized value before the scale: a unit apart at most),
// so that a row whose values differ by more than 256 keeps a finite f16 variance. Mean
// and InvStdDev come out in that type. kiln's layer_norm, or written out where those two
// outputs are asked for.
Status convert_layer_norm(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axis", "epsilon", "stash_type"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value scale, ctx.input(node, 1));
  const ir::TensorType t = ctx.type_of(x);
  KILN_ASSIGN_OR_RETURN(int64_t axis, int_attribute(node, "axis", -1));
  KILN_ASSIGN_OR_RETURN(axis, normalize_axis(node, axis, t.rank()));
  KILN_ASSIGN_OR_RETURN(float epsilon, float_attribute(node, "epsilon", 1e-5f));
  KILN_ASSIGN_OR_RETURN(int64_t stash_type, int_attribute(node, "stash_type", 1));
  KILN_ASSIGN_OR_RETURN(ir::DType stash,
                        dtype_of(static_cast<int32_t>(stash_type), where(node) + "attribute 'stash_type'"));
  if (!ir::is_float(stash))
    return node_error(node, fmt::format("stash_type is {}, not a floating-point type", ir::dtype_name(stash)));
  const ir::DType compute = ir::dtype_size(stash) > ir::dtype_size(t.dtype) ? stash : t.dtype;
  KILN_ASSIGN_OR_RETURN(x, cast(ctx, node, x, compute));
  const ir::Shape norm(t.shape.begin() + axis, t.shape.end());
  KILN_ASSIGN_OR_RETURN(scale, ctx.broadcast_to(node, scale, norm));
  KILN_ASSIGN_OR_RETURN(scale, cast(ctx, node, scale, compute));
  Value bias = scalar(0.0, compute);
  if (Context::has_input(node, 2)) {
    KILN_ASSIGN_OR_RETURN(bias, ctx.input(node, 2));
    KILN_ASSIGN_OR_RETURN(bias, cast(ctx, node, bias, compute));
  }
  KILN_ASSIGN_OR_RETURN(bias, ctx.broadcast_to(node, bias, norm));
  const bool statistics =
      (node.output_size() > 1 && !node.output(1).empty()) || (node.output_size() > 2 && !node.output(2).empty());
  if (!statistics) {
    ir::Attrs attrs;
    attrs.set("axis", axis);
    attrs.set("eps", static_cast<double>(epsilon));
    KILN_ASSIGN_OR_RETURN(Value y, ctx.apply(node, Op::LayerNorm, {x, scale, bias}, std::move(attrs)));
    KILN_ASSIGN_OR_RETURN(y, cast(ctx, node, y, t.dtype));
    return define_output(ctx, node, 0, y);
  }
  std::vector<int64_t> axes;
  for (int64_t d = axis; d < t.rank(); ++d) axes.push_back(d);
  KILN_ASSIGN_OR_RETURN(Normalized n, normalize(ctx, node, x, axes, epsilon));
  KILN_ASSIGN_OR_RETURN(Value scaled, binary(ctx, node, Op::Mul, n.y, scale));
  KILN_ASSIGN_OR_RETURN(Value y, binary(ctx, node, Op::Add, scaled, bias));
  KILN_ASSIGN_OR_RETURN(y, cast(ctx, node, y, t.dtype));
  KILN_RETURN_IF_ERROR(define_output(ctx, node, 0, y));
  KILN_RETURN_IF_ERROR(define_output(ctx, node, 1, n.mean));
  return define_output(ctx, node, 2, n.inv_std);
}

// InstanceNormalization: over each (n, c)'s spatial dims, then scale[c] and B[c]; an f16
// or bf16 x in f32, rounded once.
Status convert_instance_norm(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"epsilon"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value scale, ctx.input(node, 1));
  KILN_ASSIGN_OR_RETURN(Value bias, ctx.input(node, 2));
  const ir::TensorType t = ctx.type_of(x);
  const ir::DType compute = wide_type(t.dtype);
  KILN_ASSIGN_OR_RETURN(x, cast(ctx, node, x, compute));
  KILN_ASSIGN_OR_RETURN(scale, cast(ctx, node, scale, compute));
  KILN_ASSIGN_OR_RETURN(bias, cast(ctx, node, bias, compute));
  if (t.rank() < 3) return node_error(node, fmt::format("expected [N, C, D...], got {}", t.to_string()));
  KILN_ASSIGN_OR_RETURN(float epsilon, float_attribute(node, "epsilon", 1e-5f));
  std::vector<int64_t> axes;
  for (int64_t d = 2; d < t.rank(); ++d) axes.push_back(d);
  KILN_ASSIGN_OR_RETURN(Normalized n, normalize(ctx, node, x, axes, epsilon));
  ir::Shape per_channel(static_cast<size_t>(t.rank()), 1);
  per_channel[1] = t.shape[1];
  KILN_ASSIGN_OR_RETURN(scale, reshaped(ctx, node, scale, per_channel));
  KILN_ASSIGN_OR_RETURN(bias, reshaped(ctx, node, bias, per_channel));
  KILN_ASSIGN_OR_RETURN(Value scaled, binary(ctx, node, Op::Mul, n.y, scale));
  KILN_ASSIGN_OR_RETURN(Value y, binary(ctx, node, Op::Add, scaled, bias));
  KILN_ASSIGN_OR_RETURN(y, cast(ctx, node, y, t.dtype));
  return define_output(ctx, node, 0, y);
}

// MeanVarianceNormalization over `axes` (default [0, 2, 3]); ONNX's function adds 1e-9.
// An f16 or bf16 x in f32, rounded once.
Status convert_mvn(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axes"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const int64_t rank = ctx.type_of(x).rank();
  KILN_ASSIGN_OR_RETURN(auto given, ints_attribute(node, "axes", std::vector<int64_t>{0, 2, 3}));
  std::vector<int64_t> axes;
  for (int64_t a : given) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(node, a, rank));
    axes.push_back(axis);
  }
  std::sort(axes.begin(), axes.end());
  const ir::DType dtype = ctx.type_of(x).dtype;
  KILN_ASSIGN_OR_RETURN(x, widened(ctx, node, x));
  KILN_ASSIGN_OR_RETURN(Normalized n, normalize(ctx, node, x, axes, 1e-9));
  KILN_ASSIGN_OR_RETURN(Value y, cast(ctx, node, n.y, dtype));
  return define_output(ctx, node, 0, y);
}

constexpr OpConverter kConverters[] = {
    {"BatchNormalization", convert_batch_norm},
    {"InstanceNormalization", convert_instance_norm},
    {"LayerNormalization", convert_layer_norm},
    {"MeanVarianceNormalization", convert_mvn},
};

}  // namespace

std::span<const OpConverter> norm_converters() { return kConverters; }

}  // namespace kiln::onnx_import
