// dce: removes nodes whose values nothing uses.
#pragma once

#include <map>
#include <string>

#include "ir/tensor.h"
#include "passes/pass.h"

namespace kiln::passes {

/// Dead-code elimination; ops have no side effects, so a node is live only when a
/// result or a live node uses its value.
class DcePass : public Pass {
 public:
  std::string_view name() const override { return "dce"; }
  Result<bool> run(ir::Graph& graph) override;
};

/// The params no node reads (nor the results) dropped from g's args and their weights from
/// `weights`: what dce leaves unread once it has removed the nodes (the compile-time weight
/// folds, the ONNX import).
void drop_unread_params(ir::Graph& g, std::map<std::string, ir::Tensor>& weights);

}  // namespace kiln::passes
