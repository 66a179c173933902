// The elementwise ops after a convolution or an f32 matmul that its library call applies
// on the way out (oneDNN's bias and post-ops), so that they are no kernels of their own.
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"

namespace kiln::ir {

struct PostOp {
  /// Channel*: the result and a per-channel value, as the inference form of batch norm
  /// gives them (x - mean, times scale / sqrt(var + eps), plus bias).
  /// Silu: x·sigmoid(x); HardSwish: x·clip(x/6 + 1/2, 0, 1).
  /// GeluErf: x·(1 + erf(x/√2))/2; GeluTanh: x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))/2.
  enum class Kind {
    Bias,
    Relu,
    Clip,
    Add,
    ChannelAdd,
    ChannelSub,
    ChannelMul,
    Sigmoid,
    Tanh,
    Silu,
    HardSwish,
    GeluErf,
    GeluTanh
  };
  Kind kind;
  /// Bias and Channel*: the values per channel (any shape of that many elements); Add: a
  /// tensor of the result's shape.
  ValueId operand = kNoValue;
  double lo = 0, hi = 0;  ///< Clip's bounds
};

/// A library call and the chain of single-use ops after it. The call is a forward f32
/// convolution (its channels: dim 1) or, where asked, an f32 matmul (its channels: the
/// result's columns); also a bf16 or f16 convolution, or with oneDNN's epilogues matmul,
/// whose product is cast to f32 (autocast's), the chain then applying to the f32 sums, the
/// cast and any cast of the chain's result back to the call's type (unless the chain adds
/// a residual) joining it. The chain: an add of a per-channel bias (a
/// broadcast of those values over every other dim), then any of relu, sigmoid, tanh, a clip (maximum and minimum with
/// constants), x·sigmoid(x), hard swish (x times the clip of x/6 + 1/2 to [0, 1], as
/// ONNX's HardSwish imports), GELU in either form (in whatever arrangement of adds,
/// products, quotients, powers and its one erf or tanh a model writes it, recognized by
/// value: gelu_function); after a convolution also per-channel adds, subtractions and
/// products (batch norm) and one add of a tensor of the result's shape (a residual).
struct Epilogue {
  int call = -1;  ///< the convolution or matmul node
  /// Every node the call computes besides itself: the chain's ops, the bias's broadcast
  /// (and single-use reshapes before it), the constants and splats only the chain reads.
  std::vector<int> nodes;
  std::vector<PostOp> post_ops;  ///< in the order they apply
  ValueId result = kNoValue;     ///< the last op's: what the call writes
};

/// Which library applies f32 matmuls' epilogues, and so which chains it takes.
enum class MatmulEpilogues {
  kNone,    ///< matmuls write their product only
  kOneDnn,  ///< the CPU's: every chain above
  /// CUDA's cublasLtMatmul: a bias, then at most one of relu and GELU's tanh form (its
  /// epilogues BIAS, RELU, RELU_BIAS, GELU, GELU_BIAS; its GELU is the tanh form, so an
  /// erf GELU stays a kernel's).
  kCublasLt,
};

/// The epilogue of every forward convolution that has one and of every f32 matmul that
/// `matmuls` takes, by graph order. `folds` (matmul_operand_folds, or empty) names the
/// movement ops that matmul calls read through: a bias alone joins a matmul whose sum a
/// library call reads, through them or directly (or that is a result).
std::vector<Epilogue> library_epilogues(const Graph& g, MatmulEpilogues matmuls, const std::vector<int>& folds = {});

/// Whether the post-ops, in order, are a chain that `matmuls`' library applies (the
/// artifact reader checks CUDA's chains again itself: runtime/format cannot include ir/).
bool applies_post_ops(MatmulEpilogues matmuls, const std::vector<PostOp>& post_ops);

/// Which GELU the nodes compute from x, in graph order, each reading x, another of them or
/// scalar constants (and broadcasts of them) only, the last one's result being the
/// function's: they are evaluated in f64 at points from -1000 to 1000 and must agree with
/// one form within 1e-6·(1 + |x|) (the f32 rounding of the constants a model writes, such
/// as 1.4142135 for √2, stays far inside that; the two forms differ by 5e-4 near |x| = 2.7).
/// `producers` is g.producers().
std::optional<PostOp::Kind> gelu_function(const Graph& g, const std::vector<int>& producers, ValueId x,
                                          const std::vector<int>& nodes);

}  // namespace kiln::ir
