// Weights meet a graph: tensors by name become its params' values and its state's initial
// values, checked for type, with nothing left over unnoticed.
#pragma once

#include <map>
#include <string>

#include "base/result.h"
#include "ir/graph.h"
#include "ir/tensor.h"

namespace kiln {

/// How strictly weights must match.
struct WeightsOptions {
  /// Floating weights of another floating type (f64 or bf16 weights for an f32 param)
  /// are rounded to the argument's type, as `--weights-dtype=convert` asks; otherwise
  /// the element type must be the argument's.
  bool convert_dtypes = false;
  /// Names that are no param or state of the graph are ignored, as
  /// `--allow-unused-weights` asks; otherwise they are an error that lists them.
  bool allow_unused = false;
};

/// The tensors of `weights` for `graph`'s params and state, by argument name, each of
/// exactly its argument's type (converted where asked). Shapes must match; a tensor
/// named for a plain input, or for nothing, is an error unless `allow_unused`. Params
/// without a tensor are left for the caller to refuse; state without one starts at zero.
Result<std::map<std::string, ir::Tensor>> match_weights(const ir::Graph& graph,
                                                        const std::map<std::string, ir::Tensor>& weights,
                                                        const WeightsOptions& options);

}  // namespace kiln
