#include "ir/interpreter.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "base/allocation.h"
#include "ir/decompose.h"
#include "ir/shape_inference.h"

namespace kiln::ir {
namespace {

// Calls f(k, src) for each element k of `shape` in C order, src = base + sum(idx[d] * strides[d]).
template <class F>
void for_each_strided(const Shape& shape, const std::vector<int64_t>& strides, int64_t base, F f) {
  int64_t n = num_elements(shape);
  if (n == 0) return;
  std::vector<int64_t> idx(shape.size(), 0);
  int64_t src = base;
  for (int64_t k = 0; k < n; ++k) {
    f(k, src);
    for (size_t d = shape.size(); d-- > 0;) {
      src += strides[d];
      if (++idx[d] < shape[d]) break;
      src -= strides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

// out[k] = in[src(k)] for a movement op described by strides over the output shape.
Tensor move_strided(const Tensor& in, const TensorType& out_type, const std::vector<int64_t>& strides, int64_t base) {
  Tensor out = Tensor::zeros(out_type);
  if (in.holds_floats())
    for_each_strided(out_type.shape, strides, base, [&](int64_t k, int64_t s) { out.floats[k] = in.floats[s]; });
  else for_each_strided(out_type.shape, strides, base, [&](int64_t k, int64_t s) { out.ints[k] = in.ints[s]; });
  return out;
}

int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrap_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

int64_t int_pow(int64_t base, int64_t exp) {
  if (exp < 0) return base == 1 ? 1 : base == -1 ? (exp % 2 ? -1 : 1) : 0;
  int64_t r = 1;
  while (exp) {
    if (exp & 1) r = wrap_mul(r, base);
    base = wrap_mul(base, base);
    exp >>= 1;
  }
  return r;
}

// Each returns nothing for an op it has no case for: elementwise() makes that an error
// naming the op (the conformance test meets it), never a NaN.
std::optional<double> float_unary(Op op, double x) {
  switch (op) {
    case Op::Neg: return -x;
    case Op::Abs: return std::fabs(x);
    case Op::Exp: return std::exp(x);
    case Op::Log: return std::log(x);
    case Op::Sqrt: return std::sqrt(x);
    case Op::Rsqrt: return 1.0 / std::sqrt(x);
    case Op::Sin: return std::sin(x);
    case Op::Cos: return std::cos(x);
    case Op::Tanh: return std::tanh(x);
    case Op::Sigmoid: return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
    case Op::Relu: return x > 0 || std::isnan(x) ? x : 0.0;
    case Op::Erf: return std::erf(x);
    case Op::Floor: return std::floor(x);
    case Op::Ceil: return std::ceil(x);
    default: return std::nullopt;
  }
}

std::optional<int64_t> int_unary(Op op, int64_t x) {
  switch (op) {
    case Op::Neg: return wrap_sub(0, x);
    case Op::Abs: return x < 0 ? wrap_sub(0, x) : x;
    case Op::Relu: return x > 0 ? x : 0;
    case Op::Not: return !x;
    default: return std::nullopt;
  }
}

template <class T>
bool compare(Op op, T a, T b) {
  switch (op) {
    case Op::Eq: return a == b;
    case Op::Ne: return a != b;
    case Op::Lt: return a < b;
    case Op::Le: return a <= b;
    case Op::Gt: return a > b;
    default: return a >= b;
  }
}

std::optional<double> float_binary(Op op, double a, double b) {
  switch (op) {
    case Op::Add: return a + b;
    case Op::Sub: return a - b;
    case Op::Mul: return a * b;
    case Op::Div: return a / b;
    case Op::Pow: return std::pow(a, b);
    case Op::Maximum: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    case Op::Minimum: return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
    case Op::Eq:
    case Op::Ne:
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge: return compare(op, a, b);
    default: return std::nullopt;
  }
}

std::optional<int64_t> int_binary(Op op, int64_t a, int64_t b) {
  switch (op) {
    case Op::Add: return wrap_add(a, b);
    case Op::Sub: return wrap_sub(a, b);
    case Op::Mul: return wrap_mul(a, b);
    case Op::Div: return b == 0 ? 0 : (b == -1 ? wrap_sub(0, a) : a / b);
    case Op::Pow: return int_pow(a, b);
    case Op::Maximum: return std::max(a, b);
    case Op::Minimum: return std::min(a, b);
    case Op::Eq:
    case Op::Ne:
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge: return compare(op, a, b);
    case Op::And: return a && b;
    case Op::Or: return a || b;
    default: return std::nullopt;
  }
}

int64_t saturating_int(double x, DType to) {
  if (std::isnan(x)) return 0;
  const double lo = static_cast<double>(int_min(to)), hi = static_cast<double>(int_max(to));
  if (x <= lo) return int_min(to);
  if (x >= hi) return int_max(to);
  return static_cast<int64_t>(x);  // truncates toward zero
}

Result<Tensor> elementwise(Op op, std::span<const Tensor* const> in, const TensorType& rt) {
  Tensor out = Tensor::zeros(rt);
  int64_t n = out.size();
  auto at = [](const Tensor& t, int64_t k) { return t.type.rank() == 0 ? 0 : k; };
  DType dt = rt.dtype;
  if (op == Op::Cast) {
    const Tensor& x = *in[0];
    for (int64_t k = 0; k < n; ++k) {
      if (dt == DType::Bool) out.ints[k] = x.get(k) != 0;
      else if (out.holds_floats()) out.floats[k] = round_to_dtype(dt, x.get(k));
      else out.ints[k] = x.holds_floats() ? saturating_int(x.floats[k], dt) : wrap_to_dtype(dt, x.ints[k]);
    }
    return out;
  }
  if (op == Op::Select) {
    const Tensor &c = *in[0], &a = *in[1], &b = *in[2];
    for (int64_t k = 0; k < n; ++k) {
      bool take_a = c.ints[at(c, k)] != 0;
      if (out.holds_floats()) out.floats[k] = take_a ? a.floats[at(a, k)] : b.floats[at(b, k)];
      else out.ints[k] = take_a ? a.ints[at(a, k)] : b.ints[at(b, k)];
    }
    return out;
  }
  const Tensor& a = *in[0];
  auto missing = [&](const char* what) {
    return make_error(fmt::format("interpreter: {} has no {} case", op_name(op), what));
  };
  if (in.size() == 1) {
    for (int64_t k = 0; k < n; ++k) {
      if (a.holds_floats()) {
        std::optional<double> v = float_unary(op, a.floats[k]);
        if (!v) return missing("floating-point");
        out.floats[k] = round_to_dtype(dt, *v);
      } else {
        std::optional<int64_t> v = int_unary(op, a.ints[k]);
        if (!v) return missing("integer");
        out.ints[k] = wrap_to_dtype(dt, *v);
      }
    }
    return out;
  }
  const Tensor& b = *in[1];
  for (int64_t k = 0; k < n; ++k) {
    if (a.holds_floats()) {
      std::optional<double> v = float_binary(op, a.floats[at(a, k)], b.floats[at(b, k)]);
      if (!v) return missing("floating-point");
      if (out.holds_floats()) out.floats[k] = round_to_dtype(dt, *v);
      else out.ints[k] = *v != 0;
    } else {
      std::optional<int64_t> v = int_binary(op, a.ints[at(a, k)], b.ints[at(b, k)]);
      if (!v) return missing("integer");
      out.ints[k] = wrap_to_dtype(dt, *v);
    }
  }
  return out;
}

Tensor reduce(Op op, const Tensor& x, const Attrs& attrs, const TensorType& rt) {
  int64_t rank = x.type.rank();
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t a : attrs.get_ints("axes")) reduced[*normalize_axis(a, rank)] = true;
  // Output stride of each input dim; 0 for reduced dims, so they accumulate.
  std::vector<int64_t> kept_shape;
  for (int64_t d = 0; d < rank; ++d)
    if (!reduced[d]) kept_shape.push_back(x.type.shape[d]);
  std::vector<int64_t> kept_strides = row_major_strides(kept_shape), strides(static_cast<size_t>(rank), 0);
  for (int64_t d = 0, j = 0; d < rank; ++d)
    if (!reduced[d]) strides[d] = kept_strides[j++];
  Tensor out = Tensor::zeros(rt);
  int64_t n = out.size();
  if (x.holds_floats()) {
    double init = op == Op::ReduceSum ? 0.0 : op == Op::ReduceMax ? -INFINITY : INFINITY;
    std::vector<double> acc(static_cast<size_t>(n), init);
    for_each_strided(x.type.shape, strides, 0, [&](int64_t k, int64_t o) {
      double v = x.floats[k];
      double& a = acc[o];
      if (op == Op::ReduceSum) a += v;
      else if (std::isnan(v) || std::isnan(a)) a = NAN;
      else a = op == Op::ReduceMax ? std::max(a, v) : std::min(a, v);
    });
    for (int64_t k = 0; k < n; ++k) out.floats[k] = round_to_dtype(rt.dtype, acc[k]);
  } else {
    int64_t init = op == Op::ReduceSum   ? 0
                   : op == Op::ReduceMax ? std::numeric_limits<int64_t>::min()
                                         : std::numeric_limits<int64_t>::max();
    std::vector<int64_t> acc(static_cast<size_t>(n), init);
    for_each_strided(x.type.shape, strides, 0, [&](int64_t k, int64_t o) {
      int64_t v = x.ints[k];
      acc[o] = op == Op::ReduceSum   ? wrap_add(acc[o], v)
               : op == Op::ReduceMax ? std::max(acc[o], v)
                                     : std::min(acc[o], v);
    });
    for (int64_t k = 0; k < n; ++k) out.ints[k] = wrap_to_dtype(rt.dtype, acc[k]);
  }
  return out;
}

// Splits a shape around an axis into (outer, axis extent, inner) element counts.
struct AxisSplit {
  int64_t outer = 1, extent = 1, inner = 1;
};

AxisSplit split_at(const Shape& shape, int64_t axis) {
  AxisSplit s;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis) s.outer *= shape[d];
    else if (d == axis) s.extent = shape[d];
    else s.inner *= shape[d];
  }
  return s;
}

Tensor argmax(const Tensor& x, const Attrs& attrs, const TensorType& rt) {
  AxisSplit s = split_at(x.type.shape, *normalize_axis(attrs.get_int("axis"), x.type.rank()));
  Tensor out = Tensor::zeros(rt);
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      int64_t best = 0;
      for (int64_t a = 1; a < s.extent; ++a) {
        double cur = x.get((o * s.extent + a) * s.inner + i), top = x.get((o * s.extent + best) * s.inner + i);
        if (std::isnan(top)) break;  // the first NaN is the maximum, as in numpy
        if (cur > top || std::isnan(cur)) best = a;
      }
      out.ints[o * s.inner + i] = best;
    }
  }
  return out;
}

Tensor matmul(const Tensor& a, const Tensor& b, const TensorType& rt) {
  const Shape &as = a.type.shape, &bs = b.type.shape, &os = rt.shape;
  size_t batch = os.size() - 2;
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  // Element strides of each operand's matrices over the broadcast batch dims (0 where broadcast).
  auto batch_strides = [&](const Shape& s) {
    std::vector<int64_t> st(batch, 0);
    int64_t stride = s[s.size() - 1] * s[s.size() - 2];
    for (size_t i = batch, j = s.size() - 2; i-- > 0 && j-- > 0;) {
      st[i] = s[j] == 1 ? 0 : stride;
      stride *= s[j];
    }
    return st;
  };
  Shape batch_shape(os.begin(), os.begin() + static_cast<int64_t>(batch));
  std::vector<int64_t> a_offsets, b_offsets;
  for_each_strided(batch_shape, batch_strides(as), 0, [&](int64_t, int64_t off) { a_offsets.push_back(off); });
  for_each_strided(batch_shape, batch_strides(bs), 0, [&](int64_t, int64_t off) { b_offsets.push_back(off); });
  Tensor out = Tensor::zeros(rt);
  for (size_t p = 0; p < a_offsets.size(); ++p) {
    int64_t ao = a_offsets[p], bo = b_offsets[p], oo = static_cast<int64_t>(p) * m * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        if (out.holds_floats()) {
          double acc = 0;
          for (int64_t q = 0; q < k; ++q) acc += a.floats[ao + i * k + q] * b.floats[bo + q * n + j];
          out.floats[oo + i * n + j] = round_to_dtype(rt.dtype, acc);
        } else {
          int64_t acc = 0;
          for (int64_t q = 0; q < k; ++q) acc = wrap_add(acc, wrap_mul(a.ints[ao + i * k + q], b.ints[bo + q * n + j]));
          out.ints[oo + i * n + j] = wrap_to_dtype(rt.dtype, acc);
        }
      }
    }
  }
  return out;
}

// Calls f(gathered, slot) for every element of table[..., idx, ...] (the shape gather
// produces), with `slot` its flat index into the table; indices may be negative, numpy style.
template <class F>
Status for_each_indexed(Op op, const Shape& table_shape, const Tensor& idx, const Attrs& attrs, F f) {
  int64_t axis = *normalize_axis(attrs.get_int("axis", 0), static_cast<int64_t>(table_shape.size()));
  AxisSplit s = split_at(table_shape, axis);
  int64_t count = idx.size();
  for (int64_t i = 0; i < count; ++i) {
    int64_t j = idx.ints[i];
    if (j < -s.extent || j >= s.extent)
      return make_error(
          fmt::format("{}: index {} is out of range for axis {} of size {}", op_name(op), j, axis, s.extent));
    if (j < 0) j += s.extent;
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t in = 0; in < s.inner; ++in) f((o * count + i) * s.inner + in, (o * s.extent + j) * s.inner + in);
  }
  return Status::Ok();
}

Result<Tensor> gather(const Tensor& table, const Tensor& idx, const Attrs& attrs, const TensorType& rt) {
  Tensor out = Tensor::zeros(rt);
  KILN_RETURN_IF_ERROR(for_each_indexed(Op::Gather, table.type.shape, idx, attrs, [&](int64_t k, int64_t slot) {
    if (out.holds_floats()) out.floats[k] = table.floats[slot];
    else out.ints[k] = table.ints[slot];
  }));
  return out;
}

Result<Tensor> scatter_add(const Tensor& base, const Tensor& idx, const Tensor& updates, const Attrs& attrs) {
  Tensor out = base;
  DType dt = out.type.dtype;
  KILN_RETURN_IF_ERROR(for_each_indexed(Op::ScatterAdd, base.type.shape, idx, attrs, [&](int64_t k, int64_t slot) {
    if (out.holds_floats()) out.floats[slot] = round_to_dtype(dt, out.floats[slot] + updates.floats[k]);
    else out.ints[slot] = wrap_to_dtype(dt, wrap_add(out.ints[slot], updates.ints[k]));
  }));
  return out;
}

Tensor concat(std::span<const Tensor* const> in, const Attrs& attrs, const TensorType& rt) {
  int64_t axis = *normalize_axis(attrs.get_int("axis"), rt.rank());
  AxisSplit os = split_at(rt.shape, axis);
  Tensor out = Tensor::zeros(rt);
  int64_t offset = 0;
  for (const Tensor* t : in) {
    int64_t extent = t->type.shape[axis];
    for (int64_t o = 0; o < os.outer; ++o)
      for (int64_t k = 0; k < extent * os.inner; ++k) {
        int64_t src = o * extent * os.inner + k, dst = (o * os.extent + offset) * os.inner + k;
        if (out.holds_floats()) out.floats[dst] = t->floats[src];
        else out.ints[dst] = t->ints[src];
      }
    offset += extent;
  }
  return out;
}

Tensor movement(Op op, const Tensor& x, const Attrs& attrs, const TensorType& rt) {
  std::vector<int64_t> in_strides = row_major_strides(x.type.shape), strides(rt.shape.size(), 0);
  int64_t base = 0;
  if (op == Op::Reshape) {
    Tensor out = x;
    out.type = rt;
    return out;
  }
  if (op == Op::Transpose) {
    const auto& perm = attrs.get_ints("perm");
    for (size_t d = 0; d < perm.size(); ++d) strides[d] = in_strides[perm[d]];
  } else if (op == Op::Broadcast) {
    const auto& dims = attrs.get_ints("dims");
    for (size_t i = 0; i < dims.size(); ++i)
      if (x.type.shape[i] != 1) strides[dims[i]] = in_strides[i];
  } else {  // slice
    const auto& starts = attrs.get_ints("starts");
    std::vector<int64_t> steps =
        attrs.has("strides") ? attrs.get_ints("strides") : std::vector<int64_t>(strides.size(), 1);
    for (size_t d = 0; d < strides.size(); ++d) {
      strides[d] = in_strides[d] * steps[d];
      base += starts[d] * in_strides[d];
    }
  }
  return move_strided(x, rt, strides, base);
}

Tensor source(Op op, const Attrs& attrs, const TensorType& rt) {
  if (op == Op::Constant) {
    const Literal& lit = attrs.get_literal("value");
    return is_float(rt.dtype) ? Tensor::from_doubles(rt, lit.floats) : Tensor::from_ints(rt, lit.ints);
  }
  AxisSplit s = split_at(rt.shape, *normalize_axis(attrs.get_int("axis"), rt.rank()));
  std::vector<int64_t> values(static_cast<size_t>(rt.num_elements()));
  for (size_t k = 0; k < values.size(); ++k) values[k] = (static_cast<int64_t>(k) / s.inner) % s.extent;
  return Tensor::from_ints(rt, values);
}

}  // namespace

Result<Tensor> evaluate_op(Op op, std::span<const Tensor* const> in, const Attrs& attrs, const TensorType& rt) {
  switch (op_kind(op)) {
    case OpKind::Elementwise: return elementwise(op, in, rt);
    case OpKind::Reduction: return op == Op::Argmax ? argmax(*in[0], attrs, rt) : reduce(op, *in[0], attrs, rt);
    case OpKind::Movement:
      if (op == Op::Gather) return gather(*in[0], *in[1], attrs, rt);
      if (op == Op::Concat) return concat(in, attrs, rt);
      if (op == Op::ScatterAdd) return scatter_add(*in[0], *in[1], *in[2], attrs);
      return movement(op, *in[0], attrs, rt);
    case OpKind::Library:
      if (op != Op::Matmul) return evaluate_window_op(op, in, attrs, rt);
      return matmul(*in[0], *in[1], rt);
    case OpKind::Source: return source(op, attrs, rt);
    case OpKind::Composite:
      if (interpreted_directly(op)) return evaluate_window_op(op, in, attrs, rt);
      break;
  }
  return make_error(fmt::format("{}: composite ops are evaluated through their decomposition", op_name(op)));
}

Status check_inputs(const Graph& g, const std::map<std::string, Tensor>& inputs) {
  for (const Arg& a : g.args) {
    const std::string& name = g.value_name(a.value);
    auto it = inputs.find(name);
    if (it == inputs.end()) return make_error(fmt::format("missing input %{}: {}", name, g.type(a.value).to_string()));
    if (it->second.type != g.type(a.value))
      return make_error(
          fmt::format("input %{} must be {}, got {}", name, g.type(a.value).to_string(), it->second.type.to_string()));
  }
  for (const auto& [name, tensor] : inputs)
    if (!g.find_arg(name)) return make_error(fmt::format("@{} has no argument %{}", g.name, name));
  return Status::Ok();
}

Result<Tensor> evaluate_node(const Graph& g, const Node& n, std::span<const Tensor* const> operands) {
  // Values are held as 8-byte doubles or int64s, whatever their element type.
  const TensorType& type = g.type(n.result);
  const uint64_t bytes = static_cast<uint64_t>(type.num_elements()) * 8;
  auto what = [&] {
    return fmt::format("%{} = {}: {} in the interpreter (8 bytes an element)", display_names(g)[n.result],
                       op_name(n.op), type.to_string());
  };
  if (bytes > memory_limit_bytes()) return check_allocation(bytes, what()).error();
  try {
    return evaluate_op(n.op, operands, n.attrs, type);
  } catch (const std::bad_alloc&) {
    return allocation_error(bytes, what());
  }
}

Result<std::vector<Tensor>> evaluate(const Graph& graph, const std::map<std::string, Tensor>& inputs) {
  Graph decomposed;
  const Graph* g = &graph;
  auto decomposed_here = [](const Node& n) {
    return op_kind(n.op) == OpKind::Composite && !interpreted_directly(n.op);
  };
  if (std::any_of(graph.nodes.begin(), graph.nodes.end(), decomposed_here)) {
    decomposed = graph;
    decompose_composites(decomposed, decomposed_here);
    g = &decomposed;
  }
  KILN_RETURN_IF_ERROR(check_inputs(*g, inputs));
  std::vector<Tensor> values(g->values.size());
  for (const Arg& a : g->args) values[a.value] = inputs.at(g->value_name(a.value));
  // Free each value after its last use so long graphs stay within memory.
  std::vector<int> last_use(g->values.size(), -1);
  for (size_t i = 0; i < g->nodes.size(); ++i)
    for (ValueId v : g->nodes[i].operands) last_use[v] = static_cast<int>(i);
  for (ValueId v : g->results) last_use[v] = static_cast<int>(g->nodes.size());
  std::vector<const Tensor*> operands;
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    const Node& n = g->nodes[i];
    operands.clear();
    for (ValueId v : n.operands) operands.push_back(&values[v]);
    KILN_ASSIGN_OR_RETURN(values[n.result], evaluate_node(*g, n, operands));
    for (ValueId v : n.operands)
      if (last_use[v] == static_cast<int>(i)) values[v] = Tensor();
  }
  std::vector<Tensor> results;
  for (ValueId v : g->results) results.push_back(values[v]);
  return results;
}

}  // namespace kiln::ir
