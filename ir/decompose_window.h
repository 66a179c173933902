// The decompositions of conv, max_pool, avg_pool, pad and batch_norm into primitives:
// windows as strided slices of the padded input (which fusion turns into one gather
// kernel), conv as those slices stacked (im2col) times the weights on the matmul library.
#pragma once

#include "ir/builder.h"
#include "ir/graph.h"
#include "ir/window.h"

namespace kiln::ir {

/// conv, conv_input_grad and conv_weight_grad as im2col and matmuls (ir/decompose.h's
/// lower_convolutions).
ValueId lower_conv(GraphBuilder& b, const Node& n);
ValueId lower_conv_input_grad(GraphBuilder& b, const Node& n);
ValueId lower_conv_weight_grad(GraphBuilder& b, const Node& n);
ValueId decompose_pool(GraphBuilder& b, const Node& n);
ValueId decompose_pad(GraphBuilder& b, const Node& n);
ValueId decompose_batch_norm(GraphBuilder& b, const Node& n);

/// max_pool's gradient at g: each window's g goes to the first maximum among its taps (the
/// taps of the forward's decomposition, which cse then shares). Where the windows tile the
/// input (stride = window, no dilation), the taps' shares are interleaved into place;
/// elsewhere each is put back where its slice came from and they are added.
ValueId max_pool_gradient(GraphBuilder& b, const Node& n, ValueId g);

/// The gradients of a window's taps (shares of for_each_tap's slices, in tap order) put back
/// where each slice came from in the padded input's shape, and added (col2im).
ValueId add_back_taps(GraphBuilder& b, const std::vector<ValueId>& shares, const Window& w, const Shape& padded_shape);
/// From the windows' reach in the padded input back to x's shape: the begin padding cut
/// off, the end cut or filled with zeros.
ValueId unpadded(GraphBuilder& b, ValueId v, const Window& w, const Shape& x_shape);

/// The gradient of a slice {starts, strides} of a tensor of shape `full`: g put back in
/// place, zeros elsewhere (the slice rule of passes/gradients.cc, and col2im).
ValueId unslice(GraphBuilder& b, ValueId g, const Shape& full, const std::vector<int64_t>& starts,
                const std::vector<int64_t>& strides);

}  // namespace kiln::ir
