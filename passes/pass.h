// The pass contract: a name and a run that changes a graph or fails.
#pragma once

#include <string_view>

#include "base/result.h"
#include "ir/graph.h"

namespace kiln::passes {

/// A graph-to-graph transformation.
class Pass {
 public:
  virtual ~Pass() = default;
  /// The name used by --passes and --dump-after.
  virtual std::string_view name() const = 0;
  /// Transforms the graph in place; returns whether anything changed, or an error.
  virtual Result<bool> run(ir::Graph& graph) = 0;
  /// Whether a change by this pass keeps the graph's program and memory plan valid; the
  /// pipeline drops them after a change by any pass that does not.
  virtual bool preserves_program() const { return false; }
};

}  // namespace kiln::passes
