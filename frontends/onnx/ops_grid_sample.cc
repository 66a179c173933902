// GridSample: each output position reads the input at a position the grid gives at run time
// (deformable attention, spatial transformers, optical flow). Per spatial dim the grid's
// coordinate becomes 1 (nearest), 2 (linear) or 4 (cubic) taps, each an index and a weight;
// every combination of the dims' taps is one gather of rows of channels from the input
// held as [N·positions, C], weighted and summed. The coordinates, the padding modes and
// the taps follow ONNX's reference (onnx/reference/ops/op_grid_sample.py) where onnxruntime
// and PyTorch agree with it, and those two where they do not (cubic with border padding).
#include <fmt/format.h>

#include "frontends/onnx/ops.h"

namespace kiln::onnx_import {

namespace {

using ir::Op;

enum class Padding { Zeros, Border, Reflection };

struct Tap {
  Value index;  // a whole number in the compute type; NaN where the grid held one, which reads 0
  std::optional<Value> weight;
};

class Sampler {
 public:
  Sampler(Context& ctx, const onnx::NodeProto& node, ir::Shape shape, ir::DType dtype)
      : ctx_(ctx), node_(node), shape_(std::move(shape)), dtype_(dtype) {}

  Result<Value> op(Op op, const Value& a, const Value& b) { return binary(ctx_, node_, op, a, b); }
  Result<Value> op(Op op, const Value& a, double s) { return with_scalar(ctx_, node_, op, a, s); }
  Result<Value> select(const Value& c, const Value& a, const Value& b) {
    return ctx_.apply(node_, Op::Select, {c, a, b});
  }
  Result<Value> filled(double v) { return ctx_.broadcast_to(node_, scalar(v, dtype_), shape_); }
  Result<Value> floor(const Value& v) { return ctx_.apply(node_, Op::Floor, {v}); }
  // v clamped to [lo, hi], NaN kept (so that it reads nothing).
  Result<Value> clamp(const Value& v, double lo, double hi) {
    KILN_ASSIGN_OR_RETURN(Value below, op(Op::Lt, v, lo));
    KILN_ASSIGN_OR_RETURN(Value above, op(Op::Gt, v, hi));
    KILN_ASSIGN_OR_RETURN(Value low, filled(lo));
    KILN_ASSIGN_OR_RETURN(Value high, filled(hi));
    KILN_ASSIGN_OR_RETURN(Value upper, select(above, high, v));
    return select(below, low, upper);
  }
  // Whether v < lo or v > hi; false for NaN.
  Result<Value> outside(const Value& v, double lo, double hi) {
    KILN_ASSIGN_OR_RETURN(Value below, op(Op::Lt, v, lo));
    KILN_ASSIGN_OR_RETURN(Value above, op(Op::Gt, v, hi));
    return ctx_.apply(node_, Op::Or, {below, above});
  }
  // Whether lo <= v <= hi; false for NaN.
  Result<Value> within(const Value& v, double lo, double hi) {
    KILN_ASSIGN_OR_RETURN(Value ge, op(Op::Ge, v, lo));
    KILN_ASSIGN_OR_RETURN(Value le, op(Op::Le, v, hi));
    return ctx_.apply(node_, Op::And, {ge, le});
  }

  // v reflected by the nearer border until it lies in [lo, hi], as the reference's
  // _gs_reflect: n = trunc(distance past the border / range), and an odd n comes back from
  // the other border.
  Result<Value> reflect(const Value& v, double lo, double hi) {
    const double range = hi - lo;
    KILN_ASSIGN_OR_RETURN(Value past_border, outside(v, lo, hi));
    if (range <= 0) {  // a single position: every coordinate reflects onto it
      KILN_ASSIGN_OR_RETURN(Value only, filled(lo));
      return select(past_border, only, v);
    }
    KILN_ASSIGN_OR_RETURN(Value below, op(Op::Lt, v, lo));
    KILN_ASSIGN_OR_RETURN(Value lo_minus_v, op(Op::Sub, v, lo));
    KILN_ASSIGN_OR_RETURN(lo_minus_v, ctx_.apply(node_, Op::Neg, {lo_minus_v}));
    KILN_ASSIGN_OR_RETURN(Value v_minus_hi, op(Op::Sub, v, hi));
    KILN_ASSIGN_OR_RETURN(Value past, select(below, lo_minus_v, v_minus_hi));
    KILN_ASSIGN_OR_RETURN(Value turns, op(Op::Div, past, range));
    KILN_ASSIGN_OR_RETURN(turns, floor(turns));
    KILN_ASSIGN_OR_RETURN(Value whole, op(Op::Mul, turns, range));
    KILN_ASSIGN_OR_RETURN(Value rest, op(Op::Sub, past, whole));
    KILN_ASSIGN_OR_RETURN(Value half, op(Op::Mul, turns, 0.5));
    KILN_ASSIGN_OR_RETURN(Value half_floor, floor(half));
    KILN_ASSIGN_OR_RETURN(Value odd, op(Op::Ne, half, half_floor));
    KILN_ASSIGN_OR_RETURN(Value from_lo, op(Op::Add, rest, lo));
    KILN_ASSIGN_OR_RETURN(Value neg_rest, ctx_.apply(node_, Op::Neg, {rest}));
    KILN_ASSIGN_OR_RETURN(Value from_hi, op(Op::Add, neg_rest, hi));
    KILN_ASSIGN_OR_RETURN(Value lo_side, op(Op::Ne, below, odd));
    KILN_ASSIGN_OR_RETURN(Value reflected, select(lo_side, from_lo, from_hi));
    return select(past_border, reflected, v);
  }

  const ir::Shape& shape() const { return shape_; }
  ir::DType dtype() const { return dtype_; }

 private:
  Context& ctx_;
  const onnx::NodeProto& node_;
  ir::Shape shape_;  // [N, out...]
  ir::DType dtype_;
};

// Keys' cubic weights (a = -0.75) of the taps floor(x) - 1 .. floor(x) + 2 at t = x - floor(x).
Result<std::vector<Value>> cubic_weights(Sampler& s, const Value& t) {
  constexpr double a = -0.75;
  std::vector<Value> weights;
  for (double offset : {1.0, 0.0, -1.0, -2.0}) {  // the distance |t + offset|, as the reference writes it
    KILN_ASSIGN_OR_RETURN(Value d, s.op(Op::Add, t, offset));
    KILN_ASSIGN_OR_RETURN(d, s.op(Op::Mul, d, offset < 0 ? -1.0 : 1.0));
    Value w;
    if (offset == 0.0 || offset == -1.0) {  // |d| <= 1: ((a + 2) d - (a + 3)) d² + 1
      KILN_ASSIGN_OR_RETURN(w, s.op(Op::Mul, d, a + 2));
      KILN_ASSIGN_OR_RETURN(w, s.op(Op::Sub, w, a + 3));
      KILN_ASSIGN_OR_RETURN(w, s.op(Op::Mul, w, d));
      KILN_ASSIGN_OR_RETURN(w, s.op(Op::Mul, w, d));
      KILN_ASSIGN_OR_RETURN(w, s.op(Op::Add, w, 1.0));
    } else {  // 1 <= |d| <= 2: ((a d - 5a) d + 8a) d - 4a
      KILN_ASSIGN_OR_RETURN(w, s.op(Op::Mul, d, a));
      KILN_ASSIGN_OR_RETURN(w, s.op(Op::Sub, w, 5 * a));
      KILN_ASSIGN_OR_RETURN(w, s.op(Op::Mul, w, d));
      KILN_ASSIGN_OR_RETURN(w, s.op(Op::Add, w, 8 * a));
      KILN_ASSIGN_OR_RETURN(w, s.op(Op::Mul, w, d));
      KILN_ASSIGN_OR_RETURN(w, s.op(Op::Sub, w, 4 * a));
    }
    weights.push_back(w);
  }
  return weights;
}

struct Mode {
  std::string interpolation;  // nearest, linear, cubic
  Padding padding = Padding::Zeros;
  bool align_corners = false;
};

// The taps of one spatial dim of `extent` positions at grid coordinates g in [-1, 1].
Result<std::vector<Tap>> taps_of_dim(Context& ctx, const onnx::NodeProto& node, Sampler& s, const Value& g,
                                     int64_t extent, const Mode& m) {
  const double d = static_cast<double>(extent);
  const double lo = m.align_corners ? 0.0 : -0.5, hi = m.align_corners ? d - 1 : d - 0.5;
  // Denormalized: (g + 1) / 2 · (d - 1) with align_corners, else ((g + 1) · d - 1) / 2.
  KILN_ASSIGN_OR_RETURN(Value x, s.op(Op::Add, g, 1.0));
  KILN_ASSIGN_OR_RETURN(x, s.op(Op::Mul, x, m.align_corners ? (d - 1) / 2 : d / 2));
  if (!m.align_corners) {
    KILN_ASSIGN_OR_RETURN(x, s.op(Op::Sub, x, 0.5));
  }
  if (m.interpolation == "nearest") {
    KILN_ASSIGN_OR_RETURN(x, round_half_to_even(ctx, node, x));
  }
  // A coordinate past [lo, hi] moves onto it; cubic taps are only moved one by one, as
  // PyTorch and onnxruntime do (ONNX's reference also moves the coordinate, which differs
  // with border padding).
  if (m.padding != Padding::Zeros && m.interpolation != "cubic") {
    KILN_ASSIGN_OR_RETURN(Value past_border, s.outside(x, lo, hi));
    Value moved;
    if (m.padding == Padding::Border) {
      KILN_ASSIGN_OR_RETURN(moved, s.clamp(x, 0, d - 1));
    } else {
      KILN_ASSIGN_OR_RETURN(moved, s.reflect(x, lo, hi));
    }
    KILN_ASSIGN_OR_RETURN(x, s.select(past_border, moved, x));
  }
  std::vector<Tap> taps;
  if (m.interpolation == "nearest") {
    taps.push_back({x, std::nullopt});
  } else {
    KILN_ASSIGN_OR_RETURN(Value base, s.floor(x));
    KILN_ASSIGN_OR_RETURN(Value t, s.op(Op::Sub, x, base));
    if (m.interpolation == "linear") {
      KILN_ASSIGN_OR_RETURN(Value one_minus_t, s.op(Op::Sub, t, 1.0));
      KILN_ASSIGN_OR_RETURN(one_minus_t, ctx.apply(node, Op::Neg, {one_minus_t}));
      KILN_ASSIGN_OR_RETURN(Value next, s.op(Op::Add, base, 1.0));
      taps = {{base, one_minus_t}, {next, t}};
    } else {
      KILN_ASSIGN_OR_RETURN(std::vector<Value> weights, cubic_weights(s, t));
      for (int k = 0; k < 4; ++k) {
        KILN_ASSIGN_OR_RETURN(Value at, s.op(Op::Add, base, static_cast<double>(k - 1)));
        taps.push_back({at, weights[static_cast<size_t>(k)]});
      }
    }
  }
  // Each tap read as the padding mode says (the reference's _pixel_at_array).
  for (Tap& tap : taps) {
    if (m.padding == Padding::Border) {
      KILN_ASSIGN_OR_RETURN(tap.index, s.clamp(tap.index, 0, d - 1));
    } else if (m.padding == Padding::Reflection) {
      KILN_ASSIGN_OR_RETURN(tap.index, s.reflect(tap.index, lo, hi));
      KILN_ASSIGN_OR_RETURN(tap.index, s.floor(tap.index));  // whole already; floor as int() of a non-negative
    }
  }
  return taps;
}

Result<Padding> padding_of(const onnx::NodeProto& node) {
  KILN_ASSIGN_OR_RETURN(std::string padding, string_attribute(node, "padding_mode", "zeros"));
  if (padding == "zeros") return Padding::Zeros;
  if (padding == "border") return Padding::Border;
  if (padding == "reflection") return Padding::Reflection;
  return node_error(node, fmt::format("padding_mode '{}' is none of zeros, border and reflection", padding));
}

// GridSample(X [N, C, d...], grid [N, out..., r]) {align_corners, mode, padding_mode}:
// [N, C, out...]. Opset 16 names the modes bilinear and bicubic, opset 20 linear and cubic.
Status convert_grid_sample(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"align_corners", "mode", "padding_mode"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value grid, ctx.input(node, 1));
  const ir::TensorType xt = ctx.type_of(x), gt = ctx.type_of(grid);
  const int64_t dims = xt.rank() - 2;
  if (!ir::is_float(xt.dtype) || !ir::is_float(gt.dtype))
    return node_error(node, fmt::format("expected float X and grid, got {} and {}", xt.to_string(), gt.to_string()));
  if (dims < 1 || dims > 3)
    return node_error(node, fmt::format("GridSample of {} spatial dims is not supported (1 to 3)", dims));
  if (gt.rank() != xt.rank() || gt.shape[0] != xt.shape[0] || gt.shape.back() != dims)
    return node_error(node, fmt::format("the grid must be [{}, out..., {}] for X {}, got {}", xt.shape[0], dims,
                                        xt.to_string(), gt.to_string()));
  for (int64_t i = 0; i < dims; ++i)
    if (xt.shape[static_cast<size_t>(2 + i)] < 1)
      return node_error(node, fmt::format("X {} has an empty spatial dim, which no grid can sample", xt.to_string()));
  Mode m;
  KILN_ASSIGN_OR_RETURN(m.interpolation, string_attribute(node, "mode", ctx.opset() >= 20 ? "linear" : "bilinear"));
  if (m.interpolation == "bilinear") m.interpolation = "linear";
  if (m.interpolation == "bicubic") m.interpolation = "cubic";
  if (m.interpolation != "nearest" && m.interpolation != "linear" && m.interpolation != "cubic")
    return node_error(node, fmt::format("mode '{}' is none of nearest, linear and cubic", m.interpolation));
  KILN_ASSIGN_OR_RETURN(m.padding, padding_of(node));
  KILN_ASSIGN_OR_RETURN(int64_t align, int_attribute(node, "align_corners", 0));
  m.align_corners = align != 0;
  const int64_t n = xt.shape[0], channels = xt.shape[1];
  const ir::Shape out(gt.shape.begin(), gt.shape.end() - 1);  // [N, out...]
  int64_t positions = 1;
  for (int64_t i = 0; i < dims; ++i) positions *= xt.shape[static_cast<size_t>(2 + i)];
  const ir::DType compute = wide_type(gt.dtype);
  Sampler s(ctx, node, out, compute);
  KILN_ASSIGN_OR_RETURN(Value g, cast(ctx, node, grid, compute));
  // Per spatial dim i of X, its taps; the grid lists the dims last first (x, then y, ...).
  std::vector<std::vector<Tap>> taps;
  for (int64_t i = 0; i < dims; ++i) {
    KILN_ASSIGN_OR_RETURN(Value component, slice_axis(ctx, node, g, gt.rank() - 1, dims - 1 - i, dims - i));
    KILN_ASSIGN_OR_RETURN(component, reshaped(ctx, node, component, out));
    KILN_ASSIGN_OR_RETURN(auto dim_taps, taps_of_dim(ctx, node, s, component, xt.shape[static_cast<size_t>(2 + i)], m));
    taps.push_back(std::move(dim_taps));
  }
  // X as rows of channels: [N·positions, C], in the compute type.
  std::vector<int64_t> channels_last = {0};
  for (int64_t i = 0; i < dims; ++i) channels_last.push_back(2 + i);
  channels_last.push_back(1);
  KILN_ASSIGN_OR_RETURN(Value wide, cast(ctx, node, x, wide_type(xt.dtype)));
  KILN_ASSIGN_OR_RETURN(Value rows, transposed(ctx, node, wide, channels_last));
  KILN_ASSIGN_OR_RETURN(rows, reshaped(ctx, node, rows, {n * positions, channels}));
  KILN_ASSIGN_OR_RETURN(Value batch, iota(ctx, node, out, 0, ir::DType::I64));
  KILN_ASSIGN_OR_RETURN(Value batch_row, with_scalar(ctx, node, Op::Mul, batch, static_cast<double>(positions)));
  ir::Shape with_channels = out;
  with_channels.push_back(channels);
  ir::Shape with_one = out;
  with_one.push_back(1);
  KILN_ASSIGN_OR_RETURN(Value zero_index, s.filled(0));
  std::optional<Value> sum;
  std::vector<size_t> pick(static_cast<size_t>(dims), 0);  // one tap per dim, counted like digits
  while (true) {
    Value row = batch_row;
    std::optional<Value> weight, valid;
    int64_t stride = positions;
    for (int64_t i = 0; i < dims; ++i) {
      const int64_t extent = xt.shape[static_cast<size_t>(2 + i)];
      stride /= extent;
      const Tap& tap = taps[static_cast<size_t>(i)][pick[static_cast<size_t>(i)]];
      KILN_ASSIGN_OR_RETURN(Value in, s.within(tap.index, 0, static_cast<double>(extent - 1)));
      KILN_ASSIGN_OR_RETURN(Value safe, s.select(in, tap.index, zero_index));
      KILN_ASSIGN_OR_RETURN(Value whole, cast(ctx, node, safe, ir::DType::I64));
      KILN_ASSIGN_OR_RETURN(whole, with_scalar(ctx, node, Op::Mul, whole, static_cast<double>(stride)));
      KILN_ASSIGN_OR_RETURN(row, ctx.apply(node, Op::Add, {row, whole}));
      if (valid) {
        KILN_ASSIGN_OR_RETURN(valid, ctx.apply(node, Op::And, {*valid, in}));
      } else {
        valid = in;
      }
      if (tap.weight && weight) {
        KILN_ASSIGN_OR_RETURN(weight, ctx.apply(node, Op::Mul, {*weight, *tap.weight}));
      } else if (tap.weight) {
        weight = tap.weight;
      }
    }
    ir::Attrs gather;
    gather.set("axis", int64_t{0});
    KILN_ASSIGN_OR_RETURN(Value read, ctx.apply(node, Op::Gather, {rows, row}, std::move(gather)));
    if (weight) {
      KILN_ASSIGN_OR_RETURN(Value w, reshaped(ctx, node, *weight, with_one));
      KILN_ASSIGN_OR_RETURN(read, binary(ctx, node, Op::Mul, read, w));
    }
    KILN_ASSIGN_OR_RETURN(Value v1, reshaped(ctx, node, *valid, with_one));
    KILN_ASSIGN_OR_RETURN(Value v, ctx.broadcast_to(node, v1, with_channels));
    KILN_ASSIGN_OR_RETURN(Value zeros, ctx.broadcast_to(node, scalar(0.0, wide_type(xt.dtype)), with_channels));
    KILN_ASSIGN_OR_RETURN(Value term, s.select(v, read, zeros));
    if (sum) {
      KILN_ASSIGN_OR_RETURN(sum, ctx.apply(node, Op::Add, {*sum, term}));
    } else {
      sum = term;
    }
    size_t i = 0;
    while (i < pick.size() && ++pick[i] == taps[i].size()) pick[i++] = 0;
    if (i == pick.size()) break;
  }
  // [N, out..., C] to [N, C, out...].
  std::vector<int64_t> channels_second = {0, dims + 1};
  for (int64_t i = 0; i < dims; ++i) channels_second.push_back(1 + i);
  KILN_ASSIGN_OR_RETURN(Value y, transposed(ctx, node, *sum, channels_second));
  KILN_ASSIGN_OR_RETURN(y, cast(ctx, node, y, xt.dtype));
  return define_output(ctx, node, 0, y);
}

constexpr OpConverter kConverters[] = {
    {"GridSample", convert_grid_sample},
};

}  // namespace

std::span<const OpConverter> grid_sample_converters() { return kConverters; }

}  // namespace kiln::onnx_import
