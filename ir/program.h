// A fused program: the graph's nodes grouped into ordered steps (kernels and library
// calls), and the memory plan that places every materialized value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace kiln::ir {

struct Graph;
using ValueId = int32_t;

/// How a step computes.
enum class StepKind : uint8_t {
  Loop,       ///< one output element at a time: elementwise and movement ops
  Reduction,  ///< rows of a reduction, with its elementwise producers and consumers
  Library,    ///< a library call (matmul)
  Scatter,    ///< scatter_add
};

/// One step of a program.
struct Step {
  StepKind kind = StepKind::Loop;
  std::string name;
  /// Indices into Graph::nodes, in graph order. Constants and iota may appear in several
  /// steps (each step recomputes them); every other node is in exactly one.
  std::vector<int> nodes;
  /// Values the step reads that other steps produce or that are arguments.
  std::vector<ValueId> inputs;
  /// Values the step writes that later steps or the results read.
  std::vector<ValueId> outputs;
};

/// The ordered steps of a fused graph.
struct Program {
  std::vector<Step> steps;
};

/// Where a materialized value lives while the program runs.
enum class Home : uint8_t {
  Arena,  ///< at `offset` in the one arena
  Input,  ///< a plain input, in the caller's buffer
  Param,  ///< a weight, in the read-only weights
  State,  ///< a state argument's persistent buffer (also an in-place state update)
};

/// The placement of one materialized value.
struct Buffer {
  ValueId value = -1;
  Home home = Home::Arena;
  int64_t offset = 0;  ///< arena offset, for Home::Arena
  int64_t bytes = 0;
  /// Steps during which it is live: produced at first_step (-1 for arguments), read
  /// last at last_step (the step count for values the program returns).
  int first_step = -1;
  int last_step = -1;
  /// The value whose arena bytes this one reuses in place (an elementwise kernel writing
  /// over its dying input), or -1.
  ValueId in_place_of = -1;
  /// For Home::State: the state argument this value is the new value of.
  ValueId state = -1;
};

/// The memory plan of a program.
struct MemoryPlan {
  int64_t alignment = 256;
  int64_t arena_bytes = 0;
  /// The largest total of arena bytes live at one step (in-place pairs counted once).
  int64_t live_lower_bound_bytes = 0;
  /// Every arena value in a buffer of its own.
  int64_t naive_bytes = 0;
  std::vector<Buffer> buffers;
  /// State updates that could not be done in place: (state argument, value) pairs the
  /// runtime copies after the last step.
  std::vector<std::pair<ValueId, ValueId>> state_copies;

  /// The buffer of a value, or nullptr.
  const Buffer* find(ValueId value) const;
};

/// "loop", "reduction", "library", "scatter".
std::string_view step_kind_name(StepKind kind);

/// Checks a program against its graph: every non-source node in exactly one step, steps
/// in dependency order, inputs and outputs exactly the values crossing step boundaries.
Status verify_program(const Graph& graph);

/// Checks a memory plan against its program: every value a step outputs has a buffer of
/// its size, lifetimes cover every use, and (base/memory_check) no two arena buffers live
/// at the same step overlap and every buffer fits the arena.
Status verify_memory_plan(const Graph& graph);

}  // namespace kiln::ir
