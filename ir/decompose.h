// Decompositions: each composite op written in primitive ops.
#pragma once

#include <functional>

#include "ir/builder.h"
#include "ir/graph.h"
#include "ir/window.h"

namespace kiln::ir {

/// Layer-norm statistics over dims axis..rank-1: x minus its mean, and 1/sqrt(var + eps)
/// (biased variance), both broadcast back to x's shape. The decomposition and the
/// gradient rule build these the same way, so cse shares them between the two.
struct LayerNormStats {
  ValueId centered;
  ValueId rstd;
};
LayerNormStats layer_norm_stats(GraphBuilder& b, ValueId x, int64_t axis, double eps);

/// Rewrites every composite node (softmax, layer_norm, gelu, ...) into primitives, in
/// place. The last node of each expansion keeps the composite's result value, so names
/// and uses stay as they were. Returns true when anything changed.
bool decompose_composites(Graph& graph);
/// Like decompose_composites, for the composite nodes `select` accepts.
bool decompose_composites(Graph& graph, const std::function<bool(const Node&)>& select);

/// Rewrites every convolution into im2col (strided slices of the padded input, which fusion
/// makes one gather kernel) and matmuls, for targets without a convolution library (CUDA)
/// and half-precision compiles. Returns true when anything changed.
bool lower_convolutions(Graph& graph);
/// Like lower_convolutions, for the convolutions `select` accepts.
bool lower_convolutions(Graph& graph, const std::function<bool(const Node&)>& select);

}  // namespace kiln::ir
