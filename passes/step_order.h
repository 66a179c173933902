// The order a fused program's steps run in.
#pragma once

#include <vector>

#include "base/result.h"
#include "ir/graph.h"

namespace kiln::passes {

/// How fusion orders its steps among those whose inputs are ready.
enum class StepOrder {
  kGraph,   ///< the step whose last op comes first in the graph
  kMemory,  ///< the step that frees the most arena bytes less those it writes, then kGraph
};

/// One step to order: its nodes, sorted (a constant or iota may be in several steps; it
/// is the step's own value only where it is the step's one node).
struct StepNodes {
  std::vector<int> members;
};

/// The steps' order, topological over the values they pass each other (with extra
/// outputs, a step can end later in the graph than a step that reads it). An error where
/// the steps depend on each other in a cycle.
Result<std::vector<int>> order_steps(const ir::Graph& g, const std::vector<StepNodes>& steps, StepOrder rule);

}  // namespace kiln::passes
