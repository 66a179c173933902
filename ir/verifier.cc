#include "ir/verifier.h"

#include <fmt/format.h>
#include <algorithm>
#include <unordered_map>

#include "ir/shape_inference.h"

namespace kiln::ir {

Error located_error(const Graph& graph, Location loc, std::string_view message) {
  if (!graph.source_file.empty() && loc.line > 0)
    return make_error(fmt::format("{}:{}:{}: error: {}", graph.source_file, loc.line, loc.col, message));
  return make_error(fmt::format("error: @{}: {}", graph.name, message));
}

namespace {

Status verify_body(const Graph& g, std::span<const Graph> functions);

}  // namespace

Status verify(const Graph& g) {
  for (size_t i = 0; i < g.functions.size(); ++i) {
    const Graph& f = g.functions[i];
    if (!f.functions.empty()) return located_error(f, {}, "a function cannot define functions of its own");
    for (size_t j = 0; j < i; ++j)
      if (g.functions[j].name == f.name)
        return located_error(f, {}, fmt::format("function @{} is defined twice", f.name));
    KILN_RETURN_IF_ERROR(verify_body(f, std::span<const Graph>(g.functions).first(i)));
  }
  KILN_RETURN_IF_ERROR(verify_body(g, g.functions));
  if (g.program) KILN_RETURN_IF_ERROR(verify_program(g));
  if (g.memory) KILN_RETURN_IF_ERROR(verify_memory_plan(g));
  return Status::Ok();
}

namespace {

// A gather's or scatter's indices that are a constant must lie on the axis (numpy's
// negative ones too): the interpreter refuses the others, and compiled kernels, which
// cannot stop halfway, would clamp them.
Status check_constant_indices(const Graph& g, const Node& n, const std::vector<const Node*>& producer) {
  if ((n.op != Op::Gather && n.op != Op::ScatterAdd) || n.operands.size() < 2) return Status::Ok();
  const Node* index = producer[static_cast<size_t>(n.operands[1])];
  if (!index || index->op != Op::Constant || !index->attrs.has("value")) return Status::Ok();
  const Shape& table = g.type(n.operands[0]).shape;
  const std::optional<int64_t> axis = normalize_axis(n.attrs.get_int("axis", 0), static_cast<int64_t>(table.size()));
  if (!axis) return Status::Ok();  // check_attrs' and infer_type's to report
  const int64_t extent = table[static_cast<size_t>(*axis)];
  for (int64_t j : index->attrs.get_literal("value").ints)
    if (j < -extent || j >= extent)
      return located_error(
          g, n.loc,
          fmt::format("{}: index {} is out of range for axis {} of size {}", op_name(n.op), j, *axis, extent));
  return Status::Ok();
}

Status verify_body(const Graph& g, std::span<const Graph> functions) {
  const size_t n_values = g.values.size();
  std::vector<const Node*> producer(n_values, nullptr);
  std::vector<char> defined(n_values, 0);
  std::unordered_map<std::string_view, Location> names;
  auto define = [&](ValueId v, Location loc) -> Status {
    if (v < 0 || static_cast<size_t>(v) >= n_values)
      return located_error(g, loc, fmt::format("value id {} is out of range", v));
    if (defined[v]) return located_error(g, loc, fmt::format("value id {} is defined twice", v));
    defined[v] = 1;
    const std::string& name = g.value_name(v);
    if (!name.empty()) {
      auto [it, inserted] = names.emplace(name, loc);
      if (!inserted)
        return located_error(
            g, loc, fmt::format("redefinition of %{} (first defined at {}:{})", name, it->second.line, it->second.col));
    }
    return Status::Ok();
  };
  for (const Arg& a : g.args) {
    KILN_RETURN_IF_ERROR(define(a.value, a.loc));
    const TensorType& t = g.type(a.value);
    if (t.shape.size() > 16 || std::any_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d < 0; }))
      return located_error(g, a.loc,
                           fmt::format("argument %{} has an invalid shape {}", g.value_name(a.value), t.to_string()));
  }
  std::vector<TensorType> operand_types;
  for (const Node& n : g.nodes) {
    operand_types.clear();
    for (ValueId v : n.operands) {
      if (v < 0 || static_cast<size_t>(v) >= n_values || !defined[v])
        return located_error(g, n.loc,
                             fmt::format("{}: operand %{} is used before it is defined", op_name(n.op),
                                         v >= 0 && static_cast<size_t>(v) < n_values ? g.value_name(v) : "?"));
      operand_types.push_back(g.type(v));
    }
    KILN_RETURN_IF_ERROR(define(n.result, n.loc));
    Status attrs_ok = check_attrs(n.op, n.attrs);
    if (!attrs_ok.ok()) return located_error(g, n.loc, attrs_ok.error().message);
    const TensorType& declared = g.type(n.result);
    auto inferred = n.op == Op::Call ? infer_call(functions, operand_types, n.attrs)
                                     : infer_type(n.op, operand_types, n.attrs, declared.dtype);
    if (!inferred.ok()) return located_error(g, n.loc, inferred.error().message);
    if (*inferred != declared)
      return located_error(
          g, n.loc,
          fmt::format("declared type {} of %{} does not match {} inferred for {}", declared.to_string(),
                      g.value_name(n.result), inferred->to_string(), op_name(n.op)));
    producer[static_cast<size_t>(n.result)] = &n;
    KILN_RETURN_IF_ERROR(check_constant_indices(g, n, producer));
  }
  if (g.results.empty()) return located_error(g, {}, "graph returns nothing");
  for (ValueId v : g.results)
    if (v < 0 || static_cast<size_t>(v) >= n_values || !defined[v])
      return located_error(g, {}, fmt::format("returned value id {} is not defined", v));
  return Status::Ok();
}

}  // namespace

}  // namespace kiln::ir
