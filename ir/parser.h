// The text IR parser.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "ir/graph.h"

namespace kiln::ir {

/// Limits that keep the parser's time and memory bounded on any input.
struct ParseLimits {
  size_t max_bytes = size_t{64} << 20;           ///< input size
  int max_nesting = 32;                          ///< brackets inside a literal
  int64_t max_attr_elements = int64_t{1} << 22;  ///< scalars in all attribute lists of a file
  size_t max_identifier = 1024;                  ///< characters in a name
};

/// Parses and verifies one graph. Errors read "FILE:LINE:COL: error: ..." and say
/// what was expected.
Result<Graph> parse(std::string_view text, std::string_view filename = "<input>", const ParseLimits& limits = {});

/// The line that separates the parts of a file of several inputs (kiln opt
/// --split-input-file, lit tests of several cases).
inline constexpr std::string_view kSplitMarker = "# -----";

/// The parts of `text` between kSplitMarker lines, each preceded by as many newlines as
/// the text has lines before it, so that parsing a part reports the file's line numbers.
std::vector<std::string> split_input_parts(std::string_view text);

}  // namespace kiln::ir
