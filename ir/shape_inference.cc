#include "ir/shape_inference.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ir/window.h"

namespace kiln::ir {
namespace {

Error op_error(Op op, std::string_view message) { return make_error(fmt::format("{}: {}", op_name(op), message)); }

std::string types_string(std::span<const TensorType> types) {
  std::string s;
  for (size_t i = 0; i < types.size(); ++i) s += (i ? ", " : "") + types[i].to_string();
  return s;
}

Status check_shape_values(Op op, const Shape& shape, std::string_view what) {
  if (shape.size() > 16) return op_error(op, fmt::format("{} has rank {}, more than 16", what, shape.size()));
  for (int64_t d : shape)
    if (d < 0) return op_error(op, fmt::format("{} {} has a negative dimension", what, shape_string(shape)));
  if (!dims_within_limit(shape))
    return op_error(op, fmt::format("{} {} {}", what, shape_string(shape), dims_limit_error(shape)));
  return Status::Ok();
}

// The element types ir/ops.def says the op takes.
Status check_operand_types(Op op, const TensorType& t) {
  const OperandTypes types = op_operand_types(op);
  const bool ok = types == OperandTypes::Any || types == OperandTypes::Compared ||
                  (types == OperandTypes::Numeric && t.dtype != DType::Bool) ||
                  (types == OperandTypes::Float && is_float(t.dtype)) ||
                  (types == OperandTypes::Bool && t.dtype == DType::Bool);
  if (ok) return Status::Ok();
  return op_error(op, fmt::format("expected {} operand, got {}", operand_types_text(types), t.to_string()));
}

// Elementwise operands must have equal shapes or be rank-0 scalars; the result takes
// the shape of the non-scalar operands.
Result<Shape> elementwise_shape(Op op, std::span<const TensorType> in) {
  const Shape* shape = nullptr;
  for (const TensorType& t : in) {
    if (t.rank() == 0) continue;
    if (shape && *shape != t.shape)
      return op_error(
          op, fmt::format("operand shapes differ: {} (broadcast explicitly with 'broadcast')", types_string(in)));
    shape = &t.shape;
  }
  return shape ? *shape : Shape{};
}

Result<TensorType> infer_unary(Op op, const TensorType& x) {
  KILN_RETURN_IF_ERROR(check_operand_types(op, x));
  return x;
}

Result<TensorType> infer_binary(Op op, std::span<const TensorType> in) {
  if (in[0].dtype != in[1].dtype)
    return op_error(op, fmt::format("operand element types differ: {}", types_string(in)));
  KILN_RETURN_IF_ERROR(check_operand_types(op, in[0]));
  KILN_ASSIGN_OR_RETURN(Shape shape, elementwise_shape(op, in));
  return TensorType{op_operand_types(op) == OperandTypes::Compared ? DType::Bool : in[0].dtype, shape};
}

Result<std::vector<int64_t>> normalize_axes(Op op, const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    auto n = normalize_axis(a, rank);
    if (!n) return op_error(op, fmt::format("axis {} is out of range for rank {}", a, rank));
    if (std::find(out.begin(), out.end(), *n) != out.end())
      return op_error(op, fmt::format("axis {} appears twice", a));
    out.push_back(*n);
  }
  return out;
}

Result<TensorType> infer_reduce(Op op, const TensorType& x, const Attrs& attrs) {
  KILN_RETURN_IF_ERROR(check_operand_types(op, x));
  KILN_ASSIGN_OR_RETURN(auto axes, normalize_axes(op, attrs.get_ints("axes"), x.rank()));
  bool keep = attrs.get_bool("keepdims", false);
  TensorType out{x.dtype, {}};
  for (int64_t d = 0; d < x.rank(); ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (reduced && x.shape[d] == 0 && op != Op::ReduceSum)
      return op_error(op, fmt::format("cannot reduce the empty axis {} of {}", d, x.to_string()));
    if (!reduced) out.shape.push_back(x.shape[d]);
    else if (keep) out.shape.push_back(1);
  }
  return out;
}

Result<TensorType> infer_argmax(const TensorType& x, const Attrs& attrs) {
  KILN_RETURN_IF_ERROR(check_operand_types(Op::Argmax, x));
  auto axis = normalize_axis(attrs.get_int("axis"), x.rank());
  if (!axis)
    return op_error(Op::Argmax, fmt::format("axis {} is out of range for {}", attrs.get_int("axis"), x.to_string()));
  if (x.shape[*axis] == 0)
    return op_error(Op::Argmax, fmt::format("cannot take argmax over the empty axis {} of {}", *axis, x.to_string()));
  TensorType out{DType::I64, x.shape};
  out.shape.erase(out.shape.begin() + *axis);
  return out;
}

// table[..., idx, ...]: the type gather produces and scatter_add's updates must have.
Result<TensorType> gathered_type(Op op, const TensorType& table, const TensorType& idx, const Attrs& attrs) {
  if (!is_index(idx.dtype)) return op_error(op, fmt::format("indices must be i32 or i64, got {}", idx.to_string()));
  auto axis = normalize_axis(attrs.get_int("axis", 0), table.rank());
  if (!axis)
    return op_error(op, fmt::format("axis {} is out of range for {}", attrs.get_int("axis", 0), table.to_string()));
  TensorType out{table.dtype, Shape(table.shape.begin(), table.shape.begin() + *axis)};
  out.shape.insert(out.shape.end(), idx.shape.begin(), idx.shape.end());
  out.shape.insert(out.shape.end(), table.shape.begin() + *axis + 1, table.shape.end());
  KILN_RETURN_IF_ERROR(check_shape_values(op, out.shape, "result"));
  return out;
}

Result<TensorType> infer_movement(Op op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  switch (op) {
    case Op::Reshape: {
      const Shape& shape = attrs.get_ints("shape");
      KILN_RETURN_IF_ERROR(check_shape_values(op, shape, "shape"));
      if (num_elements(shape) != x.num_elements())
        return op_error(op, fmt::format("cannot reshape {} ({} elements) to {} ({} elements)", x.to_string(),
                                        x.num_elements(), shape_string(shape), num_elements(shape)));
      return TensorType{x.dtype, shape};
    }
    case Op::Transpose: {
      const auto& perm = attrs.get_ints("perm");
      std::vector<bool> seen(x.shape.size(), false);
      if (perm.size() != x.shape.size())
        return op_error(op,
                        fmt::format("perm {} has {} entries for {}", shape_string(perm), perm.size(), x.to_string()));
      TensorType out{x.dtype, {}};
      for (int64_t p : perm) {
        if (p < 0 || p >= x.rank() || seen[p])
          return op_error(op, fmt::format("perm {} is not a permutation of 0..{}", shape_string(perm), x.rank() - 1));
        seen[p] = true;
        out.shape.push_back(x.shape[p]);
      }
      return out;
    }
    case Op::Broadcast: {
      const Shape& shape = attrs.get_ints("shape");
      const auto& dims = attrs.get_ints("dims");
      KILN_RETURN_IF_ERROR(check_shape_values(op, shape, "shape"));
      if (dims.size() != x.shape.size())
        return op_error(
            op, fmt::format("dims {} must have one entry per operand dim of {}", shape_string(dims), x.to_string()));
      std::vector<bool> used(shape.size(), false);
      for (size_t i = 0; i < dims.size(); ++i) {
        int64_t d = dims[i];
        if (d < 0 || d >= static_cast<int64_t>(shape.size()) || used[d])
          return op_error(op, fmt::format("dims {} are not distinct dims of the result {}", shape_string(dims),
                                          shape_string(shape)));
        used[d] = true;
        if (x.shape[i] != shape[d] && x.shape[i] != 1)
          return op_error(op, fmt::format("operand dim {} of {} cannot broadcast to result dim {} of {}", i,
                                          x.to_string(), d, shape_string(shape)));
      }
      return TensorType{x.dtype, shape};
    }
    case Op::Slice: {
      const auto& starts = attrs.get_ints("starts");
      const auto& ends = attrs.get_ints("ends");
      std::vector<int64_t> strides =
          attrs.has("strides") ? attrs.get_ints("strides") : std::vector<int64_t>(x.shape.size(), 1);
      if (starts.size() != x.shape.size() || ends.size() != x.shape.size() || strides.size() != x.shape.size())
        return op_error(op, fmt::format("starts, ends and strides need one entry per dim of {}", x.to_string()));
      TensorType out{x.dtype, {}};
      for (size_t d = 0; d < x.shape.size(); ++d) {
        if (starts[d] < 0 || starts[d] > ends[d] || ends[d] > x.shape[d] || strides[d] < 1)
          return op_error(
              op, fmt::format(
                      "dim {}: start {}, end {}, stride {} do not fit {} (need 0 <= start <= end <= {}, stride >= 1)",
                      d, starts[d], ends[d], strides[d], x.to_string(), x.shape[d]));
        // ceil((end - start) / stride), written so that a huge stride cannot overflow.
        const int64_t span = ends[d] - starts[d];
        out.shape.push_back(span / strides[d] + (span % strides[d] != 0 ? 1 : 0));
      }
      return out;
    }
    case Op::Concat: {
      auto axis = normalize_axis(attrs.get_int("axis"), x.rank());
      if (!axis)
        return op_error(op, fmt::format("axis {} is out of range for {}", attrs.get_int("axis"), x.to_string()));
      TensorType out = x;
      for (size_t i = 1; i < in.size(); ++i) {
        bool same = in[i].dtype == x.dtype && in[i].rank() == x.rank();
        for (int64_t d = 0; same && d < x.rank(); ++d) same = d == *axis || in[i].shape[d] == x.shape[d];
        if (!same)
          return op_error(op, fmt::format("operands must agree except on axis {}: {}", *axis, types_string(in)));
        out.shape[*axis] += in[i].shape[*axis];
      }
      KILN_RETURN_IF_ERROR(check_shape_values(op, out.shape, "result"));
      return out;
    }
    case Op::Gather: {
      KILN_ASSIGN_OR_RETURN(TensorType out, gathered_type(op, x, in[1], attrs));
      // With indices to take and none that could be valid, every index is out of range.
      if (x.shape[*normalize_axis(attrs.get_int("axis", 0), x.rank())] == 0 && in[1].num_elements() > 0)
        return op_error(op, fmt::format("cannot take from the empty axis {} of {}",
                                        *normalize_axis(attrs.get_int("axis", 0), x.rank()), x.to_string()));
      return out;
    }
    case Op::ScatterAdd: {
      KILN_ASSIGN_OR_RETURN(TensorType expected, gathered_type(op, x, in[1], attrs));
      if (in[2] != expected)
        return op_error(op, fmt::format("updates must be {} for base {} and indices {} on axis {}, got {}",
                                        expected.to_string(), x.to_string(), in[1].to_string(),
                                        *normalize_axis(attrs.get_int("axis", 0), x.rank()), in[2].to_string()));
      KILN_RETURN_IF_ERROR(check_operand_types(op, x));
      if (x.shape[*normalize_axis(attrs.get_int("axis", 0), x.rank())] == 0 && in[1].num_elements() > 0)
        return op_error(op, fmt::format("cannot add into the empty axis {} of {}",
                                        *normalize_axis(attrs.get_int("axis", 0), x.rank()), x.to_string()));
      return x;
    }
    default: return op_error(op, "not a movement op");
  }
}

Result<TensorType> infer_matmul(const TensorType& a, const TensorType& b) {
  Op op = Op::Matmul;
  if (a.rank() < 2 || b.rank() < 2)
    return op_error(op, fmt::format("operands need rank >= 2: {} x {}", a.to_string(), b.to_string()));
  if (a.dtype != b.dtype)
    return op_error(op, fmt::format("operand element types differ: {} x {}", a.to_string(), b.to_string()));
  KILN_RETURN_IF_ERROR(check_operand_types(op, a));
  if (a.shape.back() != b.shape[b.shape.size() - 2])
    return op_error(op, fmt::format("contracting dims differ: {} x {}", a.to_string(), b.to_string()));
  size_t batch = std::max(a.shape.size(), b.shape.size()) - 2;
  Shape out(batch);
  for (size_t i = 0; i < batch; ++i) {
    // Align batch dims from the right, numpy style.
    auto dim = [&](const Shape& s) -> int64_t {
      size_t sb = s.size() - 2;
      return i + sb >= batch ? s[i + sb - batch] : 1;
    };
    int64_t da = dim(a.shape), db = dim(b.shape);
    if (da != db && da != 1 && db != 1)
      return op_error(op, fmt::format("batch dims do not broadcast: {} x {}", a.to_string(), b.to_string()));
    out[i] = da == 1 ? db : da;
  }
  out.push_back(a.shape[a.shape.size() - 2]);
  out.push_back(b.shape.back());
  KILN_RETURN_IF_ERROR(check_shape_values(op, out, "result"));
  return TensorType{a.dtype, out};
}

Result<TensorType> infer_composite(Op op, std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  KILN_RETURN_IF_ERROR(check_operand_types(op, x));
  switch (op) {
    case Op::Softmax:
    case Op::LogSoftmax: {
      auto axis = normalize_axis(attrs.get_int("axis", -1), x.rank());
      if (!axis || x.rank() == 0)
        return op_error(op, fmt::format("axis {} is out of range for {}", attrs.get_int("axis", -1), x.to_string()));
      // Its decomposition takes the maximum over the axis, which an empty axis has not.
      if (x.shape[*axis] == 0)
        return op_error(op, fmt::format("cannot normalize over the empty axis {} of {}", *axis, x.to_string()));
      return x;
    }
    case Op::Gelu: {
      std::string approx = attrs.get_string("approximate", "none");
      if (approx != "none" && approx != "tanh")
        return op_error(op, fmt::format("approximate must be \"none\" or \"tanh\", got \"{}\"", approx));
      return x;
    }
    case Op::Silu: return x;
    case Op::MaxPool:
    case Op::AvgPool:
    case Op::Pad: return infer_window_op(op, in, attrs);
    case Op::BatchNorm: {
      const TensorType channel{x.dtype, {x.rank() >= 2 ? x.shape[1] : 0}};
      if (x.rank() < 2 || !std::all_of(in.begin() + 1, in.end(), [&](const TensorType& t) { return t == channel; }))
        return op_error(op, fmt::format("expected x: [N, C, ...] and scale, bias, mean, var: [C] of one type, got {}",
                                        types_string(in)));
      return x;
    }
    case Op::LayerNorm: {
      auto axis = normalize_axis(attrs.get_int("axis", -1), x.rank());
      if (!axis || x.rank() == 0)
        return op_error(op, fmt::format("axis {} is out of range for {}", attrs.get_int("axis", -1), x.to_string()));
      TensorType norm{x.dtype, Shape(x.shape.begin() + *axis, x.shape.end())};
      if (in[1] != norm || in[2] != norm)
        return op_error(op, fmt::format("scale and bias must be {} for {} normalized from axis {}, got {}",
                                        norm.to_string(), x.to_string(), *axis, types_string(in.subspan(1))));
      return x;
    }
    case Op::Attention: {
      if (in.size() != 3 && in.size() != 4)
        return op_error(op, fmt::format("expected q, k, v and an optional mask, got {} operands", in.size()));
      const TensorType &k = in[1], &v = in[2];
      const int64_t r = x.rank();
      auto batch = [](const TensorType& t) { return Shape(t.shape.begin(), t.shape.end() - 2); };
      if (r < 2 || k.rank() != r || v.rank() != r || batch(x) != batch(k) || batch(x) != batch(v) ||
          k.shape[r - 1] != x.shape[r - 1] || v.shape[r - 2] != k.shape[r - 2] || k.dtype != x.dtype ||
          v.dtype != x.dtype)
        return op_error(op, fmt::format("expected q[...,T,D], k[...,S,D], v[...,S,E] of one float type, got {}",
                                        types_string(in.subspan(0, 3))));
      const int64_t queries = x.shape[r - 2], keys = k.shape[r - 2];
      if (keys == 0) return op_error(op, fmt::format("cannot attend over no keys: k is {}", k.to_string()));
      if (!attrs.has("scale") && x.shape[r - 1] == 0)
        return op_error(op, fmt::format("the default scale 1/sqrt(D) needs D > 0: q is {}", x.to_string()));
      if (in.size() == 4) {
        Shape scores = batch(x);
        scores.push_back(queries);
        scores.push_back(keys);
        const TensorType full{DType::Bool, scores}, square{DType::Bool, {queries, keys}};
        if (in[3] != full && in[3] != square)
          return op_error(op, fmt::format("the mask must be {} or {} (true keeps a score), got {}", full.to_string(),
                                          square.to_string(), in[3].to_string()));
      }
      TensorType out = x;
      out.shape.back() = v.shape[r - 1];
      return out;
    }
    case Op::Linear: {
      const TensorType &w = in[1], &b = in[2];
      if (x.rank() < 2 || w.rank() != 2 || b.rank() != 1 || w.shape[0] != x.shape.back() || b.shape[0] != w.shape[1] ||
          w.dtype != x.dtype || b.dtype != x.dtype)
        return op_error(op,
                        fmt::format("expected x[...,in], w[in,out], b[out] of one dtype, got {}", types_string(in)));
      TensorType out = x;
      out.shape.back() = w.shape[1];
      return out;
    }
    case Op::MseLoss:
      if (in[0] != in[1]) return op_error(op, fmt::format("operand types differ: {}", types_string(in)));
      return TensorType{x.dtype, {}};
    case Op::CrossEntropy: {
      const TensorType& labels = in[1];
      if (x.rank() != 2 || labels.rank() != 1 || labels.shape[0] != x.shape[0] || !is_index(labels.dtype))
        return op_error(op, fmt::format("expected logits[N,C] and integer labels[N], got {}", types_string(in)));
      if (x.shape[1] == 0) return op_error(op, fmt::format("logits {} have no classes (C = 0)", x.to_string()));
      return TensorType{x.dtype, {}};
    }
    default: return op_error(op, "not a composite op");
  }
}

}  // namespace

std::optional<int64_t> normalize_axis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

Status check_attrs(Op op, const Attrs& attrs) {
  auto specs = op_attrs(op);
  for (const auto& [name, value] : attrs.entries()) {
    auto it = std::find_if(specs.begin(), specs.end(), [&](const AttrSpec& s) { return s.name == name; });
    if (it == specs.end()) {
      std::string known;
      for (const AttrSpec& s : specs) known += (known.empty() ? "" : ", ") + std::string(s.name);
      return op_error(op, fmt::format("unknown attribute '{}' (expected {})", name, known.empty() ? "none" : known));
    }
    if (attr_value_kind(value) != it->kind)
      return op_error(op, fmt::format("attribute '{}' must be {}, got {}", name, attr_kind_name(it->kind),
                                      attr_kind_name(attr_value_kind(value))));
  }
  for (const AttrSpec& s : specs)
    if (!s.optional && !attrs.has(s.name))
      return op_error(op, fmt::format("missing attribute '{}' ({})", s.name, attr_kind_name(s.kind)));
  return Status::Ok();
}

Result<TensorType> infer_call(std::span<const Graph> functions, std::span<const TensorType> in, const Attrs& attrs) {
  auto find = [&](const std::string& name) -> const Graph* {
    for (const Graph& f : functions)
      if (f.name == name) return &f;
    return nullptr;
  };
  std::string callee_name = attrs.get_string("callee");
  const Graph* callee = find(callee_name);
  if (!callee) return op_error(Op::Call, fmt::format("no function @{} is defined before this call", callee_name));
  std::vector<TensorType> params;
  for (const Arg& a : callee->args) params.push_back(callee->type(a.value));
  if (params.size() != in.size() || !std::equal(params.begin(), params.end(), in.begin()))
    return op_error(Op::Call,
                    fmt::format("@{} takes ({}), got ({})", callee_name, types_string(params), types_string(in)));
  int64_t index = attrs.get_int("result", 0);
  if (index < 0 || index >= static_cast<int64_t>(callee->results.size()))
    return op_error(Op::Call, fmt::format("result {} is out of range: @{} returns {} value{}", index, callee_name,
                                          callee->results.size(), callee->results.size() == 1 ? "" : "s"));
  TensorType out = callee->type(callee->results[index]);
  if (!attrs.has("backward")) return out;
  std::string backward_name = attrs.get_string("backward");
  const Graph* backward = find(backward_name);
  if (!backward)
    return op_error(Op::Call, fmt::format("no backward function @{} is defined before this call", backward_name));
  std::vector<TensorType> want_args = params, want_results, got_args, got_results;
  want_args.push_back(out);
  for (const TensorType& t : params)
    if (is_float(t.dtype)) want_results.push_back(t);
  for (const Arg& a : backward->args) got_args.push_back(backward->type(a.value));
  for (ValueId v : backward->results) got_results.push_back(backward->type(v));
  if (got_args != want_args || got_results != want_results)
    return op_error(
        Op::Call,
        fmt::format("backward @{} must take ({}) and return ({}): the arguments of @{}, the gradient of "
                    "its result, and one gradient per floating-point argument; it takes ({}) and returns ({})",
                    backward_name, types_string(want_args), types_string(want_results), callee_name,
                    types_string(got_args), types_string(got_results)));
  return out;
}

Result<TensorType> infer_type(Op op, std::span<const TensorType> in, const Attrs& attrs,
                              std::optional<DType> source_dtype) {
  if (op == Op::Call) return op_error(op, "the type of a call depends on its callee; use infer_call");
  int arity = op_arity(op);
  if (arity >= 0 && static_cast<int>(in.size()) != arity)
    return op_error(op, fmt::format("expected {} operand{}, got {}", arity, arity == 1 ? "" : "s", in.size()));
  if (arity < 0 && in.empty()) return op_error(op, "expected at least one operand, got 0");
  switch (op_kind(op)) {
    case OpKind::Source: {
      DType dtype = source_dtype.value_or(DType::F32);
      if (op == Op::Iota) {
        const Shape& shape = attrs.get_ints("shape");
        KILN_RETURN_IF_ERROR(check_shape_values(op, shape, "shape"));
        if (!normalize_axis(attrs.get_int("axis"), static_cast<int64_t>(shape.size())) || shape.empty())
          return op_error(
              op, fmt::format("axis {} is out of range for shape {}", attrs.get_int("axis"), shape_string(shape)));
        if (dtype == DType::Bool) return op_error(op, "iota needs a numeric element type, got bool");
        return TensorType{dtype, shape};
      }
      const Literal& lit = attrs.get_literal("value");
      KILN_RETURN_IF_ERROR(check_shape_values(op, lit.shape, "value"));
      if (!is_float(dtype) && !lit.integral)
        return op_error(op, fmt::format("value has non-integer elements for element type {}", dtype_name(dtype)));
      if (dtype == DType::Bool)
        for (int64_t v : lit.ints)
          if (v != 0 && v != 1) return op_error(op, fmt::format("value {} is not a bool (true, false, 0 or 1)", v));
      if (dtype == DType::I32)
        for (int64_t v : lit.ints)
          if (v < INT32_MIN || v > INT32_MAX) return op_error(op, fmt::format("value {} is out of range for i32", v));
      return TensorType{dtype, lit.shape};
    }
    case OpKind::Elementwise:
      if (op == Op::Cast) return TensorType{attrs.get_dtype("to"), in[0].shape};
      if (op == Op::Select) {
        if (in[0].dtype != DType::Bool)
          return op_error(op, fmt::format("condition must be bool, got {}", in[0].to_string()));
        if (in[1].dtype != in[2].dtype)
          return op_error(op, fmt::format("operand element types differ: {}", types_string(in)));
        KILN_ASSIGN_OR_RETURN(Shape shape, elementwise_shape(op, in));
        return TensorType{in[1].dtype, shape};
      }
      return in.size() == 1 ? infer_unary(op, in[0]) : infer_binary(op, in);
    case OpKind::Reduction: return op == Op::Argmax ? infer_argmax(in[0], attrs) : infer_reduce(op, in[0], attrs);
    case OpKind::Movement: return infer_movement(op, in, attrs);
    case OpKind::Library:
      if (op != Op::Matmul) {
        for (const TensorType& t : in) KILN_RETURN_IF_ERROR(check_operand_types(op, t));
        return infer_window_op(op, in, attrs);
      }
      return infer_matmul(in[0], in[1]);
    case OpKind::Composite: return infer_composite(op, in, attrs);
  }
  return op_error(op, "unknown op kind");
}

}  // namespace kiln::ir
