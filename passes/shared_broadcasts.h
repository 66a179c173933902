// A fusion preparation: one broadcast of a param or constant per reading op.
#pragma once

#include "ir/graph.h"

namespace kiln::passes {

/// Gives every op that reads a broadcast of a graph argument or a source (a param's or
/// constant's value spread over a shape: GELU's 0.5, a clip bound, a bias) a broadcast
/// of its own, inserted just before it. CSE merges such broadcasts across a whole model;
/// shared, the one broadcast joins one kernel and every other kernel reads its whole
/// result from memory, where a broadcast of its own is an index computation in each
/// kernel. Returns whether it changed the graph.
bool split_shared_broadcasts(ir::Graph& g);

}  // namespace kiln::passes
