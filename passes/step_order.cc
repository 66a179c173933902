#include "passes/step_order.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <tuple>

namespace kiln::passes {
namespace {

using ir::ValueId;

// The values each step reads from other steps and writes for them, and who reads what.
struct StepValues {
  std::vector<int> last_op;                   // per step: its last own node
  std::vector<std::vector<ValueId>> inputs;   // per step, read from outside it
  std::vector<std::vector<ValueId>> outputs;  // per step, read by another step or returned
  std::vector<std::vector<int>> readers;      // per value: the steps that read it from its writer
  std::vector<std::set<int>> successors;      // per step
  std::vector<int> indegree;                  // per step
};

// Whether step `to` depends on step `from`.
bool depends(const StepValues& sv, int from, int to) {
  std::vector<char> seen(sv.successors.size(), 0);
  std::vector<int> stack{from};
  while (!stack.empty()) {
    const int s = stack.back();
    stack.pop_back();
    for (int next : sv.successors[s]) {
      if (next == to) return true;
      if (!seen[next]) {
        seen[next] = 1;
        stack.push_back(next);
      }
    }
  }
  return false;
}

// A state update %S.next is written into %S itself (passes/memory_plan.cc) where no step
// reads %S after the update's: so the steps that read %S go first, where they can.
// Otherwise the update is copied into %S after the last step.
void order_state_updates(const ir::Graph& g, const std::vector<int>& owner, StepValues& sv) {
  const std::vector<int> producer = g.producers();
  for (ValueId v : g.results) {
    const ir::Arg* state = g.updated_state(v);
    if (!state || producer[v] < 0 || owner[producer[v]] < 0) continue;
    const int update = owner[producer[v]];
    for (size_t r = 0; r < sv.inputs.size(); ++r) {
      const auto& in = sv.inputs[r];
      if (static_cast<int>(r) == update || std::find(in.begin(), in.end(), state->value) == in.end()) continue;
      if (sv.successors[r].count(update) || depends(sv, update, static_cast<int>(r))) continue;
      sv.successors[r].insert(update);
      ++sv.indegree[update];
    }
  }
}

Result<StepValues> step_values(const ir::Graph& g, const std::vector<StepNodes>& steps) {
  const size_t n = steps.size();
  const std::vector<int> producer = g.producers();
  std::vector<char> is_result(g.values.size(), 0);
  for (ValueId v : g.results) is_result[v] = 1;
  StepValues sv{std::vector<int>(n, -1),
                std::vector<std::vector<ValueId>>(n),
                std::vector<std::vector<ValueId>>(n),
                std::vector<std::vector<int>>(g.values.size()),
                std::vector<std::set<int>>(n),
                std::vector<int>(n, 0)};
  std::vector<int> owner(g.nodes.size(), -1);  // the step that writes a node's value
  for (size_t s = 0; s < n; ++s) {
    if (!std::is_sorted(steps[s].members.begin(), steps[s].members.end()))
      return make_error(fmt::format("fusion: internal error: step {}'s nodes are not sorted", s));
    for (int m : steps[s].members)
      if (ir::op_kind(g.nodes[m].op) != ir::OpKind::Source || steps[s].members.size() == 1) {
        owner[m] = static_cast<int>(s);
        sv.last_op[s] = std::max(sv.last_op[s], m);
      }
  }
  for (size_t s = 0; s < n; ++s) {
    const std::vector<int>& members = steps[s].members;
    for (int m : members)
      for (ValueId v : g.nodes[m].operands) {
        const int p = producer[v];
        if (p >= 0 && std::binary_search(members.begin(), members.end(), p)) continue;
        if (std::find(sv.inputs[s].begin(), sv.inputs[s].end(), v) != sv.inputs[s].end()) continue;
        sv.inputs[s].push_back(v);
        if (p >= 0 && owner[p] < 0)
          return make_error(fmt::format("fusion: internal error: step {} reads %{}, which no step writes", s,
                                        ir::display_names(g)[v]));
        if (p < 0 || owner[p] == static_cast<int>(s)) continue;
        sv.readers[v].push_back(static_cast<int>(s));
        if (sv.successors[owner[p]].insert(static_cast<int>(s)).second) ++sv.indegree[s];
      }
  }
  for (size_t s = 0; s < n; ++s)
    for (int m : steps[s].members) {
      const ValueId v = g.nodes[m].result;
      if (owner[m] == static_cast<int>(s) && (is_result[v] || !sv.readers[v].empty())) sv.outputs[s].push_back(v);
    }
  order_state_updates(g, owner, sv);
  return sv;
}

}  // namespace

Result<std::vector<int>> order_steps(const ir::Graph& g, const std::vector<StepNodes>& steps, StepOrder rule) {
  KILN_ASSIGN_OR_RETURN(StepValues sv, step_values(g, steps));
  const size_t n = steps.size();
  std::vector<char> is_result(g.values.size(), 0);
  for (ValueId v : g.results) is_result[v] = 1;
  std::vector<size_t> remaining(g.values.size());  // readers of each value yet to run
  for (size_t v = 0; v < remaining.size(); ++v) remaining[v] = sv.readers[v].size();
  // The arena bytes a step frees (values it is the last to read; results stay) less the
  // bytes it writes: XLA's list scheduler's priority, which keeps a training step's
  // weight updates and bias gradients beside the gradients they read rather than last.
  auto score = [&](int s) -> int64_t {
    if (rule == StepOrder::kGraph) return 0;
    int64_t freed = 0, written = 0;
    for (ValueId v : sv.inputs[s])
      if (!is_result[v] && remaining[v] == 1 && !sv.readers[v].empty()) freed += g.type(v).bytes();
    for (ValueId v : sv.outputs[s]) written += g.type(v).bytes();
    return freed - written;
  };
  using Key = std::tuple<int64_t, int, int>;  // (-score, last op, step)
  std::set<Key> ready;
  std::vector<Key> key(n);  // of the steps in `ready`
  std::vector<char> in_ready(n, 0);
  auto make_ready = [&](int s) {
    key[s] = {-score(s), sv.last_op[s], s};
    ready.insert(key[s]);
    in_ready[s] = 1;
  };
  for (size_t s = 0; s < n; ++s)
    if (sv.indegree[s] == 0) make_ready(static_cast<int>(s));
  std::vector<int> order;
  while (!ready.empty()) {
    const int s = std::get<2>(*ready.begin());
    ready.erase(ready.begin());
    in_ready[s] = 0;
    order.push_back(s);
    for (ValueId v : sv.inputs[s]) {
      if (sv.readers[v].empty() || --remaining[v] != 1 || rule == StepOrder::kGraph) continue;
      // The value's last reader now frees it.
      for (int r : sv.readers[v])
        if (in_ready[r]) {
          ready.erase(key[r]);
          make_ready(r);
        }
    }
    for (int next : sv.successors[s])
      if (--sv.indegree[next] == 0) make_ready(next);
  }
  if (order.size() != n) return make_error("fusion: internal error: the steps depend on each other in a cycle");
  return order;
}

}  // namespace kiln::passes
