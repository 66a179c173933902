// cse: one node for each distinct computation.
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

/// Common-subexpression elimination: nodes with the same op, operands, attributes and
/// type are merged into the first one, and the later ones removed.
class CsePass : public Pass {
 public:
  std::string_view name() const override { return "cse"; }
  Result<bool> run(ir::Graph& graph) override;
};

}  // namespace kiln::passes
