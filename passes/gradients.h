// The gradient rules of reverse-mode autodiff: one short rule per differentiable op,
// in one table keyed by op (passes/gradients.cc).
#pragma once

#include <vector>

#include "base/result.h"
#include "ir/builder.h"

namespace kiln::passes {

/// In a rule's result: no gradient flows to this operand by definition (select's
/// condition, gather's indices, cross_entropy's labels).
inline constexpr ir::ValueId kNoGradient = -1;
/// In a rule's result: a gradient would flow here, but the operand is not
/// differentiable (it is bool or integer); autodiff reports it if the operand depends on
/// a --wrt argument.
inline constexpr ir::ValueId kNotDifferentiable = -2;

/// A rule: given node n (its operands and its forward result n.result) and the gradient
/// g of the loss with respect to n.result, emits the backward nodes with `b` and returns
/// one gradient per operand, each of the operand's type (or one of the markers above).
using GradientRule = std::vector<ir::ValueId> (*)(ir::GraphBuilder& b, const ir::Node& n, ir::ValueId g);

/// The rule for an op, or nullptr when the op is not differentiable (comparisons,
/// logic, floor, ceil, argmax, iota, constant) or is differentiated through its
/// decomposition (silu, linear, mse_loss, cross_entropy).
GradientRule gradient_rule(ir::Op op);
/// Whether autodiff uses n's own rule; otherwise n is decomposed first (composites
/// without a rule, and calls without a `backward` function).
bool has_direct_rule(const ir::Node& n);

/// Sums v down to `shape`, undoing numpy-style broadcasting (leading dims, and dims
/// where `shape` has 1).
ir::ValueId sum_to_shape(ir::GraphBuilder& b, ir::ValueId v, const ir::Shape& shape);

}  // namespace kiln::passes
