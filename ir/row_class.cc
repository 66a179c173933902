#include "ir/row_class.h"

#include <algorithm>

#include "ir/shape_inference.h"

namespace kiln::ir {

bool RowClass::contiguous() const {
  for (size_t k = 0; k < reduced.size(); ++k)
    if (reduced[k] != static_cast<int64_t>(full.size() - reduced.size() + k)) return false;
  return true;
}

Shape RowClass::keepdims_shape() const {
  Shape s = full;
  for (int64_t d : reduced) s[static_cast<size_t>(d)] = 1;
  return s;
}

bool RowClass::is_reduced(size_t dim) const {
  return std::binary_search(reduced.begin(), reduced.end(), static_cast<int64_t>(dim));
}

bool flat_iteration(const Graph& g, const Step& step) {
  const Shape& shape = g.type(step.outputs[0]).shape;
  auto same = [&](ValueId v) { return g.type(v).rank() == 0 || g.type(v).shape == shape; };
  for (int n : step.nodes) {
    const Node& node = g.nodes[n];
    if (!same(node.result) || op_kind(node.op) == OpKind::Movement || node.op == Op::Iota) return false;
    for (ValueId v : node.operands)
      if (!same(v)) return false;
  }
  return true;
}

std::vector<ValueId> invariant_scalars(const Graph& g, const Step& step) {
  std::vector<ValueId> scalars;
  std::vector<char> varies(g.values.size(), 0);  // depends on a reduction of this step
  for (int n : step.nodes) {
    const Node& node = g.nodes[n];
    bool v = op_kind(node.op) == OpKind::Reduction;
    for (ValueId x : node.operands) v = v || varies[x];
    varies[node.result] = v;
    if (v || g.type(node.result).rank() != 0) continue;
    if (std::all_of(node.operands.begin(), node.operands.end(), [&](ValueId x) { return g.type(x).rank() == 0; }))
      scalars.push_back(node.result);
  }
  for (ValueId x : step.inputs)
    if (g.type(x).rank() == 0) scalars.push_back(x);
  return scalars;
}

int uses_in_step(const Graph& g, const Step& step, ValueId value) {
  int uses = 0;
  for (int n : step.nodes)
    for (ValueId operand : g.nodes[n].operands) uses += operand == value;
  for (ValueId o : step.outputs) uses += o == value;
  return uses;
}

std::vector<int64_t> reduction_axes(const Graph& g, const Node& n) {
  int64_t rank = g.type(n.operands[0]).rank();
  std::vector<int64_t> axes;
  if (n.op == Op::Argmax) axes.push_back(*normalize_axis(n.attrs.get_int("axis"), rank));
  else
    for (int64_t a : n.attrs.get_ints("axes")) axes.push_back(*normalize_axis(a, rank));
  std::sort(axes.begin(), axes.end());
  return axes;
}

std::optional<RowClass> row_class(const Graph& g, const Step& step) {
  RowClass rc;
  std::vector<int> producer = g.producers();
  std::vector<char> member(g.nodes.size(), 0);
  for (int n : step.nodes) member[n] = 1;
  bool found = false;
  for (int n : step.nodes) {
    const Node& node = g.nodes[n];
    if (op_kind(node.op) == OpKind::Reduction) {
      rc.full = g.type(node.operands[0]).shape;
      rc.reduced = reduction_axes(g, node);
      found = true;
      break;
    }
  }
  for (size_t k = 0; !found && k < step.nodes.size(); ++k) {
    const Node& node = g.nodes[step.nodes[k]];
    if (node.op != Op::Broadcast || producer[node.operands[0]] < 0 || !member[producer[node.operands[0]]]) continue;
    const Shape &from = g.type(node.operands[0]).shape, &to = g.type(node.result).shape;
    const auto& dims = node.attrs.get_ints("dims");
    rc.full = to;
    rc.reduced.clear();
    for (int64_t d = 0; d < static_cast<int64_t>(to.size()); ++d) {
      bool mapped = std::find(dims.begin(), dims.end(), d) != dims.end();
      bool expanded = from.size() == to.size() && from[d] == 1 && to[d] != 1;
      if (!mapped || expanded) rc.reduced.push_back(d);
    }
    found = !rc.reduced.empty();
  }
  if (!found) return std::nullopt;
  for (int64_t d = 0; d < static_cast<int64_t>(rc.full.size()); ++d) {
    if (std::binary_search(rc.reduced.begin(), rc.reduced.end(), d)) rc.reduced_shape.push_back(rc.full[d]);
    else {
      rc.kept.push_back(d);
      rc.kept_shape.push_back(rc.full[d]);
    }
  }
  return rc;
}

int64_t work_items(const Graph& g, const Step& step) {
  switch (step.kind) {
    case StepKind::Loop: return g.type(step.outputs[0]).num_elements();
    case StepKind::Reduction: {
      auto rc = row_class(g, step);
      return rc ? rc->rows() : 0;
    }
    case StepKind::Scatter: return 1;
    case StepKind::Library: return 0;
  }
  return 0;
}

namespace {
// 2·N·O·E·(C/groups)·taps, the same for conv and both its gradients.
int64_t conv_flops(const Graph& g, const Node& node) {
  const bool input_grad = node.op == Op::ConvInputGrad, weight_grad = node.op == Op::ConvWeightGrad;
  const Shape& y = input_grad    ? g.type(node.operands[0]).shape
                   : weight_grad ? g.type(node.operands[1]).shape
                                 : g.type(node.result).shape;
  const Shape& w = input_grad    ? g.type(node.operands[1]).shape
                   : weight_grad ? g.type(node.result).shape
                                 : g.type(node.operands[1]).shape;
  return 2 * num_elements(y) * (num_elements(w) / std::max<int64_t>(w.empty() ? 1 : w[0], 1));
}
}  // namespace

int64_t step_flops(const Graph& g, const Step& step) {
  int64_t flops = 0;
  for (int n : step.nodes) {
    const Node& node = g.nodes[static_cast<size_t>(n)];
    const int64_t out = g.type(node.result).num_elements();
    switch (op_kind(node.op)) {
      case OpKind::Elementwise: flops += out; break;
      case OpKind::Reduction: flops += g.type(node.operands[0]).num_elements(); break;
      case OpKind::Library: {
        if (node.op != Op::Matmul) {  // a convolution or its gradients: 2 per (output, input channel, tap)
          flops += conv_flops(g, node);
          break;
        }
        const Shape& a = g.type(node.operands[0]).shape;
        flops += 2 * out * (a.empty() ? 1 : a.back());
        break;
      }
      case OpKind::Movement:
      case OpKind::Composite:
      case OpKind::Source: break;
    }
  }
  return flops;
}

}  // namespace kiln::ir
