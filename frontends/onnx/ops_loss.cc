// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, written with kiln's primitives:
// the target class of each position picked by comparing the targets with an iota over the
// class dim.
#include <fmt/format.h>

#include "frontends/onnx/ops.h"

namespace kiln::onnx_import {

namespace {

using ir::Op;

// The loss of log-probabilities x [N, C, d...] at targets [N, d...], as ONNX's
// NegativeLogLikelihoodLoss defines it (weights per class, ignore_index, reduction).
Result<Value> nll_loss(Context& ctx, const onnx::NodeProto& node, const Value& x, const Value& target,
                       std::optional<Value> weight) {
  KILN_ASSIGN_OR_RETURN(std::string reduction, string_attribute(node, "reduction", "mean"));
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return node_error(node, fmt::format("reduction '{}' is none of none, sum and mean", reduction));
  const ir::TensorType xt = ctx.type_of(x), tt = ctx.type_of(target);
  if (xt.rank() < 2) return node_error(node, fmt::format("expected input [N, C, ...], got {}", xt.to_string()));
  ir::Shape target_shape = xt.shape;
  target_shape.erase(target_shape.begin() + 1);
  if (tt.shape != target_shape || !ir::is_index(tt.dtype))
    return node_error(node, fmt::format("expected integer targets of shape {} for input {}, got {}",
                                        ir::shape_string(target_shape), xt.to_string(), tt.to_string()));
  // hit[n, c, ...] = (c == target[n, ...]).
  KILN_ASSIGN_OR_RETURN(Value classes, iota(ctx, node, xt.shape, 1, tt.dtype));
  ir::Shape with_class = target_shape;
  with_class.insert(with_class.begin() + 1, 1);
  KILN_ASSIGN_OR_RETURN(Value t1, reshaped(ctx, node, target, with_class));
  KILN_ASSIGN_OR_RETURN(Value t_wide, ctx.broadcast_to(node, t1, xt.shape));
  KILN_ASSIGN_OR_RETURN(Value hit, ctx.apply(node, Op::Eq, {classes, t_wide}));
  KILN_ASSIGN_OR_RETURN(Value zeros, ctx.broadcast_to(node, scalar(0.0, xt.dtype), xt.shape));
  ir::Attrs over_classes;
  over_classes.set("axes", std::vector<int64_t>{1});
  over_classes.set("keepdims", false);
  KILN_ASSIGN_OR_RETURN(Value picked_all, ctx.apply(node, Op::Select, {hit, x, zeros}));
  KILN_ASSIGN_OR_RETURN(Value picked, ctx.apply(node, Op::ReduceSum, {picked_all}, over_classes));
  // The weight of each position's class (1 without weights), 0 where ignored.
  Value class_weight = scalar(1.0, xt.dtype);
  if (weight) {
    if (ctx.type_of(*weight).shape != ir::Shape{xt.shape[1]})
      return node_error(node,
                        fmt::format("weight must be [{}], got {}", xt.shape[1], ctx.type_of(*weight).to_string()));
    ir::Shape per_class(static_cast<size_t>(xt.rank()), 1);
    per_class[1] = xt.shape[1];
    KILN_ASSIGN_OR_RETURN(class_weight, reshaped(ctx, node, *weight, per_class));
  }
  KILN_ASSIGN_OR_RETURN(Value w_wide, ctx.broadcast_to(node, class_weight, xt.shape));
  KILN_ASSIGN_OR_RETURN(Value w_all, ctx.apply(node, Op::Select, {hit, w_wide, zeros}));
  KILN_ASSIGN_OR_RETURN(Value w, ctx.apply(node, Op::ReduceSum, {w_all}, over_classes));
  if (attribute(node, "ignore_index")) {
    KILN_ASSIGN_OR_RETURN(int64_t ignore, int_attribute(node, "ignore_index", std::nullopt));
    KILN_ASSIGN_OR_RETURN(Value kept, binary(ctx, node, Op::Ne, target, scalar(static_cast<double>(ignore), tt.dtype)));
    KILN_ASSIGN_OR_RETURN(Value no_weight, ctx.broadcast_to(node, scalar(0.0, xt.dtype), target_shape));
    KILN_ASSIGN_OR_RETURN(w, ctx.apply(node, Op::Select, {kept, w, no_weight}));
  }
  KILN_ASSIGN_OR_RETURN(Value weighted, ctx.apply(node, Op::Mul, {picked, w}));
  KILN_ASSIGN_OR_RETURN(Value loss, ctx.apply(node, Op::Neg, {weighted}));
  if (reduction == "none") return loss;
  std::vector<int64_t> all(target_shape.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  ir::Attrs everything;
  everything.set("axes", all);
  everything.set("keepdims", false);
  KILN_ASSIGN_OR_RETURN(Value total, ctx.apply(node, Op::ReduceSum, {loss}, everything));
  if (reduction == "sum") return total;
  KILN_ASSIGN_OR_RETURN(Value total_weight, ctx.apply(node, Op::ReduceSum, {w}, everything));
  return ctx.apply(node, Op::Div, {total, total_weight});
}

Result<std::optional<Value>> optional_input(Context& ctx, const onnx::NodeProto& node, int index) {
  if (!Context::has_input(node, index)) return std::optional<Value>();
  KILN_ASSIGN_OR_RETURN(Value v, ctx.input(node, index));
  return std::optional(v);
}

Status convert_nll(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"ignore_index", "reduction"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value target, ctx.input(node, 1));
  KILN_ASSIGN_OR_RETURN(auto weight, optional_input(ctx, node, 2));
  KILN_ASSIGN_OR_RETURN(Value loss, nll_loss(ctx, node, x, target, weight));
  return define_output(ctx, node, 0, loss);
}

// log_softmax over the class dim, then the negative log-likelihood; the second output,
// where asked for, is the log-probabilities.
Status convert_softmax_cross_entropy(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"ignore_index", "reduction"}));
  KILN_ASSIGN_OR_RETURN(Value scores, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value labels, ctx.input(node, 1));
  ir::Attrs attrs;
  attrs.set("axis", int64_t{1});
  KILN_ASSIGN_OR_RETURN(Value log_prob, ctx.apply(node, Op::LogSoftmax, {scores}, std::move(attrs)));
  KILN_ASSIGN_OR_RETURN(auto weight, optional_input(ctx, node, 2));
  KILN_ASSIGN_OR_RETURN(Value loss, nll_loss(ctx, node, log_prob, labels, weight));
  KILN_RETURN_IF_ERROR(define_output(ctx, node, 0, loss));
  return define_output(ctx, node, 1, log_prob);
}

constexpr OpConverter kConverters[] = {
    {"NegativeLogLikelihoodLoss", convert_nll},
    {"SoftmaxCrossEntropyLoss", convert_softmax_cross_entropy},
};

}  // namespace

std::span<const OpConverter> loss_converters() { return kConverters; }

}  // namespace kiln::onnx_import
