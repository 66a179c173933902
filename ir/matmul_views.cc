#include "ir/matmul_views.h"

#include <algorithm>

#include "ir/types.h"

namespace kiln::ir {

std::optional<StridedView> reshaped(const StridedView& from, const Shape& to) {
  std::vector<int64_t> dims, strides;  // the old dims without those of extent 1
  for (size_t d = 0; d < from.shape.size(); ++d)
    if (from.shape[d] != 1) dims.push_back(from.shape[d]), strides.push_back(from.strides[d]);
  StridedView out{from.offset, to, std::vector<int64_t>(to.size(), 0)};
  size_t old_at = 0, new_at = 0;
  while (new_at < to.size() || old_at < dims.size()) {
    if (new_at < to.size() && to[new_at] == 1) {  // any stride: 1 element
      out.strides[new_at++] = 1;
      continue;
    }
    if (old_at >= dims.size() || new_at >= to.size()) return std::nullopt;
    // The smallest groups [old_at, old_end) and [new_at, new_end) of equal products.
    size_t old_end = old_at + 1, new_end = new_at + 1;
    int64_t old_product = dims[old_at], new_product = to[new_at];
    while (old_product != new_product) {
      if (old_product < new_product) {
        if (old_end >= dims.size()) return std::nullopt;
        old_product *= dims[old_end++];
      } else {
        if (new_end >= to.size()) return std::nullopt;
        new_product *= to[new_end++];
      }
    }
    for (size_t d = old_at; d + 1 < old_end; ++d)
      if (strides[d] != strides[d + 1] * dims[d + 1]) return std::nullopt;
    int64_t stride = strides[old_end - 1];
    for (size_t d = new_end; d-- > new_at;) {
      out.strides[d] = stride;
      stride *= to[d];
    }
    old_at = old_end;
    new_at = new_end;
  }
  return out;
}

std::optional<StridedView> view_through(const Graph& g, const Shape& shape, const std::vector<int>& chain) {
  StridedView view{0, shape, row_major_strides(shape)};
  for (int index : chain) {
    const Node& n = g.nodes[static_cast<size_t>(index)];
    const Shape& result = g.type(n.result).shape;
    switch (n.op) {
      case Op::Transpose: {
        const std::vector<int64_t>& perm = n.attrs.get_ints("perm");
        StridedView t{view.offset, result, {}};
        for (int64_t p : perm) t.strides.push_back(view.strides[static_cast<size_t>(p)]);
        view = std::move(t);
        break;
      }
      case Op::Slice: {
        const std::vector<int64_t>& starts = n.attrs.get_ints("starts");
        const std::vector<int64_t> steps =
            n.attrs.has("strides") ? n.attrs.get_ints("strides") : std::vector<int64_t>(result.size(), 1);
        for (size_t d = 0; d < result.size(); ++d) {
          view.offset += starts[d] * view.strides[d];
          view.strides[d] *= steps[d];
        }
        view.shape = result;
        break;
      }
      case Op::Broadcast: {  // operand dim i becomes dims[i]; new and spread dims repeat (stride 0)
        const std::vector<int64_t>& dims = n.attrs.get_ints("dims");
        StridedView b{view.offset, result, std::vector<int64_t>(result.size(), 0)};
        for (size_t d = 0; d < dims.size(); ++d)
          if (view.shape[d] == result[static_cast<size_t>(dims[d])])
            b.strides[static_cast<size_t>(dims[d])] = view.strides[d];
        view = std::move(b);
        break;
      }
      case Op::Reshape: {
        std::optional<StridedView> r = reshaped(view, result);
        if (!r) return std::nullopt;
        view = std::move(*r);
        break;
      }
      default: return std::nullopt;
    }
  }
  return view;
}

std::optional<MatrixView> matrix_view(const StridedView& view) {
  const size_t rank = view.shape.size();
  if (rank < 2) return std::nullopt;
  const int64_t rows = view.shape[rank - 2], cols = view.shape[rank - 1];
  const int64_t row_stride = view.strides[rank - 2], col_stride = view.strides[rank - 1];
  // A dim of extent 1 takes any stride.
  if ((cols == 1 || col_stride == 1) && (rows == 1 || row_stride >= cols))
    return MatrixView{false, rows == 1 ? std::max<int64_t>(cols, 1) : row_stride};
  if ((rows == 1 || row_stride == 1) && (cols == 1 || col_stride >= rows))
    return MatrixView{true, cols == 1 ? std::max<int64_t>(rows, 1) : col_stride};
  return std::nullopt;
}

bool batch_dims_merge(const StridedView& view) {
  int64_t inner_span = -1;  // the stride the next dim out must have
  for (size_t d = view.shape.size() < 2 ? 0 : view.shape.size() - 2; d-- > 0;) {
    if (view.shape[d] == 1) continue;
    if (inner_span >= 0 && view.strides[d] != inner_span) return false;
    inner_span = view.strides[d] * view.shape[d];
  }
  return true;
}

bool reads_views(const Graph& g, const Node& n) {
  const DType type = g.type(n.result).dtype;
  return n.op == Op::Matmul && (type == DType::F32 || type == DType::BF16 || type == DType::F16);
}

bool matmul_view_op(Op op) { return op == Op::Transpose || op == Op::Slice || op == Op::Reshape; }

bool folds_into_matmul(const Graph& g, const Shape& shape, const std::vector<int>& chain, bool single_batch) {
  std::optional<StridedView> view = view_through(g, shape, chain);
  std::optional<MatrixView> matrix = view ? matrix_view(*view) : std::nullopt;
  // A transposed operand only as a whole matrix: oneDNN's sgemm runs a transposed B
  // slower even packed, more so at rows far apart (docs/cpu.md).
  return matrix && (!matrix->transposed || matrix->ld == view->shape[view->shape.size() - 2]) &&
         (!single_batch || batch_dims_merge(*view));
}

std::vector<int> matmul_operand_folds(const Graph& g, bool single_batch) {
  std::vector<int> folds(g.nodes.size(), -1);
  const std::vector<int> producer = g.producers();
  std::vector<int> uses(g.values.size(), 0);
  for (const Node& n : g.nodes)
    for (ValueId v : n.operands) ++uses[v];
  for (ValueId v : g.results) uses[v] += 2;  // a result is stored whole
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& mm = g.nodes[i];
    if (!reads_views(g, mm)) continue;
    for (ValueId operand : mm.operands) {
      std::vector<int> chain, best;
      for (ValueId v = operand; uses[v] == 1;) {
        const int p = producer[v];
        if (p < 0) break;
        const Op op = g.nodes[p].op;
        if (!matmul_view_op(op)) break;
        chain.insert(chain.begin(), p);
        v = g.nodes[p].operands[0];
        if (folds_into_matmul(g, g.type(v).shape, chain, single_batch)) best = chain;
      }
      for (int n : best) folds[n] = static_cast<int>(i);
    }
  }
  return folds;
}

}  // namespace kiln::ir
