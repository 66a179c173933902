#include "ir/printer.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace kiln::ir {
namespace {

void append_literal(std::string& out, const Literal& lit, DType dtype, size_t dim, size_t& index) {
  if (dim == lit.shape.size()) {
    if (dtype == DType::Bool) out += lit.ints[index] ? "true" : "false";
    else if (dtype == DType::F64) out += format_float(lit.floats[index]);
    else if (is_float(dtype)) out += format_float32(static_cast<float>(lit.floats[index]));
    else out += fmt::format("{}", lit.ints[index]);
    ++index;
    return;
  }
  out += '[';
  for (int64_t i = 0; i < lit.shape[dim]; ++i) {
    if (i) out += ", ";
    append_literal(out, lit, dtype, dim + 1, index);
  }
  out += ']';
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += fmt::format("\\{}", static_cast<char>(c));
    else if (c < 0x20 || c >= 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

}  // namespace

std::string format_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string format_float32(float v) {
  if (std::isnan(v) || std::isinf(v)) return format_float(v);
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string format_attr(const AttrValue& value, DType dtype) {
  return std::visit(
      [&](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) return fmt::format("{}", v);
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) return shape_string(v);
        else if constexpr (std::is_same_v<T, double>) return format_float(v);
        else if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::string>) return quote(v);
        else if constexpr (std::is_same_v<T, DType>) return std::string(dtype_name(v));
        else {
          std::string out;
          size_t index = 0;
          append_literal(out, v, dtype, 0, index);
          return out;
        }
      },
      value);
}

namespace {

std::string node_line(const Graph& g, const std::vector<std::string>& names, const Node& n) {
  auto ref = [&](ValueId v) { return "%" + names[static_cast<size_t>(v)]; };
  const TensorType& t = g.type(n.result);
  std::string out = fmt::format("{}: {} = {}", ref(n.result), t.to_string(), op_name(n.op));
  if (!n.operands.empty() || op_arity(n.op) != 0) {
    out += '(';
    for (size_t i = 0; i < n.operands.size(); ++i) out += (i ? ", " : "") + ref(n.operands[i]);
    out += ')';
  }
  if (!n.attrs.empty()) {
    out += " {";
    bool first = true;
    for (const auto& [name, value] : n.attrs.entries()) {
      out += fmt::format("{}{}={}", first ? "" : ", ", name, format_attr(value, t.dtype));
      first = false;
    }
    out += '}';
  }
  return out;
}

std::string refs(const std::vector<std::string>& names, const std::vector<ValueId>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", %" : "%") + names[static_cast<size_t>(values[i])];
  return out;
}

// Steps print as blocks: `loop @fused_1(%a, %b) -> (%c) { ... }`. A constant that
// several steps recompute is defined in the first and shown as a comment in the others,
// so the dump still parses. Such constants come first in each of their steps: parsed back,
// the first step that defines one may be another, and its place among a step's nodes
// another, where a dump fused again must print the same.
void print_steps(std::string& out, const Graph& g, const std::vector<std::string>& names) {
  std::vector<char> printed(g.nodes.size(), 0);
  std::vector<int> steps_of(g.nodes.size(), 0);
  for (const Step& step : g.program->steps)
    for (int n : step.nodes) ++steps_of[n];
  for (const Step& step : g.program->steps) {
    out += fmt::format("  {} @{}({}) -> ({}) {{\n", step_kind_name(step.kind), step.name, refs(names, step.inputs),
                       refs(names, step.outputs));
    std::vector<int> nodes = step.nodes;
    std::stable_partition(nodes.begin(), nodes.end(), [&](int n) { return steps_of[n] > 1; });
    for (int n : nodes) {
      std::string line = node_line(g, names, g.nodes[n]);
      out += printed[n] ? fmt::format("    # recomputed: {}\n", line) : fmt::format("    {}\n", line);
      printed[n] = 1;
    }
    out += "  }\n";
  }
}

void print_memory(std::string& out, const Graph& g, const std::vector<std::string>& names) {
  const MemoryPlan& plan = *g.memory;
  out += fmt::format("# memory plan: arena {} bytes, live lower bound {} bytes, naive {} bytes, alignment {}\n",
                     plan.arena_bytes, plan.live_lower_bound_bytes, plan.naive_bytes, plan.alignment);
  int end = static_cast<int>(g.program->steps.size());
  for (const Buffer& b : plan.buffers) {
    if (b.home == Home::Input || b.home == Home::Param || (b.home == Home::State && b.state < 0)) continue;
    std::string last = b.last_step >= end ? "end" : std::to_string(b.last_step);
    std::string where = b.home == Home::State ? fmt::format("state %{} (in place)", names[b.state])
                                              : fmt::format("arena [{}, {})", b.offset, b.offset + b.bytes);
    std::string extra = b.in_place_of >= 0 ? fmt::format(", in place of %{}", names[b.in_place_of]) : "";
    out += fmt::format("#   %{}: {} steps {}..{}{}\n", names[b.value], where, b.first_step, last, extra);
  }
  for (auto [state, value] : plan.state_copies)
    out += fmt::format("#   copy %{} to state %{} after the last step\n", names[value], names[state]);
}

void print_body(std::string& out, const Graph& g, std::string_view keyword) {
  std::vector<std::string> names = display_names(g);
  auto ref = [&](ValueId v) { return "%" + names[static_cast<size_t>(v)]; };
  out += fmt::format("{} @{}(", keyword, g.name);
  for (size_t i = 0; i < g.args.size(); ++i) {
    const Arg& a = g.args[i];
    if (i) out += ", ";
    std::string_view kw = arg_kind_keyword(a.kind);
    out += fmt::format("{}{}{}: {}", kw, kw.empty() ? "" : " ", ref(a.value), g.type(a.value).to_string());
  }
  out += ") {\n";
  if (g.program) {
    print_steps(out, g, names);
  } else {
    for (const Node& n : g.nodes) out += "  " + node_line(g, names, n) + "\n";
  }
  out += "  return ";
  for (size_t i = 0; i < g.results.size(); ++i) out += (i ? ", " : "") + ref(g.results[i]);
  out += "\n}\n";
  if (g.memory) print_memory(out, g, names);
}

}  // namespace

std::string print(const Graph& g) {
  std::string out;
  for (const Graph& f : g.functions) {
    print_body(out, f, "func");
    out += '\n';
  }
  print_body(out, g, "graph");
  return out;
}

}  // namespace kiln::ir
