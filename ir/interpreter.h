// The reference interpreter: runs any graph on the CPU in plain C++; the ground truth
// every backend is tested against.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "ir/graph.h"
#include "ir/tensor.h"

namespace kiln::ir {

/// Evaluates one primitive op on operand tensors, producing a tensor of `result_type`.
/// Reductions and matmul accumulate in f64 (int64 for integers). Integer arithmetic
/// wraps; integer division by zero gives 0; float-to-int casts saturate (NaN gives 0).
Result<Tensor> evaluate_op(Op op, std::span<const Tensor* const> operands, const Attrs& attrs,
                           const TensorType& result_type);

/// Whether the interpreter computes a composite op itself rather than through its
/// decomposition: max_pool, avg_pool and pad, so that their decompositions (what the code
/// generators run) are checked against direct sums.
bool interpreted_directly(Op op);
/// One of those ops, or conv, conv_input_grad or conv_weight_grad (whose lowering to
/// im2col and matmuls is checked against these sums), in ir/interpreter_window.cc;
/// operands and attributes must have passed shape inference.
Tensor evaluate_window_op(Op op, std::span<const Tensor* const> operands, const Attrs& attrs,
                          const TensorType& result_type);

/// Evaluates one node of `graph` (a primitive op) on its operands. An allocation failure
/// is an error naming the value and the bytes it needs, not a std::bad_alloc.
Result<Tensor> evaluate_node(const Graph& graph, const Node& node, std::span<const Tensor* const> operands);

/// Checks that `inputs` gives every argument of the graph (by name, without '%') a
/// tensor of exactly its type, and names nothing else.
Status check_inputs(const Graph& graph, const std::map<std::string, Tensor>& inputs);

/// Evaluates a verified graph (other composites through their decomposition). `inputs` maps
/// each argument's name (without '%') to a tensor of exactly its type; every argument
/// (input, param or state) needs one. Returns the graph's results in order.
Result<std::vector<Tensor>> evaluate(const Graph& graph, const std::map<std::string, Tensor>& inputs);

/// Runs a step itself: gets the step and pointers to its inputs' then its outputs' bytes
/// where the plan put them; returns true when it ran the step, false to leave it to the
/// interpreter.
using StepRunner = std::function<Result<bool>(const Step& step, std::span<uint8_t* const> buffers)>;

/// Runs a fused, planned graph (after the fusion and memory-plan passes) step by step
/// through one byte arena at the planned offsets, with `runner` (if given) or the
/// interpreter evaluating each step. State updates planned in place are written into
/// the state buffers. Returns the graph's results, read from where the plan put them.
Result<std::vector<Tensor>> evaluate_program(const Graph& graph, const std::map<std::string, Tensor>& inputs,
                                             const StepRunner& runner = {});

}  // namespace kiln::ir
