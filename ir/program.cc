#include "ir/program.h"

#include <fmt/format.h>
#include <algorithm>

#include "base/memory_check.h"
#include "ir/graph.h"

namespace kiln::ir {
namespace {

bool is_source(Op op) { return op_kind(op) == OpKind::Source; }

Error program_error(const Graph& g, std::string_view message) {
  return make_error(fmt::format("error: @{}: program: {}", g.name, message));
}

}  // namespace

const Buffer* MemoryPlan::find(ValueId value) const {
  for (const Buffer& b : buffers)
    if (b.value == value) return &b;
  return nullptr;
}

std::string_view step_kind_name(StepKind kind) {
  switch (kind) {
    case StepKind::Loop: return "loop";
    case StepKind::Reduction: return "reduction";
    case StepKind::Library: return "library";
    case StepKind::Scatter: return "scatter";
  }
  return "?";
}

Status verify_program(const Graph& g) {
  const Program& program = *g.program;
  std::vector<std::string> names = display_names(g);
  std::vector<int> step_of(g.nodes.size(), -1);
  // available[v]: the step after which v can be read (-1 for arguments), or -2.
  std::vector<int> available(g.values.size(), -2);
  for (const Arg& a : g.args) available[a.value] = -1;
  std::vector<int> inside_step(g.values.size(), -1);  // the step whose nodes compute a value, while checking it
  for (size_t s = 0; s < program.steps.size(); ++s) {
    const Step& step = program.steps[s];
    auto inside = [&](ValueId v) { return inside_step[v] == static_cast<int>(s); };
    for (int n : step.nodes) {
      if (n < 0 || static_cast<size_t>(n) >= g.nodes.size())
        return program_error(g, fmt::format("step {} names node {}, out of range", step.name, n));
      if (!is_source(g.nodes[n].op)) {
        if (step_of[n] >= 0)
          return program_error(g, fmt::format("%{} is in steps {} and {}", names[g.nodes[n].result],
                                              program.steps[step_of[n]].name, step.name));
        step_of[n] = static_cast<int>(s);
      }
      inside_step[g.nodes[n].result] = static_cast<int>(s);
    }
    // Every operand from outside must be a declared input that is already available.
    for (int n : step.nodes) {
      for (ValueId v : g.nodes[n].operands) {
        if (inside(v)) continue;
        if (std::find(step.inputs.begin(), step.inputs.end(), v) == step.inputs.end())
          return program_error(g,
                               fmt::format("step {} reads %{} but does not list it as an input", step.name, names[v]));
        if (available[v] == -2)
          return program_error(g, fmt::format("step {} reads %{} before any step produces it", step.name, names[v]));
      }
    }
    for (ValueId v : step.outputs) {
      if (!inside(v))
        return program_error(g, fmt::format("step {} outputs %{}, which it does not compute", step.name, names[v]));
      available[v] = static_cast<int>(s);
    }
  }
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (!is_source(g.nodes[n].op) && step_of[n] < 0)
      return program_error(g, fmt::format("%{} is in no step", names[g.nodes[n].result]));
  for (ValueId v : g.results)
    if (available[v] == -2)
      return program_error(g, fmt::format("the result %{} is not an output of any step", names[v]));
  return Status::Ok();
}

Status verify_memory_plan(const Graph& g) {
  if (!g.program) return program_error(g, "a memory plan needs a program");
  const MemoryPlan& plan = *g.memory;
  const Program& program = *g.program;
  std::vector<std::string> names = display_names(g);
  // Each step output and each argument read by a step needs a buffer of its size.
  for (size_t s = 0; s < program.steps.size(); ++s) {
    const Step& step = program.steps[s];
    for (ValueId v : step.outputs) {
      const Buffer* b = plan.find(v);
      if (!b) return program_error(g, fmt::format("memory: %{} (output of {}) has no buffer", names[v], step.name));
      int64_t bytes = g.type(v).bytes();
      if (b->bytes != bytes)
        return program_error(g,
                             fmt::format("memory: %{} needs {} bytes, its buffer has {}", names[v], bytes, b->bytes));
      if (b->first_step != static_cast<int>(s))
        return program_error(g, fmt::format("memory: %{} is produced at step {} but its buffer starts at {}", names[v],
                                            s, b->first_step));
    }
    for (ValueId v : step.inputs) {
      const Buffer* b = plan.find(v);
      if (!b) return program_error(g, fmt::format("memory: %{} (input of {}) has no buffer", names[v], step.name));
      if (b->last_step < static_cast<int>(s))
        return program_error(
            g, fmt::format("memory: %{} is read at step {} after its buffer dies at {}", names[v], s, b->last_step));
    }
  }
  std::vector<ArenaBuffer> arena;
  std::vector<int> index_of(g.values.size(), -1);
  for (const Buffer& b : plan.buffers) {
    if (b.home != Home::Arena) continue;
    index_of[b.value] = static_cast<int>(arena.size());
    arena.push_back({"%" + names[b.value], b.offset, b.bytes, b.first_step, b.last_step, -1});
  }
  for (const Buffer& b : plan.buffers)
    if (b.home == Home::Arena && b.in_place_of >= 0) arena[index_of[b.value]].in_place_of = index_of[b.in_place_of];
  Status ok = check_arena(arena, plan.arena_bytes, plan.alignment);
  if (!ok.ok()) return program_error(g, ok.error().message);
  return Status::Ok();
}

}  // namespace kiln::ir
