// The values an integer tensor can hold, where the ops that compute it tell: iotas and
// constants, sums and products of them, and movement ops over them.
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"

namespace kiln::ir {

/// The least and greatest element v can hold.
struct IntegerRange {
  int64_t min = 0, max = 0;
};

/// v's range, where its producers (`producers`: Graph::producers()) are iotas, integer
/// constants, add, sub and mul of such values, and reshapes, broadcasts, transposes,
/// slices and concats of them; nullopt otherwise (an input, a value read from memory a
/// step computed from anything else, a float).
std::optional<IntegerRange> integer_range(const Graph& g, const std::vector<int>& producers, ValueId v);

}  // namespace kiln::ir
