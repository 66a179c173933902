// The state of one import: ONNX values by name (graph values, or constants known at import,
// which fold through the ops that read them), and the helpers op converters share.
// Internal to frontends/onnx.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "base/result.h"
#include "ir/builder.h"
#include "ir/graph.h"
#include "ir/tensor.h"

namespace kiln::onnx_import {

/// A constant's tensor, which every copy of its Value shares: converters take their inputs
/// by value, and a weight read that way was copied each time (BERT-base's import spent
/// most of its time in memcpy).
class SharedTensor {
 public:
  SharedTensor() = default;
  SharedTensor(std::nullopt_t) {}
  SharedTensor(ir::Tensor t) : tensor_(std::make_shared<ir::Tensor>(std::move(t))) {}
  explicit operator bool() const { return tensor_ != nullptr; }
  const ir::Tensor& operator*() const { return *tensor_; }
  const ir::Tensor* operator->() const { return tensor_.get(); }
  /// The tensor, moved out where this is its last holder (else copied); empties this.
  ir::Tensor take();

 private:
  std::shared_ptr<ir::Tensor> tensor_;
};

/// An ONNX value: a graph value, or a constant (an initializer, a Constant node, or folded).
struct Value {
  std::optional<ir::ValueId> id;
  SharedTensor constant;
  /// An initializer: it becomes a param (its value a weight) when the graph reads it.
  bool initializer = false;
  std::string name;  // the ONNX name
};

/// A value written by scatters whose positions were known at import (ScatterElements with
/// constant indices): its base, its updates flattened in order, and per position of the
/// value the index into the updates' concatenation that lands there, or -1 (the base's).
struct KnownScatter {
  Value base;
  std::vector<Value> updates;
  std::vector<int64_t> source;
  int64_t total = 0;
};

class Context {
 public:
  Context(ir::Graph& graph, std::map<std::string, ir::Tensor>& weights, int64_t opset)
      : builder_(graph), weights_(weights), opset_(opset) {}

  int64_t opset() const { return opset_; }
  ir::GraphBuilder& builder() { return builder_; }

  /// Defines an ONNX value.
  void define(const std::string& name, Value value);
  bool defined(const std::string& name) const { return values_.count(name) != 0; }
  const Value& value(const std::string& name) const { return values_.at(name); }

  /// The type of a defined value.
  ir::TensorType type(const std::string& name) const;
  /// The value as a graph value: a constant becomes a constant node, an initializer a param.
  Result<ir::ValueId> operand(const std::string& name);
  /// The value's constant, or null when it is only known at run time.
  const ir::Tensor* constant(const std::string& name) const;

  /// Applies a kiln op: folded into a constant when every operand is one (and the result
  /// is small; float initializers, the weights, are not constants here), else a graph
  /// node. Errors name the node.
  Result<Value> apply(const onnx::NodeProto& node, ir::Op op, const std::vector<Value>& operands, ir::Attrs attrs = {},
                      std::optional<ir::DType> dtype = std::nullopt);
  /// Whether apply() folds over the value: a constant not yet a graph value, and not a
  /// float initializer (a weight).
  static bool foldable_constant(const Value& v);
  /// Whether every input of the node is such a constant: its result is then known at import.
  bool inputs_known_at_import(const onnx::NodeProto& node) const;
  /// A defined value by name, for apply().
  Result<Value> input(const onnx::NodeProto& node, int index);
  /// Whether input `index` is given (optional inputs may be absent or named "").
  static bool has_input(const onnx::NodeProto& node, int index);

  /// Broadcasts `a` and `b` to their common shape (numpy's rules), or errors naming the node.
  Result<std::pair<Value, Value>> broadcast_pair(const onnx::NodeProto& node, const Value& a, const Value& b);
  /// Broadcasts a value to `shape` (numpy's rules: aligned at the last dim).
  Result<Value> broadcast_to(const onnx::NodeProto& node, const Value& v, const ir::Shape& shape);

  ir::TensorType type_of(const Value& v) const;
  /// A graph value of any Value (see operand()).
  Result<ir::ValueId> materialize(const Value& v);
  /// A kiln name for an ONNX name, unique in the graph.
  std::string unique_name(const std::string& onnx_name);
  /// The known scatters by the ONNX name of their result: a scatter into one continues its chain.
  std::map<std::string, KnownScatter>& known_scatters() { return known_scatters_; }
  /// The positions the known scatters' constants (one per position of each result) have
  /// held so far in this import, against a budget.
  int64_t& known_scatter_positions() { return known_scatter_positions_; }
  /// Ends the import: forgets every value, then moves the initializers the graph reads
  /// into the weights (until now they are shared with the values, not copied).
  void store_weights();

 private:
  // A constant as a graph value: a literal if small, else a param with its value.
  Result<ir::ValueId> constant_value(const ir::Tensor& t, const std::string& onnx_name);

  ir::GraphBuilder builder_;
  std::map<std::string, ir::Tensor>& weights_;
  int64_t opset_;
  std::map<std::string, Value> values_;
  // The initializers that became params, by kiln name, for store_weights().
  std::vector<std::pair<std::string, SharedTensor>> initializer_weights_;
  std::set<std::string> used_names_;
  // Params made from folded constants, by content_hash: each distinct value once.
  std::multimap<uint64_t, std::pair<const ir::Tensor*, ir::ValueId>> constant_params_;
  std::map<std::string, KnownScatter> known_scatters_;
  int64_t known_scatter_positions_ = 0;
};

/// "node 'NAME' (OP): " or "node N (OP): ", the start of every error about a node.
std::string where(const onnx::NodeProto& node);
Error node_error(const onnx::NodeProto& node, const std::string& message);

/// Attributes: every attribute a converter does not read is refused (`check_attributes`).
Status check_attributes(const onnx::NodeProto& node, std::initializer_list<std::string_view> known);
const onnx::AttributeProto* attribute(const onnx::NodeProto& node, std::string_view name);
Result<int64_t> int_attribute(const onnx::NodeProto& node, std::string_view name, std::optional<int64_t> fallback);
Result<float> float_attribute(const onnx::NodeProto& node, std::string_view name, std::optional<float> fallback);
Result<std::vector<int64_t>> ints_attribute(const onnx::NodeProto& node, std::string_view name,
                                            std::optional<std::vector<int64_t>> fallback);
Result<std::string> string_attribute(const onnx::NodeProto& node, std::string_view name,
                                     std::optional<std::string> fallback);

/// An ONNX element type as kiln's, or an error naming what it is.
Result<ir::DType> dtype_of(int32_t onnx_type, const std::string& what);
/// A TensorProto's value.
Result<ir::Tensor> tensor_of(const onnx::TensorProto& proto);
/// A constant's elements as integers (a shape, axes, pads...).
std::vector<int64_t> ints_of(const ir::Tensor& t);
/// An axis in [-rank, rank) made non-negative, or an error naming the node.
Result<int64_t> normalize_axis(const onnx::NodeProto& node, int64_t axis, int64_t rank);

}  // namespace kiln::onnx_import
