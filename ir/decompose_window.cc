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

Attrs perm_attrs(std::vector<int64_t> perm) {
  Attrs attrs;
  attrs.set("perm", std::move(perm));
  return attrs;
}

// A conv's geometry and sizes, from x's and w's shapes and its attributes.
struct ConvSizes {
  Window win;
  int64_t batch, channels, outs, groups, group_in, group_out, taps, positions;

  ConvSizes(const Shape& x, const Shape& w, const Attrs& attrs)
      : win(*window_of(Op::Conv, x, Shape(w.begin() + 2, w.end()), attrs)),
        batch(x[0]),
        channels(x[1]),
        outs(w[0]),
        groups(attrs.get_int("groups", 1)),
        group_in(channels / groups),
        group_out(outs / groups),
        taps(std::accumulate(win.window.begin(), win.window.end(), int64_t{1}, std::multiplies<>())),
        positions(std::accumulate(win.output.begin(), win.output.end(), int64_t{1}, std::multiplies<>())) {}

  bool depthwise() const { return group_in == 1 && group_out == 1 && groups > 1; }
};

// The columns (im2col) as [groups, C/groups·taps, N·positions]: channel-major rows, taps
// within, as w's rows; the batch folded into the columns, so that each group is one GEMM
// with a long N (and the weights' gradient one with a long K), not a small GEMM per image.
ValueId columns_of(GraphBuilder& b, ValueId xp, const ConvSizes& c) {
  std::vector<ValueId> columns;
  for_each_tap(b, xp, c.win, [&](int64_t, ValueId slice) {
    columns.push_back(reshape_to(b, slice, {c.batch, c.channels, 1, c.positions}));
  });
  ValueId cols = columns[0];
  if (columns.size() > 1) {
    Attrs attrs;
    attrs.set("axis", int64_t{2});
    cols = b.emit(Op::Concat, std::move(columns), std::move(attrs));
  }
  cols = b.emit(Op::Transpose, {cols}, perm_attrs({1, 2, 0, 3}));  // [C, taps, N, positions]
  return reshape_to(b, cols, {c.groups, c.group_in * c.taps, c.batch * c.positions});
}

// dy: [N, O, E...] as [groups, O/groups, N·positions].
ValueId gradient_rows(GraphBuilder& b, ValueId dy, const ConvSizes& c) {
  std::vector<int64_t> perm(b.type(dy).shape.size());
  std::iota(perm.begin(), perm.end(), int64_t{0});
  std::swap(perm[0], perm[1]);
  ValueId t = b.emit(Op::Transpose, {dy}, perm_attrs(std::move(perm)));
  return reshape_to(b, t, {c.groups, c.group_out, c.batch * c.positions});
}

}  // namespace

ValueId unslice(GraphBuilder& b, ValueId g, const Shape& full, const std::vector<int64_t>& starts,
                const std::vector<int64_t>& strides) {
  // g padded back to `full` with zeros, one dim at a time; a stride s spreads each element
  // to every s-th place by appending s-1 zeros behind it.
  auto zeros_along = [&](ValueId x, int64_t axis, int64_t extent) {
    TensorType t = b.type(x);
    t.shape[static_cast<size_t>(axis)] = extent;
    return b.broadcast(b.scalar(0, t.dtype), t.shape, {});
  };
  auto concat_along = [&](std::vector<ValueId> parts, int64_t axis) {
    if (parts.size() == 1) return parts[0];
    Attrs attrs;
    attrs.set("axis", axis);
    return b.emit(Op::Concat, std::move(parts), std::move(attrs));
  };
  ValueId v = g;
  for (int64_t d = 0; d < static_cast<int64_t>(full.size()); ++d) {
    const int64_t count = b.type(v).shape[static_cast<size_t>(d)], s = strides[static_cast<size_t>(d)];
    if (count == full[static_cast<size_t>(d)]) continue;
    if (s > 1 && count > 0) {
      Shape split = b.type(v).shape;
      split.insert(split.begin() + d + 1, 1);
      ValueId column = reshape_to(b, v, split);
      ValueId spread = concat_along({column, zeros_along(column, d + 1, s - 1)}, d + 1);
      Shape merged = b.type(v).shape;
      merged[static_cast<size_t>(d)] = count * s;
      v = reshape_to(b, spread, merged);
      const int64_t keep = std::min(count * s, full[static_cast<size_t>(d)] - starts[static_cast<size_t>(d)]);
      if (keep < count * s) {
        std::vector<int64_t> from(merged.size(), 0), to = merged;
        to[static_cast<size_t>(d)] = keep;
        Attrs attrs;
        attrs.set("starts", std::move(from));
        attrs.set("ends", std::move(to));
        v = b.emit(Op::Slice, {v}, std::move(attrs));
      }
    }
    const int64_t before = starts[static_cast<size_t>(d)],
                  after = full[static_cast<size_t>(d)] - before - b.type(v).shape[static_cast<size_t>(d)];
    std::vector<ValueId> parts;
    if (before > 0) parts.push_back(zeros_along(v, d, before));
    parts.push_back(v);
    if (after > 0) parts.push_back(zeros_along(v, d, after));
    v = concat_along(parts, d);
  }
  return v;
}

ValueId lower_conv(GraphBuilder& b, const Node& n) {
  const ValueId x = n.operands[0], w = n.operands[1];
  const ConvSizes c(b.type(x).shape, b.type(w).shape, n.attrs);
  const Shape out = output_shape(c.batch, c.outs, c.win);
  ValueId xp = padded_for_windows(b, x, c.win, 0.0);
  if (c.depthwise()) return depthwise_conv(b, xp, w, c.win, out);
  ValueId y =
      b.binary(Op::Matmul, reshape_to(b, w, {c.groups, c.group_out, c.group_in * c.taps}), columns_of(b, xp, c));
  Shape channels_outer{c.outs, c.batch};
  channels_outer.insert(channels_outer.end(), c.win.output.begin(), c.win.output.end());
  y = reshape_to(b, y, channels_outer);  // [O, N, E1..Ek]
  std::vector<int64_t> perm(out.size());
  std::iota(perm.begin(), perm.end(), int64_t{0});
  std::swap(perm[0], perm[1]);
  return b.emit(Op::Transpose, {y}, perm_attrs(std::move(perm)));
}

ValueId lower_conv_input_grad(GraphBuilder& b, const Node& n) {
  const ValueId dy = n.operands[0], w = n.operands[1];
  const Shape x_shape = n.attrs.get_ints("shape");
  const ConvSizes c(x_shape, b.type(w).shape, n.attrs);
  const int64_t k = c.win.spatial_rank();
  // The columns' gradient, wᵀ·dy per group: [C, taps, N, E...].
  ValueId wt =
      b.emit(Op::Transpose, {reshape_to(b, w, {c.groups, c.group_out, c.group_in * c.taps})}, perm_attrs({0, 2, 1}));
  ValueId dcols = b.binary(Op::Matmul, wt, gradient_rows(b, dy, c));
  Shape by_tap{c.channels, c.taps, c.batch};
  by_tap.insert(by_tap.end(), c.win.output.begin(), c.win.output.end());
  dcols = reshape_to(b, dcols, by_tap);
  // Each tap's share goes back where its slice of the padded input came from; the taps'
  // shares add up, and the padding is cut off again.
  Shape padded_shape{c.batch, c.channels};
  std::vector<int64_t> lo(x_shape.size(), 0), hi(x_shape.size(), 0);
  for (int64_t d = 0; d < k; ++d) {
    padded_shape.push_back(c.win.padded_end(d));
    lo[static_cast<size_t>(2 + d)] = -c.win.pad_lo[static_cast<size_t>(d)];
    hi[static_cast<size_t>(2 + d)] =
        c.win.pad_lo[static_cast<size_t>(d)] + c.win.input[static_cast<size_t>(d)] - c.win.padded_end(d);
  }
  std::vector<int64_t> tap(static_cast<size_t>(k), 0);
  ValueId sum = kNoValue;
  for (int64_t t = 0; t < c.taps; ++t) {
    std::vector<int64_t> from(by_tap.size(), 0), to = by_tap;
    from[1] = t;
    to[1] = t + 1;
    Attrs attrs;
    attrs.set("starts", std::move(from));
    attrs.set("ends", std::move(to));
    Shape one_tap = by_tap;
    one_tap.erase(one_tap.begin() + 1);  // [C, N, E...]
    ValueId part = reshape_to(b, b.emit(Op::Slice, {dcols}, std::move(attrs)), one_tap);
    std::vector<int64_t> perm(one_tap.size());
    std::iota(perm.begin(), perm.end(), int64_t{0});
    std::swap(perm[0], perm[1]);
    part = b.emit(Op::Transpose, {part}, perm_attrs(std::move(perm)));  // [N, C, E...]
    std::vector<int64_t> starts(padded_shape.size(), 0), strides(padded_shape.size(), 1);
    for (int64_t d = 0; d < k; ++d) {
      starts[static_cast<size_t>(2 + d)] = tap[static_cast<size_t>(d)] * c.win.dilations[static_cast<size_t>(d)];
      strides[static_cast<size_t>(2 + d)] = c.win.strides[static_cast<size_t>(d)];
    }
    part = unslice(b, part, padded_shape, starts, strides);
    sum = sum == kNoValue ? part : b.binary(Op::Add, sum, part);
    for (int64_t d = k; d-- > 0;) {
      if (++tap[static_cast<size_t>(d)] < c.win.window[static_cast<size_t>(d)]) break;
      tap[static_cast<size_t>(d)] = 0;
    }
  }
  ValueId dx = padded(b, sum, lo, hi, 0.0);
  if (dx == sum && b.graph().nodes.back().result != dx) dx = reshape_to(b, dx, x_shape);
  return dx;
}

ValueId lower_conv_weight_grad(GraphBuilder& b, const Node& n) {
  const ValueId x = n.operands[0], dy = n.operands[1];
  const Shape w_shape = n.attrs.get_ints("shape");
  const ConvSizes c(b.type(x).shape, w_shape, n.attrs);
  ValueId cols = columns_of(b, padded_for_windows(b, x, c.win, 0.0), c);
  ValueId dw = b.binary(Op::Matmul, gradient_rows(b, dy, c), b.emit(Op::Transpose, {cols}, perm_attrs({0, 2, 1})));
  return reshape_to(b, dw, w_shape);
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

ValueId max_pool_gradient(GraphBuilder& b, const Node& n, ValueId g) {
  const ValueId x = n.operands[0], y = n.result;
  const TensorType xt = b.type(x);
  const Window win = *window_of(n.op, xt.shape, {}, n.attrs);
  const int64_t k = win.spatial_rank();
  ValueId xp = padded_for_windows(b, x, win, -INFINITY);
  const Shape padded_shape = b.type(xp).shape;
  // Each tap's share: g where the tap is the window's maximum and no earlier tap was.
  std::vector<ValueId> shares;
  ValueId seen = kNoValue, zero = b.scalar(0, xt.dtype);
  for_each_tap(b, xp, win, [&](int64_t, ValueId slice) {
    ValueId hit = b.binary(Op::Eq, slice, y);
    ValueId first = seen == kNoValue ? hit : b.binary(Op::And, hit, b.unary(Op::Not, seen));
    seen = seen == kNoValue ? hit : b.binary(Op::Or, seen, hit);
    shares.push_back(b.emit(Op::Select, {first, g, zero}));
  });
  bool tiles = true;
  for (int64_t d = 0; d < k; ++d)
    tiles = tiles && win.strides[static_cast<size_t>(d)] == win.window[static_cast<size_t>(d)] &&
            win.dilations[static_cast<size_t>(d)] == 1;
  ValueId placed = kNoValue;
  if (tiles) {
    // [N, C, E1, 1, ..., Ek, 1] per tap, joined along the tap axes from the last spatial
    // dim to the first, then merged: [N, C, E1·K1, ..., Ek·Kk].
    Shape spread{xt.shape[0], xt.shape[1]};
    for (int64_t d = 0; d < k; ++d) spread.insert(spread.end(), {win.output[static_cast<size_t>(d)], 1});
    for (ValueId& s : shares) s = reshape_to(b, s, spread);
    for (int64_t d = k; d-- > 0;) {
      const int64_t count = win.window[static_cast<size_t>(d)];
      std::vector<ValueId> joined;
      for (size_t start = 0; start < shares.size(); start += static_cast<size_t>(count)) {
        std::vector<ValueId> group(shares.begin() + static_cast<std::ptrdiff_t>(start),
                                   shares.begin() + static_cast<std::ptrdiff_t>(start + static_cast<size_t>(count)));
        if (group.size() == 1) {
          joined.push_back(group[0]);
          continue;
        }
        Attrs attrs;
        attrs.set("axis", 2 + 2 * d + 1);
        joined.push_back(b.emit(Op::Concat, std::move(group), std::move(attrs)));
      }
      shares = std::move(joined);
    }
    Shape merged{xt.shape[0], xt.shape[1]};
    for (int64_t d = 0; d < k; ++d)
      merged.push_back(win.output[static_cast<size_t>(d)] * win.window[static_cast<size_t>(d)]);
    placed = reshape_to(b, shares[0], merged);
  } else {
    std::vector<int64_t> tap(static_cast<size_t>(k), 0);
    for (ValueId share : shares) {
      std::vector<int64_t> starts(padded_shape.size(), 0), strides(padded_shape.size(), 1);
      for (int64_t d = 0; d < k; ++d) {
        starts[static_cast<size_t>(2 + d)] = tap[static_cast<size_t>(d)] * win.dilations[static_cast<size_t>(d)];
        strides[static_cast<size_t>(2 + d)] = win.strides[static_cast<size_t>(d)];
      }
      ValueId part = unslice(b, share, padded_shape, starts, strides);
      placed = placed == kNoValue ? part : b.binary(Op::Add, placed, part);
      for (int64_t d = k; d-- > 0;) {
        if (++tap[static_cast<size_t>(d)] < win.window[static_cast<size_t>(d)]) break;
        tap[static_cast<size_t>(d)] = 0;
      }
    }
  }
  // Back from the windows' reach to x: the begin padding cut off, the end cut or filled.
  std::vector<int64_t> lo(xt.shape.size(), 0), hi(xt.shape.size(), 0);
  const Shape placed_shape = b.type(placed).shape;
  for (int64_t d = 0; d < k; ++d) {
    lo[static_cast<size_t>(2 + d)] = -win.pad_lo[static_cast<size_t>(d)];
    hi[static_cast<size_t>(2 + d)] = xt.shape[static_cast<size_t>(2 + d)] + win.pad_lo[static_cast<size_t>(d)] -
                                     placed_shape[static_cast<size_t>(2 + d)];
  }
  return padded(b, placed, lo, hi, 0.0);
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
