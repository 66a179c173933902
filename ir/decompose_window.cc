#include "ir/decompose_window.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "ir/window.h"

namespace kiln::ir {
namespace {

ValueId reshape_to(GraphBuilder& b, ValueId x, Shape shape) {
  Attrs attrs;
  attrs.set("shape", std::move(shape));
  return b.emit(Op::Reshape, {x}, std::move(attrs));
}

// x padded with `fill` by lo and hi along each dim (negative: cropped).
ValueId padded(GraphBuilder& b, ValueId x, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
               double fill) {
  const TensorType t = b.type(x);
  const size_t rank = t.shape.size();
  if (std::any_of(lo.begin(), lo.end(), [](int64_t p) { return p < 0; }) ||
      std::any_of(hi.begin(), hi.end(), [](int64_t p) { return p < 0; })) {
    std::vector<int64_t> starts(rank), ends(rank);
    for (size_t d = 0; d < rank; ++d) {
      starts[d] = std::max<int64_t>(0, -lo[d]);
      ends[d] = t.shape[d] - std::max<int64_t>(0, -hi[d]);
    }
    Attrs attrs;
    attrs.set("starts", std::move(starts));
    attrs.set("ends", std::move(ends));
    x = b.emit(Op::Slice, {x}, std::move(attrs));
  }
  for (size_t d = 0; d < rank; ++d) {
    std::vector<ValueId> parts;
    auto fill_of = [&](int64_t extent) {
      Shape shape = b.type(x).shape;
      shape[d] = extent;
      return b.broadcast(b.scalar(fill, t.dtype), shape, {});
    };
    if (lo[d] > 0) parts.push_back(fill_of(lo[d]));
    parts.push_back(x);
    if (hi[d] > 0) parts.push_back(fill_of(hi[d]));
    if (parts.size() == 1) continue;
    Attrs attrs;
    attrs.set("axis", static_cast<int64_t>(d));
    x = b.emit(Op::Concat, std::move(parts), std::move(attrs));
  }
  return x;
}

// The input padded for the windows: lo before, and after exactly as far as the last
// window reaches (past the end padding with ceil_mode, short of it where no window uses it).
ValueId padded_for_windows(GraphBuilder& b, ValueId x, const Window& w, double fill) {
  const size_t rank = b.type(x).shape.size();
  std::vector<int64_t> lo(rank, 0), hi(rank, 0);
  for (int64_t d = 0; d < w.spatial_rank(); ++d) {
    lo[2 + d] = w.pad_lo[d];
    hi[2 + d] = w.padded_end(d) - w.input[d] - w.pad_lo[d];
  }
  return padded(b, x, lo, hi, fill);
}

// Calls f(tap index, slice of xp: [N, C, E1..Ek]) for each window tap in row-major order.
void for_each_tap(GraphBuilder& b, ValueId xp, const Window& w, const std::function<void(int64_t, ValueId)>& f) {
  const Shape shape = b.type(xp).shape;
  const int64_t k = w.spatial_rank();
  std::vector<int64_t> tap(k, 0);
  const int64_t taps = std::accumulate(w.window.begin(), w.window.end(), int64_t{1}, std::multiplies<>());
  for (int64_t t = 0; t < taps; ++t) {
    std::vector<int64_t> starts(shape.size(), 0), ends = shape, strides(shape.size(), 1);
    for (int64_t d = 0; d < k; ++d) {
      starts[2 + d] = tap[d] * w.dilations[d];
      ends[2 + d] = starts[2 + d] + (w.output[d] - 1) * w.strides[d] + 1;
      strides[2 + d] = w.strides[d];
    }
    Attrs attrs;
    attrs.set("starts", std::move(starts));
    attrs.set("ends", std::move(ends));
    attrs.set("strides", std::move(strides));
    f(t, b.emit(Op::Slice, {xp}, std::move(attrs)));
    for (int64_t d = k; d-- > 0;) {
      if (++tap[d] < w.window[d]) break;
      tap[d] = 0;
    }
  }
}

Shape output_shape(int64_t n, int64_t c, const Window& w) {
  Shape shape{n, c};
  shape.insert(shape.end(), w.output.begin(), w.output.end());
  return shape;
}

// Depthwise conv (one input and one output channel per group): each tap's slice times its
// weight per channel, summed elementwise: one loop kernel, no matmul of 1-row matrices.
ValueId depthwise_conv(GraphBuilder& b, ValueId xp, ValueId w, const Window& win, const Shape& out) {
  const int64_t channels = out[1];
  const int64_t taps = std::accumulate(win.window.begin(), win.window.end(), int64_t{1}, std::multiplies<>());
  ValueId weights = reshape_to(b, w, {channels, taps});
  ValueId sum = kNoValue;
  for_each_tap(b, xp, win, [&](int64_t t, ValueId slice) {
    Attrs attrs;
    attrs.set("starts", std::vector<int64_t>{0, t});
    attrs.set("ends", std::vector<int64_t>{channels, t + 1});
    ValueId column = reshape_to(b, b.emit(Op::Slice, {weights}, std::move(attrs)), {channels});
    ValueId term = b.binary(Op::Mul, slice, b.broadcast(column, out, {1}));
    sum = sum == kNoValue ? term : b.binary(Op::Add, sum, term);
  });
  return sum;
}

}  // namespace

ValueId decompose_conv(GraphBuilder& b, const Node& n) {
  const ValueId x = n.operands[0], w = n.operands[1];
  const TensorType xt = b.type(x), wt = b.type(w);
  const Window win = *window_of(Op::Conv, xt.shape, Shape(wt.shape.begin() + 2, wt.shape.end()), n.attrs);
  const int64_t batch = xt.shape[0], channels = xt.shape[1], outs = wt.shape[0];
  const int64_t groups = n.attrs.get_int("groups", 1), group_in = channels / groups, group_out = outs / groups;
  const Shape out = output_shape(batch, outs, win);
  const int64_t taps = std::accumulate(win.window.begin(), win.window.end(), int64_t{1}, std::multiplies<>());
  const int64_t positions = std::accumulate(win.output.begin(), win.output.end(), int64_t{1}, std::multiplies<>());
  ValueId xp = padded_for_windows(b, x, win, 0.0);
  if (group_in == 1 && group_out == 1 && groups > 1) return depthwise_conv(b, xp, w, win, out);
  // The columns (im2col) as [C·taps, N·positions]: channel-major rows, taps within, as w's
  // rows; the batch folded into the columns, so that each group is one GEMM with a long N
  // (and its gradients GEMMs with a long K), not one small GEMM per image.
  std::vector<ValueId> columns;
  for_each_tap(b, xp, win, [&](int64_t, ValueId slice) {
    columns.push_back(reshape_to(b, slice, {batch, channels, 1, positions}));
  });
  ValueId cols = columns[0];
  if (columns.size() > 1) {
    Attrs attrs;
    attrs.set("axis", int64_t{2});
    cols = b.emit(Op::Concat, std::move(columns), std::move(attrs));
  }
  Attrs channels_first;
  channels_first.set("perm", std::vector<int64_t>{1, 2, 0, 3});
  cols = b.emit(Op::Transpose, {cols}, std::move(channels_first));  // [C, taps, N, positions]
  cols = reshape_to(b, cols, {groups, group_in * taps, batch * positions});
  ValueId y = b.binary(Op::Matmul, reshape_to(b, w, {groups, group_out, group_in * taps}), cols);
  Shape channels_outer{outs, batch};
  channels_outer.insert(channels_outer.end(), win.output.begin(), win.output.end());
  y = reshape_to(b, y, channels_outer);  // [O, N, E1..Ek]
  std::vector<int64_t> perm(out.size());
  std::iota(perm.begin(), perm.end(), int64_t{0});
  std::swap(perm[0], perm[1]);
  Attrs batch_first;
  batch_first.set("perm", std::move(perm));
  return b.emit(Op::Transpose, {y}, std::move(batch_first));
}

ValueId decompose_pool(GraphBuilder& b, const Node& n) {
  const ValueId x = n.operands[0];
  const TensorType xt = b.type(x);
  const Window win = *window_of(n.op, xt.shape, {}, n.attrs);
  const bool max = n.op == Op::MaxPool;
  ValueId xp = padded_for_windows(b, x, win, max ? -INFINITY : 0.0);
  ValueId acc = kNoValue;
  for_each_tap(b, xp, win, [&](int64_t, ValueId slice) {
    acc = acc == kNoValue ? slice : b.binary(max ? Op::Maximum : Op::Add, acc, slice);
  });
  if (max) return acc;
  // avg_pool's divisor per output position: a product over dims of per-dim counts.
  const bool include_pad = n.attrs.get_bool("count_include_pad", false);
  const Shape out = output_shape(xt.shape[0], xt.shape[1], win);
  double uniform = 1;
  ValueId divisor = kNoValue;
  for (int64_t d = 0; d < win.spatial_rank(); ++d) {
    std::vector<double> counts;
    for (int64_t e = 0; e < win.output[d]; ++e) {
      const int64_t begin = e * win.strides[d] - win.pad_lo[d], end = begin + win.window[d];
      counts.push_back(static_cast<double>(include_pad ? std::min(end, win.input[d] + win.pad_hi[d]) - begin
                                                       : std::min(end, win.input[d]) - std::max<int64_t>(begin, 0)));
    }
    if (std::all_of(counts.begin(), counts.end(), [&](double c) { return c == counts[0]; })) {
      uniform *= counts[0];
      continue;
    }
    Attrs attrs;
    attrs.set("value",
              Literal{{static_cast<int64_t>(counts.size())}, counts, std::vector<int64_t>(counts.size(), 0), false});
    ValueId column = b.broadcast(*b.add(Op::Constant, {}, std::move(attrs), xt.dtype), out, {2 + d});
    divisor = divisor == kNoValue ? column : b.binary(Op::Mul, divisor, column);
  }
  if (divisor == kNoValue) return b.binary(Op::Div, acc, b.scalar(uniform, xt.dtype));
  if (uniform != 1) divisor = b.binary(Op::Mul, divisor, b.scalar(uniform, xt.dtype));
  return b.binary(Op::Div, acc, divisor);
}

ValueId decompose_pad(GraphBuilder& b, const Node& n) {
  const ValueId x = n.operands[0];
  const Padding p = *padding_of(b.type(x).shape, n.attrs);
  ValueId y = padded(b, x, p.lo, p.hi, n.attrs.get_float("value", 0.0));
  if (y == x) y = reshape_to(b, x, b.type(x).shape);  // no padding: a copy takes over the result
  return y;
}

ValueId decompose_batch_norm(GraphBuilder& b, const Node& n) {
  const ValueId x = n.operands[0], scale = n.operands[1], bias = n.operands[2], mean = n.operands[3],
                var = n.operands[4];
  const TensorType t = b.type(x);
  ValueId rstd = b.unary(Op::Rsqrt, b.binary(Op::Add, var, b.scalar(n.attrs.get_float("epsilon", 1e-5), t.dtype)));
  ValueId centered = b.binary(Op::Sub, x, b.broadcast(mean, t.shape, {1}));
  ValueId normed = b.binary(Op::Mul, centered, b.broadcast(b.binary(Op::Mul, rstd, scale), t.shape, {1}));
  return b.binary(Op::Add, normed, b.broadcast(bias, t.shape, {1}));
}

}  // namespace kiln::ir
