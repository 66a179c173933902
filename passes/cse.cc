#include "passes/cse.h"

#include <fmt/format.h>
#include <unordered_map>

#include "ir/printer.h"

namespace kiln::passes {

Result<bool> CsePass::run(ir::Graph& g) {
  std::unordered_map<std::string, ir::ValueId> seen;
  std::vector<ir::ValueId> replacement(g.values.size(), ir::kNoValue);
  std::vector<ir::Node> kept;
  kept.reserve(g.nodes.size());
  bool changed = false;
  for (ir::Node& n : g.nodes) {
    for (ir::ValueId& v : n.operands)
      if (replacement[v] != ir::kNoValue) v = replacement[v];
    const ir::TensorType& t = g.type(n.result);
    std::string key = fmt::format("{}|{}|{}", ir::op_name(n.op), t.to_string(), fmt::join(n.operands, ","));
    for (const auto& [name, value] : n.attrs.entries())
      key += fmt::format("|{}={}", name, ir::format_attr(value, t.dtype));
    auto [it, inserted] = seen.emplace(std::move(key), n.result);
    if (inserted) {
      kept.push_back(std::move(n));
      continue;
    }
    replacement[n.result] = it->second;
    changed = true;
  }
  g.nodes = std::move(kept);
  g.replace_uses(replacement);
  return changed;
}

}  // namespace kiln::passes
