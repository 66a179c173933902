// Neural-network ONNX ops: MatMul, Gemm, Conv, ConvTranspose, the pools, Softmax,
// Dropout, PRelu.
#include <fmt/format.h>

#include "frontends/onnx/ops.h"

namespace kiln::onnx_import {

namespace {

using ir::Op;

// numpy's matmul: a 1-D operand gains a dim of 1 (leading for a, trailing for b), which the
// result then loses.
Result<Value> matmul(Context& ctx, const onnx::NodeProto& node, Value a, Value b) {
  ir::Shape sa = ctx.type_of(a).shape, sb = ctx.type_of(b).shape;
  const bool a_vector = sa.size() == 1, b_vector = sb.size() == 1;
  if (sa.empty() || sb.empty()) return node_error(node, "MatMul of a scalar");
  if (a_vector) {
    KILN_ASSIGN_OR_RETURN(a, reshaped(ctx, node, a, {1, sa[0]}));
  }
  if (b_vector) {
    KILN_ASSIGN_OR_RETURN(b, reshaped(ctx, node, b, {sb[0], 1}));
  }
  KILN_ASSIGN_OR_RETURN(Value r, ctx.apply(node, Op::Matmul, {a, b}));
  ir::Shape shape = ctx.type_of(r).shape;
  if (b_vector) shape.erase(shape.end() - 1);
  if (a_vector) shape.erase(shape.end() - (b_vector ? 1 : 2));
  return reshaped(ctx, node, r, shape);
}

Status convert_matmul(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  KILN_ASSIGN_OR_RETURN(Value a, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value b, ctx.input(node, 1));
  KILN_ASSIGN_OR_RETURN(Value r, matmul(ctx, node, a, b));
  return define_output(ctx, node, 0, r);
}

// alpha * op(A) @ op(B) + beta * C.
Status convert_gemm(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"alpha", "beta", "transA", "transB", "broadcast"}));
  KILN_ASSIGN_OR_RETURN(float alpha, float_attribute(node, "alpha", 1.0f));
  KILN_ASSIGN_OR_RETURN(float beta, float_attribute(node, "beta", 1.0f));
  KILN_ASSIGN_OR_RETURN(int64_t trans_a, int_attribute(node, "transA", 0));
  KILN_ASSIGN_OR_RETURN(int64_t trans_b, int_attribute(node, "transB", 0));
  KILN_ASSIGN_OR_RETURN(Value a, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value b, ctx.input(node, 1));
  if (ctx.type_of(a).rank() != 2 || ctx.type_of(b).rank() != 2)
    return node_error(node, fmt::format("A and B must be matrices, got {} and {}", ctx.type_of(a).to_string(),
                                        ctx.type_of(b).to_string()));
  if (trans_a) {
    KILN_ASSIGN_OR_RETURN(a, transposed(ctx, node, a, {1, 0}));
  }
  if (trans_b) {
    KILN_ASSIGN_OR_RETURN(b, transposed(ctx, node, b, {1, 0}));
  }
  KILN_ASSIGN_OR_RETURN(Value r, ctx.apply(node, Op::Matmul, {a, b}));
  const ir::DType dtype = ctx.type_of(r).dtype;
  if (alpha != 1.0f) {
    KILN_ASSIGN_OR_RETURN(auto pair, ctx.broadcast_pair(node, r, scalar(alpha, dtype)));
    KILN_ASSIGN_OR_RETURN(r, ctx.apply(node, Op::Mul, {pair.first, pair.second}));
  }
  if (Context::has_input(node, 2) && beta != 0.0f) {
    KILN_ASSIGN_OR_RETURN(Value c, ctx.input(node, 2));
    if (beta != 1.0f) {
      KILN_ASSIGN_OR_RETURN(auto pair, ctx.broadcast_pair(node, c, scalar(beta, dtype)));
      KILN_ASSIGN_OR_RETURN(c, ctx.apply(node, Op::Mul, {pair.first, pair.second}));
    }
    KILN_ASSIGN_OR_RETURN(c, ctx.broadcast_to(node, c, ctx.type_of(r).shape));
    KILN_ASSIGN_OR_RETURN(r, ctx.apply(node, Op::Add, {r, c}));
  }
  return define_output(ctx, node, 0, r);
}

// Explicit pads from auto_pad (SAME_UPPER, SAME_LOWER, VALID) or the pads attribute:
// all begin pads, then all end pads.
Result<std::vector<int64_t>> window_pads(const onnx::NodeProto& node, const ir::Shape& x,
                                         const std::vector<int64_t>& window, const std::vector<int64_t>& strides,
                                         const std::vector<int64_t>& dilations) {
  const size_t k = window.size();
  KILN_ASSIGN_OR_RETURN(std::string auto_pad, string_attribute(node, "auto_pad", "NOTSET"));
  if (auto_pad == "NOTSET") return ints_attribute(node, "pads", std::vector<int64_t>(2 * k, 0));
  if (auto_pad == "VALID") return std::vector<int64_t>(2 * k, 0);
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER")
    return node_error(node, fmt::format("auto_pad '{}' is none of NOTSET, SAME_UPPER, SAME_LOWER and VALID", auto_pad));
  std::vector<int64_t> pads(2 * k);
  for (size_t i = 0; i < k; ++i) {
    const int64_t in = x[2 + i], out = (in + strides[i] - 1) / strides[i];
    const int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + dilations[i] * (window[i] - 1) + 1 - in);
    const int64_t small = total / 2, large = total - small;
    pads[i] = auto_pad == "SAME_UPPER" ? small : large;
    pads[k + i] = auto_pad == "SAME_UPPER" ? large : small;
  }
  return pads;
}

// What Conv and ConvTranspose share: X, W and the window attributes.
struct ConvOperands {
  Value x, w;
  ir::Shape xs, ws;
  size_t k = 0;  // spatial dims
  std::vector<int64_t> window, strides, dilations;
  int64_t group = 1;
};

Result<ConvOperands> conv_operands(Context& ctx, const onnx::NodeProto& node, std::string_view w_form) {
  ConvOperands c;
  KILN_ASSIGN_OR_RETURN(c.x, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(c.w, ctx.input(node, 1));
  c.xs = ctx.type_of(c.x).shape, c.ws = ctx.type_of(c.w).shape;
  if (c.xs.size() < 3 || c.ws.size() != c.xs.size())
    return node_error(node, fmt::format("expected X [N, C, D...] and W {}, got {} and {}", w_form,
                                        ctx.type_of(c.x).to_string(), ctx.type_of(c.w).to_string()));
  c.k = c.xs.size() - 2;
  c.window.assign(c.ws.begin() + 2, c.ws.end());
  KILN_ASSIGN_OR_RETURN(auto kernel_shape, ints_attribute(node, "kernel_shape", c.window));
  if (kernel_shape != c.window) return node_error(node, "kernel_shape differs from W's spatial dims");
  KILN_ASSIGN_OR_RETURN(c.strides, ints_attribute(node, "strides", std::vector<int64_t>(c.k, 1)));
  KILN_ASSIGN_OR_RETURN(c.dilations, ints_attribute(node, "dilations", std::vector<int64_t>(c.k, 1)));
  KILN_ASSIGN_OR_RETURN(c.group, int_attribute(node, "group", 1));
  if (c.strides.size() != c.k || c.dilations.size() != c.k)
    return node_error(node, fmt::format("strides and dilations need {} entries", c.k));
  return c;
}

// y plus the optional bias input 2, one value per channel (dim 1).
Result<Value> with_channel_bias(Context& ctx, const onnx::NodeProto& node, Value y) {
  if (!Context::has_input(node, 2)) return y;
  KILN_ASSIGN_OR_RETURN(Value b, ctx.input(node, 2));
  ir::Shape bias_shape(static_cast<size_t>(ctx.type_of(y).rank()), 1);
  bias_shape[1] = ctx.type_of(y).shape[1];
  KILN_ASSIGN_OR_RETURN(b, reshaped(ctx, node, b, bias_shape));
  return binary(ctx, node, Op::Add, y, b);
}

Status convert_conv(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}));
  KILN_ASSIGN_OR_RETURN(ConvOperands c, conv_operands(ctx, node, "[M, C/group, K...]"));
  KILN_ASSIGN_OR_RETURN(auto pads, window_pads(node, c.xs, c.window, c.strides, c.dilations));
  ir::Attrs attrs;
  attrs.set("strides", c.strides);
  attrs.set("pads", pads);
  attrs.set("dilations", c.dilations);
  attrs.set("groups", c.group);
  KILN_ASSIGN_OR_RETURN(Value y, ctx.apply(node, Op::Conv, {c.x, c.w}, std::move(attrs)));
  KILN_ASSIGN_OR_RETURN(y, with_channel_bias(ctx, node, y));
  return define_output(ctx, node, 0, y);
}

// ConvTranspose as the input gradient of the conv that maps its output back to its input:
// W [C_in, C_out/group, K...] is that conv's weight.
Status convert_conv_transpose(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(
      node, {"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads", "strides"}));
  KILN_ASSIGN_OR_RETURN(ConvOperands c, conv_operands(ctx, node, "[C, M/group, K...]"));
  const auto& [x, w, xs, ws, k, window, strides, dilations, group] = c;
  KILN_ASSIGN_OR_RETURN(auto output_padding, ints_attribute(node, "output_padding", std::vector<int64_t>(k, 0)));
  KILN_ASSIGN_OR_RETURN(std::string auto_pad, string_attribute(node, "auto_pad", "NOTSET"));
  if (output_padding.size() != k) return node_error(node, fmt::format("output_padding needs {} entries", k));
  std::vector<int64_t> full(k), pads(2 * k, 0);
  for (size_t i = 0; i < k; ++i)
    full[i] = strides[i] * (xs[2 + i] - 1) + output_padding[i] + (window[i] - 1) * dilations[i] + 1;
  std::optional<std::vector<int64_t>> output_shape;
  if (attribute(node, "output_shape")) {
    KILN_ASSIGN_OR_RETURN(auto given, ints_attribute(node, "output_shape", std::nullopt));
    if (given.size() == k + 2) given.erase(given.begin(), given.begin() + 2);
    output_shape = given;
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    output_shape = std::vector<int64_t>(k);
    for (size_t i = 0; i < k; ++i) (*output_shape)[i] = xs[2 + i] * strides[i];
  }
  if (output_shape) {
    if (output_shape->size() != k) return node_error(node, fmt::format("output_shape needs {} entries", k));
    // Padding as ONNX's reference computes it (floor division); a negative pad is zeros
    // added after the convolution.
    auto floor_half = [](int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); };
    for (size_t i = 0; i < k; ++i) {
      const int64_t total = full[i] - (*output_shape)[i];
      const bool upper = auto_pad == "SAME_UPPER";
      pads[i] = upper ? floor_half(total) : total - floor_half(total);
      pads[k + i] = upper ? total - floor_half(total) : floor_half(total);
    }
  } else if (auto_pad == "NOTSET") {
    KILN_ASSIGN_OR_RETURN(pads, ints_attribute(node, "pads", std::vector<int64_t>(2 * k, 0)));
    if (pads.size() != 2 * k) return node_error(node, fmt::format("pads need {} entries", 2 * k));
  } else if (auto_pad != "VALID") {
    return node_error(node, fmt::format("auto_pad '{}' is none of NOTSET, SAME_UPPER, SAME_LOWER and VALID", auto_pad));
  }
  std::vector<int64_t> extra(2 * k, 0);
  for (size_t i = 0; i < 2 * k; ++i)
    if (pads[i] < 0) extra[i] = -pads[i], pads[i] = 0;
  ir::Shape out = {xs[0], ws[1] * group};
  for (size_t i = 0; i < k; ++i) out.push_back(full[i] - pads[i] - pads[k + i]);
  ir::Attrs attrs;
  attrs.set("shape", out);
  attrs.set("strides", strides);
  attrs.set("pads", pads);
  attrs.set("dilations", dilations);
  attrs.set("groups", group);
  KILN_ASSIGN_OR_RETURN(Value y, ctx.apply(node, Op::ConvInputGrad, {x, w}, std::move(attrs)));
  if (extra != std::vector<int64_t>(2 * k, 0)) {
    std::vector<int64_t> all(2 * (k + 2), 0);
    for (size_t i = 0; i < k; ++i) all[2 + i] = extra[i], all[k + 4 + i] = extra[k + i];
    ir::Attrs pad;
    pad.set("pads", all);
    KILN_ASSIGN_OR_RETURN(y, ctx.apply(node, Op::Pad, {y}, std::move(pad)));
  }
  KILN_ASSIGN_OR_RETURN(y, with_channel_bias(ctx, node, y));
  return define_output(ctx, node, 0, y);
}

template <Op op>
Status convert_pool(Context& ctx, const onnx::NodeProto& node) {
  const bool max = op == Op::MaxPool;
  KILN_RETURN_IF_ERROR(max ? check_attributes(node, {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads",
                                                     "storage_order", "strides"})
                           : check_attributes(node, {"auto_pad", "ceil_mode", "count_include_pad", "dilations",
                                                     "kernel_shape", "pads", "strides"}));
  if (node.output_size() > 1 && !node.output(1).empty()) return node_error(node, "the Indices output is not supported");
  KILN_ASSIGN_OR_RETURN(int64_t storage_order, int_attribute(node, "storage_order", 0));
  if (storage_order != 0) return node_error(node, "storage_order 1 (column-major indices) is not supported");
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::Shape xs = ctx.type_of(x).shape;
  KILN_ASSIGN_OR_RETURN(auto window, ints_attribute(node, "kernel_shape", std::nullopt));
  const size_t k = window.size();
  if (xs.size() != k + 2)
    return node_error(node, fmt::format("kernel_shape has {} dims for {}", k, ctx.type_of(x).to_string()));
  KILN_ASSIGN_OR_RETURN(auto strides, ints_attribute(node, "strides", std::vector<int64_t>(k, 1)));
  KILN_ASSIGN_OR_RETURN(auto dilations, ints_attribute(node, "dilations", std::vector<int64_t>(k, 1)));
  KILN_ASSIGN_OR_RETURN(int64_t ceil_mode, int_attribute(node, "ceil_mode", 0));
  KILN_ASSIGN_OR_RETURN(auto pads, window_pads(node, xs, window, strides, dilations));
  // With ceil_mode, a window past the padded input still has one output, over all of it
  // (as PyTorch and onnxruntime pool; Hugging Face's EfficientNet pools 7x7 with a window
  // of 2560): that window is the padded input's extent.
  // (Lists of the wrong length are left to the op's checks, which name them.)
  if (ceil_mode && pads.size() == 2 * k && dilations.size() == k)
    for (size_t d = 0; d < k; ++d) {
      const int64_t padded = xs[2 + d] + pads[d] + pads[k + d];
      if (dilations[d] == 1 && window[d] > padded && padded > 0) window[d] = padded;
    }
  ir::Attrs attrs;
  attrs.set("window", window);
  attrs.set("strides", strides);
  attrs.set("pads", pads);
  if (max) {
    attrs.set("dilations", dilations);
  } else {
    if (dilations != std::vector<int64_t>(k, 1)) return node_error(node, "AveragePool with dilations is not supported");
    KILN_ASSIGN_OR_RETURN(int64_t count_include_pad, int_attribute(node, "count_include_pad", 0));
    attrs.set("count_include_pad", count_include_pad != 0);
  }
  attrs.set("ceil_mode", ceil_mode != 0);
  KILN_ASSIGN_OR_RETURN(Value y, ctx.apply(node, op, {x}, std::move(attrs)));
  return define_output(ctx, node, 0, y);
}

template <Op reduce>
Status convert_global_pool(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType t = ctx.type_of(x);
  if (t.rank() < 3) return node_error(node, fmt::format("expected X [N, C, D...], got {}", t.to_string()));
  std::vector<int64_t> axes;
  int64_t count = 1;
  for (int64_t d = 2; d < t.rank(); ++d) axes.push_back(d), count *= t.shape[static_cast<size_t>(d)];
  ir::Attrs attrs;
  attrs.set("axes", axes);
  attrs.set("keepdims", true);
  // An f16 or bf16 average sums in f32 and rounds once (wide_type).
  if (reduce == Op::ReduceSum) {
    KILN_ASSIGN_OR_RETURN(x, widened(ctx, node, x));
  }
  KILN_ASSIGN_OR_RETURN(Value y, ctx.apply(node, reduce, {x}, std::move(attrs)));
  if (reduce == Op::ReduceSum) {
    const ir::TensorType sum = ctx.type_of(y);
    KILN_ASSIGN_OR_RETURN(Value n, ctx.broadcast_to(node, scalar(static_cast<double>(count), sum.dtype), sum.shape));
    KILN_ASSIGN_OR_RETURN(y, ctx.apply(node, Op::Div, {y, n}));
    KILN_ASSIGN_OR_RETURN(y, cast(ctx, node, y, t.dtype));
  }
  return define_output(ctx, node, 0, y);
}

// Softmax and LogSoftmax: over one axis from opset 13; before, over the flattened dims
// from `axis` (default 1) on. f16 and bf16 compute in f32 and round once, as onnxruntime
// and PyTorch do (kiln's softmax rounds each of its steps in the graph's type, a few units
// apart).
template <Op op>
Status convert_softmax(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axis"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType t = ctx.type_of(x);
  KILN_ASSIGN_OR_RETURN(int64_t axis, int_attribute(node, "axis", ctx.opset() >= 13 ? -1 : 1));
  KILN_ASSIGN_OR_RETURN(axis, normalize_axis(node, axis, t.rank()));
  KILN_ASSIGN_OR_RETURN(x, widened(ctx, node, x));
  ir::Attrs attrs;
  Value y;
  if (ctx.opset() >= 13) {
    attrs.set("axis", axis);
    KILN_ASSIGN_OR_RETURN(y, ctx.apply(node, op, {x}, std::move(attrs)));
  } else {
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < t.rank(); ++d) (d < axis ? outer : inner) *= t.shape[static_cast<size_t>(d)];
    KILN_ASSIGN_OR_RETURN(Value flat, reshaped(ctx, node, x, {outer, inner}));
    attrs.set("axis", int64_t{1});
    KILN_ASSIGN_OR_RETURN(y, ctx.apply(node, op, {flat}, std::move(attrs)));
    KILN_ASSIGN_OR_RETURN(y, reshaped(ctx, node, y, t.shape));
  }
  KILN_ASSIGN_OR_RETURN(y, cast(ctx, node, y, t.dtype));
  return define_output(ctx, node, 0, y);
}

// Inference: Dropout passes its input through.
Status convert_dropout(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"ratio", "seed", "is_test"}));
  if (Context::has_input(node, 2)) {
    // Training mode drops elements at random, unless the ratio is 0.
    KILN_ASSIGN_OR_RETURN(auto training, constant_ints(ctx, node, 2, "training_mode"));
    if (training.size() == 1 && training[0] != 0) {
      std::vector<int64_t> ratio = {1};
      if (Context::has_input(node, 1)) {
        KILN_ASSIGN_OR_RETURN(Value r, ctx.input(node, 1));
        if (!r.constant)
          return node_error(node, "input 1 (ratio) is computed at run time; kiln needs it known at import");
        ratio = {r.constant->get(0) == 0 ? 0 : 1};
      }
      if (ratio[0] != 0) return node_error(node, "training mode is not supported; export for inference");
    }
  }
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  KILN_RETURN_IF_ERROR(define_output(ctx, node, 0, x));
  if (node.output_size() < 2 || node.output(1).empty()) return Status::Ok();
  // The mask: every element kept.
  KILN_ASSIGN_OR_RETURN(
      Value mask,
      ctx.broadcast_to(node, Value{std::nullopt, ir::Tensor::from_ints({ir::DType::Bool, {}}, {1}), false, ""},
                       ctx.type_of(x).shape));
  return define_output(ctx, node, 1, mask);
}

// PRelu: x where x > 0, else slope * x (slope broadcast to x). Before opset 7 a slope of
// one per channel ([C] for an [N, C, ...] input) applies along dim 1, as Caffe2's PRelu
// did and PyTorch's exporter of that time wrote; from 7 on, broadcasting is numpy's.
Status convert_prelu(Context& ctx, const onnx::NodeProto& node) {
  // PRelu-1's consumed_inputs was a hint for in-place computation.
  KILN_RETURN_IF_ERROR(ctx.opset() < 7 ? check_attributes(node, {"consumed_inputs"}) : check_attributes(node, {}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value slope, ctx.input(node, 1));
  const ir::Shape &x_shape = ctx.type_of(x).shape, slope_shape = ctx.type_of(slope).shape;
  if (ctx.opset() < 7 && slope_shape.size() == 1 && slope_shape[0] > 1 && x_shape.size() > 2 &&
      slope_shape[0] == x_shape[1]) {
    ir::Shape per_channel(x_shape.size() - 1, 1);
    per_channel[0] = slope_shape[0];
    KILN_ASSIGN_OR_RETURN(slope, reshaped(ctx, node, slope, std::move(per_channel)));
  }
  KILN_ASSIGN_OR_RETURN(Value scaled, binary(ctx, node, Op::Mul, x, slope));
  KILN_ASSIGN_OR_RETURN(Value positive, binary(ctx, node, Op::Gt, x, scalar(0.0, ctx.type_of(x).dtype)));
  KILN_ASSIGN_OR_RETURN(Value r, ctx.apply(node, Op::Select, {positive, x, scaled}));
  return define_output(ctx, node, 0, r);
}

// LRN: x / (bias + alpha / size * sum of x² over the `size` channels around)^beta.
Status convert_lrn(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"alpha", "beta", "bias", "size"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType t = ctx.type_of(x);
  if (t.rank() < 3) return node_error(node, fmt::format("expected [N, C, D...], got {}", t.to_string()));
  KILN_ASSIGN_OR_RETURN(float alpha, float_attribute(node, "alpha", 1e-4f));
  KILN_ASSIGN_OR_RETURN(float beta, float_attribute(node, "beta", 0.75f));
  KILN_ASSIGN_OR_RETURN(float bias, float_attribute(node, "bias", 1.0f));
  KILN_ASSIGN_OR_RETURN(int64_t size, int_attribute(node, "size", std::nullopt));
  if (size < 1 || size > 64) return node_error(node, fmt::format("size {} is not from 1 to 64", size));
  KILN_ASSIGN_OR_RETURN(Value sq, ctx.apply(node, Op::Mul, {x, x}));
  std::vector<int64_t> pads(2 * static_cast<size_t>(t.rank()), 0);
  pads[1] = (size - 1) / 2, pads[static_cast<size_t>(t.rank()) + 1] = size - 1 - (size - 1) / 2;
  ir::Attrs pad;
  pad.set("pads", pads);
  KILN_ASSIGN_OR_RETURN(Value padded, ctx.apply(node, Op::Pad, {sq}, std::move(pad)));
  Value sum;
  for (int64_t i = 0; i < size; ++i) {
    KILN_ASSIGN_OR_RETURN(Value part, slice_axis(ctx, node, padded, 1, i, i + t.shape[1]));
    if (i == 0) {
      sum = part;
    } else {
      KILN_ASSIGN_OR_RETURN(sum, ctx.apply(node, Op::Add, {sum, part}));
    }
  }
  KILN_ASSIGN_OR_RETURN(Value scaled,
                        binary(ctx, node, Op::Mul, sum, scalar(alpha / static_cast<double>(size), t.dtype)));
  KILN_ASSIGN_OR_RETURN(Value shifted, binary(ctx, node, Op::Add, scaled, scalar(bias, t.dtype)));
  KILN_ASSIGN_OR_RETURN(Value powered, binary(ctx, node, Op::Pow, shifted, scalar(beta, t.dtype)));
  KILN_ASSIGN_OR_RETURN(Value y, ctx.apply(node, Op::Div, {x, powered}));
  return define_output(ctx, node, 0, y);
}

constexpr OpConverter kConverters[] = {
    {"AveragePool", convert_pool<Op::AvgPool>},
    {"Conv", convert_conv},
    {"ConvTranspose", convert_conv_transpose},
    {"Dropout", convert_dropout},
    {"Gemm", convert_gemm},
    {"GlobalAveragePool", convert_global_pool<Op::ReduceSum>},
    {"GlobalMaxPool", convert_global_pool<Op::ReduceMax>},
    {"LRN", convert_lrn},
    {"LogSoftmax", convert_softmax<Op::LogSoftmax>},
    {"MatMul", convert_matmul},
    {"MaxPool", convert_pool<Op::MaxPool>},
    {"PRelu", convert_prelu},
    {"Softmax", convert_softmax<Op::Softmax>},
};

}  // namespace

std::span<const OpConverter> nn_converters() { return kConverters; }

}  // namespace kiln::onnx_import
