#include "passes/lower_conv.h"

#include "ir/decompose.h"

namespace kiln::passes {

Result<bool> LowerConvPass::run(ir::Graph& graph) {
  return ir::lower_convolutions(
      graph, [&](const ir::Node& n) { return !keep_f32_ || graph.type(n.result).dtype != ir::DType::F32; });
}

}  // namespace kiln::passes
