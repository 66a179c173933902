// Shape ONNX ops and constants. Their shape operands must be known at import (constants,
// or folded from constants and static shapes).
#include <numeric>

#include <fmt/format.h>

#include "frontends/onnx/ops.h"

namespace kiln::onnx_import {

namespace {

using ir::Op;

Status convert_constant(Context& ctx, const onnx::NodeProto& node) {
  if (node.attribute_size() != 1) return node_error(node, "expected exactly one value attribute");
  const onnx::AttributeProto& a = node.attribute(0);
  ir::Tensor t;
  if (a.name() == "value" && a.type() == onnx::AttributeProto::TENSOR) {
    KILN_ASSIGN_OR_RETURN(t, tensor_of(a.t()));
  } else if (a.name() == "value_float") {
    t = ir::Tensor::from_doubles({ir::DType::F32, {}}, {a.f()});
  } else if (a.name() == "value_floats") {
    t = ir::Tensor::from_doubles({ir::DType::F32, {a.floats_size()}},
                                 std::vector<double>(a.floats().begin(), a.floats().end()));
  } else if (a.name() == "value_int") {
    t = ir::Tensor::from_ints({ir::DType::I64, {}}, {a.i()});
  } else if (a.name() == "value_ints") {
    t = ir::Tensor::from_ints({ir::DType::I64, {a.ints_size()}},
                              std::vector<int64_t>(a.ints().begin(), a.ints().end()));
  } else {
    return node_error(node, fmt::format("attribute '{}' is not supported", a.name()));
  }
  return define_output(ctx, node, 0, Value{std::nullopt, std::move(t), false, ""});
}

// Reshape: 0 copies the input's dim (unless allowzero), -1 takes what is left.
Status convert_reshape(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"allowzero", "shape"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  std::vector<int64_t> shape;
  if (ctx.opset() < 5) {
    KILN_ASSIGN_OR_RETURN(shape, ints_attribute(node, "shape", std::nullopt));
  } else {
    KILN_ASSIGN_OR_RETURN(shape, constant_ints(ctx, node, 1, "shape"));
  }
  KILN_ASSIGN_OR_RETURN(int64_t allowzero, int_attribute(node, "allowzero", 0));
  const ir::TensorType t = ctx.type_of(x);
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowzero) {
      if (i >= t.shape.size())
        return node_error(node, fmt::format("shape dim {} copies a dim {} lacks", i, t.to_string()));
      shape[i] = t.shape[i];
    }
    if (shape[i] == -1) {
      if (infer >= 0) return node_error(node, "shape has two -1 dims");
      infer = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      return node_error(node, fmt::format("shape has the dim {}", shape[i]));
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || t.num_elements() % known != 0)
      return node_error(node, fmt::format("cannot reshape {} to {}", t.to_string(), ir::shape_string(shape)));
    shape[static_cast<size_t>(infer)] = t.num_elements() / known;
  }
  KILN_ASSIGN_OR_RETURN(Value r, reshaped(ctx, node, x, shape));
  return define_output(ctx, node, 0, r);
}

Status convert_flatten(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axis"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType t = ctx.type_of(x);
  KILN_ASSIGN_OR_RETURN(int64_t axis, int_attribute(node, "axis", 1));
  if (axis < -t.rank() || axis > t.rank())
    return node_error(node, fmt::format("axis {} is out of range for rank {}", axis, t.rank()));
  if (axis < 0) axis += t.rank();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < t.rank(); ++d) (d < axis ? outer : inner) *= t.shape[static_cast<size_t>(d)];
  KILN_ASSIGN_OR_RETURN(Value r, reshaped(ctx, node, x, {outer, inner}));
  return define_output(ctx, node, 0, r);
}

Status convert_transpose(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"perm"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  std::vector<int64_t> reversed(static_cast<size_t>(ctx.type_of(x).rank()));
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  KILN_ASSIGN_OR_RETURN(auto perm, ints_attribute(node, "perm", reversed));
  KILN_ASSIGN_OR_RETURN(Value r, transposed(ctx, node, x, perm));
  return define_output(ctx, node, 0, r);
}

Status convert_squeeze(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axes"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType t = ctx.type_of(x);
  KILN_ASSIGN_OR_RETURN(auto axes, axes_of(ctx, node, 13));
  std::vector<bool> drop(static_cast<size_t>(t.rank()), false);
  if (axes) {
    for (int64_t a : *axes) {
      KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(node, a, t.rank()));
      if (t.shape[static_cast<size_t>(axis)] != 1)
        return node_error(node, fmt::format("cannot squeeze dim {} of {}", axis, t.to_string()));
      drop[static_cast<size_t>(axis)] = true;
    }
  } else {
    for (size_t d = 0; d < drop.size(); ++d) drop[d] = t.shape[d] == 1;
  }
  ir::Shape shape;
  for (size_t d = 0; d < drop.size(); ++d)
    if (!drop[d]) shape.push_back(t.shape[d]);
  KILN_ASSIGN_OR_RETURN(Value r, reshaped(ctx, node, x, shape));
  return define_output(ctx, node, 0, r);
}

Status convert_unsqueeze(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axes"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType t = ctx.type_of(x);
  KILN_ASSIGN_OR_RETURN(auto axes, axes_of(ctx, node, 13));
  if (!axes) return node_error(node, "axes are missing");
  const int64_t rank = t.rank() + static_cast<int64_t>(axes->size());
  std::vector<bool> added(static_cast<size_t>(rank), false);
  for (int64_t a : *axes) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(node, a, rank));
    if (added[static_cast<size_t>(axis)]) return node_error(node, fmt::format("axis {} is given twice", axis));
    added[static_cast<size_t>(axis)] = true;
  }
  ir::Shape shape;
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d) shape.push_back(added[static_cast<size_t>(d)] ? 1 : t.shape[next++]);
  KILN_ASSIGN_OR_RETURN(Value r, reshaped(ctx, node, x, shape));
  return define_output(ctx, node, 0, r);
}

Status convert_concat(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axis"}));
  std::vector<Value> parts;
  for (int i = 0; i < node.input_size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value v, ctx.input(node, i));
    parts.push_back(v);
  }
  if (parts.empty()) return node_error(node, "no inputs");
  KILN_ASSIGN_OR_RETURN(int64_t axis, int_attribute(node, "axis", std::nullopt));
  KILN_ASSIGN_OR_RETURN(axis, normalize_axis(node, axis, ctx.type_of(parts[0]).rank()));
  ir::Attrs attrs;
  attrs.set("axis", axis);
  KILN_ASSIGN_OR_RETURN(
      Value r, parts.size() == 1 ? Result<Value>(parts[0]) : ctx.apply(node, Op::Concat, parts, std::move(attrs)));
  return define_output(ctx, node, 0, r);
}

Status convert_shape(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"start", "end"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::Shape shape = ctx.type_of(x).shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  KILN_ASSIGN_OR_RETURN(int64_t start, int_attribute(node, "start", 0));
  KILN_ASSIGN_OR_RETURN(int64_t end, int_attribute(node, "end", rank));
  auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + rank : i, 0, rank); };
  start = clamp(start), end = std::max(clamp(end), clamp(start));
  std::vector<int64_t> dims(shape.begin() + start, shape.begin() + end);
  const int64_t n = static_cast<int64_t>(dims.size());
  return define_output(ctx, node, 0,
                       Value{std::nullopt, ir::Tensor::from_ints({ir::DType::I64, {n}}, dims), false, ""});
}

Status convert_size(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  return define_output(
      ctx, node, 0,
      Value{std::nullopt, ir::Tensor::from_ints({ir::DType::I64, {}}, {ctx.type_of(x).num_elements()}), false, ""});
}

// NonZero: the indices [rank, count] of the nonzero elements, in row-major order. Its
// shape is the count, so kiln, whose shapes are static, takes it only for a value known
// at import (Longformer's and LED's masks built from constants).
Status convert_non_zero(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  if (!Context::foldable_constant(x))
    return node_error(node,
                      "the input is computed at run time, and the count of its nonzero elements is the output's "
                      "shape; kiln needs it known at import");
  const ir::Tensor& t = *x.constant;
  const ir::Shape& shape = t.type.shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> flat;
  for (int64_t i = 0; i < t.size(); ++i)
    if (t.holds_floats() ? t.get(i) != 0.0 : t.ints[static_cast<size_t>(i)] != 0) flat.push_back(i);
  const auto count = static_cast<int64_t>(flat.size());
  std::vector<int64_t> indices(static_cast<size_t>(std::max<int64_t>(rank, 1) * count));
  for (int64_t k = 0; k < count; ++k) {
    int64_t rest = flat[static_cast<size_t>(k)];
    for (int64_t d = rank - 1; d >= 0; --d) {
      indices[static_cast<size_t>(d * count + k)] = rest % shape[static_cast<size_t>(d)];
      rest /= shape[static_cast<size_t>(d)];
    }
  }
  if (rank == 0) indices.assign(static_cast<size_t>(count), 0);  // a scalar: [1, count] of zeros
  return define_output(
      ctx, node, 0,
      Value{std::nullopt, ir::Tensor::from_ints({ir::DType::I64, {std::max<int64_t>(rank, 1), count}}, indices), false,
            ""});
}

Status convert_constant_of_shape(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"value"}));
  KILN_ASSIGN_OR_RETURN(auto shape, constant_ints(ctx, node, 0, "shape"));
  ir::Tensor fill = ir::Tensor::from_doubles({ir::DType::F32, {}}, {0.0});
  if (const onnx::AttributeProto* a = attribute(node, "value")) {
    KILN_ASSIGN_OR_RETURN(fill, tensor_of(a->t()));
    if (fill.size() != 1) return node_error(node, "value must hold one element");
  }
  ir::Attrs attrs;
  attrs.set("shape", ir::Shape(shape));
  attrs.set("dims", std::vector<int64_t>{});
  ir::Tensor one = fill.holds_floats() ? ir::Tensor::from_doubles({fill.type.dtype, {}}, {fill.get(0)})
                                       : ir::Tensor::from_ints({fill.type.dtype, {}}, {fill.ints[0]});
  KILN_ASSIGN_OR_RETURN(Value r,
                        ctx.apply(node, Op::Broadcast, {Value{std::nullopt, one, false, ""}}, std::move(attrs)));
  return define_output(ctx, node, 0, r);
}

Status convert_expand(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(auto shape, constant_ints(ctx, node, 1, "shape"));
  // Two-way broadcasting: the result's dims are the larger of each pair.
  const ir::Shape xs = ctx.type_of(x).shape;
  const size_t rank = std::max(xs.size(), shape.size());
  ir::Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t a = i + xs.size() >= rank ? xs[i + xs.size() - rank] : 1;
    const int64_t b = i + shape.size() >= rank ? shape[i + shape.size() - rank] : 1;
    if (a != b && a != 1 && b != 1)
      return node_error(node,
                        fmt::format("cannot expand {} to {}", ctx.type_of(x).to_string(), ir::shape_string(shape)));
    out[i] = a == 1 ? b : a;
  }
  KILN_ASSIGN_OR_RETURN(Value r, ctx.broadcast_to(node, x, out));
  return define_output(ctx, node, 0, r);
}

Status convert_gather(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axis"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value indices, ctx.input(node, 1));
  const ir::TensorType t = ctx.type_of(x);
  KILN_ASSIGN_OR_RETURN(int64_t axis, int_attribute(node, "axis", 0));
  KILN_ASSIGN_OR_RETURN(axis, normalize_axis(node, axis, t.rank()));
  const int64_t extent = t.shape[static_cast<size_t>(axis)];
  // Negative indices count from the end (constant ones fold at import).
  KILN_ASSIGN_OR_RETURN(indices, wrap_negative(ctx, node, indices, extent));
  ir::Attrs attrs;
  attrs.set("axis", axis);
  KILN_ASSIGN_OR_RETURN(Value r, ctx.apply(node, Op::Gather, {x, indices}, std::move(attrs)));
  return define_output(ctx, node, 0, r);
}

// Slice: starts, ends, axes and steps as attributes before opset 10, as inputs after.
Status convert_slice(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"starts", "ends", "axes"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType t = ctx.type_of(x);
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    KILN_ASSIGN_OR_RETURN(starts, ints_attribute(node, "starts", std::nullopt));
    KILN_ASSIGN_OR_RETURN(ends, ints_attribute(node, "ends", std::nullopt));
    KILN_ASSIGN_OR_RETURN(axes, ints_attribute(node, "axes", std::vector<int64_t>{}));
  } else {
    KILN_ASSIGN_OR_RETURN(starts, constant_ints(ctx, node, 1, "starts"));
    KILN_ASSIGN_OR_RETURN(ends, constant_ints(ctx, node, 2, "ends"));
    if (Context::has_input(node, 3)) {
      KILN_ASSIGN_OR_RETURN(axes, constant_ints(ctx, node, 3, "axes"));
    }
    if (Context::has_input(node, 4)) {
      KILN_ASSIGN_OR_RETURN(steps, constant_ints(ctx, node, 4, "steps"));
    }
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return node_error(node, "starts, ends, axes and steps differ in length");
  std::vector<int64_t> begin(static_cast<size_t>(t.rank()), 0), end(t.shape.begin(), t.shape.end()),
      stride(static_cast<size_t>(t.rank()), 1);
  // Negative steps: a gather of the indices they walk, from start (clamped to [0, n-1])
  // down to end (clamped to [-1, n-1]).
  for (size_t i = 0; i < starts.size(); ++i) {
    if (steps[i] >= 0) continue;
    KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(node, axes[i], t.rank()));
    const int64_t n = t.shape[static_cast<size_t>(axis)];
    if (n > (int64_t{1} << 24))
      return node_error(node, fmt::format("a negative step along a dim of {} is not supported", n));
    const int64_t from = std::clamp<int64_t>(starts[i] < 0 ? starts[i] + n : starts[i], 0, n - 1);
    const int64_t to = std::clamp<int64_t>(ends[i] < 0 ? ends[i] + n : ends[i], -1, n - 1);
    std::vector<int64_t> walk;
    for (int64_t j = from; j > to && n > 0; j += steps[i]) walk.push_back(j);
    ir::Attrs gather;
    gather.set("axis", axis);
    const int64_t m = static_cast<int64_t>(walk.size());
    KILN_ASSIGN_OR_RETURN(
        x, ctx.apply(node, Op::Gather,
                     {x, Value{std::nullopt, ir::Tensor::from_ints({ir::DType::I64, {m}}, walk), false, ""}},
                     std::move(gather)));
    starts[i] = 0, ends[i] = m, steps[i] = 1;
  }
  const ir::TensorType walked = ctx.type_of(x);
  end.assign(walked.shape.begin(), walked.shape.end());
  for (size_t i = 0; i < starts.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(node, axes[i], t.rank()));
    const int64_t n = walked.shape[static_cast<size_t>(axis)];
    if (steps[i] == 0) return node_error(node, fmt::format("the step along axis {} is 0; a step is never 0", axis));
    auto clamp = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
    begin[static_cast<size_t>(axis)] = clamp(starts[i]);
    end[static_cast<size_t>(axis)] = std::max(clamp(ends[i]), clamp(starts[i]));
    stride[static_cast<size_t>(axis)] = steps[i];
  }
  ir::Attrs attrs;
  attrs.set("starts", begin);
  attrs.set("ends", end);
  attrs.set("strides", stride);
  KILN_ASSIGN_OR_RETURN(Value r, ctx.apply(node, Op::Slice, {x}, std::move(attrs)));
  return define_output(ctx, node, 0, r);
}

constexpr OpConverter kConverters[] = {
    {"Concat", convert_concat},       {"Constant", convert_constant},   {"ConstantOfShape", convert_constant_of_shape},
    {"Expand", convert_expand},       {"Flatten", convert_flatten},     {"Gather", convert_gather},
    {"NonZero", convert_non_zero},    {"Reshape", convert_reshape},     {"Shape", convert_shape},
    {"Size", convert_size},           {"Slice", convert_slice},         {"Squeeze", convert_squeeze},
    {"Transpose", convert_transpose}, {"Unsqueeze", convert_unsqueeze},
};

}  // namespace

std::span<const OpConverter> shape_converters() { return kConverters; }

}  // namespace kiln::onnx_import
