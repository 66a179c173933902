// Graphviz DOT export.
#pragma once

#include <string>

#include "ir/graph.h"

namespace kiln::ir {

/// The graph in Graphviz DOT: arguments as ellipses, ops as boxes labelled with the
/// value name, op and type, edges from operands to users, results marked.
std::string to_dot(const Graph& graph);

}  // namespace kiln::ir
