// conv, conv_input_grad and conv_weight_grad as im2col and matmuls (the lower-conv pass).
#include <functional>
#include <numeric>

#include "ir/decompose_window.h"
#include "ir/window_taps.h"

namespace kiln::ir {
namespace {

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

// Beyond this many taps the columns are one gather, not a slice per tap and a concat of
// them all: those exceed what one kernel fuses (wav2vec2's positional convolution, 128
// taps, ran as 129 kernels, its concat at 0.12 of copy).
constexpr int64_t kMaxSlicedTaps = 16;

// The columns as [C, taps, N, positions], gathered from the padded input with its spatial
// dims flattened: tap t's element at position p lies at offset(t) + offset(p) there, each
// a sum over the spatial dims of an iota times the dim's pitch (and dilation or stride),
// which the gather's kernel computes as it reads.
ValueId gathered_columns(GraphBuilder& b, ValueId xp, const ConvSizes& c) {
  const Shape padded = b.type(xp).shape;
  const int64_t k = c.win.spatial_rank();
  Shape index_shape(c.win.window.begin(), c.win.window.end());
  index_shape.insert(index_shape.end(), c.win.output.begin(), c.win.output.end());
  int64_t pitch = 1;
  ValueId index = kNoValue;
  auto add_term = [&](int64_t axis, int64_t factor) {
    Attrs attrs;
    attrs.set("shape", index_shape);
    attrs.set("axis", axis);
    ValueId term = *b.add(Op::Iota, {}, std::move(attrs), DType::I64);
    if (factor != 1) term = b.binary(Op::Mul, term, b.scalar(static_cast<double>(factor), DType::I64));
    index = index == kNoValue ? term : b.binary(Op::Add, index, term);
  };
  for (int64_t d = k; d-- > 0;) {
    const auto dim = static_cast<size_t>(d);
    add_term(d, c.win.dilations[dim] * pitch);
    add_term(k + d, c.win.strides[dim] * pitch);
    pitch *= padded[2 + dim];
  }
  ValueId flat = reshape_to(b, xp, {c.batch, c.channels, pitch});
  Attrs attrs;
  attrs.set("axis", int64_t{2});
  ValueId cols = b.emit(Op::Gather, {flat, reshape_to(b, index, {c.taps, c.positions})}, std::move(attrs));
  return b.emit(Op::Transpose, {cols}, perm_attrs({1, 2, 0, 3}));  // [C, taps, N, positions]
}

// The columns (im2col) as [groups, C/groups·taps, N·positions]: channel-major rows, taps
// within, as w's rows; the batch folded into the columns, so that each group is one GEMM
// with a long N (and the weights' gradient one with a long K), not a small GEMM per image.
ValueId columns_of(GraphBuilder& b, ValueId xp, const ConvSizes& c) {
  if (c.taps > kMaxSlicedTaps)
    return reshape_to(b, gathered_columns(b, xp, c), {c.groups, c.group_in * c.taps, c.batch * c.positions});
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
  for (int64_t d = 0; d < k; ++d) padded_shape.push_back(c.win.padded_end(d));
  std::vector<ValueId> shares;
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
    shares.push_back(b.emit(Op::Transpose, {part}, perm_attrs(std::move(perm))));  // [N, C, E...]
  }
  ValueId sum = add_back_taps(b, shares, c.win, padded_shape);
  ValueId dx = unpadded(b, sum, c.win, x_shape);
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

}  // namespace kiln::ir
