// canonicalize: algebraic identities and folding of small constants.
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

/// Simplifies the graph to a fixed point:
///   x+0, 0+x, x-0, x*1, 1*x, x/1 -> x (0 and 1 may be broadcast constants);  neg(neg x) -> x;  cast to the same type
///   -> x; transpose(transpose x) -> one transpose (or x);  reshape(reshape x) -> one reshape; reshape, broadcast,
///   slice or transpose that changes nothing -> x; reshape(matmul(reshape(x), w)) of a matrix w that flattens rows
///   and splits them back -> matmul(x, w) (x reshaped to the outer leading dims); add(concat(a, 0), concat(0, b))
///   along one axis, each side's pieces over the other's zeros -> concat(a, b) (the sum of a value's slice
///   gradients); ops whose operands are all constants and whose result has at most kMaxFoldElements elements ->
///   a constant; an op with no elements, or a matmul that sums nothing (a contracted dim of 0) -> a broadcast
///   zero; transpose(matmul(a, b)) of matrices whose product nothing else reads -> matmul(bᵀ, aᵀ) (a weight
///   gradient stored in the weight's own layout).
/// Nodes left without users are removed.
class CanonicalizePass : public Pass {
 public:
  static constexpr int64_t kMaxFoldElements = 64;
  std::string_view name() const override { return "canonicalize"; }
  Result<bool> run(ir::Graph& graph) override;
};

}  // namespace kiln::passes
