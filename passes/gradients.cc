#include "passes/gradients.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ir/decompose.h"
#include "ir/decompose_window.h"
#include "ir/shape_inference.h"

namespace kiln::passes {
namespace {

using ir::Attrs;
using ir::GraphBuilder;
using ir::Node;
using ir::Op;
using ir::ValueId;
using Grads = std::vector<ValueId>;

// Short names for the ops rules are written in.
struct Emit {
  GraphBuilder& b;
  ValueId add(ValueId x, ValueId y) { return b.binary(Op::Add, x, y); }
  ValueId sub(ValueId x, ValueId y) { return b.binary(Op::Sub, x, y); }
  ValueId mul(ValueId x, ValueId y) { return b.binary(Op::Mul, x, y); }
  ValueId div(ValueId x, ValueId y) { return b.binary(Op::Div, x, y); }
  ValueId neg(ValueId x) { return b.unary(Op::Neg, x); }
  ValueId c(double value, ValueId like) { return b.scalar(value, b.type(like).dtype); }
  ValueId select(ValueId cond, ValueId x, ValueId y) { return b.emit(Op::Select, {cond, x, y}); }
  ValueId cmp(Op op, ValueId x, ValueId y) { return b.binary(op, x, y); }
  // g where cond holds, else 0.
  ValueId where(ValueId cond, ValueId g) { return select(cond, g, c(0, g)); }
};

std::vector<int64_t> iota_axes(int64_t from, int64_t to) {
  std::vector<int64_t> axes(static_cast<size_t>(std::max<int64_t>(to - from, 0)));
  std::iota(axes.begin(), axes.end(), from);
  return axes;
}

// An elementwise gradient goes to a rank-0 operand summed over all dims.
ValueId to_operand(GraphBuilder& b, ValueId g, ValueId operand) {
  if (b.type(operand).rank() == 0 && b.type(g).rank() != 0)
    return b.reduce(Op::ReduceSum, g, iota_axes(0, b.type(g).rank()));
  return g;
}

// g of a reduction's result, broadcast back over the reduced dims of x.
ValueId unreduce(GraphBuilder& b, const Node& n, ValueId g) {
  const ir::Shape x_shape = b.type(n.operands[0]).shape;
  int64_t rank = static_cast<int64_t>(x_shape.size());
  if (n.attrs.get_bool("keepdims", false)) return b.broadcast(g, x_shape, iota_axes(0, rank));
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t a : n.attrs.get_ints("axes")) reduced[*ir::normalize_axis(a, rank)] = true;
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < rank; ++d)
    if (!reduced[d]) kept.push_back(d);
  return b.broadcast(g, x_shape, kept);
}

// Swaps the last two dims (the matrix transpose of a batched operand).
ValueId transpose_last2(GraphBuilder& b, ValueId x) {
  int64_t rank = b.type(x).rank();
  std::vector<int64_t> perm = iota_axes(0, rank);
  std::swap(perm[rank - 1], perm[rank - 2]);
  Attrs attrs;
  attrs.set("perm", perm);
  return b.emit(Op::Transpose, {x}, std::move(attrs));
}

ValueId zeros_like(GraphBuilder& b, ValueId x) {
  const ir::TensorType t = b.type(x);
  return b.broadcast(b.scalar(0, t.dtype), t.shape, {});
}

ValueId reshape(GraphBuilder& b, ValueId x, ir::Shape shape) {
  if (b.type(x).shape == shape) return x;
  Attrs attrs;
  attrs.set("shape", std::move(shape));
  return b.emit(Op::Reshape, {x}, std::move(attrs));
}

ValueId slice_along(GraphBuilder& b, ValueId x, int64_t axis, int64_t start, int64_t end) {
  ir::Shape shape = b.type(x).shape;
  std::vector<int64_t> starts(shape.size(), 0), ends = shape;
  starts[axis] = start;
  ends[axis] = end;
  Attrs attrs;
  attrs.set("starts", std::move(starts));
  attrs.set("ends", std::move(ends));
  return b.emit(Op::Slice, {x}, std::move(attrs));
}

// ---- the rules ------------------------------------------------------------------

Grads neg(GraphBuilder& b, const Node&, ValueId g) { return {Emit{b}.neg(g)}; }

Grads abs(GraphBuilder& b, const Node& n, ValueId g) {
  Emit e{b};
  ValueId x = n.operands[0];
  return {e.select(e.cmp(Op::Gt, x, e.c(0, x)), g, e.where(e.cmp(Op::Lt, x, e.c(0, x)), e.neg(g)))};
}

Grads exp(GraphBuilder& b, const Node& n, ValueId g) { return {Emit{b}.mul(g, n.result)}; }
Grads log(GraphBuilder& b, const Node& n, ValueId g) { return {Emit{b}.div(g, n.operands[0])}; }
Grads sqrt(GraphBuilder& b, const Node& n, ValueId g) {
  Emit e{b};
  return {e.div(g, e.mul(n.result, e.c(2, g)))};
}
Grads rsqrt(GraphBuilder& b, const Node& n, ValueId g) {  // d/dx x^-1/2 = -y^3 / 2
  Emit e{b};
  ValueId y = n.result;
  return {e.mul(g, e.mul(e.mul(y, e.mul(y, y)), e.c(-0.5, g)))};
}
Grads sin(GraphBuilder& b, const Node& n, ValueId g) { return {Emit{b}.mul(g, b.unary(Op::Cos, n.operands[0]))}; }
Grads cos(GraphBuilder& b, const Node& n, ValueId g) {
  Emit e{b};
  return {e.neg(e.mul(g, b.unary(Op::Sin, n.operands[0])))};
}
Grads tanh(GraphBuilder& b, const Node& n, ValueId g) {
  Emit e{b};
  return {e.mul(g, e.sub(e.c(1, g), e.mul(n.result, n.result)))};
}
Grads sigmoid(GraphBuilder& b, const Node& n, ValueId g) {  // y (1 - y), from the forward value
  Emit e{b};
  return {e.mul(g, e.mul(n.result, e.sub(e.c(1, g), n.result)))};
}
// From the result (y > 0 exactly where x > 0): the forward's input then need not stay in
// memory, and a convolution's call can apply the relu on the way out.
Grads relu(GraphBuilder& b, const Node& n, ValueId g) {
  Emit e{b};
  return {e.where(e.cmp(Op::Gt, n.result, e.c(0, g)), g)};
}
Grads erf(GraphBuilder& b, const Node& n, ValueId g) {  // 2/sqrt(pi) exp(-x^2)
  Emit e{b};
  ValueId x = n.operands[0];
  return {e.mul(g, e.mul(b.unary(Op::Exp, e.neg(e.mul(x, x))), e.c(M_2_SQRTPI, g)))};
}

Grads add(GraphBuilder& b, const Node& n, ValueId g) {
  return {to_operand(b, g, n.operands[0]), to_operand(b, g, n.operands[1])};
}
Grads sub(GraphBuilder& b, const Node& n, ValueId g) {
  return {to_operand(b, g, n.operands[0]), to_operand(b, Emit{b}.neg(g), n.operands[1])};
}
Grads mul(GraphBuilder& b, const Node& n, ValueId g) {
  Emit e{b};
  ValueId x = n.operands[0], y = n.operands[1];
  return {to_operand(b, e.mul(g, y), x), to_operand(b, e.mul(g, x), y)};
}
Grads div(GraphBuilder& b, const Node& n, ValueId g) {  // d/dy x/y = -(x/y)/y
  Emit e{b};
  ValueId x = n.operands[0], y = n.operands[1];
  return {to_operand(b, e.div(g, y), x), to_operand(b, e.neg(e.div(e.mul(g, n.result), y)), y)};
}
Grads pow(GraphBuilder& b, const Node& n, ValueId g) {
  Emit e{b};
  ValueId x = n.operands[0], y = n.operands[1];
  ValueId dx = e.mul(g, e.mul(y, b.binary(Op::Pow, x, e.sub(y, e.c(1, y)))));
  ValueId dy = e.mul(g, e.mul(n.result, b.unary(Op::Log, x)));
  return {to_operand(b, dx, x), to_operand(b, dy, y)};
}
// Ties send the whole gradient to the first operand.
Grads maximum(GraphBuilder& b, const Node& n, ValueId g) {
  Emit e{b};
  ValueId x = n.operands[0], y = n.operands[1];
  return {to_operand(b, e.where(e.cmp(Op::Ge, x, y), g), x), to_operand(b, e.where(e.cmp(Op::Lt, x, y), g), y)};
}
Grads minimum(GraphBuilder& b, const Node& n, ValueId g) {
  Emit e{b};
  ValueId x = n.operands[0], y = n.operands[1];
  return {to_operand(b, e.where(e.cmp(Op::Le, x, y), g), x), to_operand(b, e.where(e.cmp(Op::Gt, x, y), g), y)};
}
Grads select(GraphBuilder& b, const Node& n, ValueId g) {
  Emit e{b};
  ValueId c = n.operands[0];
  return {kNoGradient, to_operand(b, e.where(c, g), n.operands[1]),
          to_operand(b, e.select(c, e.c(0, g), g), n.operands[2])};
}
Grads cast(GraphBuilder& b, const Node& n, ValueId g) {
  ir::DType from = b.type(n.operands[0]).dtype;
  if (!ir::is_float(from)) return {kNotDifferentiable};
  Attrs attrs;
  attrs.set("to", from);
  return {b.emit(Op::Cast, {g}, std::move(attrs))};
}

Grads reduce_sum(GraphBuilder& b, const Node& n, ValueId g) { return {unreduce(b, n, g)}; }
// The gradient is shared equally among the elements that attain the extremum.
Grads reduce_extremum(GraphBuilder& b, const Node& n, ValueId g) {
  Emit e{b};
  ValueId x = n.operands[0];
  ValueId hit = e.cmp(Op::Eq, x, unreduce(b, n, n.result));
  Attrs to;
  to.set("to", b.type(x).dtype);
  ValueId hits = b.emit(Op::Cast, {hit}, std::move(to));
  ValueId count = b.emit(Op::ReduceSum, {hits}, n.attrs);
  return {e.where(hit, unreduce(b, n, e.div(g, count)))};
}

Grads reshape_rule(GraphBuilder& b, const Node& n, ValueId g) { return {reshape(b, g, b.type(n.operands[0]).shape)}; }
Grads transpose(GraphBuilder& b, const Node& n, ValueId g) {
  const auto& perm = n.attrs.get_ints("perm");
  std::vector<int64_t> inverse(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) inverse[perm[d]] = static_cast<int64_t>(d);
  Attrs attrs;
  attrs.set("perm", inverse);
  return {b.emit(Op::Transpose, {g}, std::move(attrs))};
}
Grads broadcast(GraphBuilder& b, const Node& n, ValueId g) {
  const ir::Shape x_shape = b.type(n.operands[0]).shape;
  const auto& dims = n.attrs.get_ints("dims");
  const ir::Shape out_shape = b.type(n.result).shape;
  // Sum over the result dims no operand dim maps to, then over expanded size-1 dims.
  std::vector<int64_t> unmapped;
  for (int64_t d = 0; d < static_cast<int64_t>(out_shape.size()); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) unmapped.push_back(d);
  // Trailing dims first when others are summed too (a conv's bias, broadcast over N, H and
  // W of NCHW): their rows lie back to back, a fast row sum, which leaves a small column
  // sum, where one reduction over N, H and W walks every row with a stride.
  size_t trailing = 0;
  while (trailing < unmapped.size() &&
         unmapped[unmapped.size() - 1 - trailing] == static_cast<int64_t>(out_shape.size() - 1 - trailing))
    ++trailing;
  ValueId v = g;
  if (trailing > 0 && trailing < unmapped.size()) {
    v = b.reduce(Op::ReduceSum, v,
                 std::vector<int64_t>(unmapped.end() - static_cast<std::ptrdiff_t>(trailing), unmapped.end()));
    unmapped.resize(unmapped.size() - trailing);
  }
  if (!unmapped.empty()) v = b.reduce(Op::ReduceSum, v, unmapped);
  // v's dims are the mapped result dims in increasing order; put them in operand order.
  std::vector<int64_t> order(dims.begin(), dims.end());
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> perm;
  for (int64_t d : order) perm.push_back(std::find(sorted.begin(), sorted.end(), d) - sorted.begin());
  if (perm != iota_axes(0, static_cast<int64_t>(perm.size()))) {
    Attrs attrs;
    attrs.set("perm", perm);
    v = b.emit(Op::Transpose, {v}, std::move(attrs));
  }
  return {sum_to_shape(b, v, x_shape)};
}
Grads slice(GraphBuilder& b, const Node& n, ValueId g) {
  const ir::Shape x_shape = b.type(n.operands[0]).shape;
  std::vector<int64_t> strides =
      n.attrs.has("strides") ? n.attrs.get_ints("strides") : std::vector<int64_t>(x_shape.size(), 1);
  return {ir::unslice(b, g, x_shape, n.attrs.get_ints("starts"), strides)};
}
Grads max_pool(GraphBuilder& b, const Node& n, ValueId g) { return {ir::max_pool_gradient(b, n, g)}; }
// The convolution's gradients are library ops of their own (oneDNN's backward data and
// backward weights on the CPU; lowered to matmuls elsewhere).
Grads conv(GraphBuilder& b, const Node& n, ValueId g) {
  ValueId x = n.operands[0], w = n.operands[1];
  Attrs input = n.attrs, weights = n.attrs;
  input.set("shape", b.type(x).shape);
  weights.set("shape", b.type(w).shape);
  return {b.emit(Op::ConvInputGrad, {g, w}, std::move(input)), b.emit(Op::ConvWeightGrad, {x, g}, std::move(weights))};
}
Grads concat(GraphBuilder& b, const Node& n, ValueId g) {
  int64_t axis = *ir::normalize_axis(n.attrs.get_int("axis"), b.type(g).rank());
  Grads grads;
  int64_t offset = 0;
  for (ValueId x : n.operands) {
    int64_t extent = b.type(x).shape[axis];
    grads.push_back(slice_along(b, g, axis, offset, offset + extent));
    offset += extent;
  }
  return grads;
}
Grads gather(GraphBuilder& b, const Node& n, ValueId g) {  // scatter-add into zeros
  ValueId table = n.operands[0];
  return {b.emit(Op::ScatterAdd, {zeros_like(b, table), n.operands[1], g}, n.attrs), kNoGradient};
}
Grads scatter_add(GraphBuilder& b, const Node& n, ValueId g) {
  return {g, kNoGradient, b.emit(Op::Gather, {g, n.operands[1]}, n.attrs)};
}
Grads matmul(GraphBuilder& b, const Node& n, ValueId g) {
  ValueId x = n.operands[0], y = n.operands[1];
  const ir::Shape xs = b.type(x).shape, ys = b.type(y).shape;
  ValueId dx = b.binary(Op::Matmul, g, transpose_last2(b, y));
  ValueId dy;
  if (xs.size() > 2 && ys.size() == 2) {
    // A matrix shared by every batch index (a linear layer's weight): one GEMM over all the
    // batch's rows, [B·M, K]ᵀ [B·M, N], rather than a GEMM per index writing [B, K, N] and
    // a sum over B.
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < xs.size(); ++d) rows *= xs[d];
    ValueId x_rows = reshape(b, x, {rows, xs.back()});
    ValueId g_rows = reshape(b, g, {rows, b.type(g).shape.back()});
    dy = b.binary(Op::Matmul, transpose_last2(b, x_rows), g_rows);
  } else {
    dy = sum_to_shape(b, b.binary(Op::Matmul, transpose_last2(b, x), g), ys);
  }
  return {sum_to_shape(b, dx, xs), dy};
}

// Direct rules for composites whose decomposition would be longer or less stable.
int64_t axis_of(GraphBuilder& b, const Node& n) {
  return *ir::normalize_axis(n.attrs.get_int("axis", -1), b.type(n.operands[0]).rank());
}
ValueId sum_back(GraphBuilder& b, ValueId v, int64_t axis) {  // sum over axis, broadcast back
  const ir::Shape shape = b.type(v).shape;
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    if (d != axis) kept.push_back(d);
  return b.broadcast(b.reduce(Op::ReduceSum, v, {axis}), shape, kept);
}
Grads softmax(GraphBuilder& b, const Node& n, ValueId g) {  // y (g - sum(g y))
  Emit e{b};
  ValueId y = n.result;
  return {e.mul(y, e.sub(g, sum_back(b, e.mul(g, y), axis_of(b, n))))};
}
Grads log_softmax(GraphBuilder& b, const Node& n, ValueId g) {  // g - exp(y) sum(g)
  Emit e{b};
  return {e.sub(g, e.mul(b.unary(Op::Exp, n.result), sum_back(b, g, axis_of(b, n))))};
}
Grads layer_norm(GraphBuilder& b, const Node& n, ValueId g) {
  // xhat = (x - mean) rstd;  dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)).
  Emit e{b};
  ValueId x = n.operands[0];
  const ir::TensorType t = b.type(x);
  int64_t axis = axis_of(b, n);
  auto stats = ir::layer_norm_stats(b, x, axis, n.attrs.get_float("eps", 1e-5));
  ValueId xhat = e.mul(stats.centered, stats.rstd);
  std::vector<int64_t> norm_axes = iota_axes(axis, t.rank()), batch_axes = iota_axes(0, axis);
  ir::Shape norm_shape(t.shape.begin() + axis, t.shape.end());
  int64_t count = ir::num_elements(norm_shape);
  auto mean_back = [&](ValueId v) {
    ValueId m = e.mul(b.reduce(Op::ReduceSum, v, norm_axes), e.c(1.0 / static_cast<double>(count), v));
    return b.broadcast(m, t.shape, batch_axes);
  };
  ValueId dxhat = e.mul(g, b.broadcast(n.operands[1], t.shape, norm_axes));
  ValueId dx = e.mul(stats.rstd, e.sub(e.sub(dxhat, mean_back(dxhat)), e.mul(xhat, mean_back(e.mul(dxhat, xhat)))));
  auto over_batch = [&](ValueId v) { return batch_axes.empty() ? v : b.reduce(Op::ReduceSum, v, batch_axes); };
  return {dx, over_batch(e.mul(g, xhat)), over_batch(g)};
}
Grads gelu(GraphBuilder& b, const Node& n, ValueId g) {
  Emit e{b};
  ValueId x = n.operands[0];
  if (n.attrs.get_string("approximate", "none") == "tanh") {
    // t = tanh(k (x + a x^3)):  0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 a x^2)
    const double k = std::sqrt(2.0 / M_PI), a = 0.044715;
    ValueId x2 = e.mul(x, x);
    ValueId t = b.unary(Op::Tanh, e.mul(e.add(x, e.mul(e.mul(x2, x), e.c(a, x))), e.c(k, x)));
    ValueId left = e.mul(e.add(t, e.c(1, x)), e.c(0.5, x));
    ValueId dt = e.mul(e.sub(e.c(1, x), e.mul(t, t)), e.add(e.mul(x2, e.c(3 * a * k, x)), e.c(k, x)));
    return {e.mul(g, e.add(left, e.mul(e.mul(x, dt), e.c(0.5, x))))};
  }
  // Phi(x) + x phi(x) with Phi(x) = (1 + erf(x/sqrt2))/2 and phi(x) = exp(-x^2/2)/sqrt(2 pi)
  ValueId cdf = e.mul(e.add(b.unary(Op::Erf, e.mul(x, e.c(M_SQRT1_2, x))), e.c(1, x)), e.c(0.5, x));
  ValueId pdf = e.mul(b.unary(Op::Exp, e.mul(e.mul(x, x), e.c(-0.5, x))), e.c(0.5 * M_2_SQRTPI * M_SQRT1_2, x));
  return {e.mul(g, e.add(cdf, e.mul(x, pdf)))};
}

// A call with a custom backward: one call of the backward function per floating-point
// operand, each picking that operand's gradient from the backward's results.
Grads call(GraphBuilder& b, const Node& n, ValueId g) {
  std::vector<ValueId> operands = n.operands;
  operands.push_back(g);
  Grads grads;
  int64_t index = 0;
  for (ValueId x : n.operands) {
    if (!ir::is_float(b.type(x).dtype)) {
      grads.push_back(kNotDifferentiable);
      continue;
    }
    Attrs attrs;
    attrs.set("callee", n.attrs.get_string("backward"));
    attrs.set("result", index++);
    grads.push_back(b.emit(Op::Call, operands, std::move(attrs)));
  }
  return grads;
}

struct Entry {
  Op op;
  GradientRule rule;
};

// The table. Ops absent from it are not differentiable, or are differentiated through
// their decomposition.
constexpr Entry kRules[] = {
    {Op::Abs, abs},
    {Op::Add, add},
    {Op::Broadcast, broadcast},
    {Op::Call, call},
    {Op::Cast, cast},
    {Op::Concat, concat},
    {Op::Conv, conv},
    {Op::Cos, cos},
    {Op::Div, div},
    {Op::Erf, erf},
    {Op::Exp, exp},
    {Op::Gather, gather},
    {Op::Gelu, gelu},
    {Op::LayerNorm, layer_norm},
    {Op::Log, log},
    {Op::LogSoftmax, log_softmax},
    {Op::Matmul, matmul},
    {Op::MaxPool, max_pool},
    {Op::Maximum, maximum},
    {Op::Minimum, minimum},
    {Op::Mul, mul},
    {Op::Neg, neg},
    {Op::Pow, pow},
    {Op::ReduceMax, reduce_extremum},
    {Op::ReduceMin, reduce_extremum},
    {Op::ReduceSum, reduce_sum},
    {Op::Relu, relu},
    {Op::Reshape, reshape_rule},
    {Op::Rsqrt, rsqrt},
    {Op::ScatterAdd, scatter_add},
    {Op::Select, select},
    {Op::Sigmoid, sigmoid},
    {Op::Sin, sin},
    {Op::Slice, slice},
    {Op::Softmax, softmax},
    {Op::Sqrt, sqrt},
    {Op::Sub, sub},
    {Op::Tanh, tanh},
    {Op::Transpose, transpose},
};

}  // namespace

GradientRule gradient_rule(Op op) {
  for (const Entry& e : kRules)
    if (e.op == op) return e.rule;
  return nullptr;
}

bool has_direct_rule(const Node& n) {
  if (n.op == Op::Call) return n.attrs.has("backward");
  return gradient_rule(n.op) != nullptr;
}

ValueId sum_to_shape(GraphBuilder& b, ValueId v, const ir::Shape& shape) {
  const ir::Shape from = b.type(v).shape;
  int64_t extra = static_cast<int64_t>(from.size()) - static_cast<int64_t>(shape.size());
  if (extra > 0) v = b.reduce(Op::ReduceSum, v, iota_axes(0, extra));
  std::vector<int64_t> expanded;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] == 1 && from[d + static_cast<size_t>(std::max<int64_t>(extra, 0))] != 1)
      expanded.push_back(static_cast<int64_t>(d));
  if (!expanded.empty()) v = b.reduce(Op::ReduceSum, v, expanded, /*keepdims=*/true);
  return v;
}

}  // namespace kiln::passes
