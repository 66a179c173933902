// What both code generators need to know of a kernel step beyond its nodes: the row
// structure of a reduction step (which dims of its iteration shape a row spans; kernels
// walk it a row at a time), whether a loop step can index flat, which scalars are
// invariant, and how often the step reads a value.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/graph.h"

namespace kiln::ir {

/// The iteration shape of a reduction step split into row (reduced) and kept dims.
struct RowClass {
  /// The full iteration shape (the reduced operand's shape).
  Shape full;
  /// Sorted dims of `full` a row spans, and the other dims.
  std::vector<int64_t> reduced, kept;
  Shape kept_shape, reduced_shape;

  /// Elements per row.
  int64_t row_length() const { return num_elements(reduced_shape); }
  /// Rows.
  int64_t rows() const { return num_elements(kept_shape); }
  /// Whether each row is one contiguous range of `full` (the reduced dims are trailing).
  bool contiguous() const;
  /// `full` with extent 1 at the reduced dims (a row value kept with keepdims).
  Shape keepdims_shape() const;

  /// An index over `full` from an index over the kept dims and one over the reduced dims,
  /// in whatever form the code generator builds indexes.
  template <class I>
  std::vector<I> full_index(const std::vector<I>& kept_index, const std::vector<I>& reduced_index) const {
    std::vector<I> full;
    for (size_t d = 0, k = 0, q = 0; d < this->full.size(); ++d)
      full.push_back(is_reduced(d) ? reduced_index[q++] : kept_index[k++]);
    return full;
  }
  /// An index over keepdims_shape() from one over the kept dims (`zero` at reduced dims).
  template <class I>
  std::vector<I> keepdims_index(const std::vector<I>& kept_index, const I& zero) const {
    std::vector<I> index;
    for (size_t d = 0, k = 0; d < full.size(); ++d) index.push_back(is_reduced(d) ? zero : kept_index[k++]);
    return index;
  }
  bool is_reduced(size_t dim) const;
};

/// The sorted, normalized axes a reduction node reduces.
std::vector<int64_t> reduction_axes(const Graph& graph, const Node& node);

/// The row class of a reduction step: from its first reduction, or else from a broadcast
/// that spreads a value computed in the step over its rows; nullopt when it has neither.
std::optional<RowClass> row_class(const Graph& graph, const Step& step);

/// Whether a loop step can index every value by the flat index of its iteration shape:
/// every value has that shape or is a scalar, and no movement op or iota remaps indices.
bool flat_iteration(const Graph& graph, const Step& step);

/// The scalars a kernel step can compute once, before any loop: results of rank-0 nodes
/// whose operands are all scalars and that no reduction of the step feeds (in node
/// order), then the step's rank-0 inputs.
std::vector<ValueId> invariant_scalars(const Graph& graph, const Step& step);

/// How many times the step's nodes read `value`, plus one if the step outputs it.
int uses_in_step(const Graph& graph, const Step& step, ValueId value);

/// How many work items a kernel step covers: output elements for a loop kernel, rows for
/// a reduction kernel, 1 for a scatter, 0 for a library step.
int64_t work_items(const Graph& graph, const Step& step);

/// The floating-point operations a step does, as profiles count them: 2mnk per batch
/// index of a matmul, one per result element of an elementwise op (casts and selects
/// included), one per operand element of a reduction; movement ops and constants none.
int64_t step_flops(const Graph& graph, const Step& step);

}  // namespace kiln::ir
