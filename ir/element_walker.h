// A fused kernel's values, element by element, for both code generators: which element
// of which value an index names, loading the step's inputs and computing every other
// value from its producer's operands, each element once per index. The walk is the same
// on the CPU (over LLVM values) and in CUDA source (over C++ expressions); each backend
// derives from ElementWalker and supplies only its arithmetic, its loads and its code for
// one op, as ir/movement_index.h does for movement ops.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/result.h"
#include "ir/graph.h"
#include "ir/movement_index.h"
#include "ir/shape_inference.h"
#include "ir/value_range.h"

namespace kiln::ir {

/// An index into a value: one index per dim, or (for values of a loop kernel's iteration
/// shape when every value shares it) just the flat index.
template <class V>
struct ElementIndex {
  V flat{};
  std::vector<V> dims;
};

/// Where a backend's dim index came from: unflatten_dim(flat, stride, extent, outermost).
template <class V>
struct Unflattened {
  V flat{};
  int64_t stride = 0, extent = 0;
  bool outermost = false;
};

/// The walker, a base of each backend's kernel emitter (CRTP). `Backend` provides, over
/// its index and element values V (where a default V is "none"):
///   V index_constant(int64_t c);  V index_add(V a, V b);  V index_mul(V a, int64_t c);
///   V index_finish(V flat)       a flat index summed from dims, made a value
///   V unflatten_dim(V flat, int64_t stride, int64_t extent, bool outermost)
///   V affine(V i, int64_t start, int64_t step)       start + i * step
///   V clamp_index(V j, int64_t extent)   numpy take: negative from the end, then clamped
///   std::optional<V> special_value(ValueId v, const Key& key)   a value the backend holds
///                                 elsewhere at this index (CUDA: row caches, vector lanes)
///   V load(ValueId v, V flat)     an input of the step
///   Result<V> elementwise(const Node& n, std::span<const V> operands, std::span<const DType> dtypes)
///   Result<V> iota(V index, DType dtype);  V scalar_constant(DType, double, int64_t)
///   V dense_constant(const Literal& literal, DType dtype, V flat)
///   Result<V> concat(const Node& n, const Index& out)   with value_at for the operands
///   std::string_view codegen_name()   "cpu codegen", for errors
/// and, optionally:
///   std::optional<Unflattened<V>> unflattened(const V& dim)   how dim was unflattened
template <class Backend, class V>
class ElementWalker {
 public:
  using Index = ElementIndex<V>;
  using Key = std::vector<V>;
  /// The values already emitted, by value and canonical index: an element is computed
  /// once per loop body however many nodes read it.
  using Memo = std::map<std::pair<ValueId, Key>, V>;

 protected:
  ElementWalker(const Graph& g, const Step& step)
      : g_(g), step_(step), slot_(g.values.size(), -1), producer_(g.producers()), member_(g.nodes.size(), 0) {
    int k = 0;
    for (ValueId v : step.inputs) slot_[v] = k++;
    for (ValueId v : step.outputs) slot_[v] = k++;
    for (int n : step.nodes) member_[n] = 1;
  }

  const TensorType& type(ValueId v) const { return g_.type(v); }
  bool computed_here(ValueId v) const { return producer_[v] >= 0 && member_[producer_[v]]; }
  static bool present(const V& v) {
    if constexpr (std::is_pointer_v<V>) return v != nullptr;
    else return !v.empty();
  }

  /// The flat index of idx over shape.
  V flat_of(const Shape& shape, const Index& idx) {
    if (shape.empty()) return backend().index_constant(0);
    if (present(idx.flat)) return idx.flat;
    std::vector<int64_t> st = row_major_strides(shape);
    V f = backend().index_constant(0);
    for (size_t d = 0; d < shape.size(); ++d) {
      if (auto run = unflattened_run(shape, idx, d)) {
        f = backend().index_add(f, backend().index_mul(run->second, st[run->first]));
        d = run->first;
        continue;
      }
      f = backend().index_add(f, backend().index_mul(idx.dims[d], st[d]));
    }
    return backend().index_finish(f);
  }

  /// A run of dims from `first` whose indices are one flat index unflattened over the
  /// run's extents, consecutive dims at consecutive strides (a row's kept dims from its row
  /// number, a column sum's reduced dims from its step): their part of a flat index is one
  /// index times the last one's stride, where summing them took a division and products
  /// per dim. That index is the flat index itself where the run holds all of it (its first
  /// dim outermost, its last at stride 1); else one quotient (flat / the last dim's stride)
  /// and, where the first dim is not outermost, one remainder: the kept dims [B, H] of a sum
  /// over the middle axis of [B, H, G, T, D], or its [T, D]. The run's last dim and that
  /// index, or none (also where the backend does not say how it unflattened dims).
  std::optional<std::pair<size_t, V>> unflattened_run(const Shape& shape, const Index& idx, size_t first) {
    if constexpr (requires(Backend & b, const V& v) { b.unflattened(v); }) {
      const std::optional<Unflattened<V>> head = backend().unflattened(idx.dims[first]);
      if (!head || (!head->outermost && head->extent != shape[first])) return std::nullopt;
      size_t last = first;
      int64_t stride = head->stride;
      for (size_t d = first + 1; d < shape.size() && stride > 1; ++d) {
        if (shape[d] == 1) continue;  // its index is 0
        const std::optional<Unflattened<V>> next = backend().unflattened(idx.dims[d]);
        if (!next || next->outermost || next->flat != head->flat || next->extent != shape[d] ||
            next->stride * next->extent != stride)
          break;
        stride = next->stride;
        last = d;
      }
      if (last == first) return std::nullopt;
      if (head->outermost && stride == 1) return std::pair{last, head->flat};
      const int64_t extent = head->extent * (head->stride / stride);
      return std::pair{last, backend().unflatten_dim(head->flat, stride, extent, head->outermost)};
    } else {
      (void)shape, (void)idx, (void)first;
      return std::nullopt;
    }
  }

  /// The per-dim index of flat index `flat` over shape.
  Index unflatten(V flat, const Shape& shape) {
    Index idx;
    std::vector<int64_t> st = row_major_strides(shape);
    for (size_t d = 0; d < shape.size(); ++d)
      idx.dims.push_back(backend().unflatten_dim(flat, st[d], shape[d], d == 0));
    return idx;
  }

  /// The operand index of a reshape's element at `out`. The dims of both shapes fall into
  /// consecutive blocks of equal element counts ([B,T,C] and [B,T,H,D]: {B}, {T}, {C} and
  /// {H,D}), and each block's index is flattened and unflattened within the block alone:
  /// c = h·D + d, where going through the flat index of the whole tensor divided it by T·C
  /// and C again for every element, and the loop over d no longer vectorized.
  Index reshape_source(const Shape& to, const Index& out, const Shape& from) {
    if (present(out.flat)) return unflatten(out.flat, from);
    Index source;
    size_t i = 0, j = 0;
    while (i < to.size() || j < from.size()) {
      // Extent-1 dims (index 0) join no block: a block [1,768] of [1,197,1,768] was
      // flattened and divided again for every element, and the loop stopped vectorizing.
      if (i < to.size() && to[i] == 1) {
        ++i;
        continue;
      }
      if (j < from.size() && from[j] == 1) {
        source.dims.push_back(backend().index_constant(0));
        ++j;
        continue;
      }
      const size_t i0 = i, j0 = j;
      int64_t a = i < to.size() ? to[i++] : 1, b = j < from.size() ? from[j++] : 1;
      while (a != b) {
        if (a < b && i < to.size()) a *= to[i++];
        else if (b < a && j < from.size()) b *= from[j++];
        else break;  // a zero extent: the tensor has no elements to index
      }
      Index part;
      for (size_t k = i0; k < i; ++k) part.dims.push_back(out.dims[k]);
      const Shape to_block(to.begin() + static_cast<std::ptrdiff_t>(i0), to.begin() + static_cast<std::ptrdiff_t>(i));
      const Shape from_block(from.begin() + static_cast<std::ptrdiff_t>(j0),
                             from.begin() + static_cast<std::ptrdiff_t>(j));
      V flat = flat_of(to_block, part);
      if (from_block.size() == 1) {
        source.dims.push_back(flat);
      } else {
        for (V& d : unflatten(flat, from_block).dims) source.dims.push_back(d);
      }
    }
    return source;
  }

  Index dims_of(const Shape& shape, const Index& idx) { return present(idx.flat) ? unflatten(idx.flat, shape) : idx; }

  /// Canonical indexes: an extent-1 dim is always index 0, so equal elements share a key.
  Index canonical(ValueId v, Index idx) {
    const Shape& shape = type(v).shape;
    if (type(v).rank() == 0) return Index{};
    if (present(idx.flat) && type(v).num_elements() == 1) idx.flat = backend().index_constant(0);
    else if (!present(idx.flat))
      for (size_t d = 0; d < shape.size(); ++d)
        if (shape[d] == 1) idx.dims[d] = backend().index_constant(0);
    return idx;
  }
  static Key key_of(const Index& idx) { return present(idx.flat) ? Key{idx.flat} : idx.dims; }

  /// The value of v at idx (an index over v's shape): loaded if v is an input of the step,
  /// else computed from its producer's operands, once per index (memo_).
  Result<V> value_at(ValueId v, Index idx) {
    idx = canonical(v, idx);
    Key key = key_of(idx);
    if (auto memo = memo_.find({v, key}); memo != memo_.end()) return memo->second;
    V result;
    if (std::optional<V> special = backend().special_value(v, key)) {
      result = *special;
    } else if (!computed_here(v)) {
      if (slot_[v] < 0)
        return make_error(fmt::format("{}: step {} reads a value it does not list as an input",
                                      backend().codegen_name(), step_.name));
      V flat = flat_of(type(v).shape, idx);
      result = backend().load(v, flat);
    } else {
      KILN_ASSIGN_OR_RETURN(result, compute(g_.nodes[producer_[v]], idx));
    }
    memo_[{v, key}] = result;
    return result;
  }

  /// n's result at idx, for an elementwise, source or movement op.
  Result<V> compute(const Node& n, const Index& idx) {
    const TensorType& rt = type(n.result);
    switch (op_kind(n.op)) {
      case OpKind::Elementwise: {
        std::vector<V> operands;
        std::vector<DType> dtypes;
        for (ValueId x : n.operands) {
          KILN_ASSIGN_OR_RETURN(V v, value_at(x, idx));
          operands.push_back(v);
          dtypes.push_back(type(x).dtype);
        }
        return backend().elementwise(n, operands, dtypes);
      }
      case OpKind::Source: return source(n, idx);
      case OpKind::Movement: return movement(n, dims_of(rt.shape, idx));
      default: break;
    }
    return make_error(fmt::format("{}: {} cannot be computed per element in step {}", backend().codegen_name(),
                                  op_name(n.op), step_.name));
  }

  Result<V> source(const Node& n, const Index& idx) {
    const TensorType& rt = type(n.result);
    if (n.op == Op::Iota) {
      int64_t axis = *normalize_axis(n.attrs.get_int("axis"), rt.rank());
      return backend().iota(dims_of(rt.shape, idx).dims[static_cast<size_t>(axis)], rt.dtype);
    }
    const Literal& lit = n.attrs.get_literal("value");
    if (rt.rank() == 0) return backend().scalar_constant(rt.dtype, lit.floats[0], lit.ints[0]);
    V flat = flat_of(rt.shape, idx);
    return backend().dense_constant(lit, rt.dtype, flat);
  }

  Result<V> movement(const Node& n, const Index& out) {
    const TensorType& rt = type(n.result);
    ValueId x = n.operands[0];
    const Shape& xs = type(x).shape;
    auto zero = [&] { return backend().index_constant(0); };
    auto affine = [&](const V& i, int64_t start, int64_t step) { return backend().affine(i, start, step); };
    if (auto source = movement_source(n, xs, out.dims, zero, affine))
      return value_at(x, Index{V{}, std::move(*source)});
    switch (n.op) {
      case Op::Reshape: return value_at(x, reshape_source(rt.shape, out, xs));
      case Op::Gather: {
        int64_t axis = *normalize_axis(n.attrs.get_int("axis", 0), static_cast<int64_t>(xs.size()));
        KILN_ASSIGN_OR_RETURN(Index src, table_index(out, n.operands[1], axis, xs));
        return value_at(x, src);
      }
      case Op::Concat: return backend().concat(n, out);
      default: break;
    }
    return make_error(fmt::format("{}: {} is not supported inside a kernel", backend().codegen_name(), op_name(n.op)));
  }

  /// The index into a table (gather's operand, scatter_add's base) of the element that
  /// `gathered` (an index into table[:axis] + indices + table[axis+1:]) refers to: numpy
  /// take, negative indices from the end, out-of-range ones clamped (compiled code must
  /// not leave the table; the interpreter reports them).
  Result<Index> table_index(const Index& gathered, ValueId indices, int64_t axis, const Shape& table) {
    size_t rank = type(indices).shape.size();
    Index at, result;
    for (size_t k = 0; k < rank; ++k) at.dims.push_back(gathered.dims[static_cast<size_t>(axis) + k]);
    KILN_ASSIGN_OR_RETURN(V j, value_at(indices, at));
    // Indices that cannot leave [0, extent) (an im2col's, computed from iotas) are used as
    // they are: clamped, consecutive ones stopped being consecutive loads.
    const int64_t extent = table[static_cast<size_t>(axis)];
    const std::optional<IntegerRange> range = integer_range(g_, producer_, indices);
    V clamped = range && range->min >= 0 && range->max < extent ? j : backend().clamp_index(j, extent);
    for (size_t d = 0; d < table.size(); ++d) {
      if (static_cast<int64_t>(d) < axis) result.dims.push_back(gathered.dims[d]);
      else if (static_cast<int64_t>(d) == axis) result.dims.push_back(clamped);
      else result.dims.push_back(gathered.dims[d + rank - 1]);
    }
    return result;
  }

  const Graph& g_;
  const Step& step_;
  std::vector<int> slot_;      // per value: its argument position in the kernel, or -1
  std::vector<int> producer_;  // per value: the node that produces it, or -1
  std::vector<char> member_;   // per node: whether it is in this step
  Memo memo_;

 private:
  Backend& backend() { return static_cast<Backend&>(*this); }
};

}  // namespace kiln::ir
