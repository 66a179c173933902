// The text IR parser.
#pragma once

#include <string_view>

#include "ir/graph.h"
#include "base/result.h"

namespace kiln::ir {

/// Limits that keep the parser's time and memory bounded on any input.
struct ParseLimits {
  size_t max_bytes = size_t{64} << 20;     ///< input size
  int max_nesting = 32;                     ///< brackets inside a literal
  int64_t max_attr_elements = int64_t{1} << 22;  ///< scalars in all attribute lists of a file
  size_t max_identifier = 1024;             ///< characters in a name
};

/// Parses and verifies one graph. Errors read "FILE:LINE:COL: error: ..." and say
/// what was expected.
Result<Graph> parse(std::string_view text, std::string_view filename = "<input>",
                    const ParseLimits& limits = {});

}  // namespace kiln::ir
