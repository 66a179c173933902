#include "passes/autocast.h"

#include <functional>

namespace kiln::passes {
namespace {

using ir::DType;
using ir::Node;
using ir::Op;
using ir::ValueId;

Node cast_node(ir::Graph& g, ValueId from, DType to, ir::Location loc, ValueId result = ir::kNoValue) {
  Node n;
  n.op = Op::Cast;
  n.operands = {from};
  n.attrs.set("to", to);
  n.loc = loc;
  n.result = result != ir::kNoValue ? result : g.add_value({to, g.type(from).shape});
  return n;
}

}  // namespace

Result<bool> AutocastPass::run(ir::Graph& g) {
  if (precision_ != DType::F16 && precision_ != DType::BF16)
    return make_error("pass 'autocast': precision must be f16 or bf16");
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  bool changed = false;
  for (Node& n : g.nodes) {
    // matmul, linear (its bias cast too, as PyTorch's autocast does), and convolutions with
    // their gradients (PyTorch's autocast lists conv and its backward runs in the same type).
    bool f32_product = n.op == Op::Matmul || n.op == Op::Linear || n.op == Op::Conv || n.op == Op::ConvInputGrad ||
                       n.op == Op::ConvWeightGrad;
    for (ValueId operand : n.operands) f32_product = f32_product && g.type(operand).dtype == DType::F32;
    if (!f32_product) {
      nodes.push_back(std::move(n));
      continue;
    }
    changed = true;
    const ValueId result = n.result;
    for (ValueId& operand : n.operands) {
      nodes.push_back(cast_node(g, operand, precision_, n.loc));
      operand = nodes.back().result;
    }
    n.result = g.add_value({precision_, g.type(result).shape});
    const ValueId low = n.result;
    const ir::Location loc = n.loc;
    nodes.push_back(std::move(n));
    nodes.push_back(cast_node(g, low, DType::F32, loc, result));  // the old value, its users unchanged
  }
  g.nodes = std::move(nodes);
  if (!changed || !store_params_) return changed;
  // Params that only matmuls and convolutions read (through their casts) take the low precision themselves.
  std::vector<std::vector<int>> users(g.values.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId v : g.nodes[i].operands) users[v].push_back(static_cast<int>(i));
  std::vector<char> is_result(g.values.size(), 0);
  for (ValueId v : g.results) is_result[v] = 1;
  std::vector<ValueId> replacement(g.values.size(), ir::kNoValue);
  std::vector<char> drop(g.nodes.size(), 0);
  // Whether v reaches only casts to the precision, through movement ops that keep its
  // values (a transpose of PyTorch's [out, in] weights, a reshape): the whole chain can
  // then hold the precision, and the casts go.
  std::function<bool(ValueId)> only_feeds_casts = [&](ValueId v) {
    if (is_result[v] || users[v].empty()) return false;
    for (int u : users[v]) {
      const Node& n = g.nodes[u];
      const bool cast = n.op == Op::Cast && n.attrs.get_dtype("to") == precision_;
      const bool moved = (n.op == Op::Transpose || n.op == Op::Reshape) && only_feeds_casts(n.result);
      if (!cast && !moved) return false;
    }
    return true;
  };
  std::function<void(ValueId)> retype = [&](ValueId v) {
    g.values[v].type.dtype = precision_;
    for (int u : users[v]) {
      if (g.nodes[u].op == Op::Cast) {
        replacement[g.nodes[u].result] = v;
        drop[u] = 1;
      } else {
        retype(g.nodes[u].result);
      }
    }
  };
  for (const ir::Arg& a : g.args)
    if (a.kind == ir::ArgKind::Param && g.type(a.value).dtype == DType::F32 && only_feeds_casts(a.value))
      retype(a.value);
  g.replace_uses(replacement);
  std::vector<Node> kept;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  return true;
}

}  // namespace kiln::passes
