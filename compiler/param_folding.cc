#include "compiler/param_folding.h"

#include <algorithm>
#include <set>
#include <vector>

#include "ir/interpreter.h"
#include "passes/dce.h"

namespace kiln {
namespace {

using ir::ArgKind;
using ir::Op;
using ir::ValueId;

// The values to fold (fold[v]), and whether there is any.
struct Folds {
  std::vector<char> fold;
  bool any = false;
};

Folds find_folds(const ir::Graph& g, const std::map<std::string, ir::Tensor>& weights) {
  const size_t count = g.values.size();
  // known[v]: only params with weights and constants determine v; largest[v]: the bytes
  // of the largest param among them (0: constants alone, which stay as they are);
  // computes[v]: arithmetic among them (params only moved, reshaped or transposed stay
  // as they are: a library call reads them in place, and a tied weight is stored once).
  std::vector<char> known(count, 0), computes(count, 0);
  std::vector<int64_t> largest(count, 0);
  for (const ir::Arg& a : g.args)
    if (a.kind == ArgKind::Param && weights.count(g.value_name(a.value))) {
      known[static_cast<size_t>(a.value)] = 1;
      largest[static_cast<size_t>(a.value)] = g.type(a.value).bytes();
    }
  for (const ir::Node& n : g.nodes) {
    if (n.op == Op::Call) continue;
    bool all = true, arithmetic = ir::op_kind(n.op) != ir::OpKind::Movement;
    int64_t most = 0;
    for (ValueId o : n.operands) {
      all = all && known[static_cast<size_t>(o)];
      arithmetic = arithmetic || computes[static_cast<size_t>(o)];
      most = std::max(most, largest[static_cast<size_t>(o)]);
    }
    known[static_cast<size_t>(n.result)] = all;
    computes[static_cast<size_t>(n.result)] = arithmetic && all;
    largest[static_cast<size_t>(n.result)] = most;
  }
  // The values to fold: known, computed from a param, no larger than it, read by a node
  // that is not known (a graph result stays computed: a param is no result).
  std::vector<char> fold(count, 0);
  bool any = false;
  for (const ir::Node& n : g.nodes) {
    if (known[static_cast<size_t>(n.result)]) continue;
    for (ValueId o : n.operands) {
      const auto v = static_cast<size_t>(o);
      if (known[v] && computes[v] && largest[v] > 0 && g.type(o).bytes() <= largest[v]) fold[v] = 1, any = true;
    }
  }
  return {std::move(fold), any};
}

}  // namespace

std::set<std::string> taken_names(const ir::Graph& g) {
  std::set<std::string> taken;
  for (const ir::Value& v : g.values) taken.insert(v.name);
  for (const ir::Arg& a : g.args) taken.insert(g.value_name(a.value));
  return taken;
}

std::string folded_param_name(std::set<std::string>& taken, const std::string& base) {
  std::string name = base + ".folded";
  for (int k = 2; taken.count(name); ++k) name = base + ".folded" + std::to_string(k);
  taken.insert(name);
  return name;
}

bool computes_on_params(const ir::Graph& g, const std::map<std::string, ir::Tensor>& weights) {
  return find_folds(g, weights).any;
}

int fold_param_computations(ir::Graph& g, std::map<std::string, ir::Tensor>& weights) {
  const size_t count = g.values.size();
  auto [fold, any] = find_folds(g, weights);
  if (!any) return 0;
  // What the folded values need, as a graph of its own whose inputs are those params:
  // evaluated whole, composites decomposed as the interpreter does.
  std::vector<char> needed(fold);
  for (auto n = g.nodes.rbegin(); n != g.nodes.rend(); ++n)
    if (needed[static_cast<size_t>(n->result)])
      for (ValueId o : n->operands) needed[static_cast<size_t>(o)] = 1;
  ir::Graph cone;
  cone.values = g.values;
  std::map<std::string, ir::Tensor> inputs;
  for (const ir::Arg& a : g.args)
    if (needed[static_cast<size_t>(a.value)]) {
      cone.args.push_back(ir::Arg{a.value, ArgKind::Input, a.loc});
      inputs[g.value_name(a.value)] = weights.at(g.value_name(a.value));
    }
  for (const ir::Node& n : g.nodes)
    if (needed[static_cast<size_t>(n.result)]) cone.nodes.push_back(n);
  for (size_t v = 0; v < count; ++v)
    if (fold[v]) cone.results.push_back(static_cast<ValueId>(v));
  auto values = ir::evaluate(cone, inputs);
  // Left to the kernels where the interpreter cannot evaluate it here (a weight whose type
  // the compile converts later, or beyond the interpreter's memory).
  if (!values.ok()) return 0;
  std::map<ValueId, ir::Tensor> folded_values;
  for (size_t i = 0; i < cone.results.size(); ++i) folded_values[cone.results[i]] = std::move((*values)[i]);
  std::set<std::string> taken = taken_names(g);
  int folded = 0;
  std::vector<ir::Node> nodes;
  for (ir::Node& n : g.nodes) {
    const auto r = static_cast<size_t>(n.result);
    if (!fold[r]) {
      nodes.push_back(std::move(n));
      continue;
    }
    std::string& name = g.values[r].name;
    name = folded_param_name(taken, name.empty() ? "value" : name);
    g.args.push_back(ir::Arg{n.result, ArgKind::Param, n.loc});
    weights[name] = std::move(folded_values.at(n.result));
    ++folded;
  }
  g.nodes = std::move(nodes);
  g.program.reset();
  g.memory.reset();
  (void)passes::DcePass().run(g);
  passes::drop_unread_params(g, weights);
  return folded;
}

}  // namespace kiln
