// Resize (and the older Upsample): separable along each spatial axis. Where an output
// coordinate comes from is known at import, so nearest is a gather with constant indices,
// and linear and cubic a sum over their 2 or 4 taps of a gather times constant weights.
#include <algorithm>
#include <cmath>
#include <tuple>

#include <fmt/format.h>

#include "frontends/onnx/ops.h"

namespace kiln::onnx_import {

namespace {

using ir::Op;

struct ResizeMode {
  std::string mode, transform, nearest;
  double cubic_a = -0.75;
  bool exclude_outside = false;
};

// The input coordinate of output index `o` of an axis resized from `in` by `scale`. The
// resized length is in * scale, not rounded (as ONNX's reference takes it).
Result<double> source_coordinate(const onnx::NodeProto& node, const ResizeMode& m, int64_t o, int64_t in,
                                 double scale) {
  const double x = static_cast<double>(o), out = static_cast<double>(in) * scale;
  if (m.transform == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (m.transform == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (m.transform == "align_corners") return out == 1 ? 0.0 : x * static_cast<double>(in - 1) / (out - 1);
  if (m.transform == "asymmetric") return x / scale;
  if (m.transform == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  return node_error(node, fmt::format("coordinate_transformation_mode '{}' is not supported", m.transform));
}

Result<int64_t> nearest_index(const onnx::NodeProto& node, const ResizeMode& m, double x, int64_t in) {
  double i;
  if (m.nearest == "round_prefer_floor") i = x - std::floor(x) == 0.5 ? std::floor(x) : std::round(x);
  else if (m.nearest == "round_prefer_ceil") i = std::round(x) == x - 0.5 ? std::ceil(x) : std::round(x);
  else if (m.nearest == "floor") i = std::floor(x);
  else if (m.nearest == "ceil") i = std::ceil(x);
  else return node_error(node, fmt::format("nearest_mode '{}' is not supported", m.nearest));
  return std::clamp<int64_t>(static_cast<int64_t>(i), 0, in - 1);
}

// The weights of the taps around x: 2 for linear, 4 for cubic (Keys, with a), from the tap
// floor(x) - 1 (cubic) or floor(x) (linear) on; taps outside [0, in) clamp to the edge, or
// with exclude_outside get no weight (the others renormalized).
std::vector<std::pair<int64_t, double>> taps(const ResizeMode& m, double x, int64_t in) {
  const double base = std::floor(x), t = x - base;
  std::vector<std::pair<int64_t, double>> out;
  if (m.mode == "linear") {
    out = {{static_cast<int64_t>(base), 1.0 - t}, {static_cast<int64_t>(base) + 1, t}};
  } else {
    const double a = m.cubic_a;
    auto w = [a](double d) {
      d = std::fabs(d);
      if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
      if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
      return 0.0;
    };
    for (int k = -1; k <= 2; ++k) out.push_back({static_cast<int64_t>(base) + k, w(t - k)});
  }
  double total = 0;
  for (auto& [i, weight] : out) {
    if (m.exclude_outside && (i < 0 || i >= in)) weight = 0;
    total += weight;
    i = std::clamp<int64_t>(i, 0, in - 1);
  }
  if (m.exclude_outside && total != 0)
    for (auto& tap : out) tap.second /= total;
  return out;
}

// x resized along `axis` to `out` elements.
Result<Value> resize_axis(Context& ctx, const onnx::NodeProto& node, const Value& x, const ResizeMode& m, int64_t axis,
                          int64_t out, double scale) {
  const ir::TensorType t = ctx.type_of(x);
  const int64_t in = t.shape[static_cast<size_t>(axis)];
  if (out > (int64_t{1} << 24)) return node_error(node, fmt::format("resize to {} is not supported", out));
  if (m.mode == "nearest") {
    std::vector<int64_t> index(static_cast<size_t>(out));
    for (int64_t o = 0; o < out; ++o) {
      KILN_ASSIGN_OR_RETURN(double c, source_coordinate(node, m, o, in, scale));
      KILN_ASSIGN_OR_RETURN(index[static_cast<size_t>(o)], nearest_index(node, m, c, in));
    }
    ir::Attrs attrs;
    attrs.set("axis", axis);
    return ctx.apply(node, Op::Gather,
                     {x, Value{std::nullopt, ir::Tensor::from_ints({ir::DType::I64, {out}}, index), false, ""}},
                     std::move(attrs));
  }
  if (!ir::is_float(t.dtype))
    return node_error(node, fmt::format("{} resize of {} is not supported", m.mode, t.to_string()));
  // Per tap (2 linear, 4 cubic), each output's source index and weight: the sum over the
  // taps of x gathered at the index times the weight, so that an inf or NaN reaches only
  // the outputs whose taps read it. f16 and bf16 sum in f32, rounded once.
  const size_t tap_count = m.mode == "linear" ? 2 : 4;
  std::vector<std::vector<int64_t>> index(tap_count, std::vector<int64_t>(static_cast<size_t>(out)));
  std::vector<std::vector<double>> weight(tap_count, std::vector<double>(static_cast<size_t>(out)));
  for (int64_t o = 0; o < out; ++o) {
    KILN_ASSIGN_OR_RETURN(double c, source_coordinate(node, m, o, in, scale));
    const auto around = taps(m, c, in);
    for (size_t k = 0; k < tap_count; ++k)
      std::tie(index[k][static_cast<size_t>(o)], weight[k][static_cast<size_t>(o)]) = around[k];
  }
  const ir::DType compute = wide_type(t.dtype);
  KILN_ASSIGN_OR_RETURN(Value wide, widened(ctx, node, x));
  ir::Shape resized_shape = t.shape, along(static_cast<size_t>(t.rank()), 1);
  resized_shape[static_cast<size_t>(axis)] = out;
  along[static_cast<size_t>(axis)] = out;
  Value sum;
  for (size_t k = 0; k < tap_count; ++k) {
    ir::Attrs attrs;
    attrs.set("axis", axis);
    KILN_ASSIGN_OR_RETURN(
        Value gathered,
        ctx.apply(node, Op::Gather,
                  {wide, Value{std::nullopt, ir::Tensor::from_ints({ir::DType::I64, {out}}, index[k]), false, ""}},
                  std::move(attrs)));
    const Value w{std::nullopt, ir::Tensor::from_doubles({compute, along}, weight[k]), false, ""};
    KILN_ASSIGN_OR_RETURN(Value w_wide, ctx.broadcast_to(node, w, resized_shape));
    KILN_ASSIGN_OR_RETURN(Value term, ctx.apply(node, Op::Mul, {gathered, w_wide}));
    if (k == 0) {
      sum = term;
    } else {
      KILN_ASSIGN_OR_RETURN(sum, ctx.apply(node, Op::Add, {sum, term}));
    }
  }
  return cast(ctx, node, sum, t.dtype);
}

// Resize(X, roi, scales, sizes) from opset 11; Resize(X, scales) at opset 10; Upsample.
Status convert_resize(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(
      check_attributes(node, {"antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                              "extrapolation_value", "keep_aspect_ratio_policy", "mode", "nearest_mode", "scales"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType t = ctx.type_of(x);
  ResizeMode m;
  KILN_ASSIGN_OR_RETURN(m.mode, string_attribute(node, "mode", "nearest"));
  const bool modern = node.op_type() == "Resize" && ctx.opset() >= 11;
  KILN_ASSIGN_OR_RETURN(m.transform,
                        string_attribute(node, "coordinate_transformation_mode", modern ? "half_pixel" : "asymmetric"));
  KILN_ASSIGN_OR_RETURN(m.nearest, string_attribute(node, "nearest_mode", modern ? "round_prefer_floor" : "floor"));
  KILN_ASSIGN_OR_RETURN(float a, float_attribute(node, "cubic_coeff_a", -0.75f));
  KILN_ASSIGN_OR_RETURN(int64_t exclude, int_attribute(node, "exclude_outside", 0));
  m.cubic_a = a, m.exclude_outside = exclude != 0;
  if (m.mode == "linear" && !modern) m.transform = "asymmetric";
  if (m.mode != "nearest" && m.mode != "linear" && m.mode != "cubic")
    return node_error(node, fmt::format("mode '{}' is none of nearest, linear and cubic", m.mode));
  if (m.transform == "tf_crop_and_resize")
    return node_error(node, "coordinate_transformation_mode 'tf_crop_and_resize' is not supported");
  // Opset 18's axes (the dims scales and sizes list; every dim by default) and aspect
  // policy; opset 19's antialias, which only the default 0 is.
  KILN_ASSIGN_OR_RETURN(int64_t antialias, int_attribute(node, "antialias", 0));
  if (antialias) return node_error(node, "antialias 1 is not supported");
  KILN_ASSIGN_OR_RETURN(std::string policy, string_attribute(node, "keep_aspect_ratio_policy", "stretch"));
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    return node_error(
        node, fmt::format("keep_aspect_ratio_policy '{}' is none of stretch, not_larger and not_smaller", policy));
  std::vector<int64_t> axes;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> given_axes, ints_attribute(node, "axes", std::vector<int64_t>{}));
  for (int64_t a : given_axes) {
    KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(node, a, t.rank()));
    if (std::find(axes.begin(), axes.end(), axis) != axes.end())
      return node_error(node, fmt::format("axis {} is listed twice", a));
    axes.push_back(axis);
  }
  if (axes.empty())
    for (int64_t d = 0; d < t.rank(); ++d) axes.push_back(d);
  std::vector<double> scales(static_cast<size_t>(t.rank()), 1.0);
  std::vector<int64_t> sizes(t.shape.begin(), t.shape.end());
  const int scales_input = modern ? 2 : 1;
  if (modern && Context::has_input(node, 3)) {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> given, constant_ints(ctx, node, 3, "sizes"));
    if (given.size() != axes.size())
      return node_error(node, fmt::format("{} sizes for {} axes", given.size(), axes.size()));
    for (size_t k = 0; k < axes.size(); ++k) {
      const auto d = static_cast<size_t>(axes[k]);
      sizes[d] = given[k];
      scales[d] = static_cast<double>(given[k]) / static_cast<double>(t.shape[d]);
    }
    if (policy != "stretch") {  // one scale for every listed axis: the least or the greatest
      double scale = scales[static_cast<size_t>(axes[0])];
      for (int64_t d : axes)
        scale = policy == "not_larger" ? std::min(scale, scales[static_cast<size_t>(d)])
                                       : std::max(scale, scales[static_cast<size_t>(d)]);
      for (int64_t d : axes) {
        scales[static_cast<size_t>(d)] = scale;
        sizes[static_cast<size_t>(d)] =
            static_cast<int64_t>(std::floor(scale * static_cast<double>(t.shape[static_cast<size_t>(d)]) + 0.5));
      }
    }
  } else if (Context::has_input(node, scales_input)) {
    KILN_ASSIGN_OR_RETURN(Value s, ctx.input(node, scales_input));
    if (!s.constant) return node_error(node, "the scales are computed at run time; kiln needs it known at import");
    if (s.constant->size() != static_cast<int64_t>(axes.size()))
      return node_error(node, fmt::format("{} scales for {} axes", s.constant->size(), axes.size()));
    for (size_t k = 0; k < axes.size(); ++k) {
      const auto d = static_cast<size_t>(axes[k]);
      scales[d] = s.constant->get(static_cast<int64_t>(k));
      sizes[d] = static_cast<int64_t>(std::floor(static_cast<double>(t.shape[d]) * scales[d]));
    }
  } else if (const onnx::AttributeProto* a = attribute(node, "scales");
             a && node.op_type() == "Upsample" && ctx.opset() < 9) {  // an attribute before opset 9
    if (a->type() != onnx::AttributeProto::FLOATS || a->floats_size() != t.rank())
      return node_error(node, fmt::format("attribute 'scales' is not {} floats", t.rank()));
    for (int64_t d = 0; d < t.rank(); ++d) {
      scales[static_cast<size_t>(d)] = a->floats(static_cast<int>(d));
      sizes[static_cast<size_t>(d)] = static_cast<int64_t>(
          std::floor(static_cast<double>(t.shape[static_cast<size_t>(d)]) * scales[static_cast<size_t>(d)]));
    }
  } else {
    return node_error(node, "neither scales nor sizes are given");
  }
  Value r = x;
  for (int64_t d = 0; d < t.rank(); ++d) {
    const size_t i = static_cast<size_t>(d);
    if (sizes[i] == t.shape[i] && scales[i] == 1.0) continue;
    if (sizes[i] < 1) return node_error(node, fmt::format("dim {} resizes to {}", d, sizes[i]));
    KILN_ASSIGN_OR_RETURN(r, resize_axis(ctx, node, r, m, d, sizes[i], scales[i]));
  }
  return define_output(ctx, node, 0, r);
}

constexpr OpConverter kConverters[] = {
    {"Resize", convert_resize},
    {"Upsample", convert_resize},
};

}  // namespace

std::span<const OpConverter> resize_converters() { return kConverters; }

}  // namespace kiln::onnx_import
