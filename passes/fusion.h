// fusion: partitions a decomposed graph into kernels and library calls (a Program).
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

/// Groups nodes into steps, visiting them from the results backwards. A node joins the
/// group of its users when all its users are in that one group, it is not a result, its
/// shape fits the group, and the group stays within its budget. Because of that rule
/// there is never a cycle, and no node with several users is computed twice. The only
/// copies are of constants and iota, which each kernel that reads them recomputes.
///   - loop kernels: elementwise and movement ops (cos∘cos, bias + gelu, the epilogue
///     after a matmul); an operand that a broadcast or gather would repeat stays outside
///     unless it is a scalar;
///   - reduction kernels: reductions over one shape S and axes R, their elementwise
///     producers (input fusion), and elementwise consumers of shape S or of the row
///     shape, with broadcasts of row values over the row, so softmax and layer_norm are
///     one kernel per row;
///   - library calls: matmul, with the transposes of its last two dims that feed only it
///     (BLAS takes transposed operands, so they are never copied); scatter_add, alone.
/// With `fuse` false every node is a step of its own (the unfused baseline).
class FusionPass : public Pass {
 public:
  static constexpr int kMaxNodes = 64;   ///< ops per kernel (constants not counted)
  static constexpr int kMaxInputs = 16;  ///< distinct values a kernel reads

  explicit FusionPass(bool fuse = true) : fuse_(fuse) {}
  std::string_view name() const override { return "fusion"; }
  Result<bool> run(ir::Graph& graph) override;
  bool preserves_program() const override { return true; }

 private:
  bool fuse_;
};

}  // namespace kiln::passes
