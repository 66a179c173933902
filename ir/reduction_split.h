// How a reduction step whose rows are too few, or too long, to keep every core busy one row
// per work item is split: a first kernel sums each part of a row into scratch (a double per
// part), and the step's kernel then adds each row's parts, always in the same order, and
// finishes the row. The parts depend on the shapes only, never on the thread count, so
// results are bit-identical from run to run and across thread counts.
#pragma once

#include <cstdint>
#include <optional>

#include "ir/graph.h"
#include "ir/row_class.h"

namespace kiln::ir {

struct ReductionSplit {
  enum class Walk : uint8_t {
    /// The reduced dims lead (bias and layer-norm parameter gradients): part p sums operand
    /// rows [p·part_length, (p+1)·part_length) for every column; scratch[p·rows + c].
    Columns,
    /// The reduced dims trail (a full-tensor sum, a few long rows): part p of row r sums
    /// row positions [p·part_length, (p+1)·part_length); scratch[r·parts + p].
    Rows,
  };
  Walk walk = Walk::Rows;
  int64_t parts = 0;          ///< per row (Rows) or over the operand's rows (Columns)
  int64_t part_length = 0;    ///< row positions (Rows) or operand rows (Columns) per part
  int64_t partial_items = 0;  ///< the first kernel's work items: rows·parts, or parts
  int64_t scratch_bytes = 0;  ///< one double per row per part
};

/// Whether the step reduces with exactly one float reduce_sum and writes no full-shape
/// output computed from that sum (so a row's sum is all the rest of its row needs).
bool single_float_sum(const Graph& graph, const Step& step, const RowClass& rc);

/// Whether the step's rows are columns of its operand: its reduced dims lead, some dims
/// are kept, and single_float_sum holds.
bool sums_columns(const Graph& graph, const Step& step, const RowClass& rc);

/// The split of a reduction step, or nullopt when it runs one row per work item: a
/// Columns split for a column sum of at least kMinElements with fewer than kManyColumns
/// columns; a Rows split for at most kFewRows contiguous rows of at least kMinElements in
/// all, with no full-shape output, in parts of equal length (a divisor of the row length,
/// at least kMinPartLength).
std::optional<ReductionSplit> reduction_split(const Graph& graph, const Step& step);

inline constexpr int64_t kSplitMinElements = int64_t{1} << 20;
inline constexpr int64_t kSplitPartElements = int64_t{1} << 18;  // aimed at per part
inline constexpr int64_t kSplitMaxParts = 256;
inline constexpr int64_t kSplitFewRows = 64;
inline constexpr int64_t kSplitManyColumns = 65536;
inline constexpr int64_t kSplitMinPartLength = 16384;
inline constexpr int64_t kSplitMinColumnRows = 64;

}  // namespace kiln::ir
