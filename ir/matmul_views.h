// Matmul operands read in place through movement ops: the transposes, slices and reshapes
// between a stored value and a matmul (attention's heads split out of a projection) that
// the library call reads by strides instead of a kernel copying them out.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/graph.h"

namespace kiln::ir {

/// Elements of a stored value read as a tensor of `shape`: element (i0, i1, ...) at
/// offset + i0·strides[0] + i1·strides[1] + ... of the value's row-major elements.
struct StridedView {
  int64_t offset = 0;
  Shape shape;
  std::vector<int64_t> strides;
};

/// The view reshaped to `to` without moving elements, or none: each group of dims whose
/// extents multiply to those of a group of new dims must lie in memory as one row-major
/// block (dims of extent 1 aside); the new dims then take strides from the group's
/// innermost one out.
std::optional<StridedView> reshaped(const StridedView& from, const Shape& to);

/// The view that the movement nodes `chain` (transpose, slice, reshape, broadcast; in graph order,
/// each reading the one before, the first reading a stored value of `shape`) give of that
/// value, or none where a reshape merges dims that are not adjacent in memory.
std::optional<StridedView> view_through(const Graph& g, const Shape& shape, const std::vector<int>& chain);

/// A matmul operand's view as a BLAS call reads it: rows at `ld` elements apart and columns
/// adjacent, or (transposed) the other way round; none where neither holds.
struct MatrixView {
  bool transposed = false;
  int64_t ld = 0;
};
std::optional<MatrixView> matrix_view(const StridedView& view);

/// Whether the view's batch dims (all but the last two; extents of 1 aside) lie at one
/// stride each inside the next, so that one strided-batched call walks them all.
bool batch_dims_merge(const StridedView& view);

/// Whether a matmul's call can read its operands through views: an f32, bf16 or f16 matmul.
bool reads_views(const Graph& g, const Node& n);
/// Whether op is one of the views such a call reads through: transpose, slice, reshape.
bool matmul_view_op(Op op);

/// Whether an f32, bf16 or f16 matmul reads the view that `chain` (as view_through takes
/// it) gives of a stored value of `shape` in place: matrix_view takes it, transposed only
/// where the matrix lies whole (its ld the packed one's), and with `single_batch` only
/// where its batch dims merge.
bool folds_into_matmul(const Graph& g, const Shape& shape, const std::vector<int>& chain, bool single_batch);

/// Per node: the matmul node whose call reads it in place, or -1. For each operand of an
/// f32, bf16 or f16 matmul, the longest chain of single-use transposes, slices and
/// reshapes (none a result) back from the operand whose view matrix_view takes,
/// transposed only where the matrix lies whole (its ld the packed one's), and with
/// `single_batch` only where its batch dims merge (batch_dims_merge): CUDA runs a matmul
/// whose batch dims do not as a loop of cuBLAS calls, slower than copying the operand out
/// once.
std::vector<int> matmul_operand_folds(const Graph& g, bool single_batch = false);

}  // namespace kiln::ir
