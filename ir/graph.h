// The graph IR: SSA values, nodes with one result each, arguments and results.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/attributes.h"
#include "ir/ops.h"
#include "ir/program.h"
#include "ir/types.h"

namespace kiln::ir {

/// Index of a value in Graph::values.
using ValueId = int32_t;
inline constexpr ValueId kNoValue = -1;

/// Where something was written in a text file (1-based); line 0 means "not from text".
struct Location {
  int line = 0;
  int col = 0;
};

/// An SSA value: its name (without '%', empty until printed) and its type.
struct Value {
  std::string name;
  TensorType type;
};

/// What a graph argument is: a plain input, a weight, or persistent mutable state.
enum class ArgKind : uint8_t { Input, Param, State };

/// A graph argument.
struct Arg {
  ValueId value = kNoValue;
  ArgKind kind = ArgKind::Input;
  Location loc;
};

/// One op application producing one value.
struct Node {
  Op op;
  std::vector<ValueId> operands;
  Attrs attrs;
  ValueId result = kNoValue;
  Location loc;
};

/// A static graph. Nodes are kept in a topological order (operands before users).
struct Graph {
  std::string name = "main";
  /// The file it was parsed from, for error locations; empty when built in memory.
  std::string source_file;
  std::vector<Arg> args;
  std::vector<Node> nodes;
  std::vector<ValueId> results;
  std::vector<Value> values;
  /// Functions `call` nodes may apply, each a graph of its own (printed as `func`).
  /// A function may call only functions listed before it; functions have no functions.
  std::vector<Graph> functions;
  /// The fused program, once the fusion pass has run; passes that change nodes drop it.
  std::optional<Program> program;
  /// The memory plan of the program, once the memory-plan pass has run.
  std::optional<MemoryPlan> memory;

  /// Adds a value and returns its id.
  ValueId add_value(TensorType type, std::string name = "");
  const TensorType& type(ValueId id) const { return values[static_cast<size_t>(id)].type; }
  const std::string& value_name(ValueId id) const { return values[static_cast<size_t>(id)].name; }
  /// How many times each value is used (operands and results), indexed by ValueId.
  std::vector<int> use_counts() const;
  /// For each value, the index of the node producing it, or -1 for arguments.
  std::vector<int> producers() const;
  /// Replaces every use of a value (operands and results) through `replacement`
  /// (indexed by ValueId; kNoValue keeps the original). A replaced result's name moves
  /// to its replacement when that has none.
  void replace_uses(const std::vector<ValueId>& replacement);
  /// The argument whose value has this name, or nullptr.
  const Arg* find_arg(std::string_view name) const;
  /// The state argument %S that `result` updates, it being named %S.next and of %S's type
  /// (a training step names its updates so), or nullptr.
  const Arg* updated_state(ValueId result) const;
  /// The function with this name, or nullptr.
  const Graph* find_function(std::string_view name) const;
};

/// The name each value prints with: its own name, or for unnamed values the next
/// decimal number not already taken (indexed by ValueId).
std::vector<std::string> display_names(const Graph& graph);

/// "param", "state" or "" for plain inputs.
std::string_view arg_kind_keyword(ArgKind kind);

}  // namespace kiln::ir
