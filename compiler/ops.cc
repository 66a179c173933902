// The free functions of the model-definition API: numpy-style broadcasting made
// explicit, then one op each.
#include <fmt/format.h>

#include "compiler/model.h"

namespace kiln {
namespace {

using ir::Op;

Model* model_of(std::initializer_list<Tensor> ts) {
  for (const Tensor& t : ts)
    if (t.valid()) return t.model();
  return nullptr;
}

Tensor unary(Op op, Tensor x) { return x.valid() ? x.model()->apply(op, {x}) : x; }

// Rank-0 operands need no broadcast (elementwise ops accept scalars); others are
// broadcast to the common shape.
std::vector<Tensor> broadcast_all(std::vector<Tensor> ts, Op op) {
  ir::Shape shape;
  for (const Tensor& t : ts) {
    if (!t.valid()) return ts;
    if (t.rank() == 0) continue;
    auto s = broadcast_shapes(shape, t.shape());
    if (!s) {
      ts[0].model()->apply(op, ts);  // records the op's own error when shapes cannot match
      return {Tensor(), Tensor(), Tensor()};
    }
    shape = *s;
  }
  for (Tensor& t : ts)
    if (t.rank() != 0 && t.shape() != shape) t = broadcast_to(t, shape);
  return ts;
}

Tensor binary(Op op, Tensor a, Tensor b) {
  Model* m = model_of({a, b});
  if (!m || !a.valid() || !b.valid()) return {};
  auto ts = broadcast_all({a, b}, op);
  if (!ts[0].valid() || !ts[1].valid()) return {};
  return m->apply(op, {ts[0], ts[1]});
}

Tensor with_scalar(Op op, Tensor a, double b, bool scalar_first) {
  if (!a.valid()) return a;
  Tensor s = a.model()->scalar(b, a.dtype());
  return scalar_first ? binary(op, s, a) : binary(op, a, s);
}

Tensor reduction(Op op, Tensor x, std::vector<int64_t> axes, bool keepdims) {
  if (!x.valid()) return x;
  ir::Attrs attrs;
  attrs.set("axes", std::move(axes));
  attrs.set("keepdims", keepdims);
  return x.model()->apply(op, {x}, std::move(attrs));
}

Tensor with_attr(Op op, std::vector<Tensor> operands, ir::Attrs attrs) {
  for (const Tensor& t : operands)
    if (!t.valid()) return {};
  return operands[0].model()->apply(op, operands, std::move(attrs));
}

ir::Attrs attr(std::string name, ir::AttrValue value) {
  ir::Attrs a;
  a.set(std::move(name), std::move(value));
  return a;
}

}  // namespace

std::optional<ir::Shape> broadcast_shapes(const ir::Shape& a, const ir::Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  ir::Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor broadcast(Tensor x, const ir::Shape& shape, const std::vector<int64_t>& dims) {
  ir::Attrs attrs;
  attrs.set("shape", shape);
  attrs.set("dims", dims);
  return with_attr(Op::Broadcast, {x}, std::move(attrs));
}

Tensor broadcast_to(Tensor x, const ir::Shape& shape) {
  if (!x.valid()) return x;
  std::vector<int64_t> dims;
  int64_t offset = static_cast<int64_t>(shape.size()) - x.rank();
  for (int64_t i = 0; i < x.rank(); ++i) dims.push_back(i + offset);
  if (offset < 0) dims.clear();  // let the op report the rank mismatch
  return broadcast(x, shape, dims);
}

// The unary elementwise ops' functions, one per row of ir/ops.def marked Unary.
#define KILN_API_Unary(Enum, fn) \
  Tensor fn(Tensor x) { return unary(Op::Enum, x); }
#define KILN_API_Custom
#define KILN_OP(Enum, name, arity, kind, attrs, operands, math, gradient, api) KILN_API_##api
#include "ir/ops.def"
#undef KILN_OP
#undef KILN_API_Custom
#undef KILN_API_Unary
Tensor add(Tensor a, Tensor b) { return binary(Op::Add, a, b); }
Tensor sub(Tensor a, Tensor b) { return binary(Op::Sub, a, b); }
Tensor mul(Tensor a, Tensor b) { return binary(Op::Mul, a, b); }
Tensor div(Tensor a, Tensor b) { return binary(Op::Div, a, b); }
Tensor pow(Tensor a, Tensor b) { return binary(Op::Pow, a, b); }
Tensor maximum(Tensor a, Tensor b) { return binary(Op::Maximum, a, b); }
Tensor minimum(Tensor a, Tensor b) { return binary(Op::Minimum, a, b); }
Tensor eq(Tensor a, Tensor b) { return binary(Op::Eq, a, b); }
Tensor ne(Tensor a, Tensor b) { return binary(Op::Ne, a, b); }
Tensor lt(Tensor a, Tensor b) { return binary(Op::Lt, a, b); }
Tensor le(Tensor a, Tensor b) { return binary(Op::Le, a, b); }
Tensor gt(Tensor a, Tensor b) { return binary(Op::Gt, a, b); }
Tensor ge(Tensor a, Tensor b) { return binary(Op::Ge, a, b); }
Tensor logical_and(Tensor a, Tensor b) { return binary(Op::And, a, b); }
Tensor logical_or(Tensor a, Tensor b) { return binary(Op::Or, a, b); }

Tensor select(Tensor cond, Tensor a, Tensor b) {
  Model* m = model_of({cond, a, b});
  if (!m || !cond.valid() || !a.valid() || !b.valid()) return {};
  auto ts = broadcast_all({cond, a, b}, Op::Select);
  if (!ts[0].valid()) return {};
  return m->apply(Op::Select, ts);
}

Tensor cast(Tensor x, ir::DType to) { return with_attr(Op::Cast, {x}, attr("to", to)); }

Tensor operator+(Tensor a, Tensor b) { return add(a, b); }
Tensor operator-(Tensor a, Tensor b) { return sub(a, b); }
Tensor operator*(Tensor a, Tensor b) { return mul(a, b); }
Tensor operator/(Tensor a, Tensor b) { return div(a, b); }
Tensor operator-(Tensor x) { return neg(x); }
Tensor operator+(Tensor a, double b) { return with_scalar(Op::Add, a, b, false); }
Tensor operator-(Tensor a, double b) { return with_scalar(Op::Sub, a, b, false); }
Tensor operator*(Tensor a, double b) { return with_scalar(Op::Mul, a, b, false); }
Tensor operator/(Tensor a, double b) { return with_scalar(Op::Div, a, b, false); }
Tensor operator+(double a, Tensor b) { return with_scalar(Op::Add, b, a, true); }
Tensor operator-(double a, Tensor b) { return with_scalar(Op::Sub, b, a, true); }
Tensor operator*(double a, Tensor b) { return with_scalar(Op::Mul, b, a, true); }
Tensor operator/(double a, Tensor b) { return with_scalar(Op::Div, b, a, true); }

Tensor reduce_sum(Tensor x, std::vector<int64_t> axes, bool keepdims) {
  return reduction(Op::ReduceSum, x, std::move(axes), keepdims);
}
Tensor reduce_max(Tensor x, std::vector<int64_t> axes, bool keepdims) {
  return reduction(Op::ReduceMax, x, std::move(axes), keepdims);
}
Tensor reduce_min(Tensor x, std::vector<int64_t> axes, bool keepdims) {
  return reduction(Op::ReduceMin, x, std::move(axes), keepdims);
}

Tensor mean(Tensor x, std::vector<int64_t> axes, bool keepdims) {
  if (!x.valid()) return x;
  int64_t count = 1;
  for (int64_t a : axes) {
    int64_t d = a < 0 ? a + x.rank() : a;
    if (d >= 0 && d < x.rank()) count *= x.shape()[d];
  }
  Tensor sum = reduce_sum(x, std::move(axes), keepdims);
  return count ? sum * (1.0 / static_cast<double>(count)) : sum;
}

Tensor argmax(Tensor x, int64_t axis) { return with_attr(Op::Argmax, {x}, attr("axis", axis)); }
Tensor reshape(Tensor x, ir::Shape shape) { return with_attr(Op::Reshape, {x}, attr("shape", std::move(shape))); }
Tensor transpose(Tensor x, std::vector<int64_t> perm) {
  return with_attr(Op::Transpose, {x}, attr("perm", std::move(perm)));
}

Tensor slice(Tensor x, std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> strides) {
  ir::Attrs attrs;
  attrs.set("starts", std::move(starts));
  attrs.set("ends", std::move(ends));
  if (!strides.empty()) attrs.set("strides", std::move(strides));
  return with_attr(Op::Slice, {x}, std::move(attrs));
}

Tensor concat(const std::vector<Tensor>& parts, int64_t axis) {
  if (parts.empty()) return {};
  return with_attr(Op::Concat, parts, attr("axis", axis));
}

Tensor gather(Tensor table, Tensor indices, int64_t axis) {
  return with_attr(Op::Gather, {table, indices}, attr("axis", axis));
}
Tensor scatter_add(Tensor base, Tensor indices, Tensor updates, int64_t axis) {
  return with_attr(Op::ScatterAdd, {base, indices, updates}, attr("axis", axis));
}
Tensor matmul(Tensor a, Tensor b) { return with_attr(Op::Matmul, {a, b}, {}); }
Tensor softmax(Tensor x, int64_t axis) { return with_attr(Op::Softmax, {x}, attr("axis", axis)); }
Tensor log_softmax(Tensor x, int64_t axis) { return with_attr(Op::LogSoftmax, {x}, attr("axis", axis)); }

Tensor layer_norm(Tensor x, Tensor scale, Tensor bias, int64_t axis, double eps) {
  ir::Attrs attrs;
  attrs.set("axis", axis);
  attrs.set("eps", eps);
  return with_attr(Op::LayerNorm, {x, scale, bias}, std::move(attrs));
}

Tensor gelu(Tensor x, bool tanh_approximation) {
  return with_attr(Op::Gelu, {x}, tanh_approximation ? attr("approximate", std::string("tanh")) : ir::Attrs());
}

Tensor silu(Tensor x) { return with_attr(Op::Silu, {x}, {}); }
Tensor linear(Tensor x, Tensor w, Tensor b) { return with_attr(Op::Linear, {x, w, b}, {}); }

namespace {
ir::Attrs attention_attrs(double scale, bool causal) {
  ir::Attrs attrs;
  if (scale != 0) attrs.set("scale", scale);
  if (causal) attrs.set("causal", true);
  return attrs;
}
}  // namespace

Tensor attention(Tensor q, Tensor k, Tensor v, double scale, bool causal) {
  return with_attr(Op::Attention, {q, k, v}, attention_attrs(scale, causal));
}

Tensor attention(Tensor q, Tensor k, Tensor v, Tensor mask, double scale, bool causal) {
  return with_attr(Op::Attention, {q, k, v, mask}, attention_attrs(scale, causal));
}
namespace {
void set_if_given(ir::Attrs& attrs, const char* name, std::vector<int64_t> values) {
  if (!values.empty()) attrs.set(name, std::move(values));
}
Tensor pool(Op op, Tensor x, std::vector<int64_t> window, const PoolOptions& o) {
  ir::Attrs attrs;
  attrs.set("window", std::move(window));
  set_if_given(attrs, "strides", o.strides);
  set_if_given(attrs, "pads", o.pads);
  set_if_given(attrs, "dilations", o.dilations);
  if (o.ceil_mode) attrs.set("ceil_mode", true);
  if (o.count_include_pad) attrs.set("count_include_pad", true);
  return with_attr(op, {x}, std::move(attrs));
}
}  // namespace

Tensor conv(Tensor x, Tensor w, const ConvOptions& o) {
  ir::Attrs attrs;
  set_if_given(attrs, "strides", o.strides);
  set_if_given(attrs, "pads", o.pads);
  set_if_given(attrs, "dilations", o.dilations);
  if (o.groups != 1) attrs.set("groups", o.groups);
  return with_attr(Op::Conv, {x, w}, std::move(attrs));
}
Tensor max_pool(Tensor x, std::vector<int64_t> window, const PoolOptions& o) {
  return pool(Op::MaxPool, x, std::move(window), o);
}
Tensor avg_pool(Tensor x, std::vector<int64_t> window, const PoolOptions& o) {
  return pool(Op::AvgPool, x, std::move(window), o);
}
Tensor pad(Tensor x, std::vector<int64_t> pads, double value) {
  ir::Attrs attrs;
  attrs.set("pads", std::move(pads));
  if (value != 0) attrs.set("value", value);
  return with_attr(Op::Pad, {x}, std::move(attrs));
}
Tensor batch_norm(Tensor x, Tensor scale, Tensor bias, Tensor mean, Tensor var, double epsilon) {
  ir::Attrs attrs;
  if (epsilon != 1e-5) attrs.set("epsilon", epsilon);
  return with_attr(Op::BatchNorm, {x, scale, bias, mean, var}, std::move(attrs));
}

Tensor mse_loss(Tensor prediction, Tensor target) { return with_attr(Op::MseLoss, {prediction, target}, {}); }
Tensor cross_entropy(Tensor logits, Tensor labels) { return with_attr(Op::CrossEntropy, {logits, labels}, {}); }

}  // namespace kiln
