#include "passes/memory_plan.h"

#include <fmt/format.h>
#include <algorithm>

#include "ir/epilogue.h"

namespace kiln::passes {
namespace {

using ir::Buffer;
using ir::Home;
using ir::Node;
using ir::Op;
using ir::ValueId;

int64_t align(int64_t bytes) {
  return (bytes + MemoryPlanPass::kAlignment - 1) / MemoryPlanPass::kAlignment * MemoryPlanPass::kAlignment;
}

int64_t bytes_of(const ir::Graph& g, ValueId v) { return g.type(v).bytes(); }

// Whether, in step s, output element k depends on v only at element k: every value the
// step derives from v comes through elementwise ops of the output's shape (no movement
// op or reduction in between). Then writing the output over v, element by element,
// never clobbers an element still to be read. A loop kernel computes each element where
// it reads it; so does a reduction kernel's epilogue (after its sums, per output
// element), which is where an optimizer's update of a bias or a layer norm's scale reads
// the old value: `epilogues` admits those steps.
bool reads_elementwise(const ir::Graph& g, const ir::Step& step, ValueId v, const ir::TensorType& out,
                       bool epilogues = false) {
  const bool kind_ok = step.kind == ir::StepKind::Loop || (epilogues && step.kind == ir::StepKind::Reduction);
  if (!kind_ok || g.type(v).shape != out.shape) return false;
  std::vector<char> derived(g.values.size(), 0);
  derived[v] = 1;
  for (int m : step.nodes) {
    const Node& n = g.nodes[m];
    if (std::none_of(n.operands.begin(), n.operands.end(), [&](ValueId x) { return derived[x]; })) continue;
    if (ir::op_kind(n.op) != ir::OpKind::Elementwise || g.type(n.result).shape != out.shape) return false;
    derived[n.result] = 1;
  }
  return true;
}

// Whether library step `step` is a convolution whose residual add (oneDNN's sum post-op)
// reads v and nothing else in the step reads v: the call adds what its result's buffer
// holds, so a dying v can be that buffer and the copy of v into it is saved.
bool adds_in_place(const ir::Graph& g, const std::vector<ir::Epilogue>& epilogues, const ir::Step& step, ValueId v,
                   ValueId out) {
  if (step.kind != ir::StepKind::Library) return false;
  int readers = 0;
  for (int m : step.nodes)
    for (ValueId x : g.nodes[m].operands) readers += x == v;
  if (readers != 1) return false;
  for (const ir::Epilogue& e : epilogues) {
    if (e.result != out || std::find(step.nodes.begin(), step.nodes.end(), e.call) == step.nodes.end()) continue;
    return std::any_of(e.post_ops.begin(), e.post_ops.end(),
                       [&](const ir::PostOp& p) { return p.kind == ir::PostOp::Kind::Add && p.operand == v; });
  }
  return false;
}

// A group of values sharing arena bytes through in-place reuse.
struct Allocation {
  std::vector<ValueId> values;
  int64_t bytes = 0;  // aligned
  int first = 0, last = 0;
  int64_t offset = -1;
};

}  // namespace

Result<bool> MemoryPlanPass::run(ir::Graph& g) {
  if (!g.program) return make_error("memory-plan: the graph has no program; run fusion first");
  const ir::Program& program = *g.program;
  const int end = static_cast<int>(program.steps.size());
  std::vector<int> produced(g.values.size(), -2), last_read(g.values.size(), -1);
  for (int s = 0; s < end; ++s) {
    for (ValueId v : program.steps[s].outputs) produced[v] = s;
    for (ValueId v : program.steps[s].inputs) last_read[v] = std::max(last_read[v], s);
  }
  std::vector<char> is_result(g.values.size(), 0);
  for (ValueId v : g.results) is_result[v] = 1;

  ir::MemoryPlan plan;
  plan.alignment = kAlignment;
  std::vector<Buffer> buffers;
  std::vector<int> buffer_of(g.values.size(), -1);
  auto add = [&](Buffer b) {
    buffer_of[b.value] = static_cast<int>(buffers.size());
    buffers.push_back(b);
  };
  for (const ir::Arg& a : g.args) {
    Home home = a.kind == ir::ArgKind::Input ? Home::Input : a.kind == ir::ArgKind::Param ? Home::Param : Home::State;
    add({a.value, home, 0, bytes_of(g, a.value), -1, is_result[a.value] ? end : last_read[a.value], -1, -1});
  }
  for (int s = 0; s < end; ++s)
    for (ValueId v : program.steps[s].outputs)
      add({v, Home::Arena, 0, bytes_of(g, v), s, is_result[v] ? end : std::max(last_read[v], s), -1, -1});

  // State updates: %S.next goes straight into %S when nothing reads %S afterwards.
  for (ValueId v : g.results) {
    const ir::Arg* state = g.updated_state(v);
    if (!state || buffer_of[v] < 0 || buffers[buffer_of[v]].home != Home::Arena) continue;
    int s = produced[v];
    bool read_later = last_read[state->value] > s || is_result[state->value];
    bool read_here = std::find(program.steps[s].inputs.begin(), program.steps[s].inputs.end(), state->value) !=
                     program.steps[s].inputs.end();
    if (!read_later && (!read_here || reads_elementwise(g, program.steps[s], state->value, g.type(v), true))) {
      Buffer& b = buffers[buffer_of[v]];
      b.home = Home::State;
      b.state = state->value;
    } else if (std::find(plan.state_copies.begin(), plan.state_copies.end(), std::pair{state->value, v}) ==
               plan.state_copies.end()) {  // once, for a result returned twice
      plan.state_copies.emplace_back(state->value, v);
    }
  }

  // In-place reuse: a loop kernel's output over an input dying at that step, and a
  // convolution's over the residual it adds.
  const std::vector<ir::Epilogue> epilogues = ir::library_epilogues(g, ir::MatmulEpilogues::kNone);
  std::vector<int> allocation_of(g.values.size(), -1);
  std::vector<Allocation> allocations;
  for (const Buffer& b : buffers) {
    if (b.home != Home::Arena) continue;
    int reuse = -1;
    const ir::Step& step = program.steps[b.first_step];
    for (ValueId in : step.inputs) {
      int ib = buffer_of[in];
      if (ib < 0 || buffers[ib].home != Home::Arena || buffers[ib].last_step != b.first_step ||
          buffers[ib].bytes != b.bytes)
        continue;
      int a = allocation_of[in];
      if (allocations[a].last != b.first_step || allocations[a].values.back() != in) continue;  // already taken over
      if (!reads_elementwise(g, step, in, g.type(b.value)) && !adds_in_place(g, epilogues, step, in, b.value)) continue;
      reuse = a;
      buffers[buffer_of[b.value]].in_place_of = in;
      break;
    }
    if (reuse < 0) {
      allocations.push_back({{}, align(b.bytes), b.first_step, b.last_step, -1});
      reuse = static_cast<int>(allocations.size()) - 1;
    }
    Allocation& alloc = allocations[reuse];
    alloc.values.push_back(b.value);
    alloc.last = std::max(alloc.last, b.last_step);
    allocation_of[b.value] = reuse;
  }

  // Greedy placement, best fit among the allocations live at the same time. The order
  // matters; greedy by size comes first, and a few other standard orders are tried too,
  // keeping the smallest arena.
  auto by_size = [&](int a, int b) {
    if (allocations[a].bytes != allocations[b].bytes) return allocations[a].bytes > allocations[b].bytes;
    return allocations[a].last - allocations[a].first > allocations[b].last - allocations[b].first;
  };
  auto by_lifetime = [&](int a, int b) {
    int la = allocations[a].last - allocations[a].first, lb = allocations[b].last - allocations[b].first;
    return la != lb ? la > lb : allocations[a].bytes > allocations[b].bytes;
  };
  auto by_birth = [&](int a, int b) {
    return allocations[a].first != allocations[b].first ? allocations[a].first < allocations[b].first
                                                        : allocations[a].bytes > allocations[b].bytes;
  };
  std::vector<int64_t> best_offsets;
  int64_t best_arena = -1;
  for (int strategy = 0; strategy < 3; ++strategy) {
    std::vector<int> order(allocations.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    if (strategy == 0) std::stable_sort(order.begin(), order.end(), by_size);
    if (strategy == 1) std::stable_sort(order.begin(), order.end(), by_lifetime);
    if (strategy == 2) std::stable_sort(order.begin(), order.end(), by_birth);
    std::vector<int64_t> offsets(allocations.size(), -1);
    int64_t arena = 0;
    std::vector<int> placed;
    for (int i : order) {
      const Allocation& a = allocations[i];
      std::vector<std::pair<int64_t, int64_t>> busy;  // [offset, end) of overlapping placed allocations
      for (int j : placed) {
        const Allocation& p = allocations[j];
        if (p.first <= a.last && a.first <= p.last) busy.emplace_back(offsets[j], offsets[j] + p.bytes);
      }
      std::sort(busy.begin(), busy.end());
      int64_t best = -1, best_gap = 0, cursor = 0;
      for (auto [start, stop] : busy) {
        int64_t gap = start - cursor;
        if (gap >= a.bytes && (best < 0 || gap < best_gap)) {
          best = cursor;
          best_gap = gap;
        }
        cursor = std::max(cursor, stop);
      }
      offsets[i] = best >= 0 ? best : cursor;
      placed.push_back(i);
      arena = std::max(arena, offsets[i] + a.bytes);
    }
    if (best_arena < 0 || arena < best_arena) {
      best_arena = arena;
      best_offsets = offsets;
    }
  }
  plan.arena_bytes = std::max<int64_t>(best_arena, 0);
  for (size_t i = 0; i < allocations.size(); ++i) allocations[i].offset = best_offsets[i];
  for (const Allocation& a : allocations) {
    for (ValueId v : a.values) buffers[buffer_of[v]].offset = a.offset;
  }
  for (const Buffer& b : buffers)
    if (b.home == Home::Arena) plan.naive_bytes += align(b.bytes);
  for (int s = 0; s <= end; ++s) {
    int64_t live = 0;
    for (const Allocation& a : allocations)
      if (a.first <= s && s <= a.last) live += a.bytes;
    plan.live_lower_bound_bytes = std::max(plan.live_lower_bound_bytes, live);
  }
  plan.buffers = std::move(buffers);
  g.memory = std::move(plan);
  return true;
}

}  // namespace kiln::passes
