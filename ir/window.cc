#include "ir/window.h"

#include <fmt/format.h>
#include <algorithm>

namespace kiln::ir {
namespace {

Error op_error(Op op, std::string_view message) { return make_error(fmt::format("{}: {}", op_name(op), message)); }

std::string ints_string(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ",")); }

// An optional per-dim attribute: `count` values, each at least `min`, or `fallback` each.
Result<std::vector<int64_t>> per_dim(Op op, const Attrs& attrs, std::string_view name, size_t count, int64_t min,
                                     int64_t fallback, const Shape& x) {
  if (!attrs.has(name)) return std::vector<int64_t>(count, fallback);
  const std::vector<int64_t>& v = attrs.get_ints(name);
  if (v.size() != count)
    return op_error(op, fmt::format("{} must list {} values ({} per spatial dim of x {}), got {}", name, count,
                                    count / (x.size() - 2), shape_string(x), ints_string(v)));
  for (int64_t e : v)
    if (e < min || e > (int64_t{1} << 32))
      return op_error(op, fmt::format("{} must be {} or more (and at most 2^32), got {}", name, min, ints_string(v)));
  return v;
}

}  // namespace

Result<Window> window_of(Op op, const Shape& x, const std::vector<int64_t>& window, const Attrs& attrs) {
  if (x.size() < 3 || x.size() > 5)
    return op_error(op, fmt::format("expected x: [N, C, D1..Dk] with 1 to 3 spatial dims, got {}", shape_string(x)));
  const size_t k = x.size() - 2;
  Window w;
  w.input.assign(x.begin() + 2, x.end());
  const bool conv = is_convolution(op);
  if (!conv) {
    KILN_ASSIGN_OR_RETURN(w.window, per_dim(op, attrs, "window", k, 1, 1, x));
  } else {
    w.window = window;
  }
  KILN_ASSIGN_OR_RETURN(w.strides, per_dim(op, attrs, "strides", k, 1, 1, x));
  KILN_ASSIGN_OR_RETURN(w.dilations, per_dim(op, attrs, "dilations", k, 1, 1, x));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, per_dim(op, attrs, "pads", 2 * k, 0, 0, x));
  w.pad_lo.assign(pads.begin(), pads.begin() + static_cast<int64_t>(k));
  w.pad_hi.assign(pads.begin() + static_cast<int64_t>(k), pads.end());
  w.ceil_mode = attrs.get_bool("ceil_mode", false);
  for (size_t d = 0; d < k; ++d) {
    const int64_t extent = w.extent(static_cast<int64_t>(d));
    if (!conv && (w.pad_lo[d] >= extent || w.pad_hi[d] >= extent))
      return op_error(op, fmt::format("pads {} must be smaller than the window's extent {} in each dim, so that "
                                      "every window covers the input",
                                      ints_string(pads), extent));
    const int64_t span = w.input[d] + w.pad_lo[d] + w.pad_hi[d] - extent;
    if (span < 0)
      return op_error(op, fmt::format("the window (extent {} in spatial dim {}) is larger than the padded input "
                                      "({} + {} + {}) of x {}",
                                      extent, d, w.input[d], w.pad_lo[d], w.pad_hi[d], shape_string(x)));
    const int64_t s = w.strides[d];
    int64_t e = (w.ceil_mode ? (span + s - 1) / s : span / s) + 1;
    // As PyTorch: with ceil_mode, a last window that would start in the end padding is dropped.
    if (w.ceil_mode && (e - 1) * s >= w.input[d] + w.pad_lo[d]) --e;
    w.output.push_back(e);
  }
  return w;
}

Result<Padding> padding_of(const Shape& x, const Attrs& attrs) {
  const std::vector<int64_t>& pads = attrs.get_ints("pads");
  if (pads.size() != 2 * x.size())
    return op_error(Op::Pad, fmt::format("pads must list {} values (all begin pads, then all end pads, for x {}), "
                                         "got {}",
                                         2 * x.size(), shape_string(x), ints_string(pads)));
  Padding p;
  p.lo.assign(pads.begin(), pads.begin() + static_cast<int64_t>(x.size()));
  p.hi.assign(pads.begin() + static_cast<int64_t>(x.size()), pads.end());
  for (size_t d = 0; d < x.size(); ++d) {
    const int64_t limit = int64_t{1} << 40;
    if (std::abs(p.lo[d]) > limit || std::abs(p.hi[d]) > limit || x[d] + p.lo[d] + p.hi[d] < 0)
      return op_error(
          Op::Pad, fmt::format("pads {} crop more than dim {} of x {} holds", ints_string(pads), d, shape_string(x)));
  }
  return p;
}

namespace {

// conv's checks of x against w, and its result type.
Result<TensorType> conv_type(Op op, const TensorType& x, const TensorType& w, const Attrs& attrs) {
  const int64_t groups = attrs.get_int("groups", 1);
  if (w.dtype != x.dtype || w.rank() != x.rank() || x.rank() < 3)
    return op_error(op, fmt::format("expected x: [N, C, D1..Dk] and w: [O, C/groups, K1..Kk] of one type, got {}, {}",
                                    x.to_string(), w.to_string()));
  if (x.shape[1] == 0)
    return op_error(op, fmt::format("x {} has no input channels (a convolution needs C >= 1)", x.to_string()));
  if (groups < 1 || groups > x.shape[1] || x.shape[1] % groups != 0 || w.shape[0] % groups != 0)
    return op_error(op, fmt::format("groups={} must divide the input channels C and the output channels O of "
                                    "x {} and w {}",
                                    groups, x.to_string(), w.to_string()));
  if (w.shape[1] != x.shape[1] / groups)
    return op_error(op, fmt::format("w {} must have C/groups = {} input channels for x {} and groups={}", w.to_string(),
                                    x.shape[1] / groups, x.to_string(), groups));
  const std::vector<int64_t> kernel(w.shape.begin() + 2, w.shape.end());
  for (int64_t k : kernel)
    if (k < 1) return op_error(op, fmt::format("w {} has an empty window", w.to_string()));
  KILN_ASSIGN_OR_RETURN(Window win, window_of(op, x.shape, kernel, attrs));
  TensorType out{x.dtype, {x.shape[0], w.shape[0]}};
  out.shape.insert(out.shape.end(), win.output.begin(), win.output.end());
  return out;
}

// The gradients of conv: conv_input_grad(dy, w) {shape = x's} and conv_weight_grad(x, dy)
// {shape = w's}; dy must be the type conv(x, w) has.
Result<TensorType> conv_grad_type(Op op, std::span<const TensorType> in, const Attrs& attrs) {
  const bool input = op == Op::ConvInputGrad;
  const TensorType& dy = input ? in[0] : in[1];
  TensorType x = input ? TensorType{dy.dtype, attrs.get_ints("shape")} : in[0];
  TensorType w = input ? in[1] : TensorType{dy.dtype, attrs.get_ints("shape")};
  if (!is_float(dy.dtype) || in[0].dtype != in[1].dtype)
    return op_error(
        op, fmt::format("expected operands of one float type, got {}, {}", in[0].to_string(), in[1].to_string()));
  for (int64_t d : attrs.get_ints("shape"))
    if (d < 0 || d > (int64_t{1} << 40))
      return op_error(op, fmt::format("shape {} has a dimension out of range", shape_string(attrs.get_ints("shape"))));
  KILN_ASSIGN_OR_RETURN(TensorType y, conv_type(op, x, w, attrs));
  if (y != dy)
    return op_error(op, fmt::format("the gradient {} must have the type of conv's result, {}, for x {} and w {}",
                                    dy.to_string(), y.to_string(), x.to_string(), w.to_string()));
  return input ? x : w;
}

}  // namespace

Result<TensorType> infer_window_op(Op op, std::span<const TensorType> in, const Attrs& attrs) {
  if (op == Op::Conv) return conv_type(op, in[0], in[1], attrs);
  if (op == Op::ConvInputGrad || op == Op::ConvWeightGrad) return conv_grad_type(op, in, attrs);
  const TensorType& x = in[0];
  if (op == Op::Pad) {
    KILN_ASSIGN_OR_RETURN(Padding p, padding_of(x.shape, attrs));
    const double value = attrs.get_float("value", 0.0);
    if (!is_float(x.dtype) && value != static_cast<double>(static_cast<int64_t>(value)))
      return op_error(op, fmt::format("value {} is not an integer, for x {}", value, x.to_string()));
    TensorType out = x;
    for (size_t d = 0; d < x.shape.size(); ++d) out.shape[d] += p.lo[d] + p.hi[d];
    return out;
  }
  const int64_t channels = x.shape.size() > 1 ? x.shape[1] : 0;
  KILN_ASSIGN_OR_RETURN(Window w, window_of(op, x.shape, {}, attrs));
  TensorType out{x.dtype, {x.shape[0], channels}};
  out.shape.insert(out.shape.end(), w.output.begin(), w.output.end());
  return out;
}

}  // namespace kiln::ir
