#include "passes/autocast.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>

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

// The transposes and reshapes no op reads and that are no result (the moves an operand was
// cast past) go: the params are retyped after, and a move reading one would keep it f32.
void drop_unused_moves(ir::Graph& g) {
  std::vector<int> uses(g.values.size(), 0);
  for (ValueId v : g.results) ++uses[v];
  for (const Node& n : g.nodes)
    for (ValueId v : n.operands) ++uses[v];
  std::vector<char> unused(g.nodes.size(), 0);
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    if ((n.op != Op::Transpose && n.op != Op::Reshape) || uses[n.result] > 0) continue;
    --uses[n.operands[0]];  // later moves first, so a chain goes whole
    unused[i] = 1;
  }
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!unused[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
}

}  // namespace

Result<bool> AutocastPass::run(ir::Graph& g) {
  if (precision_ != DType::F16 && precision_ != DType::BF16)
    return make_error("pass 'autocast': precision must be f16 or bf16");
  // The transposes and reshapes of the graph, by result: an operand they move is cast
  // before them, and moved in the precision after. The cast of a transpose is a kernel that
  // walks one of the two across rows; the cast where the value lies runs at copy speed (or
  // joins the kernel computing it), and the matmul reads the moved cast in place. GPT-2's
  // logits read its token embedding (also read by the lookup, so not stored in the
  // precision) that way, its transposing cast 163 of the model's 210 ms in bf16; its
  // training step's weight gradients read activations so, 100 of 377 ms.
  std::map<ValueId, Node> movement;  // copies: the loop below moves the graph's nodes
  for (const Node& n : g.nodes)
    if (n.op == Op::Transpose || n.op == Op::Reshape) movement.emplace(n.result, n);
  std::vector<Node> nodes;
  nodes.reserve(g.nodes.size());
  // `operand` cast to the precision: where the chain of moves it comes from starts, then
  // the moves again.
  auto cast_operand = [&](ValueId operand, ir::Location loc) {
    std::vector<const Node*> chain;
    ValueId root = operand;
    for (auto m = movement.find(root); m != movement.end(); m = movement.find(root)) {
      chain.push_back(&m->second);
      root = m->second.operands[0];
    }
    if (chain.empty()) {
      nodes.push_back(cast_node(g, operand, precision_, loc));
      return nodes.back().result;
    }
    nodes.push_back(cast_node(g, root, precision_, loc));
    ValueId moved = nodes.back().result;
    for (auto m = chain.rbegin(); m != chain.rend(); ++m) {
      Node again{(*m)->op, {moved}, (*m)->attrs, ir::kNoValue, (*m)->loc};
      again.result = g.add_value({precision_, g.type((*m)->result).shape});
      nodes.push_back(std::move(again));
      moved = nodes.back().result;
    }
    return moved;
  };
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
    for (ValueId& operand : n.operands) operand = cast_operand(operand, n.loc);
    n.result = g.add_value({precision_, g.type(result).shape});
    const ValueId low = n.result;
    const ir::Location loc = n.loc;
    nodes.push_back(std::move(n));
    nodes.push_back(cast_node(g, low, DType::F32, loc, result));  // the old value, its users unchanged
  }
  g.nodes = std::move(nodes);
  drop_unused_moves(g);
  if (!changed || !store_params_) return changed;
  // Params that only matmuls and convolutions read (through their casts) take the low
  // precision themselves.
  std::vector<std::vector<int>> users(g.values.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId v : g.nodes[i].operands) users[v].push_back(static_cast<int>(i));
  std::vector<char> is_result(g.values.size(), 0);
  for (ValueId v : g.results) is_result[v] = 1;
  std::vector<ValueId> replacement(g.values.size(), ir::kNoValue);
  std::vector<char> drop(g.nodes.size(), 0);
  const auto casts_down = [&](const Node& n) { return n.op == Op::Cast && n.attrs.get_dtype("to") == precision_; };
  // Whether v reaches only casts to the precision, through movement ops that keep its
  // values (a transpose of PyTorch's [out, in] weights, a reshape): the whole chain can
  // then hold the precision, and the casts go.
  std::function<bool(ValueId)> only_feeds_casts = [&](ValueId v) {
    if (is_result[v] || users[v].empty()) return false;
    for (int u : users[v]) {
      const Node& n = g.nodes[u];
      const bool moved = (n.op == Op::Transpose || n.op == Op::Reshape) && only_feeds_casts(n.result);
      if (!casts_down(n) && !moved) return false;
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
  // A param that is also read by other ops, and cast for a matmul or convolution:
  //  - where those ops only move its elements (GPT-2's token embedding, looked up by a
  //    gather, and multiplied by for the logits), it is stored in the precision too: the
  //    moves read it widened (a cast fused into their kernel), so an inference artifact
  //    holds its weights once, at half the size (GPT-2 small's bf16 artifact was 408 MB
  //    of 498 in f32), and its lookups read rounded embeddings, as a model converted to
  //    bf16 does;
  //  - where they compute with it in f32 (or it is a result), it keeps f32 for them and
  //    gets a copy in the precision for its casts, %NAME.bf16 (or .f16), which the
  //    compiler fills with NAME's weights rounded (derived_param_source): its cast ran on
  //    every run otherwise, 8 of GPT-2's 59 ms.
  std::set<std::string> names;
  for (size_t v = 0; v < g.values.size(); ++v) names.insert(g.value_name(static_cast<ValueId>(v)));
  std::vector<Node> widened;
  std::vector<ir::Arg> copies;
  for (const ir::Arg& a : g.args) {
    if (a.kind != ir::ArgKind::Param || g.type(a.value).dtype != DType::F32) continue;
    std::vector<int> casts, others;
    for (int u : users[a.value]) (casts_down(g.nodes[u]) ? casts : others).push_back(u);
    if (casts.empty()) continue;
    const bool only_moves = !is_result[a.value] && std::all_of(others.begin(), others.end(), [&](int u) {
      return ir::op_kind(g.nodes[u].op) == ir::OpKind::Movement;
    });
    ValueId low = a.value;
    if (only_moves) {
      const ValueId wide = g.add_value(g.type(a.value));
      g.values[a.value].type.dtype = precision_;
      widened.push_back(cast_node(g, a.value, DType::F32, a.loc, wide));
      for (int u : others)
        for (ValueId& operand : g.nodes[u].operands)
          if (operand == a.value) operand = wide;
    } else {
      const std::string name = g.value_name(a.value) + "." + std::string(ir::dtype_name(precision_));
      if (names.count(name)) continue;
      low = g.add_value({precision_, g.type(a.value).shape}, name);
      copies.push_back({low, ir::ArgKind::Param, a.loc});
    }
    for (int u : casts) {
      replacement[g.nodes[u].result] = low;
      drop[u] = 1;
    }
  }
  g.args.insert(g.args.end(), copies.begin(), copies.end());
  replacement.resize(g.values.size(), ir::kNoValue);
  g.replace_uses(replacement);
  std::vector<Node> kept = std::move(widened);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  return true;
}

std::string derived_param_source(std::string_view name) {
  for (std::string_view suffix : {".bf16", ".f16"})
    if (name.size() > suffix.size() && name.ends_with(suffix))
      return std::string(name.substr(0, name.size() - suffix.size()));
  return std::string();
}

}  // namespace kiln::passes
