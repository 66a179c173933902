// The text IR printer.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln::ir {

/// Prints a graph, after its functions, in the text format; parse(print(g)) gives back
/// the same graph.
std::string print(const Graph& graph);

/// Shortest text that reads back as the same double, always with a '.', 'e', "inf" or
/// "nan" so it reads back as a float.
std::string format_float(double value);

/// Shortest text that reads back as the same float (for f32, f16 and bf16 literals).
std::string format_float32(float value);

/// An attribute value as the text format writes it; `dtype` decides how literals print.
std::string format_attr(const AttrValue& value, DType dtype);

}  // namespace kiln::ir
