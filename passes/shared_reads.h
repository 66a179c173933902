// Fusion preparations: an op of its own, per reading op, for cheap reads that CSE merged.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace kiln::passes {

/// Gives every op that reads a broadcast of a graph argument or a source (a param's or
/// constant's value spread over a shape: GELU's 0.5, a clip bound, a bias) a broadcast
/// of its own, inserted just before it. CSE merges such broadcasts across a whole model;
/// shared, the one broadcast joins one kernel and every other kernel reads its whole
/// result from memory, where a broadcast of its own is an index computation in each
/// kernel. Returns whether it changed the graph.
bool split_shared_broadcasts(ir::Graph& g);

/// Gives every op that reads a slice of a value in memory anyway (a graph argument, a
/// library call's result, or a computed value that several windows read, which fusion
/// keeps in memory) a slice of its own. CSE merges the taps that a pool and its gradient
/// read; shared, each tap joins the pool's kernel as an extra output that the gradient's
/// kernel reads back, where a tap of its own is an index computation in each kernel, and
/// the pool writes only its result. Returns whether it changed the graph.
bool split_shared_taps(ir::Graph& g);

/// Gives every f32, bf16 or f16 matmul after the first that reads a view (a chain of
/// transposes, reshapes and slices of a stored value) read only by such matmuls, each in
/// place (ir::folds_into_matmul), a chain of its own. CSE merges the flattening reshape of
/// a layer's input that the weight gradients of q, k and v each read; shared, it is a copy
/// of its own, where a chain of its own is a stride in each library call. Returns whether
/// it changed the graph.
bool split_shared_matmul_views(ir::Graph& g, bool single_batch);

/// The slices that read v, directly or through movement ops other than broadcasts (a
/// pool's padding); `users` lists each value's reading nodes. None where every reader is a
/// unit-stride slice of v and their boxes are disjoint: the parts of a split (an LSTM's
/// four gates) read each element once, and are no windows.
int window_reads(const ir::Graph& g, const std::vector<std::vector<int>>& users, ir::ValueId v);

}  // namespace kiln::passes
