#include "passes/shared_broadcasts.h"

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

}  // namespace

bool split_shared_broadcasts(ir::Graph& g) {
  const std::vector<int> producer = g.producers();
  std::vector<char> splittable(g.values.size(), 0);
  std::vector<int> readers(g.values.size(), 0);
  for (const ir::Node& n : g.nodes) {
    if (n.op == ir::Op::Broadcast && from_argument_or_source(g, producer, n.operands[0])) splittable[n.result] = 1;
    for (ir::ValueId v : n.operands) ++readers[v];
  }
  bool any = false;
  for (size_t v = 0; v < readers.size(); ++v) any = any || (splittable[v] && readers[v] > 1);
  if (!any) return false;
  std::vector<char> first_reader_seen(g.values.size(), 0);
  const std::vector<ir::Node> originals = g.nodes;
  std::vector<ir::Node> nodes;
  nodes.reserve(g.nodes.size());
  for (ir::Node& n : g.nodes) {
    for (ir::ValueId& v : n.operands) {
      if (!splittable[v] || readers[v] < 2) continue;
      if (!first_reader_seen[v]) {  // the first reader keeps the original
        first_reader_seen[v] = 1;
        continue;
      }
      ir::Node copy = originals[static_cast<size_t>(producer[v])];
      copy.result = g.add_value(g.type(v));
      v = copy.result;
      nodes.push_back(std::move(copy));
    }
    nodes.push_back(std::move(n));
  }
  g.nodes = std::move(nodes);
  return true;
}

}  // namespace kiln::passes
