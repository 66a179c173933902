// ONNX ops built on one-hot comparisons with an iota: GatherElements, OneHot, Hardmax,
// EyeLike; and CumSum as a scan of log2(n) shifted adds.
#include <fmt/format.h>

#include "frontends/onnx/ops.h"

namespace kiln::onnx_import {

namespace {

using ir::Op;

// out[p] = x[p with p[axis] = indices[p]]: x's dims other than the axis cut to the indices',
// the axis moved last and every index compared with an iota over it.
Status convert_gather_elements(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axis"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value indices, ctx.input(node, 1));
  const ir::TensorType xt = ctx.type_of(x), it = ctx.type_of(indices);
  if (xt.rank() != it.rank() || xt.rank() == 0)
    return node_error(node, fmt::format("data {} and indices {} differ in rank", xt.to_string(), it.to_string()));
  KILN_ASSIGN_OR_RETURN(int64_t axis, int_attribute(node, "axis", 0));
  KILN_ASSIGN_OR_RETURN(axis, normalize_axis(node, axis, xt.rank()));
  const size_t a = static_cast<size_t>(axis), rank = static_cast<size_t>(xt.rank());
  const int64_t n = xt.shape[a];
  std::vector<int64_t> starts(rank, 0), ends(it.shape.begin(), it.shape.end());
  ends[a] = n;
  for (size_t d = 0; d < rank; ++d)
    if (ends[d] > xt.shape[d])
      return node_error(node, fmt::format("indices {} do not fit data {}", it.to_string(), xt.to_string()));
  ir::Attrs slice;
  slice.set("starts", starts);
  slice.set("ends", ends);
  KILN_ASSIGN_OR_RETURN(Value cut, ctx.apply(node, Op::Slice, {x}, std::move(slice)));
  KILN_ASSIGN_OR_RETURN(Value last, transposed(ctx, node, cut, axis_last(xt.rank(), axis).to_last));  // [others..., n]
  ir::Shape wide(it.shape.begin(), it.shape.end());
  wide.push_back(n);
  std::vector<int64_t> dims;
  for (size_t d = 0; d < rank; ++d)
    if (d != a) dims.push_back(static_cast<int64_t>(d));
  dims.push_back(static_cast<int64_t>(rank));
  ir::Attrs spread;
  spread.set("shape", wide);
  spread.set("dims", dims);
  KILN_ASSIGN_OR_RETURN(Value table, ctx.apply(node, Op::Broadcast, {last}, std::move(spread)));  // [indices..., n]
  KILN_ASSIGN_OR_RETURN(Value k, wrap_negative(ctx, node, indices, n));
  ir::Shape with_one(it.shape.begin(), it.shape.end());
  with_one.push_back(1);
  KILN_ASSIGN_OR_RETURN(Value k1, reshaped(ctx, node, k, with_one));
  KILN_ASSIGN_OR_RETURN(Value kw, ctx.broadcast_to(node, k1, wide));
  KILN_ASSIGN_OR_RETURN(Value positions, iota(ctx, node, wide, static_cast<int64_t>(rank), it.dtype));
  KILN_ASSIGN_OR_RETURN(Value hit, ctx.apply(node, Op::Eq, {positions, kw}));
  KILN_ASSIGN_OR_RETURN(Value zeros, ctx.broadcast_to(node, scalar(0.0, xt.dtype), wide));
  KILN_ASSIGN_OR_RETURN(Value picked, ctx.apply(node, Op::Select, {hit, table, zeros}));
  ir::Attrs sum;
  sum.set("axes", std::vector<int64_t>{static_cast<int64_t>(rank)});
  sum.set("keepdims", false);
  if (xt.dtype == ir::DType::Bool) return node_error(node, "GatherElements of bool data is not supported");
  KILN_ASSIGN_OR_RETURN(Value r, ctx.apply(node, Op::ReduceSum, {picked}, std::move(sum)));
  return define_output(ctx, node, 0, r);
}

// OneHot(indices, depth, values = [off, on]) {axis = -1}.
Status convert_one_hot(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axis"}));
  KILN_ASSIGN_OR_RETURN(Value indices, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(auto depths, constant_ints(ctx, node, 1, "depth"));
  KILN_ASSIGN_OR_RETURN(Value values, ctx.input(node, 2));
  if (depths.size() != 1 || depths[0] < 1) return node_error(node, "depth must be one positive number");
  if (!values.constant || values.constant->size() != 2)
    return node_error(node, "values must be [off, on] computed at import; kiln needs it known at import");
  const ir::TensorType it = ctx.type_of(indices);
  KILN_ASSIGN_OR_RETURN(int64_t axis, int_attribute(node, "axis", -1));
  KILN_ASSIGN_OR_RETURN(axis, normalize_axis(node, axis, it.rank() + 1));
  const int64_t depth = depths[0];
  ir::Shape out = it.shape;
  out.insert(out.begin() + axis, depth);
  ir::Shape with_one = it.shape;
  with_one.insert(with_one.begin() + axis, 1);
  // Indices of another integer type compare as i64; floats are truncated, as ONNX says.
  KILN_ASSIGN_OR_RETURN(Value k, cast(ctx, node, indices, ir::DType::I64));
  KILN_ASSIGN_OR_RETURN(k, wrap_negative(ctx, node, k, depth));
  KILN_ASSIGN_OR_RETURN(Value k1, reshaped(ctx, node, k, with_one));
  KILN_ASSIGN_OR_RETURN(Value kw, ctx.broadcast_to(node, k1, out));
  KILN_ASSIGN_OR_RETURN(Value positions, iota(ctx, node, out, axis, ir::DType::I64));
  KILN_ASSIGN_OR_RETURN(Value hit, ctx.apply(node, Op::Eq, {positions, kw}));
  const ir::DType vt = values.constant->type.dtype;
  KILN_ASSIGN_OR_RETURN(Value on, ctx.broadcast_to(node, scalar(values.constant->get(1), vt), out));
  KILN_ASSIGN_OR_RETURN(Value off, ctx.broadcast_to(node, scalar(values.constant->get(0), vt), out));
  KILN_ASSIGN_OR_RETURN(Value r, ctx.apply(node, Op::Select, {hit, on, off}));
  return define_output(ctx, node, 0, r);
}

// Hardmax: 1 at the first maximum along the axis, 0 elsewhere.
Status convert_hardmax(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axis"}));
  if (ctx.opset() < 13) return node_error(node, "Hardmax before opset 13 (over flattened dims) is not supported");
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType t = ctx.type_of(x);
  KILN_ASSIGN_OR_RETURN(int64_t axis, int_attribute(node, "axis", -1));
  KILN_ASSIGN_OR_RETURN(axis, normalize_axis(node, axis, t.rank()));
  ir::Attrs attrs;
  attrs.set("axis", axis);
  KILN_ASSIGN_OR_RETURN(Value best, ctx.apply(node, Op::Argmax, {x}, std::move(attrs)));
  ir::Shape with_one = t.shape;
  with_one[static_cast<size_t>(axis)] = 1;
  KILN_ASSIGN_OR_RETURN(Value b1, reshaped(ctx, node, best, with_one));
  KILN_ASSIGN_OR_RETURN(Value bw, ctx.broadcast_to(node, b1, t.shape));
  KILN_ASSIGN_OR_RETURN(Value positions, iota(ctx, node, t.shape, axis, ir::DType::I64));
  KILN_ASSIGN_OR_RETURN(Value hit, ctx.apply(node, Op::Eq, {positions, bw}));
  KILN_ASSIGN_OR_RETURN(Value r, cast(ctx, node, hit, t.dtype));
  return define_output(ctx, node, 0, r);
}

Status convert_eye_like(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"dtype", "k"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType t = ctx.type_of(x);
  if (t.rank() != 2) return node_error(node, fmt::format("expected a matrix, got {}", t.to_string()));
  ir::DType dtype = t.dtype;
  if (attribute(node, "dtype")) {
    KILN_ASSIGN_OR_RETURN(int64_t code, int_attribute(node, "dtype", std::nullopt));
    KILN_ASSIGN_OR_RETURN(dtype, dtype_of(static_cast<int32_t>(code), where(node) + "attribute 'dtype'"));
  }
  KILN_ASSIGN_OR_RETURN(int64_t k, int_attribute(node, "k", 0));
  KILN_ASSIGN_OR_RETURN(Value rows, iota(ctx, node, t.shape, 0, ir::DType::I64));
  KILN_ASSIGN_OR_RETURN(Value cols, iota(ctx, node, t.shape, 1, ir::DType::I64));
  KILN_ASSIGN_OR_RETURN(Value diagonal, ctx.apply(node, Op::Sub, {cols, rows}));
  KILN_ASSIGN_OR_RETURN(Value hit, binary(ctx, node, Op::Eq, diagonal, scalar(static_cast<double>(k), ir::DType::I64)));
  KILN_ASSIGN_OR_RETURN(Value r, cast(ctx, node, hit, dtype));
  return define_output(ctx, node, 0, r);
}

// CumSum along an axis as Hillis and Steele's scan: log2(n) adds of the sums so far and
// themselves moved along the axis by 1, 2, 4, ... (zeros moved in), so that element i
// adds elements 0..i only (i..n-1 reversed). A matmul with a triangular matrix of ones
// (the form before) turned one inf or NaN into NaN across its row (0 times inf).
Status convert_cumsum(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"exclusive", "reverse"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType t = ctx.type_of(x);
  // Integers too: RoBERTa's position ids are a cumsum of its i64 padding mask.
  if (t.dtype == ir::DType::Bool)
    return node_error(node, fmt::format("CumSum of {} is not supported (only numbers)", t.to_string()));
  KILN_ASSIGN_OR_RETURN(auto axes, constant_ints(ctx, node, 1, "axis"));
  if (axes.size() != 1) return node_error(node, "axis must be one integer");
  KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(node, axes[0], t.rank()));
  KILN_ASSIGN_OR_RETURN(int64_t exclusive, int_attribute(node, "exclusive", 0));
  KILN_ASSIGN_OR_RETURN(int64_t reverse, int_attribute(node, "reverse", 0));
  const int64_t n = t.shape[static_cast<size_t>(axis)];
  // y moved `by` along the axis toward its end (toward its start when reverse).
  auto moved = [&](const Value& y, int64_t by) -> Result<Value> {
    KILN_ASSIGN_OR_RETURN(Value kept,
                          reverse ? slice_axis(ctx, node, y, axis, by, n) : slice_axis(ctx, node, y, axis, 0, n - by));
    std::vector<int64_t> pads(static_cast<size_t>(2 * t.rank()), 0);
    pads[static_cast<size_t>(reverse ? t.rank() + axis : axis)] = by;
    ir::Attrs attrs;
    attrs.set("pads", pads);
    return ctx.apply(node, Op::Pad, {kept}, std::move(attrs));
  };
  Value y = x;
  if (exclusive && n > 0) {
    KILN_ASSIGN_OR_RETURN(y, moved(x, 1));
  }
  for (int64_t by = 1; by < n; by *= 2) {
    KILN_ASSIGN_OR_RETURN(Value earlier, moved(y, by));
    KILN_ASSIGN_OR_RETURN(y, ctx.apply(node, Op::Add, {y, earlier}));
  }
  return define_output(ctx, node, 0, y);
}

constexpr OpConverter kConverters[] = {
    {"CumSum", convert_cumsum},   {"EyeLike", convert_eye_like}, {"GatherElements", convert_gather_elements},
    {"Hardmax", convert_hardmax}, {"OneHot", convert_one_hot},
};

}  // namespace

std::span<const OpConverter> gather_converters() { return kConverters; }

}  // namespace kiln::onnx_import
