#include "passes/shared_reads.h"

#include <algorithm>

#include "ir/matmul_views.h"

namespace kiln::passes {
namespace {

// Whether v is a graph argument, or the result of a source op (a constant, iota) or of a
// reshape of one.
bool from_argument_or_source(const ir::Graph& g, const std::vector<int>& producer, ir::ValueId v) {
  for (int depth = 0; depth < 4; ++depth) {
    int p = producer[v];
    if (p < 0) return true;
    const ir::Node& n = g.nodes[p];
    if (ir::op_kind(n.op) == ir::OpKind::Source) return true;
    if (n.op != ir::Op::Reshape) return false;
    v = n.operands[0];
  }
  return false;
}

// Gives each reader after the first of a value read by several ops a copy of the nodes
// `chains` lists for it (in graph order, each reading the one before, the last computing
// the value; none where it stays shared), inserted just before the reader.
bool split_shared(ir::Graph& g, const std::vector<std::vector<int>>& chains) {
  std::vector<int> readers(g.values.size(), 0);
  for (const ir::Node& n : g.nodes)
    for (ir::ValueId v : n.operands) ++readers[v];
  bool any = false;
  for (size_t v = 0; v < readers.size(); ++v) any = any || (!chains[v].empty() && readers[v] > 1);
  if (!any) return false;
  std::vector<char> first_reader_seen(g.values.size(), 0);
  const std::vector<ir::Node> originals = g.nodes;
  std::vector<ir::Node> nodes;
  nodes.reserve(g.nodes.size());
  for (ir::Node& n : g.nodes) {
    for (ir::ValueId& v : n.operands) {
      if (chains[v].empty() || readers[v] < 2) continue;
      if (!first_reader_seen[v]) {  // the first reader keeps the original
        first_reader_seen[v] = 1;
        continue;
      }
      ir::ValueId read = originals[static_cast<size_t>(chains[v].front())].operands[0];
      for (int c : chains[v]) {
        ir::Node copy = originals[static_cast<size_t>(c)];
        if (c != chains[v].front()) copy.operands[0] = read;
        copy.result = g.add_value(g.type(copy.result));
        read = copy.result;
        nodes.push_back(std::move(copy));
      }
      v = read;
    }
    nodes.push_back(std::move(n));
  }
  g.nodes = std::move(nodes);
  return true;
}

// The chain of one node, v's producer, for each value `splittable` marks.
std::vector<std::vector<int>> producers_of(const std::vector<int>& producer, const std::vector<char>& splittable) {
  std::vector<std::vector<int>> chains(splittable.size());
  for (size_t v = 0; v < splittable.size(); ++v)
    if (splittable[v]) chains[v] = {producer[v]};
  return chains;
}

// Whether `readers` are unit-stride slices of one value that take disjoint boxes of it:
// parts of a split (an LSTM's gates), which read each element once, unlike windows. Past
// kMaxParts, pairwise checks cost more than the answer is worth, and the slices count as
// windows.
bool disjoint_parts(const ir::Graph& g, const std::vector<int>& readers) {
  constexpr size_t kMaxParts = 256;
  if (readers.size() < 2 || readers.size() > kMaxParts) return false;
  for (int r : readers) {
    const ir::Node& n = g.nodes[r];
    if (n.op != ir::Op::Slice) return false;
    const std::vector<int64_t>& strides = n.attrs.get_ints("strides");
    if (std::any_of(strides.begin(), strides.end(), [](int64_t s) { return s != 1; })) return false;
  }
  for (size_t a = 0; a < readers.size(); ++a)
    for (size_t b = a + 1; b < readers.size(); ++b) {
      const ir::Node& x = g.nodes[readers[a]];
      const ir::Node& y = g.nodes[readers[b]];
      const std::vector<int64_t>&xs = x.attrs.get_ints("starts"), &xe = x.attrs.get_ints("ends");
      const std::vector<int64_t>&ys = y.attrs.get_ints("starts"), &ye = y.attrs.get_ints("ends");
      if (xs.size() != ys.size() || xe.size() != xs.size() || ye.size() != ys.size()) return false;
      bool apart = false;  // along some dim, one box ends where the other starts or before
      for (size_t d = 0; d < xs.size() && !apart; ++d) apart = xe[d] <= ys[d] || ye[d] <= xs[d];
      if (!apart) return false;
    }
  return true;
}

std::vector<std::vector<int>> users_of(const ir::Graph& g) {
  std::vector<std::vector<int>> users(g.values.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ir::ValueId v : g.nodes[i].operands) users[v].push_back(static_cast<int>(i));
  return users;
}

}  // namespace

int window_reads(const ir::Graph& g, const std::vector<std::vector<int>>& users, ir::ValueId v) {
  if (disjoint_parts(g, users[v])) return 0;
  int reads = 0;
  auto walk = [&](auto& self, ir::ValueId value, int depth) -> void {
    for (int u : users[value]) {
      const ir::Node& user = g.nodes[u];
      if (user.op == ir::Op::Slice) ++reads;
      else if (ir::op_kind(user.op) == ir::OpKind::Movement && user.op != ir::Op::Broadcast && depth < 4)
        self(self, user.result, depth + 1);
    }
  };
  walk(walk, v, 0);
  return reads;
}

bool split_shared_broadcasts(ir::Graph& g) {
  const std::vector<int> producer = g.producers();
  std::vector<char> splittable(g.values.size(), 0);
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::Broadcast && from_argument_or_source(g, producer, n.operands[0])) splittable[n.result] = 1;
  return split_shared(g, producers_of(producer, splittable));
}

bool split_shared_taps(ir::Graph& g) {
  const std::vector<int> producer = g.producers();
  const std::vector<std::vector<int>> users = users_of(g);
  auto in_memory = [&](ir::ValueId v) {
    const int p = producer[v];
    if (p < 0) return true;
    const ir::OpKind kind = ir::op_kind(g.nodes[p].op);
    if (kind == ir::OpKind::Library) return true;
    return kind != ir::OpKind::Movement && kind != ir::OpKind::Source && window_reads(g, users, v) > 2;
  };
  std::vector<char> splittable(g.values.size(), 0);
  for (const ir::Node& n : g.nodes)
    if (n.op == ir::Op::Slice && in_memory(n.operands[0])) splittable[n.result] = 1;
  return split_shared(g, producers_of(producer, splittable));
}

bool split_shared_matmul_views(ir::Graph& g, bool single_batch) {
  const std::vector<int> producer = g.producers();
  const std::vector<std::vector<int>> users = users_of(g);
  std::vector<char> is_result(g.values.size(), 0);
  for (ir::ValueId v : g.results) is_result[v] = 1;
  auto is_view = [&](ir::ValueId v) { return producer[v] >= 0 && ir::matmul_view_op(g.nodes[producer[v]].op); };
  auto is_matmul = [&](int n) { return ir::reads_views(g, g.nodes[n]); };
  std::vector<std::vector<int>> chains(g.values.size());  // the views from the stored value, in graph order
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (users[v].size() < 2 || is_result[v] || !is_view(static_cast<ir::ValueId>(v))) continue;
    if (!std::all_of(users[v].begin(), users[v].end(), is_matmul)) continue;
    std::vector<int> chain;
    ir::ValueId base = static_cast<ir::ValueId>(v);
    for (; is_view(base); base = g.nodes[producer[base]].operands[0]) chain.insert(chain.begin(), producer[base]);
    if (!folds_into_matmul(g, g.type(base).shape, chain, single_batch)) continue;
    chains[v] = std::move(chain);
  }
  return split_shared(g, chains);
}

}  // namespace kiln::passes
