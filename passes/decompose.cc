#include "passes/decompose.h"

#include "ir/decompose.h"

namespace kiln::passes {

Result<bool> DecomposePass::run(ir::Graph& graph) { return ir::decompose_composites(graph); }

}  // namespace kiln::passes
