// autocast: matmuls and convolutions in half precision, the rest in f32, as PyTorch's
// autocast does.
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

/// Every f32 matmul (and linear, the composite of a matmul and its bias) and convolution
/// (conv, conv_input_grad, conv_weight_grad) takes its operands cast to `precision` (f16
/// or bf16) and gives a result of that type (f32 accumulation inside), cast back to f32
/// for its users; every
/// other op computes in f32, as PyTorch's autocast lists have it for exp, log, pow,
/// rsqrt, softmax, log_softmax, layer_norm, reductions and losses. The casts are
/// elementwise ops, which fusion folds into the kernels beside them. A param that only
/// matmuls and convolutions read becomes a param of `precision` itself (its weights stored at half the
/// size; the compiler rounds them to it). State (a training step's master weights) stays
/// f32, and so do all params with `store_params = false` (a training step's master weights).
/// A param also read by other ops keeps f32 for them, and its casts read a copy in the
/// precision, the param %NAME.bf16 (or .f16; not where that name is taken), whose weights
/// the compiler derives from NAME's (derived_param_source).
class AutocastPass : public Pass {
 public:
  explicit AutocastPass(ir::DType precision, bool store_params = true)
      : precision_(precision), store_params_(store_params) {}
  std::string_view name() const override { return "autocast"; }
  Result<bool> run(ir::Graph& graph) override;

 private:
  ir::DType precision_;
  bool store_params_;
};

/// The param whose weights, rounded, a copy autocast made is given: "wte" for
/// "wte.bf16" or "wte.f16"; empty for any other name.
std::string derived_param_source(std::string_view name);

}  // namespace kiln::passes
