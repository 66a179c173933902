#include "passes/autodiff.h"

#include <fmt/format.h>

#include "ir/decompose.h"
#include "ir/printer.h"
#include "passes/dce.h"
#include "passes/gradients.h"

namespace kiln::passes {
namespace {

using ir::Node;
using ir::Op;
using ir::ValueId;

// "%y = floor(%x)", for error messages.
std::string describe_node(const std::vector<std::string>& names, const Node& n) {
  std::string operands;
  for (ValueId v : n.operands) operands += (operands.empty() ? "%" : ", %") + names[v];
  return fmt::format("%{} = {}({})", names[n.result], ir::op_name(n.op), operands);
}

}  // namespace

Result<bool> AutodiffPass::run(ir::Graph& g) {
  if (wrt_.empty()) return make_error("autodiff: no arguments to differentiate with respect to; pass --wrt=NAME,...");
  if (g.results.empty()) return make_error("autodiff: the graph returns nothing");
  ValueId loss = g.results[0];
  const ir::TensorType loss_type = g.type(loss);  // a copy: the passes below grow the value table
  {
    std::vector<std::string> names = ir::display_names(g);
    if (loss_type.rank() != 0 || !ir::is_float(loss_type.dtype))
      return make_error(fmt::format("autodiff: the first result %{} must be a floating-point scalar loss, got {}",
                                    names[loss], loss_type.to_string()));
  }
  std::vector<ValueId> wrt;
  for (const std::string& name : wrt_) {
    const ir::Arg* arg = g.find_arg(name);
    if (!arg) {
      std::string known;
      for (const ir::Arg& a : g.args) known += (known.empty() ? "" : ", ") + g.value_name(a.value);
      return make_error(fmt::format("autodiff: @{} has no argument %{} (arguments: {})", g.name, name, known));
    }
    const ir::TensorType& t = g.type(arg->value);
    if (!ir::is_float(t.dtype))
      return make_error(
          fmt::format("autodiff: argument %{} is {}; only floating-point values have gradients", name, t.to_string()));
    if (std::find(wrt.begin(), wrt.end(), arg->value) != wrt.end())
      return make_error(fmt::format("autodiff: --wrt names %{} twice", name));
    for (const ir::Value& v : g.values)
      if (v.name == "grad_" + name)
        return make_error(fmt::format("autodiff: the gradient's name %grad_{} is already taken in @{}", name, g.name));
    wrt.push_back(arg->value);
  }

  // Composites without a direct rule are differentiated through their decomposition.
  ir::decompose_composites(g, [](const Node& n) { return !has_direct_rule(n); });

  // active[v]: index+1 of the first --wrt argument v depends on, 0 for none.
  std::vector<size_t> active(g.values.size(), 0);
  for (size_t i = 0; i < wrt.size(); ++i) active[wrt[i]] = i + 1;
  for (const Node& n : g.nodes)
    for (ValueId v : n.operands)
      if (active[v] && !active[n.result]) active[n.result] = active[v];

  ir::GraphBuilder b(g);
  std::vector<ValueId> grad(g.values.size(), ir::kNoValue);
  grad[loss] = b.scalar(1.0, loss_type.dtype);
  auto not_differentiable = [&](ValueId wrt_arg, const std::string& through, std::string_view why) {
    std::vector<std::string> names = ir::display_names(g);
    return make_error(fmt::format("autodiff: the gradient of %{} with respect to %{} flows through {}, and {}",
                                  names[loss], names[wrt_arg], through, why));
  };
  std::vector<int> producer = g.producers();
  size_t forward_nodes = g.nodes.size();
  for (size_t i = forward_nodes; i-- > 0;) {
    // A copy: rules append nodes, which may move the node list.
    const Node n = g.nodes[i];
    ValueId gy = n.result < static_cast<ValueId>(grad.size()) ? grad[n.result] : ir::kNoValue;
    if (gy == ir::kNoValue || !active[n.result]) continue;
    GradientRule rule = gradient_rule(n.op);
    if (!rule) {
      std::vector<std::string> names = ir::display_names(g);
      return not_differentiable(wrt[active[n.result] - 1], describe_node(names, n),
                                fmt::format("{} is not differentiable", ir::op_name(n.op)));
    }
    std::vector<ValueId> grads = rule(b, n, gy);
    grad.resize(g.values.size(), ir::kNoValue);
    active.resize(g.values.size(), 0);
    for (size_t k = 0; k < n.operands.size(); ++k) {
      ValueId x = n.operands[k];
      if (!active[x] || grads[k] == kNoGradient) continue;
      if (grads[k] == kNotDifferentiable) {
        std::vector<std::string> names = ir::display_names(g);
        int p = producer[x];
        std::string through = p >= 0 ? describe_node(names, g.nodes[p]) : "%" + names[x];
        return not_differentiable(
            wrt[active[x] - 1], through,
            fmt::format("its result %{} is {}, which has no gradient", names[x], g.type(x).to_string()));
      }
      grad[x] = grad[x] == ir::kNoValue ? grads[k] : b.binary(Op::Add, grad[x], grads[k]);
      grad.resize(g.values.size(), ir::kNoValue);
      active.resize(g.values.size(), 0);
    }
  }

  for (size_t i = 0; i < wrt.size(); ++i) {
    ValueId w = wrt[i];
    ValueId gw = grad[w];
    if (gw == ir::kNoValue) {  // the loss does not depend on it
      const ir::TensorType type = g.type(w);
      gw = b.broadcast(b.scalar(0, type.dtype), type.shape, {});
    } else if (!g.value_name(gw).empty() || std::find(g.results.begin(), g.results.end(), gw) != g.results.end()) {
      // Already a named value or a result (d loss/d loss, or two equal gradients): copy
      // it, so each gradient is a result of its own name.
      ir::Attrs attrs;
      attrs.set("shape", g.type(gw).shape);
      gw = b.emit(Op::Reshape, {gw}, std::move(attrs));
    }
    g.values[gw].name = "grad_" + wrt_[i];
    g.results.push_back(gw);
  }
  KILN_RETURN_IF_ERROR(DcePass().run(g));
  return true;
}

}  // namespace kiln::passes
