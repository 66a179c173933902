// autodiff: reverse-mode differentiation of a graph's scalar loss.
#pragma once

#include <string>
#include <vector>

#include "passes/pass.h"

namespace kiln::passes {

/// Differentiates the graph's first result (a floating-point scalar loss) with respect
/// to the named arguments. The graph afterwards returns its original results followed by
/// one gradient per argument, named %grad_NAME, in `wrt` order. The backward nodes use
/// the forward values (nothing is recomputed); nodes no result needs are removed.
/// Composites with a direct rule (softmax, log_softmax, layer_norm, gelu) keep it; the
/// others (and calls without a custom backward) are differentiated through their
/// decomposition. A gradient that would flow through a comparison, argmax, floor, ceil or
/// an integer value is an error naming the op and the value.
class AutodiffPass : public Pass {
 public:
  explicit AutodiffPass(std::vector<std::string> wrt) : wrt_(std::move(wrt)) {}
  std::string_view name() const override { return "autodiff"; }
  Result<bool> run(ir::Graph& graph) override;

 private:
  std::vector<std::string> wrt_;
};

}  // namespace kiln::passes
