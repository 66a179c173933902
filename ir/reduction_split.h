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

/// The elements after the reduced dims below which a sum over inner dims is not walked by
/// columns (its operand's rows too short to read a vector at a time).
inline constexpr int64_t kMinColumnBlockRow = 16;

/// Whether the step's rows are columns of its operand: its reduced dims are consecutive,
/// not trailing, and lead or have at least kMinColumnBlockRow elements after them (each
/// block of the operand between kept dims outside them a column sum); some dims are kept,
/// and single_float_sum holds.
bool sums_columns(const Graph& graph, const Step& step, const RowClass& rc);

/// When a target splits and into what parts.
struct SplitRule {
  int64_t min_elements;     ///< smaller steps run whole
  int64_t part_elements;    ///< aimed at per part
  int64_t max_parts;        ///< in all
  int64_t min_parts;        ///< a Columns split of fewer parts runs whole
  int64_t few_rows;         ///< a Rows split only of at most this many rows
  int64_t many_columns;     ///< a Columns split only of fewer columns
  int64_t min_part_length;  ///< Rows: elements per part at least
  int64_t min_column_rows;  ///< Columns: operand rows per part at least
  /// Rows: elements per part aimed at where the step also writes full-shape outputs (which
  /// never need the sum, see single_float_sum; the partial kernel writes them).
  int64_t output_part_elements;
};

/// The CPU splits what two cores could not share one row per work item: columns of at
/// least 2^20 elements in parts of about 2^18, and up to 64 long rows into equal parts;
/// rows with full-shape outputs in parts of about 2^14, which its partial kernel walks
/// twice (the sum, then the outputs) while the part is still in L2.
inline constexpr SplitRule kCpuSplit{int64_t{1} << 20, int64_t{1} << 18, 256, 2, 64, 65536, 16384, 64,
                                     int64_t{1} << 14};
/// CUDA walks every column sum by columns (threads own columns, so reads coalesce; one
/// part is that walk unsplit), in parts of about 2^15 elements; and splits up to 264
/// rows (two per SM of an H100) of at least 2^16 elements in all into equal parts, the
/// partial kernel writing any full-shape outputs on its one walk, in parts of about 2^12
/// there: a block per part, and parts of 2^15 left GPT-2's loss step (3·2^20 elements,
/// the residual written beside the sum) 96 blocks for 132 SMs, at 0.20 of copy on an
/// H200 (docs/benchmarks.md).
inline constexpr SplitRule kCudaSplit{int64_t{1} << 16, int64_t{1} << 15, 1024, 1, 264, int64_t{1} << 40, 2048, 32,
                                      int64_t{1} << 12};

/// The split of a reduction step under `rule`, or nullopt when it runs one row per work
/// item: a Columns split (sums_columns) of at least rule.min_elements, fewer than
/// rule.many_columns columns and at least rule.min_parts parts; a Rows split of at most
/// rule.few_rows contiguous rows of at least rule.min_elements in all, in equal parts (a
/// divisor of the row length of at least rule.min_part_length).
std::optional<ReductionSplit> reduction_split(const Graph& graph, const Step& step, const SplitRule& rule);

}  // namespace kiln::ir
