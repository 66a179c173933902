#include "passes/dce.h"

namespace kiln::passes {

Result<bool> DcePass::run(ir::Graph& g) {
  std::vector<char> live(g.values.size(), 0);
  for (ir::ValueId v : g.results) live[v] = 1;
  std::vector<char> keep(g.nodes.size(), 0);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const ir::Node& n = g.nodes[i];
    if (!live[n.result]) continue;
    keep[i] = 1;
    for (ir::ValueId v : n.operands) live[v] = 1;
  }
  std::vector<ir::Node> kept;
  kept.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (keep[i]) kept.push_back(std::move(g.nodes[i]));
  bool changed = kept.size() != g.nodes.size();
  g.nodes = std::move(kept);
  return changed;
}

void drop_unread_params(ir::Graph& g, std::map<std::string, ir::Tensor>& weights) {
  const std::vector<int> uses = g.use_counts();  // results count as uses
  std::vector<ir::Arg> kept;
  for (const ir::Arg& a : g.args) {
    if (a.kind == ir::ArgKind::Param && uses[static_cast<size_t>(a.value)] == 0) {
      weights.erase(g.value_name(a.value));
      continue;
    }
    kept.push_back(a);
  }
  g.args = std::move(kept);
}

}  // namespace kiln::passes
