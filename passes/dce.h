// dce: removes nodes whose values nothing uses.
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

/// Dead-code elimination; ops have no side effects, so a node is live only when a
/// result or a live node uses its value.
class DcePass : public Pass {
 public:
  std::string_view name() const override { return "dce"; }
  Result<bool> run(ir::Graph& graph) override;
};

}  // namespace kiln::passes
