// The elementwise ops after a convolution that its library call applies on the way out
// (oneDNN's bias and post-ops), so that they are no kernels of their own.
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"

namespace kiln::ir {

struct ConvPostOp {
  /// Channel*: the result and a per-channel value, as the inference form of batch norm
  /// gives them (x - mean, times scale / sqrt(var + eps), plus bias).
  /// Silu: x·sigmoid(x); HardSwish: x·clip(x/6 + 1/2, 0, 1).
  enum class Kind { Bias, Relu, Clip, Add, ChannelAdd, ChannelSub, ChannelMul, Sigmoid, Tanh, Silu, HardSwish };
  Kind kind;
  /// Bias and Channel*: the [O] values (any shape of O elements); Add: a tensor of the
  /// result's shape.
  ValueId operand = kNoValue;
  double lo = 0, hi = 0;  ///< Clip's bounds
};

/// A forward f32 convolution and the chain of single-use ops after it: an add of a
/// per-channel bias (broadcast over every dim but 1), then any of relu, sigmoid, tanh, a
/// clip (maximum and minimum with constants), x·sigmoid(x), hard swish (x times the clip
/// of x/6 + 1/2 to [0, 1], as ONNX's HardSwish imports), per-channel adds, subtractions
/// and products (batch norm), and one add of a tensor of the result's shape (a residual).
struct ConvEpilogue {
  int conv = -1;
  /// Every node the call computes besides the convolution: the chain's ops, the bias's
  /// broadcast (and single-use reshapes before it), the clip bounds' constants.
  std::vector<int> nodes;
  std::vector<ConvPostOp> post_ops;  ///< in the order they apply
  ValueId result = kNoValue;         ///< the last op's: what the call writes
};

/// The epilogue of every forward convolution that has one, by graph order.
std::vector<ConvEpilogue> conv_epilogues(const Graph& g);

}  // namespace kiln::ir
