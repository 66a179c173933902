#include "ir/decompose_window.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "ir/window_taps.h"

namespace kiln::ir {

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

ValueId add_back_taps(GraphBuilder& b, const std::vector<ValueId>& shares, const Window& w, const Shape& padded_shape) {
  ValueId sum = kNoValue;
  for (size_t t = 0; t < shares.size(); ++t) {
    ValueId part = unslice(b, shares[t], padded_shape, tap_starts(w, static_cast<int64_t>(t), padded_shape.size()),
                           window_strides(w, padded_shape.size()));
    sum = sum == kNoValue ? part : b.binary(Op::Add, sum, part);
  }
  return sum;
}

ValueId unpadded(GraphBuilder& b, ValueId v, const Window& w, const Shape& x_shape) {
  const Shape shape = b.type(v).shape;
  std::vector<int64_t> lo(x_shape.size(), 0), hi(x_shape.size(), 0);
  for (size_t d = 0; d < static_cast<size_t>(w.spatial_rank()); ++d) {
    lo[2 + d] = -w.pad_lo[d];
    hi[2 + d] = x_shape[2 + d] + w.pad_lo[d] - shape[2 + d];
  }
  return padded(b, v, lo, hi, 0.0);
}

ValueId decompose_pool(GraphBuilder& b, const Node& n) {
  const ValueId x = n.operands[0];
  const TensorType xt = b.type(x);
  const Window win = *window_of(n.op, xt.shape, {}, n.attrs);
  const bool max = n.op == Op::MaxPool;
  // The max's padding is below every value of the type: -inf, or the integer type's least.
  ValueId xp = padded_for_windows(b, x, win, !max ? 0.0 : is_float(xt.dtype) ? -INFINITY : int_min(xt.dtype));
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
    placed = add_back_taps(b, shares, win, padded_shape);
  }
  return unpadded(b, placed, win, xt.shape);
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
