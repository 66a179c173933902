#include "ir/dot.h"

#include <fmt/format.h>

#include "ir/printer.h"

namespace kiln::ir {
namespace {

std::string escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string to_dot(const Graph& g) {
  std::vector<std::string> names = display_names(g);
  std::string out = fmt::format("digraph \"{}\" {{\n  rankdir=TB;\n  node [fontname=\"monospace\"];\n", escape(g.name));
  for (const Arg& a : g.args) {
    std::string_view kw = arg_kind_keyword(a.kind);
    out += fmt::format("  v{} [shape=ellipse, label=\"{}{}%{}\\n{}\"];\n", a.value, kw, kw.empty() ? "" : " ",
                       escape(names[a.value]), g.type(a.value).to_string());
  }
  auto node_label = [&](const Node& n) {
    return fmt::format("v{} [shape=box, label=\"%{} = {}\\n{}\"];\n", n.result, escape(names[n.result]), op_name(n.op),
                       g.type(n.result).to_string());
  };
  if (g.program) {
    // One cluster per step; a constant several steps recompute is drawn once, outside.
    std::vector<int> uses(g.nodes.size(), 0);
    for (const Step& step : g.program->steps)
      for (int n : step.nodes) ++uses[n];
    for (size_t s = 0; s < g.program->steps.size(); ++s) {
      const Step& step = g.program->steps[s];
      out += fmt::format("  subgraph cluster_{} {{\n    label=\"{} ({})\";\n", s, escape(step.name),
                         step_kind_name(step.kind));
      for (int n : step.nodes)
        if (uses[n] == 1) out += "    " + node_label(g.nodes[n]);
      out += "  }\n";
    }
    for (size_t n = 0; n < g.nodes.size(); ++n)
      if (uses[n] > 1) out += "  " + node_label(g.nodes[n]);
  } else {
    for (const Node& n : g.nodes) out += "  " + node_label(n);
  }
  for (const Node& n : g.nodes)
    for (ValueId v : n.operands) out += fmt::format("  v{} -> v{};\n", v, n.result);
  for (size_t i = 0; i < g.results.size(); ++i) {
    out += fmt::format("  result{} [shape=plaintext, label=\"return #{}\"];\n", i, i);
    out += fmt::format("  v{} -> result{};\n", g.results[i], i);
  }
  out += "}\n";
  return out;
}

}  // namespace kiln::ir
