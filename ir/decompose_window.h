// The decompositions of conv, max_pool, avg_pool, pad and batch_norm into primitives:
// windows as strided slices of the padded input (which fusion turns into one gather
// kernel), conv as those slices stacked (im2col) times the weights on the matmul library.
#pragma once

#include "ir/builder.h"
#include "ir/graph.h"

namespace kiln::ir {

ValueId decompose_conv(GraphBuilder& b, const Node& n);
ValueId decompose_pool(GraphBuilder& b, const Node& n);
ValueId decompose_pad(GraphBuilder& b, const Node& n);
ValueId decompose_batch_norm(GraphBuilder& b, const Node& n);

}  // namespace kiln::ir
