// lower-conv: convolutions (conv, conv_input_grad, conv_weight_grad) as im2col and matmuls.
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

/// Rewrites each convolution into strided slices of its padded input (which fusion makes
/// one gather kernel) and a matmul per group: for targets without a convolution library
/// (CUDA, until cuDNN) and for half-precision compiles, whose matmuls autocast then casts.
/// The CPU runs convolutions on oneDNN, so its pipeline leaves them (ir/decompose.h).
/// With keep_f32, f32 convolutions stay library ops (the CPU's, on oneDNN) and only the
/// others are lowered.
class LowerConvPass : public Pass {
 public:
  explicit LowerConvPass(bool keep_f32 = false) : keep_f32_(keep_f32) {}
  std::string_view name() const override { return "lower-conv"; }
  Result<bool> run(ir::Graph& graph) override;

 private:
  bool keep_f32_;
};

}  // namespace kiln::passes
