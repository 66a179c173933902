// decompose: composite ops (softmax, layer_norm, gelu, ...) to primitives.
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

/// Rewrites every composite op into primitive ops; the rules live in ir/decompose.
class DecomposePass : public Pass {
 public:
  std::string_view name() const override { return "decompose"; }
  Result<bool> run(ir::Graph& graph) override;
};

}  // namespace kiln::passes
