// Appending type-checked nodes to a graph; used by passes, decompositions and the
// model-definition API.
#pragma once

#include <initializer_list>
#include <vector>

#include "base/result.h"
#include "ir/graph.h"

namespace kiln::ir {

/// Appends nodes to a graph, inferring each result type.
class GraphBuilder {
 public:
  explicit GraphBuilder(Graph& graph) : graph_(graph) {}

  /// Adds an argument.
  ValueId arg(std::string name, TensorType type, ArgKind kind = ArgKind::Input);
  /// Adds a node; the error names the op and shapes when the operands do not fit.
  /// `source_dtype` gives constant and iota their element type.
  Result<ValueId> add(Op op, std::vector<ValueId> operands, Attrs attrs = {},
                      std::optional<DType> source_dtype = std::nullopt);
  /// Like add(), for callers whose operands are known to fit (asserts on error).
  ValueId emit(Op op, std::vector<ValueId> operands, Attrs attrs = {});

  // Shorthands for the forms decompositions need.
  ValueId scalar(double value, DType dtype);
  ValueId unary(Op op, ValueId x) { return emit(op, {x}); }
  ValueId binary(Op op, ValueId a, ValueId b) { return emit(op, {a, b}); }
  /// reduce_{sum,max,min} over axes without keeping dims.
  ValueId reduce(Op op, ValueId x, std::vector<int64_t> axes, bool keepdims = false);
  /// Broadcasts x to `shape`, x's dim i going to result dim dims[i].
  ValueId broadcast(ValueId x, Shape shape, std::vector<int64_t> dims);

  const TensorType& type(ValueId v) const { return graph_.type(v); }
  Graph& graph() { return graph_; }

 private:
  Graph& graph_;
};

}  // namespace kiln::ir
