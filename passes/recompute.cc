#include "passes/recompute.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace kiln::passes {
namespace {

using ir::Node;
using ir::ValueId;

// Ops one value's copies may take: enough for GELU's tanh form and its derivative's
// factors, few enough that a kernel's copies stay a small part of its work.
constexpr size_t kMaxCopiesPerValue = 24;

bool is_source(const Node& n) { return ir::op_kind(n.op) == ir::OpKind::Source; }

// What one kernel copies: the other kernels' nodes, sorted, and where the copies go.
struct Plan {
  int group = -1;
  int insert_at = -1;  // G's first node that reads one of the values
  std::vector<int> originals;
  std::vector<ValueId> values;
};

class Planner {
 public:
  Planner(const ir::Graph& g, const std::vector<KernelGroup>& groups, RecomputeOps ops,
          const std::vector<char>& exclude)
      : g_(g), groups_(groups), ops_(ops), exclude_(exclude), producer_(g.producers()), owner_(g.nodes.size(), -1) {
    for (size_t k = 0; k < groups.size(); ++k)
      for (int m : groups[k].members)
        if (!is_source(g.nodes[m])) owner_[m] = static_cast<int>(k);
    in_memory_.assign(g.values.size(), 0);
    for (const ir::Arg& a : g.args) in_memory_[a.value] = 1;
    for (ValueId v : g.results) in_memory_[v] = 1;
    std::vector<char> result(g.values.size(), 0);
    for (ValueId v : g.results) result[v] = 1;
    std::vector<std::set<int>> reading_groups(g.values.size());
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (ValueId v : g.nodes[i].operands) {
        const int p = producer_[v];
        if (p >= 0 && !is_source(g.nodes[p]) && owner_[p] != owner_[i]) {
          in_memory_[v] = 1;
          reading_groups[v].insert(owner_[i]);
        }
      }
    only_reader_.assign(g.values.size(), -1);
    for (size_t v = 0; v < g.values.size(); ++v)
      if (reading_groups[v].size() == 1 && !result[v]) only_reader_[v] = *reading_groups[v].begin();
  }

  std::optional<Plan> plan(int group, int max_ops, int max_inputs) const {
    const KernelGroup& kernel = groups_[group];
    if (!kernel.kernel) return std::nullopt;
    // What the kernel reads from memory, and its first node reading each.
    std::map<ValueId, int> reads;
    for (int m : kernel.members) {
      if (is_source(g_.nodes[m])) continue;
      for (ValueId v : g_.nodes[m].operands) {
        const int p = producer_[v];
        if (p >= 0 && (owner_[p] == group || is_source(g_.nodes[p]))) continue;
        auto [it, inserted] = reads.emplace(v, m);
        if (!inserted) it->second = std::min(it->second, m);
      }
    }
    std::vector<std::pair<int, ValueId>> by_reader;
    for (auto [v, reader] : reads) by_reader.push_back({reader, v});
    std::sort(by_reader.begin(), by_reader.end());
    Plan plan;
    plan.group = group;
    std::set<int> taken;
    std::set<ValueId> new_reads;
    for (auto [reader, v] : by_reader) {
      std::optional<Closure> c = closure(v, group, reads);
      if (!c) continue;
      if (plan.insert_at >= 0 && c->nodes.back() >= plan.insert_at) continue;
      std::set<int> with = taken;
      with.insert(c->nodes.begin(), c->nodes.end());
      if (kernel.ops + static_cast<int>(with.size()) > max_ops) continue;
      // New reads only where they are fewer bytes than the kernel saves: its read of the
      // value, and the value's write where no other kernel reads it (a mask's [T, S] for
      // its broadcast over every batch and head, a matmul's result for its sum with a
      // bias); and within the kernel's inputs.
      int64_t added = 0;
      std::set<ValueId> reads_with = new_reads;
      for (ValueId w : c->leaves)
        if (reads_with.insert(w).second) added += bytes(w) * (c->written.count(w) ? 2 : 1);
      if (added >= bytes(v) * (only_reader_[v] == group ? 2 : 1)) continue;
      if (static_cast<int>(reads.size() + reads_with.size()) > max_inputs) continue;
      taken = std::move(with);
      new_reads = std::move(reads_with);
      if (plan.insert_at < 0) plan.insert_at = reader;
      plan.values.push_back(v);
    }
    if (plan.values.empty()) return std::nullopt;
    plan.originals.assign(taken.begin(), taken.end());
    return plan;
  }

 private:
  struct Closure {
    std::vector<int> nodes;       // sorted
    std::vector<ValueId> leaves;  // values the kernel does not read yet
    std::set<ValueId> written;    // those of them v's kernel is to write
  };

  int64_t bytes(ValueId v) const { return g_.type(v).bytes(); }

  // The nodes of v's kernel that compute v from values in memory, sources and that
  // kernel's reductions: elementwise ops of v's shape (inline ones only, for kInline) and
  // broadcasts; nullopt where v needs anything else (another value that kernel keeps to
  // itself, one of the reading kernel's own values).
  std::optional<Closure> closure(ValueId v, int group, const std::map<ValueId, int>& reads) const {
    if (!exclude_.empty() && exclude_[v]) return std::nullopt;
    const int root = producer_[v];
    if (root < 0 || owner_[root] < 0 || !groups_[owner_[root]].kernel) return std::nullopt;
    const int from = owner_[root];
    const ir::Shape& shape = g_.type(v).shape;
    auto copyable = [&](int node) {
      const Node& n = g_.nodes[node];
      return n.op == ir::Op::Broadcast ||
             (ir::op_kind(n.op) == ir::OpKind::Elementwise && g_.type(n.result).shape == shape &&
              (ops_ == RecomputeOps::kAll || ir::op_cpu_math(n.op) == ir::CpuMath::Inline));
    };
    if (!copyable(root)) return std::nullopt;
    std::set<int> nodes;
    std::set<ValueId> leaves, written;
    // Takes what computing w needs: nothing where the kernel reads it anyway or it is a
    // source's; else the ops of v's kernel that compute it where they can be copied (a
    // value in memory is read instead where they cannot).
    auto need = [&](auto& self, ValueId w) -> bool {
      if (reads.count(w)) return true;
      const int q = producer_[w];
      if (q >= 0 && is_source(g_.nodes[q])) return true;
      if (q >= 0 && owner_[q] == group) return false;
      if (q >= 0 && owner_[q] == from && copyable(q)) {
        if (nodes.count(q)) return true;
        const std::set<int> nodes_before = nodes;
        const std::set<ValueId> leaves_before = leaves, written_before = written;
        nodes.insert(q);
        bool ok = nodes.size() <= kMaxCopiesPerValue;
        for (ValueId o : g_.nodes[q].operands) ok = ok && self(self, o);
        if (ok) return true;
        nodes = nodes_before;
        leaves = leaves_before;
        written = written_before;
      }
      if (!in_memory_[w]) {
        // A reduction's result that v's kernel keeps to itself (a softmax's row maximum
        // and sum) is a leaf that kernel then writes too: a row's values for a row's.
        if (q < 0 || owner_[q] != from || ir::op_kind(g_.nodes[q].op) != ir::OpKind::Reduction) return false;
        written.insert(w);
      }
      leaves.insert(w);
      return true;
    };
    nodes.insert(root);
    for (ValueId o : g_.nodes[root].operands)
      if (!need(need, o)) return std::nullopt;
    return Closure{std::vector<int>(nodes.begin(), nodes.end()), std::vector<ValueId>(leaves.begin(), leaves.end()),
                   written};
  }

  const ir::Graph& g_;
  const std::vector<KernelGroup>& groups_;
  RecomputeOps ops_;
  const std::vector<char>& exclude_;
  std::vector<int> producer_;
  std::vector<int> owner_;        // per node: its group, or -1 for sources
  std::vector<char> in_memory_;   // per value: an argument, a result, or read by another step
  std::vector<int> only_reader_;  // per value that is no result: the one other group reading it, or -1
};

}  // namespace

RecomputedReads recompute_kernel_reads(ir::Graph& g, const std::vector<KernelGroup>& groups, int max_ops,
                                       int max_inputs, RecomputeOps ops, const std::vector<char>& exclude) {
  if (ops == RecomputeOps::kNone) return {};
  std::vector<Plan> plans;
  {
    const Planner planner(g, groups, ops, exclude);
    for (size_t k = 0; k < groups.size(); ++k)
      if (std::optional<Plan> p = planner.plan(static_cast<int>(k), max_ops, max_inputs))
        plans.push_back(std::move(*p));
  }
  if (plans.empty()) return {};
  RecomputedReads result;
  result.values_before = g.values.size();
  std::vector<int> plan_at(g.nodes.size(), -1), plan_of(g.nodes.size(), -1);
  for (size_t p = 0; p < plans.size(); ++p) {
    plan_at[plans[p].insert_at] = static_cast<int>(p);
    for (int m : groups[plans[p].group].members)
      if (!is_source(g.nodes[m])) plan_of[m] = static_cast<int>(p);
  }
  // Each plan's copies, before its first reader, and its kernel's reads of them.
  std::vector<std::map<ValueId, ValueId>> copy_of(plans.size());
  std::map<ValueId, int> copy_plan;  // each copy's plan
  std::set<int> originals;
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (const int p = plan_at[i]; p >= 0) {
      for (int o : plans[p].originals) {
        Node copy = g.nodes[o];
        for (ValueId& v : copy.operands)
          if (auto it = copy_of[p].find(v); it != copy_of[p].end()) v = it->second;
        copy.result = g.add_value(g.type(g.nodes[o].result));
        copy_of[p][g.nodes[o].result] = copy.result;
        copy_plan[copy.result] = p;
        originals.insert(o);
        nodes.push_back(std::move(copy));
      }
    }
    Node n = g.nodes[i];
    if (const int p = plan_of[i]; p >= 0)
      for (ValueId& v : n.operands)
        if (auto it = copy_of[p].find(v); it != copy_of[p].end()) v = it->second;
    nodes.push_back(std::move(n));
  }
  // The originals' indices in the new order.
  std::set<ValueId> original_values;
  for (int o : originals) original_values.insert(g.nodes[o].result);
  result.nodes_before = std::exchange(g.nodes, std::move(nodes));
  std::set<int> candidates;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (original_values.count(g.nodes[i].result)) candidates.insert(static_cast<int>(i));
  remove_unread_nodes(g, candidates);

  result.kernels.resize(plans.size());
  for (size_t p = 0; p < plans.size(); ++p) {
    result.kernels[p].group = plans[p].group;
    result.kernels[p].values = plans[p].values;
  }
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (auto it = copy_plan.find(g.nodes[i].result); it != copy_plan.end())
      result.kernels[it->second].nodes.push_back(static_cast<int>(i));
  return result;
}

void remove_unread_nodes(ir::Graph& g, const std::set<int>& candidates) {
  std::vector<int> uses = g.use_counts();
  std::vector<char> removed(g.nodes.size(), 0);
  for (bool again = true; again;) {
    again = false;
    for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
      const Node& n = g.nodes[*it];
      if (removed[*it] || uses[n.result] > 0) continue;
      removed[*it] = 1;
      again = true;
      for (ValueId v : n.operands) --uses[v];
    }
  }
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!removed[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
}

void undo_recompute(ir::Graph& g, RecomputedReads& r) {
  g.nodes = std::move(r.nodes_before);
  g.values.resize(r.values_before);
}

}  // namespace kiln::passes
