// Where a loop step reads its inputs, at compile time: the element walker over integers
// rather than code. The CPU code generator asks it whether an input is read across rows
// (a transpose of the output's last two dims) to walk such a step in tiles.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace kiln::ir {

/// The loads a loop step makes for its output element at `index` (one index per dim of
/// its iteration shape, the first output's): each input and the flat index read, in the
/// order the element walker reaches them. Nullopt where a load's index is not known
/// without the data (a gather's table), or the walk fails.
std::optional<std::vector<std::pair<ValueId, int64_t>>> element_reads(const Graph& graph, const Step& step,
                                                                      const std::vector<int64_t>& index);

/// The inputs a loop step reads across rows, and the output dim their rows run down.
struct ReadAcrossRows {
  int64_t dim = 0;
  std::vector<ValueId> inputs;
};

/// A loop step's inputs read across rows: one step along the output's last dim moves
/// such an input's index by more than one element, and each step along an earlier dim
/// `dim`, for a tile's 16 rows from the origin, by exactly one. With `dim` the one before
/// the last, that is a transpose of the last two dims (a vision transformer's [C, H·W]
/// to [H·W, C]); with an earlier one, the dims after it taken together as the columns
/// (NHWC to NCHW: rows down C, columns along H·W). Read a row at a time, each of such an
/// input's elements is a load from another cache line. The latest such dim; none where
/// there is none, where the walk reads an index only the data knows, or where an input
/// read across rows is read more than once per output element (a tile of it could not
/// stand for each read).
std::optional<ReadAcrossRows> inputs_read_across_rows(const Graph& graph, const Step& step);

}  // namespace kiln::ir
