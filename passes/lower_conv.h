// lower-conv: convolutions (conv, conv_input_grad, conv_weight_grad) as im2col and matmuls.
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

/// Rewrites each convolution into strided slices of its padded input (which fusion makes
/// one gather kernel) and a matmul per group: for targets without a convolution library
/// (CUDA, until cuDNN). The CPU runs convolutions on oneDNN: with keep_library, those of
/// f32, bf16 and f16 stay library ops and only the others (f64) are lowered.
class LowerConvPass : public Pass {
 public:
  explicit LowerConvPass(bool keep_library = false) : keep_library_(keep_library) {}
  std::string_view name() const override { return "lower-conv"; }
  Result<bool> run(ir::Graph& graph) override;

 private:
  bool keep_library_;
};

}  // namespace kiln::passes
