#include "frontends/onnx/context.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <xxhash.h>

#include "frontends/onnx/importer.h"
#include "frontends/onnx/ops.h"
#include "ir/interpreter.h"
#include "ir/shape_inference.h"

namespace kiln::onnx_import {

namespace {

// Constants this small fold through the ops that read them (shape arithmetic, and the
// index tensors models build from it: Swin's attention-mask scatter indices have tens of
// thousands of elements); larger ones stay graph values, computed by the compiled model.
constexpr int64_t kMostFoldedElements = int64_t{1} << 20;
// Float constants broadcast to more elements than this are not folded.
constexpr int64_t kMostGrownElements = 4096;
// Constants this large become params (with weights) rather than literals in the IR.
constexpr int64_t kMostLiteralElements = 16;

ir::Literal literal_of(const ir::Tensor& t) {
  ir::Literal lit;
  lit.shape = t.type.shape;
  const int64_t n = t.size();
  for (int64_t k = 0; k < n; ++k) {
    if (t.holds_floats()) {
      lit.floats.push_back(t.floats[static_cast<size_t>(k)]);
      lit.ints.push_back(0);
    } else {
      lit.ints.push_back(t.ints[static_cast<size_t>(k)]);
      lit.floats.push_back(static_cast<double>(t.ints[static_cast<size_t>(k)]));
    }
  }
  lit.integral = !t.holds_floats();
  return lit;
}

bool foldable(ir::Op op) {
  const ir::OpKind kind = ir::op_kind(op);
  return kind == ir::OpKind::Elementwise || kind == ir::OpKind::Movement || kind == ir::OpKind::Reduction;
}

// Bitwise, so that NaNs of one pattern are equal.
bool same_content(const ir::Tensor& a, const ir::Tensor& b) {
  auto same_bytes = [](const auto& x, const auto& y) {
    return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) == 0);
  };
  return a.type == b.type && same_bytes(a.floats, b.floats) && same_bytes(a.ints, b.ints);
}

// XXH64 of the shape and the elements' bytes, each seeded with the hash before it.
uint64_t content_hash(const ir::Tensor& t) {
  uint64_t h = XXH64(t.type.shape.data(), t.type.shape.size() * sizeof(int64_t), 0);
  h = XXH64(t.floats.data(), t.floats.size() * sizeof(double), h);
  return XXH64(t.ints.data(), t.ints.size() * sizeof(int64_t), h);
}

}  // namespace

std::string where(const onnx::NodeProto& node) { return fmt::format("node '{}' ({}): ", node.name(), node.op_type()); }

Error node_error(const onnx::NodeProto& node, const std::string& message) {
  return make_error("onnx: " + where(node) + message);
}

void Context::define(const std::string& name, Value value) {
  value.name = name;
  values_[name] = std::move(value);
}

ir::TensorType Context::type_of(const Value& v) const { return v.id ? builder_.type(*v.id) : v.constant->type; }

ir::TensorType Context::type(const std::string& name) const { return type_of(values_.at(name)); }

const ir::Tensor* Context::constant(const std::string& name) const {
  auto it = values_.find(name);
  return it != values_.end() && it->second.constant ? &*it->second.constant : nullptr;
}

std::string Context::unique_name(const std::string& onnx_name) {
  std::string name = kiln_name(onnx_name);
  for (int suffix = 1; used_names_.count(name); ++suffix) name = kiln_name(onnx_name) + "_" + std::to_string(suffix);
  used_names_.insert(name);
  return name;
}

Result<ir::ValueId> Context::materialize(const Value& v) {
  if (v.id) return *v.id;
  if (!v.name.empty() && values_.count(v.name)) return operand(v.name);
  return constant_value(*v.constant, "");
}

namespace {

// Whether every element of t is its first (NaN equal to NaN).
bool splat(const ir::Tensor& t) {
  if (t.size() < 2) return false;
  for (int64_t k = 1; k < t.size(); ++k) {
    if (t.holds_floats()) {
      const double a = t.get(0), b = t.get(k);
      if (a != b && !(std::isnan(a) && std::isnan(b))) return false;
    } else if (t.ints[static_cast<size_t>(k)] != t.ints[0]) {
      return false;
    }
  }
  return true;
}

}  // namespace

Result<ir::ValueId> Context::constant_value(const ir::Tensor& t, const std::string& onnx_name) {
  // A tensor of one repeated value (a folded Expand, ConstantOfShape) is a scalar spread
  // over the shape: kernels compute with it as an immediate, where a literal array is
  // memory to read, and a large one a weight.
  if (splat(t)) {
    ir::Tensor one = t;
    one.type.shape = {};
    if (t.holds_floats()) one.floats.resize(1);
    else one.ints.resize(1);
    KILN_ASSIGN_OR_RETURN(ir::ValueId scalar, constant_value(one, onnx_name));
    ir::Attrs attrs;
    attrs.set("shape", t.type.shape);
    attrs.set("dims", std::vector<int64_t>{});
    return builder_.add(ir::Op::Broadcast, {scalar}, std::move(attrs), t.type.dtype);
  }
  if (t.size() > kMostLiteralElements) {
    // Exporters repeat folded constants per layer (GPT-2's causal mask, once per block):
    // one param holds each distinct value.
    const uint64_t key = content_hash(t);
    auto [first, last] = constant_params_.equal_range(key);
    for (auto it = first; it != last; ++it)
      if (same_content(*it->second.first, t)) return it->second.second;
    const std::string name = unique_name(onnx_name.empty() ? "const" : onnx_name);
    const ir::Tensor& stored = weights_[name] = t;
    const ir::ValueId id = builder_.arg(name, t.type, ir::ArgKind::Param);
    constant_params_.emplace(key, std::pair{&stored, id});
    return id;
  }
  ir::Attrs attrs;
  attrs.set("value", literal_of(t));
  return builder_.add(ir::Op::Constant, {}, std::move(attrs), t.type.dtype);
}

ir::Tensor SharedTensor::take() {
  ir::Tensor t = tensor_.use_count() == 1 ? std::move(*tensor_) : *tensor_;
  tensor_.reset();
  return t;
}

void Context::store_weights() {
  values_.clear();
  known_scatters_.clear();
  for (auto& [name, tensor] : initializer_weights_) weights_[name] = tensor.take();
  initializer_weights_.clear();
}

Result<ir::ValueId> Context::operand(const std::string& name) {
  Value& v = values_.at(name);
  if (v.id) return *v.id;
  ir::ValueId id;
  if (v.initializer) {
    const std::string kname = unique_name(name);
    initializer_weights_.emplace_back(kname, v.constant);
    id = builder_.arg(kname, v.constant->type, ir::ArgKind::Param);
  } else {
    KILN_ASSIGN_OR_RETURN(id, constant_value(*v.constant, name));
  }
  v.id = id;
  return id;
}

bool Context::has_input(const onnx::NodeProto& node, int index) {
  return index < node.input_size() && !node.input(index).empty();
}

Result<Value> Context::input(const onnx::NodeProto& node, int index) {
  if (!has_input(node, index)) return node_error(node, fmt::format("input {} is missing", index));
  const std::string& name = node.input(index);
  auto it = values_.find(name);
  if (it == values_.end()) return node_error(node, fmt::format("input '{}' is defined by no earlier node", name));
  return it->second;
}

bool Context::foldable_constant(const Value& v) {
  // Float initializers are weights: they stay params, which compute at run time.
  return !v.id && v.constant && !(v.initializer && ir::is_float(v.constant->type.dtype));
}

bool Context::inputs_known_at_import(const onnx::NodeProto& node) const {
  for (const std::string& name : node.input()) {
    if (name.empty()) continue;
    auto it = values_.find(name);
    if (it == values_.end() || !foldable_constant(it->second)) return false;
  }
  return true;
}

Result<Value> Context::apply(const onnx::NodeProto& node, ir::Op op, const std::vector<Value>& operands,
                             ir::Attrs attrs, std::optional<ir::DType> dtype) {
  Status attrs_ok = ir::check_attrs(op, attrs);
  if (!attrs_ok.ok()) return node_error(node, attrs_ok.error().message);
  std::vector<ir::TensorType> types;
  bool all_constant = true;
  for (const Value& v : operands) {
    types.push_back(type_of(v));
    all_constant = all_constant && foldable_constant(v);
  }
  auto type = ir::infer_type(op, types, attrs, dtype);
  if (!type.ok()) return node_error(node, type.error().message);
  // A float constant broadcast to a large shape stays a broadcast of the smaller constant:
  // a kernel reading it indexes the few values (an attention mask of [1,1,T,T] added to
  // [B,H,T,T] scores), where the folded result would be a weight H times larger. Integers
  // fold (indices an op needs at import may be built by an Expand), and so does a
  // scalar's broadcast (constant_value makes a splat a scalar broadcast again).
  const bool grows = op == ir::Op::Broadcast && ir::is_float(type->dtype) &&
                     type->num_elements() > kMostGrownElements && types[0].num_elements() > 1 &&
                     type->num_elements() > types[0].num_elements();
  // A source op (iota) folds where every input of the node is known at import, since its
  // result is then known too: BEiT's relative-position index is scatters of aranges,
  // which the one-hot ScatterElements compares with an iota. Elsewhere it stays a node,
  // never a weight of positions.
  const bool fold =
      foldable(op) || (ir::op_kind(op) == ir::OpKind::Source && op != ir::Op::Constant && inputs_known_at_import(node));
  if (all_constant && fold && !grows && type->num_elements() <= kMostFoldedElements) {
    std::vector<const ir::Tensor*> tensors;
    for (const Value& v : operands) tensors.push_back(&*v.constant);
    auto folded = ir::evaluate_op(op, tensors, attrs, *type);
    if (!folded.ok()) return node_error(node, folded.error().message);
    return Value{std::nullopt, std::move(*folded), false, ""};
  }
  std::vector<ir::ValueId> ids;
  for (const Value& v : operands) {
    KILN_ASSIGN_OR_RETURN(ir::ValueId id, materialize(v));
    ids.push_back(id);
  }
  auto added = builder_.add(op, std::move(ids), std::move(attrs), dtype);
  if (!added.ok()) return node_error(node, added.error().message);
  return Value{*added, std::nullopt, false, ""};
}

Result<Value> Context::broadcast_to(const onnx::NodeProto& node, const Value& v, const ir::Shape& shape) {
  const ir::Shape from = type_of(v).shape;
  if (from == shape) return v;
  if (from.size() > shape.size())
    return node_error(node, fmt::format("cannot broadcast {} to {}", type_of(v).to_string(), ir::shape_string(shape)));
  std::vector<int64_t> dims;
  const size_t lead = shape.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i] != shape[lead + i] && from[i] != 1)
      return node_error(node,
                        fmt::format("cannot broadcast {} to {}", type_of(v).to_string(), ir::shape_string(shape)));
    dims.push_back(static_cast<int64_t>(lead + i));
  }
  // Size-1 dims that grow are dropped first: broadcast maps each operand dim to one of
  // the result's with the same extent.
  Value squeezed = v;
  ir::Shape kept;
  std::vector<int64_t> kept_dims;
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] == shape[lead + i]) kept.push_back(from[i]), kept_dims.push_back(dims[i]);
  if (kept.size() != from.size()) {
    ir::Attrs reshape;
    reshape.set("shape", kept);
    KILN_ASSIGN_OR_RETURN(squeezed, apply(node, ir::Op::Reshape, {v}, std::move(reshape)));
  }
  ir::Attrs attrs;
  attrs.set("shape", shape);
  attrs.set("dims", kept_dims);
  return apply(node, ir::Op::Broadcast, {squeezed}, std::move(attrs));
}

Result<std::pair<Value, Value>> Context::broadcast_pair(const onnx::NodeProto& node, const Value& a, const Value& b) {
  const ir::Shape sa = type_of(a).shape, sb = type_of(b).shape;
  const size_t rank = std::max(sa.size(), sb.size());
  ir::Shape shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i + sa.size() >= rank ? sa[i + sa.size() - rank] : 1;
    const int64_t db = i + sb.size() >= rank ? sb[i + sb.size() - rank] : 1;
    if (da != db && da != 1 && db != 1)
      return node_error(
          node, fmt::format("shapes {} and {} do not broadcast", type_of(a).to_string(), type_of(b).to_string()));
    shape[i] = da == 1 ? db : da;
  }
  KILN_ASSIGN_OR_RETURN(Value ba, broadcast_to(node, a, shape));
  KILN_ASSIGN_OR_RETURN(Value bb, broadcast_to(node, b, shape));
  return std::pair{ba, bb};
}

Result<std::vector<int64_t>> constant_ints(Context& ctx, const onnx::NodeProto& node, int index, const char* what) {
  if (!Context::has_input(node, index)) return node_error(node, fmt::format("input {} ({}) is missing", index, what));
  KILN_ASSIGN_OR_RETURN(Value v, ctx.input(node, index));
  if (!v.constant || (v.initializer && ir::is_float(v.constant->type.dtype)))
    return node_error(node,
                      fmt::format("input {} ({}) is computed at run time; kiln needs it known at import", index, what));
  return ints_of(*v.constant);
}

Result<Value> reshaped(Context& ctx, const onnx::NodeProto& node, const Value& x, ir::Shape shape) {
  if (ctx.type_of(x).shape == shape) return x;
  ir::Attrs attrs;
  attrs.set("shape", std::move(shape));
  return ctx.apply(node, ir::Op::Reshape, {x}, std::move(attrs));
}

Result<std::optional<std::vector<int64_t>>> axes_of(Context& ctx, const onnx::NodeProto& node,
                                                    int64_t input_from_opset) {
  if (ctx.opset() < input_from_opset) {
    if (!attribute(node, "axes")) return std::optional<std::vector<int64_t>>();
    KILN_ASSIGN_OR_RETURN(auto axes, ints_attribute(node, "axes", std::nullopt));
    return std::optional(axes);
  }
  if (!Context::has_input(node, 1)) return std::optional<std::vector<int64_t>>();
  KILN_ASSIGN_OR_RETURN(auto axes, constant_ints(ctx, node, 1, "axes"));
  return std::optional(axes);
}

Result<Value> binary(Context& ctx, const onnx::NodeProto& node, ir::Op op, const Value& a, const Value& b) {
  KILN_ASSIGN_OR_RETURN(auto pair, ctx.broadcast_pair(node, a, b));
  return ctx.apply(node, op, {pair.first, pair.second});
}

Result<Value> with_scalar(Context& ctx, const onnx::NodeProto& node, ir::Op op, const Value& x, double s) {
  return binary(ctx, node, op, x, scalar(s, ctx.type_of(x).dtype));
}

Result<Value> transposed(Context& ctx, const onnx::NodeProto& node, const Value& x, std::vector<int64_t> perm) {
  ir::Attrs attrs;
  attrs.set("perm", std::move(perm));
  return ctx.apply(node, ir::Op::Transpose, {x}, std::move(attrs));
}

ir::DType wide_type(ir::DType dtype) {
  return dtype == ir::DType::F16 || dtype == ir::DType::BF16 ? ir::DType::F32 : dtype;
}

Result<Value> widened(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  return cast(ctx, node, x, wide_type(ctx.type_of(x).dtype));
}

Result<Value> cast(Context& ctx, const onnx::NodeProto& node, const Value& x, ir::DType to) {
  if (ctx.type_of(x).dtype == to) return x;
  ir::Attrs attrs;
  attrs.set("to", to);
  return ctx.apply(node, ir::Op::Cast, {x}, std::move(attrs));
}

// floor(x), plus 1 above the half, plus floor's parity at it.
Result<Value> round_half_to_even(Context& ctx, const onnx::NodeProto& node, const Value& x) {
  using ir::Op;
  auto unary = [&](Op op, const Value& v) { return ctx.apply(node, op, {v}); };
  KILN_ASSIGN_OR_RETURN(Value f, unary(Op::Floor, x));
  KILN_ASSIGN_OR_RETURN(Value d, ctx.apply(node, Op::Sub, {x, f}));
  KILN_ASSIGN_OR_RETURN(Value half_f, with_scalar(ctx, node, Op::Mul, f, 0.5));
  KILN_ASSIGN_OR_RETURN(Value half_floor, unary(Op::Floor, half_f));
  KILN_ASSIGN_OR_RETURN(Value twice, with_scalar(ctx, node, Op::Mul, half_floor, 2.0));
  KILN_ASSIGN_OR_RETURN(Value parity, ctx.apply(node, Op::Sub, {f, twice}));  // 0 or 1
  KILN_ASSIGN_OR_RETURN(Value up, with_scalar(ctx, node, Op::Add, f, 1.0));
  KILN_ASSIGN_OR_RETURN(Value at_half, ctx.apply(node, Op::Add, {f, parity}));
  KILN_ASSIGN_OR_RETURN(Value above, with_scalar(ctx, node, Op::Gt, d, 0.5));
  KILN_ASSIGN_OR_RETURN(Value below, with_scalar(ctx, node, Op::Lt, d, 0.5));
  KILN_ASSIGN_OR_RETURN(Value rest, ctx.apply(node, Op::Select, {below, f, at_half}));
  return ctx.apply(node, Op::Select, {above, up, rest});
}

Result<Value> iota(Context& ctx, const onnx::NodeProto& node, const ir::Shape& shape, int64_t axis, ir::DType dtype) {
  ir::Attrs attrs;
  attrs.set("shape", shape);
  attrs.set("axis", axis);
  return ctx.apply(node, ir::Op::Iota, {}, std::move(attrs), dtype);
}

Result<Value> slice_axis(Context& ctx, const onnx::NodeProto& node, const Value& x, int64_t axis, int64_t begin,
                         int64_t end) {
  const ir::Shape shape = ctx.type_of(x).shape;
  std::vector<int64_t> starts(shape.size(), 0), ends(shape.begin(), shape.end());
  starts[static_cast<size_t>(axis)] = begin;
  ends[static_cast<size_t>(axis)] = end;
  ir::Attrs attrs;
  attrs.set("starts", starts);
  attrs.set("ends", ends);
  return ctx.apply(node, ir::Op::Slice, {x}, std::move(attrs));
}

AxisLast axis_last(int64_t rank, int64_t axis) {
  AxisLast p;
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis) p.to_last.push_back(d);
  p.to_last.push_back(axis);
  p.back.resize(p.to_last.size());
  for (size_t i = 0; i < p.to_last.size(); ++i) p.back[static_cast<size_t>(p.to_last[i])] = static_cast<int64_t>(i);
  return p;
}

Result<Value> wrap_negative(Context& ctx, const onnx::NodeProto& node, const Value& indices, int64_t extent) {
  KILN_ASSIGN_OR_RETURN(Value negative, with_scalar(ctx, node, ir::Op::Lt, indices, 0));
  KILN_ASSIGN_OR_RETURN(Value shifted, with_scalar(ctx, node, ir::Op::Add, indices, static_cast<double>(extent)));
  return ctx.apply(node, ir::Op::Select, {negative, shifted, indices});
}

}  // namespace kiln::onnx_import
