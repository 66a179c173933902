// Decompositions: each composite op written in primitive ops.
#pragma once

#include "ir/graph.h"

namespace kiln::ir {

/// Rewrites every composite node (softmax, layer_norm, gelu, ...) into primitives, in
/// place. The last node of each expansion keeps the composite's result value, so names
/// and uses stay as they were. Returns true when anything changed.
bool decompose_composites(Graph& graph);

}  // namespace kiln::ir
