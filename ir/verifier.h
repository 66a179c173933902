// Graph verification: structure, attributes and types.
#pragma once

#include "base/result.h"
#include "ir/graph.h"

namespace kiln::ir {

/// Checks that a graph is well formed: every value defined once before use, names
/// unique, arities and attributes as the op table says, and each declared result type
/// equal to the inferred one. Errors are "FILE:LINE:COL: error: ..." for parsed graphs.
Status verify(const Graph& graph);

/// Formats an error at a location of a graph ("f.kir:3:7: error: msg", or
/// "error: @g: msg" when the graph was not parsed from text).
Error located_error(const Graph& graph, Location loc, std::string_view message);

}  // namespace kiln::ir
