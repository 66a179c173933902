// fusion: partitions a decomposed graph into kernels and library calls (a Program).
#pragma once

#include "ir/attention_match.h"
#include "ir/epilogue.h"
#include "passes/pass.h"
#include "passes/recompute.h"
#include "passes/step_order.h"

namespace kiln::passes {

/// The fusion pass's options (`fusion{...}`). With `fuse` false every node is a step of
/// its own (the unfused baseline). `matmul_epilogues` names the library that applies a
/// matmul's post-ops where the runtime has one: oneDNN's (the CPU's), or cublasLt's
/// (CUDA's, a bias and relu or tanh GELU); `matmul_views` for those that read a matmul's
/// operands through the transposes, slices and reshapes before it by strides
/// (ir/matmul_views.h; both targets'), with `single_batch_views` only where the batch dims
/// still fold into one strided-batched call (CUDA's); `attention` names the runtime that
/// runs softmax(f(q·kᵀ))·v as one step, and so which matches become steps
/// (ir/attention_match.h: the CPU's, or CUDA's kernel), and with `attention_gradient` its
/// backward too (passes/attention_split.h); `recompute` which ops a kernel
/// recomputes rather than read another kernel's value back (passes/recompute.h: none,
/// inline ones, all); `order` which ready step runs first (passes/step_order.h: the one
/// that frees the most memory, or the graph's order).
struct FusionOptions {
  bool fuse = true;
  ir::MatmulEpilogues matmul_epilogues = ir::MatmulEpilogues::kNone;
  bool matmul_views = false;
  ir::AttentionRunner attention = ir::AttentionRunner::kNone;
  bool attention_gradient = true;
  bool single_batch_views = false;
  RecomputeOps recompute = RecomputeOps::kAll;
  StepOrder order = StepOrder::kMemory;
};

/// Groups nodes into steps, visiting them from the results backwards. A node joins the
/// group of its users when its shape fits the group and the group stays within its
/// budget. When the node is a result, or has users in other groups too, it joins as an
/// extra output of the kernel (multi-output fusion): only if its shape is the kernel's
/// iteration shape and no group of its other users can reach the kernel, so there is
/// never a cycle. No node is computed twice except constants and iota, which each kernel
/// that reads them recomputes.
///   - loop kernels: elementwise and movement ops (cos∘cos, bias + gelu, the epilogue
///     after a matmul); an operand that a broadcast or gather would repeat stays outside
///     unless it is a scalar;
///   - reduction kernels: reductions over one shape S and axes R, their elementwise
///     producers (input fusion), and elementwise consumers of shape S or of the row
///     shape, with broadcasts of row values over the row, so softmax and layer_norm are
///     one kernel per row;
///   - library calls: matmul, with the transposes of its last two dims that feed only it
///     (BLAS takes transposed operands, so they are never copied); a forward f32
///     convolution, and an f32 matmul whose library applies its bias and activations
///     (`matmul_epilogues`), with those (ir/epilogue.h); scatter_add, alone.
class FusionPass : public Pass {
 public:
  static constexpr int kMaxNodes = 64;   ///< ops per kernel (constants not counted)
  static constexpr int kMaxInputs = 16;  ///< distinct values a kernel reads
  static constexpr int kMaxOutputs = 8;  ///< values a kernel writes

  explicit FusionPass(FusionOptions options = {}) : options_(options) {}
  std::string_view name() const override { return "fusion"; }
  Result<bool> run(ir::Graph& graph) override;
  bool preserves_program() const override { return true; }

 private:
  FusionOptions options_;
};

}  // namespace kiln::passes
