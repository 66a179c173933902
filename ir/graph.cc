#include "ir/graph.h"

#include <unordered_set>

namespace kiln::ir {

ValueId Graph::add_value(TensorType type, std::string name) {
  values.push_back(Value{std::move(name), std::move(type)});
  return static_cast<ValueId>(values.size() - 1);
}

std::vector<int> Graph::use_counts() const {
  std::vector<int> counts(values.size(), 0);
  for (const Node& n : nodes)
    for (ValueId v : n.operands) ++counts[static_cast<size_t>(v)];
  for (ValueId v : results) ++counts[static_cast<size_t>(v)];
  return counts;
}

std::vector<int> Graph::producers() const {
  std::vector<int> producer(values.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i) producer[static_cast<size_t>(nodes[i].result)] = static_cast<int>(i);
  return producer;
}

void Graph::replace_uses(const std::vector<ValueId>& replacement) {
  auto resolve = [&](ValueId v) {
    // Follow chains (a -> b -> c) so one call settles every replacement.
    while (static_cast<size_t>(v) < replacement.size() && replacement[static_cast<size_t>(v)] != kNoValue &&
           replacement[static_cast<size_t>(v)] != v)
      v = replacement[static_cast<size_t>(v)];
    return v;
  };
  for (Node& n : nodes)
    for (ValueId& v : n.operands) v = resolve(v);
  for (ValueId& v : results) {
    ValueId to = resolve(v);
    // A result keeps its name when its replacement has none (%grad_x = 1 * %3 -> %3).
    Value &from_value = values[static_cast<size_t>(v)], &to_value = values[static_cast<size_t>(to)];
    if (to != v && to_value.name.empty()) to_value.name = std::move(from_value.name), from_value.name.clear();
    v = to;
  }
}

const Arg* Graph::find_arg(std::string_view name) const {
  for (const Arg& a : args)
    if (value_name(a.value) == name) return &a;
  return nullptr;
}

const Arg* Graph::updated_state(ValueId result) const {
  const std::string& name = value_name(result);
  if (name.size() <= 5 || !name.ends_with(".next")) return nullptr;
  const Arg* state = find_arg(std::string_view(name).substr(0, name.size() - 5));
  return state && state->kind == ArgKind::State && type(state->value) == type(result) ? state : nullptr;
}

const Graph* Graph::find_function(std::string_view fn) const {
  for (const Graph& f : functions)
    if (f.name == fn) return &f;
  return nullptr;
}

std::vector<std::string> display_names(const Graph& g) {
  std::vector<std::string> names(g.values.size());
  std::unordered_set<std::string> taken;
  for (const Value& v : g.values)
    if (!v.name.empty()) taken.insert(v.name);
  int next = 0;
  auto name_of = [&](ValueId id) {
    std::string& name = names[static_cast<size_t>(id)];
    if (!name.empty()) return;
    name = g.value_name(id);
    if (!name.empty()) return;
    while (taken.count(std::to_string(next))) ++next;
    name = std::to_string(next++);
  };
  for (const Arg& a : g.args) name_of(a.value);
  for (const Node& n : g.nodes) name_of(n.result);
  return names;
}

std::string_view arg_kind_keyword(ArgKind kind) {
  switch (kind) {
    case ArgKind::Input: return "";
    case ArgKind::Param: return "param";
    case ArgKind::State: return "state";
  }
  return "";
}

}  // namespace kiln::ir
