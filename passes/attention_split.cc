#include "passes/attention_split.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "ir/attention_match.h"
#include "ir/ops.h"
#include "passes/recompute.h"

namespace kiln::passes {
namespace {

using ir::Node;
using ir::Op;
using ir::ValueId;

// Ops a step recomputes as it reads (views, sources, compares of such: a causal mask's
// j <= i, and autocast's rounding of an f32 operand), copied for each reader so that each
// step claims its own.
bool cheap(const ir::Graph& g, const std::vector<int>& producer, const Node& n, int depth = 8) {
  switch (n.op) {
    case Op::Cast: {
      const ir::DType to = g.type(n.result).dtype;
      return g.type(n.operands[0]).dtype == ir::DType::F32 && (to == ir::DType::BF16 || to == ir::DType::F16);
    }
    case Op::Transpose:
    case Op::Slice:
    case Op::Reshape:
    case Op::Broadcast:
    case Op::Iota:
    case Op::Constant: return true;
    case Op::Le:
    case Op::Lt:
    case Op::Ge:
    case Op::Gt:
    case Op::Eq:
    case Op::Ne:
      if (depth == 0) return false;
      return std::all_of(n.operands.begin(), n.operands.end(), [&](ValueId v) {
        return producer[v] >= 0 && cheap(g, producer, g.nodes[producer[v]], depth - 1);
      });
    default: return false;
  }
}

// Copies of nodes, each inserted before a node of the graph, and the copies' reads.
class Copier {
 public:
  explicit Copier(ir::Graph& g) : g_(g), producer_(g.producers()) {}

  // A copy of v for the reader at node `before`: v's producer copied where it is in
  // `core` or cheap, with its operands copied the same way; v itself where neither.
  ValueId copy(ValueId v, int before, const std::set<int>& core, std::map<ValueId, ValueId>& copies) {
    if (auto it = copies.find(v); it != copies.end()) return it->second;
    const int p = producer_[v];
    if (p < 0 || (!core.count(p) && !cheap(g_, producer_, g_.nodes[p]))) return v;
    Node n = g_.nodes[p];
    for (ValueId& operand : n.operands) operand = copy(operand, before, core, copies);
    n.result = g_.add_value(g_.type(v));
    copies[v] = n.result;
    copied_.insert(p);
    inserts_[before].push_back(std::move(n));
    return copies[v];
  }

  // Node `reader`'s operand `index` read as `v`.
  void rewire(int reader, size_t index, ValueId v) { rewired_[{reader, index}] = v; }

  // The graph with the copies in place, the originals that nothing reads any more removed.
  void apply() {
    std::vector<Node> nodes;
    std::set<ValueId> originals;
    for (int o : copied_) originals.insert(g_.nodes[o].result);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (auto it = inserts_.find(static_cast<int>(i)); it != inserts_.end())
        for (Node& n : it->second) nodes.push_back(std::move(n));
      Node n = g_.nodes[i];
      for (size_t k = 0; k < n.operands.size(); ++k)
        if (auto it = rewired_.find({static_cast<int>(i), k}); it != rewired_.end()) n.operands[k] = it->second;
      nodes.push_back(std::move(n));
    }
    g_.nodes = std::move(nodes);
    std::set<int> candidates;
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (originals.count(g_.nodes[i].result)) candidates.insert(static_cast<int>(i));
    remove_unread_nodes(g_, candidates);
  }

 private:
  ir::Graph& g_;
  std::vector<int> producer_;
  std::set<int> copied_;
  std::map<int, std::vector<Node>> inserts_;
  std::map<std::pair<int, size_t>, ValueId> rewired_;
};

// The index of the node computing v.
int node_of(const ir::Graph& g, ValueId v) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].result == v) return static_cast<int>(i);
  return -1;
}

// Splits the softmax ending in node `div` if its other readers are a backward; whether it did.
bool split(ir::Graph& g, int div, ir::AttentionRunner runner) {
  const Node& d = g.nodes[div];
  if (d.op != Op::Div || g.type(d.result).dtype != ir::DType::F32 || g.type(d.result).rank() < 2) return false;
  const ValueId p = d.result;
  // In half precision (autocast's form) P·v reads P cast to it, which dv's product reads too.
  ValueId half_p = ir::kNoValue;
  for (const Node& n : g.nodes)
    if (n.op == Op::Cast && n.operands[0] == p &&
        (g.type(n.result).dtype == ir::DType::BF16 || g.type(n.result).dtype == ir::DType::F16))
      half_p = n.result;
  // P's readers and its cast's that are not P·v: the backward's, rewired to its copies.
  std::vector<std::pair<int, size_t>> readers;
  int values_calls = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (size_t k = 0; k < g.nodes[i].operands.size(); ++k) {
      const ValueId v = g.nodes[i].operands[k];
      if (v != p && v != half_p) continue;
      const bool values_call = g.nodes[i].op == Op::Matmul && k == 0 && g.nodes[i].operands[1] != v;
      if (values_call && (half_p == ir::kNoValue || v == half_p)) ++values_calls;
      else if (g.nodes[i].result != half_p) readers.push_back({static_cast<int>(i), k});
    }
  // (A P the graph returns is stored anyway: its readers read it back.)
  auto returned = [&](ValueId v) { return std::find(g.results.begin(), g.results.end(), v) != g.results.end(); };
  if (values_calls != 1 || readers.empty() || returned(p) || (half_p != ir::kNoValue && returned(half_p))) return false;
  const std::vector<Node> nodes_before = g.nodes;
  const size_t values_before = g.values.size();
  auto undo = [&] {
    g.nodes = nodes_before;
    g.values.resize(values_before);
    return false;
  };
  // The backward's own scores and softmax, before its first reader of P.
  ValueId copy_of_p;
  {
    Copier copier(g);
    const std::optional<std::vector<int>> scores = ir::attention_scores_nodes(g, div);
    if (!scores) return false;
    std::set<int> core(scores->begin(), scores->end());
    if (half_p != ir::kNoValue) core.insert(node_of(g, half_p));
    std::map<ValueId, ValueId> copies;
    const int first = std::min_element(readers.begin(), readers.end())->first;
    copier.copy(half_p != ir::kNoValue ? half_p : p, first, core, copies);
    copy_of_p = copies.at(p);
    for (const auto& [r, k] : readers) copier.rewire(r, k, copies.at(g.nodes[r].operands[k]));
    copier.apply();
  }
  std::optional<ir::AttentionGradientMatch> match;
  for (const auto& m : ir::attention_gradient_matches(g, runner))
    if (std::binary_search(m.nodes.begin(), m.nodes.end(), node_of(g, copy_of_p))) match = m;
  if (!match) return undo();
  // Its own copies of what its nodes read that a step recomputes as it reads.
  {
    Copier copier(g);
    const std::vector<int> producer = g.producers();
    const std::set<int> in_step(match->nodes.begin(), match->nodes.end());
    for (int n : match->nodes)
      for (size_t k = 0; k < g.nodes[n].operands.size(); ++k) {
        const ValueId v = g.nodes[n].operands[k];
        if (producer[v] < 0 || in_step.count(producer[v])) continue;
        std::map<ValueId, ValueId> copies;
        const ValueId c = copier.copy(v, n, {}, copies);
        if (c != v) copier.rewire(n, k, c);
      }
    copier.apply();
  }
  const int copy_div = node_of(g, copy_of_p);
  for (const auto& m : ir::attention_gradient_matches(g, runner))
    if (std::binary_search(m.nodes.begin(), m.nodes.end(), copy_div)) return true;
  return undo();
}

}  // namespace

int split_attention_gradients(ir::Graph& g, ir::AttentionRunner runner) {
  // The candidates: f32 divisions read by a matmul as its first operand and by a
  // transpose (autodiff's Pᵀ for dv), or whose cast to a half precision is.
  std::vector<std::vector<int>> users(g.values.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId v : g.nodes[i].operands) users[v].push_back(static_cast<int>(i));
  auto read_by = [&](ValueId v, auto is_reader) {
    return std::any_of(users[v].begin(), users[v].end(), [&](int u) { return is_reader(g.nodes[u]); });
  };
  auto candidate = [&](ValueId v) {
    return read_by(v, [&](const Node& u) { return u.op == Op::Matmul && u.operands[0] == v; }) &&
           read_by(v, [](const Node& u) { return u.op == Op::Transpose; });
  };
  std::vector<ValueId> candidates;
  for (const Node& n : g.nodes) {
    if (n.op != Op::Div || g.type(n.result).dtype != ir::DType::F32) continue;
    if (candidate(n.result) ||
        read_by(n.result, [&](const Node& u) { return u.op == Op::Cast && candidate(u.result); }))
      candidates.push_back(n.result);
  }
  int split_count = 0;
  for (ValueId p : candidates)
    if (split(g, node_of(g, p), runner)) ++split_count;
  return split_count;
}

}  // namespace kiln::passes
