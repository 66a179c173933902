#include "ir/decompose.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>

#include "ir/builder.h"
#include "ir/decompose_window.h"
#include "ir/shape_inference.h"

namespace kiln::ir {
namespace {

std::vector<int64_t> all_dims_except(int64_t rank, int64_t axis) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis) dims.push_back(d);
  return dims;
}

// max over `axis`, broadcast back: the shift that keeps exp() from overflowing.
ValueId row_max(GraphBuilder& b, ValueId x, int64_t axis) {
  const TensorType t = b.type(x);  // a copy: emitting nodes may move the value table
  ValueId m = b.reduce(Op::ReduceMax, x, {axis});
  return b.broadcast(m, t.shape, all_dims_except(t.rank(), axis));
}

ValueId softmax(GraphBuilder& b, const Node& n) {
  ValueId x = n.operands[0];
  Shape shape = b.type(x).shape;
  int64_t axis = *normalize_axis(n.attrs.get_int("axis", -1), static_cast<int64_t>(shape.size()));
  ValueId e = b.unary(Op::Exp, b.binary(Op::Sub, x, row_max(b, x, axis)));
  ValueId s =
      b.broadcast(b.reduce(Op::ReduceSum, e, {axis}), shape, all_dims_except(static_cast<int64_t>(shape.size()), axis));
  return b.binary(Op::Div, e, s);
}

ValueId log_softmax_of(GraphBuilder& b, ValueId x, int64_t axis) {
  Shape shape = b.type(x).shape;
  ValueId z = b.binary(Op::Sub, x, row_max(b, x, axis));
  ValueId s = b.reduce(Op::ReduceSum, b.unary(Op::Exp, z), {axis});
  return b.binary(Op::Sub, z,
                  b.broadcast(b.unary(Op::Log, s), shape, all_dims_except(static_cast<int64_t>(shape.size()), axis)));
}

ValueId log_softmax(GraphBuilder& b, const Node& n) {
  ValueId x = n.operands[0];
  return log_softmax_of(b, x, *normalize_axis(n.attrs.get_int("axis", -1), b.type(x).rank()));
}

ValueId layer_norm(GraphBuilder& b, const Node& n) {
  ValueId x = n.operands[0], scale = n.operands[1], bias = n.operands[2];
  const TensorType t = b.type(x);
  int64_t axis = *normalize_axis(n.attrs.get_int("axis", -1), t.rank());
  std::vector<int64_t> axes(static_cast<size_t>(t.rank() - axis));
  std::iota(axes.begin(), axes.end(), axis);
  LayerNormStats stats = layer_norm_stats(b, x, axis, n.attrs.get_float("eps", 1e-5));
  ValueId normed = b.binary(Op::Mul, stats.centered, stats.rstd);
  ValueId scaled = b.binary(Op::Mul, normed, b.broadcast(scale, t.shape, axes));
  return b.binary(Op::Add, scaled, b.broadcast(bias, t.shape, axes));
}

}  // namespace

LayerNormStats layer_norm_stats(GraphBuilder& b, ValueId x, int64_t axis, double eps) {
  const TensorType t = b.type(x);
  std::vector<int64_t> axes(static_cast<size_t>(t.rank() - axis));
  std::iota(axes.begin(), axes.end(), axis);
  std::vector<int64_t> kept(static_cast<size_t>(axis));
  std::iota(kept.begin(), kept.end(), 0);
  int64_t count = 1;
  for (int64_t a : axes) count *= t.shape[a];
  ValueId inv_count = b.scalar(1.0 / static_cast<double>(count), t.dtype);
  ValueId mean = b.binary(Op::Mul, b.reduce(Op::ReduceSum, x, axes), inv_count);
  ValueId centered = b.binary(Op::Sub, x, b.broadcast(mean, t.shape, kept));
  ValueId var = b.binary(Op::Mul, b.reduce(Op::ReduceSum, b.binary(Op::Mul, centered, centered), axes), inv_count);
  ValueId rstd = b.unary(Op::Rsqrt, b.binary(Op::Add, var, b.scalar(eps, t.dtype)));
  return {centered, b.broadcast(rstd, t.shape, kept)};
}

namespace {

ValueId gelu(GraphBuilder& b, const Node& n) {
  ValueId x = n.operands[0];
  DType dt = b.type(x).dtype;
  ValueId inner;
  if (n.attrs.get_string("approximate", "none") == "tanh") {
    // tanh(sqrt(2/pi) * (x + 0.044715 x^3))
    ValueId x3 = b.binary(Op::Mul, b.binary(Op::Mul, x, x), x);
    ValueId poly = b.binary(Op::Add, x, b.binary(Op::Mul, x3, b.scalar(0.044715, dt)));
    inner = b.unary(Op::Tanh, b.binary(Op::Mul, poly, b.scalar(std::sqrt(2.0 / M_PI), dt)));
  } else {
    inner = b.unary(Op::Erf, b.binary(Op::Mul, x, b.scalar(M_SQRT1_2, dt)));
  }
  ValueId half_x = b.binary(Op::Mul, x, b.scalar(0.5, dt));
  return b.binary(Op::Mul, half_x, b.binary(Op::Add, inner, b.scalar(1.0, dt)));
}

ValueId silu(GraphBuilder& b, const Node& n) {
  ValueId x = n.operands[0];
  return b.binary(Op::Mul, x, b.unary(Op::Sigmoid, x));
}

ValueId linear(GraphBuilder& b, const Node& n) {
  ValueId y = b.binary(Op::Matmul, n.operands[0], n.operands[1]);
  Shape shape = b.type(y).shape;
  return b.binary(Op::Add, y, b.broadcast(n.operands[2], shape, {static_cast<int64_t>(shape.size()) - 1}));
}

ValueId mean_of_all(GraphBuilder& b, ValueId x) {
  const TensorType t = b.type(x);
  std::vector<int64_t> axes(static_cast<size_t>(t.rank()));
  std::iota(axes.begin(), axes.end(), 0);
  double inv = t.num_elements() ? 1.0 / static_cast<double>(t.num_elements()) : 0.0;
  return b.binary(Op::Mul, b.reduce(Op::ReduceSum, x, axes), b.scalar(inv, t.dtype));
}

ValueId mse_loss(GraphBuilder& b, const Node& n) {
  ValueId d = b.binary(Op::Sub, n.operands[0], n.operands[1]);
  return mean_of_all(b, b.binary(Op::Mul, d, d));
}

ValueId cross_entropy(GraphBuilder& b, const Node& n) {
  ValueId logits = n.operands[0], labels = n.operands[1];
  const TensorType t = b.type(logits);
  DType label_type = b.type(labels).dtype;
  ValueId lsm = log_softmax_of(b, logits, 1);
  // One-hot mask: iota over classes == label of the row.
  Attrs iota;
  iota.set("shape", t.shape);
  iota.set("axis", int64_t{1});
  ValueId classes = *b.add(Op::Iota, {}, std::move(iota), label_type);
  ValueId mask = b.binary(Op::Eq, classes, b.broadcast(labels, t.shape, {0}));
  ValueId picked = b.emit(Op::Select, {mask, lsm, b.scalar(0.0, t.dtype)});
  ValueId total = b.reduce(Op::ReduceSum, picked, {0, 1});
  return b.binary(Op::Mul, total, b.scalar(t.shape[0] ? -1.0 / static_cast<double>(t.shape[0]) : 0.0, t.dtype));
}

// softmax(q kᵀ · scale, masked) v, with masked scores -inf (a row masked whole gives NaN,
// as PyTorch's scaled_dot_product_attention does). causal keeps key j for query i when
// j <= i (the upper-left alignment of PyTorch's is_causal).
ValueId attention(GraphBuilder& b, const Node& n) {
  ValueId q = n.operands[0], k = n.operands[1], v = n.operands[2];
  const TensorType qt = b.type(q);
  const int64_t r = qt.rank();
  std::vector<int64_t> perm(static_cast<size_t>(r));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[r - 1], perm[r - 2]);
  Attrs transpose;
  transpose.set("perm", perm);
  ValueId scores = b.binary(Op::Matmul, q, b.emit(Op::Transpose, {k}, std::move(transpose)));
  const double scale = n.attrs.get_float("scale", 1.0 / std::sqrt(static_cast<double>(qt.shape.back())));
  scores = b.binary(Op::Mul, scores, b.scalar(scale, qt.dtype));
  const Shape shape = b.type(scores).shape;
  const int64_t queries = shape[r - 2], keys = shape[r - 1];
  std::vector<int64_t> last_two = {r - 2, r - 1};
  auto keep_where = [&](ValueId keep) {  // keep: bool[T,S] or the scores' shape
    if (b.type(keep).shape != shape) keep = b.broadcast(keep, shape, last_two);
    scores = b.emit(Op::Select, {keep, scores, b.scalar(-INFINITY, qt.dtype)});
  };
  if (n.attrs.get_bool("causal", false)) {
    auto positions = [&](int64_t axis) {
      Attrs iota;
      iota.set("shape", Shape{queries, keys});
      iota.set("axis", axis);
      return *b.add(Op::Iota, {}, std::move(iota), DType::I64);
    };
    keep_where(b.binary(Op::Le, positions(1), positions(0)));
  }
  if (n.operands.size() == 4) keep_where(n.operands[3]);
  Attrs softmax_axis;
  softmax_axis.set("axis", int64_t{-1});
  ValueId p = b.emit(Op::Softmax, {scores}, std::move(softmax_axis));
  return b.binary(Op::Matmul, p, v);
}

// Copies the callee's body in, its arguments bound to the call's operands.
ValueId inline_call(GraphBuilder& b, const Node& n) {
  Graph& g = b.graph();
  const Graph& callee = *g.find_function(n.attrs.get_string("callee"));
  std::vector<ValueId> map(callee.values.size(), kNoValue);
  for (size_t i = 0; i < callee.args.size(); ++i) map[callee.args[i].value] = n.operands[i];
  for (const Node& inner : callee.nodes) {
    std::vector<ValueId> operands;
    for (ValueId v : inner.operands) operands.push_back(map[v]);
    map[inner.result] = g.add_value(callee.type(inner.result));
    g.nodes.push_back(Node{inner.op, std::move(operands), inner.attrs, map[inner.result], n.loc});
  }
  ValueId result = map[callee.results[n.attrs.get_int("result", 0)]];
  if (g.nodes.empty() || g.nodes.back().result != result) {
    // The result is an argument or an earlier value: end with a copy that can take over
    // the call's result (canonicalize removes it).
    Attrs attrs;
    attrs.set("shape", g.type(result).shape);
    result = b.emit(Op::Reshape, {result}, std::move(attrs));
  }
  return result;
}

ValueId expand(GraphBuilder& b, const Node& n) {
  switch (n.op) {
    case Op::Call: return inline_call(b, n);
    case Op::Softmax: return softmax(b, n);
    case Op::LogSoftmax: return log_softmax(b, n);
    case Op::LayerNorm: return layer_norm(b, n);
    case Op::Gelu: return gelu(b, n);
    case Op::Silu: return silu(b, n);
    case Op::Linear: return linear(b, n);
    case Op::Attention: return attention(b, n);
    case Op::MseLoss: return mse_loss(b, n);
    case Op::CrossEntropy: return cross_entropy(b, n);
    case Op::MaxPool:
    case Op::AvgPool: return decompose_pool(b, n);
    case Op::Pad: return decompose_pad(b, n);
    case Op::BatchNorm: return decompose_batch_norm(b, n);
    default: assert(false && "expand: not a composite op"); return kNoValue;
  }
}

}  // namespace

namespace {
using Expander = ValueId (*)(GraphBuilder&, const Node&);
void decompose_once(Graph& g, const std::function<bool(const Node&)>& chosen, Expander expander = expand);

ValueId lower_convolution(GraphBuilder& b, const Node& n) {
  switch (n.op) {
    case Op::Conv: return lower_conv(b, n);
    case Op::ConvInputGrad: return lower_conv_input_grad(b, n);
    case Op::ConvWeightGrad: return lower_conv_weight_grad(b, n);
    default: assert(false && "lower_convolution: not a convolution"); return kNoValue;
  }
}
}  // namespace

bool lower_convolutions(Graph& g) {
  return lower_convolutions(g, [](const Node&) { return true; });
}

bool lower_convolutions(Graph& g, const std::function<bool(const Node&)>& select) {
  auto chosen = [&](const Node& n) { return is_convolution(n.op) && select(n); };
  if (std::none_of(g.nodes.begin(), g.nodes.end(), chosen)) return false;
  decompose_once(g, chosen, lower_convolution);
  return true;
}

bool decompose_composites(Graph& g) {
  return decompose_composites(g, [](const Node&) { return true; });
}

bool decompose_composites(Graph& g, const std::function<bool(const Node&)>& select) {
  auto chosen = [&](const Node& n) { return op_kind(n.op) == OpKind::Composite && select(n); };
  bool changed = false;
  // An inlined function body may hold composites (and calls) of its own: repeat.
  while (std::any_of(g.nodes.begin(), g.nodes.end(), chosen)) {
    decompose_once(g, chosen);
    changed = true;
  }
  // Functions nothing calls any more are dropped.
  if (std::none_of(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return n.op == Op::Call; })) g.functions.clear();
  return changed;
}

namespace {

void decompose_once(Graph& g, const std::function<bool(const Node&)>& chosen, Expander expander) {
  std::vector<Node> old_nodes = std::move(g.nodes);
  g.nodes.clear();
  GraphBuilder b(g);
  for (Node& n : old_nodes) {
    if (!chosen(n)) {
      g.nodes.push_back(std::move(n));
      continue;
    }
    [[maybe_unused]] ValueId v = expander(b, n);
    assert(!g.nodes.empty() && g.nodes.back().result == v && g.type(v) == g.type(n.result));
    g.nodes.back().result = n.result;  // the expansion's last node takes over the result
    g.nodes.back().loc = n.loc;
  }
}

}  // namespace

}  // namespace kiln::ir
