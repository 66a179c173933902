// The row structure of a reduction step: which dims of its iteration shape a row spans.
// Both code generators walk reduction kernels a row at a time from this.
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
};

/// The sorted, normalized axes a reduction node reduces.
std::vector<int64_t> reduction_axes(const Graph& graph, const Node& node);

/// The row class of a reduction step: from its first reduction, or else from a broadcast
/// that spreads a value computed in the step over its rows; nullopt when it has neither.
std::optional<RowClass> row_class(const Graph& graph, const Step& step);

/// How many work items a kernel step covers: output elements for a loop kernel, rows for
/// a reduction kernel, 1 for a scatter, 0 for a library step.
int64_t work_items(const Graph& graph, const Step& step);

}  // namespace kiln::ir
