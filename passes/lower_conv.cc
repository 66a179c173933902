#include "passes/lower_conv.h"

#include "ir/decompose.h"

namespace kiln::passes {

Result<bool> LowerConvPass::run(ir::Graph& graph) {
  return ir::lower_convolutions(graph, [&](const ir::Node& n) {
    const ir::DType t = graph.type(n.result).dtype;
    return !keep_library_ || !(t == ir::DType::F32 || t == ir::DType::BF16 || t == ir::DType::F16);
  });
}

}  // namespace kiln::passes
