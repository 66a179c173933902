// Runs a fused, planned program step by step through a real byte arena, so that fusion
// and memory planning are checked for correctness before any code generation exists.
#include <fmt/format.h>
#include <cstring>

#include "base/allocation.h"
#include "ir/interpreter.h"

namespace kiln::ir {

Result<std::vector<Tensor>> evaluate_program(const Graph& g, const std::map<std::string, Tensor>& inputs,
                                             const StepRunner& runner) {
  if (!g.program || !g.memory) return make_error("evaluate_program: the graph has no program and memory plan");
  const MemoryPlan& plan = *g.memory;
  KILN_RETURN_IF_ERROR(check_inputs(g, inputs));
  std::vector<uint8_t> arena;
  KILN_RETURN_IF_ERROR(resize_or_error(arena, static_cast<uint64_t>(plan.arena_bytes), "the arena"));
  // Argument buffers, as bytes; state buffers are written by in-place updates.
  std::map<ValueId, std::vector<uint8_t>> outside;
  for (const Arg& a : g.args) outside[a.value] = tensor_to_bytes(inputs.at(g.value_name(a.value)));

  auto bytes_of = [&](ValueId v) -> uint8_t* {
    const Buffer* b = plan.find(v);
    if (!b) return nullptr;
    switch (b->home) {
      case Home::Arena: return arena.data() + b->offset;
      case Home::State: return outside[b->state < 0 ? v : b->state].data();
      default: return outside[v].data();
    }
  };
  auto store = [&](ValueId v, const Tensor& t) {
    std::vector<uint8_t> bytes = tensor_to_bytes(t);
    if (!bytes.empty()) std::memcpy(bytes_of(v), bytes.data(), bytes.size());
  };

  std::vector<Tensor> values(g.values.size());
  std::vector<uint8_t*> buffers;
  for (const Step& step : g.program->steps) {
    if (runner) {
      buffers.clear();
      for (ValueId v : step.inputs) buffers.push_back(bytes_of(v));
      for (ValueId v : step.outputs) buffers.push_back(bytes_of(v));
      KILN_ASSIGN_OR_RETURN(bool ran, runner(step, buffers));
      if (ran) continue;
    }
    // Read every input before writing any output: a kernel's output may take over the
    // bytes of an input that dies here.
    std::vector<char> ready(g.values.size(), 0);
    for (ValueId v : step.inputs) {
      values[v] = tensor_from_bytes(g.type(v), bytes_of(v));
      ready[v] = 1;
    }
    std::vector<const Tensor*> operands;
    for (int n : step.nodes) {
      const Node& node = g.nodes[n];
      operands.clear();
      for (ValueId v : node.operands) operands.push_back(&values[v]);
      KILN_ASSIGN_OR_RETURN(values[node.result], evaluate_node(g, node, operands));
    }
    for (ValueId v : step.outputs) store(v, values[v]);
    for (int n : step.nodes) values[g.nodes[n].result] = Tensor();
    for (ValueId v : step.inputs) values[v] = Tensor();
  }
  std::vector<Tensor> results;
  for (ValueId v : g.results) results.push_back(tensor_from_bytes(g.type(v), bytes_of(v)));
  return results;
}

}  // namespace kiln::ir
