// The geometry of the windowed ops (conv, max_pool, avg_pool) over the spatial dims of
// x: [N, C, D1..Dk], and of pad: one place that reads and checks their attributes, shared
// by shape inference, the interpreter and the decompositions.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "ir/attributes.h"
#include "ir/ops.h"
#include "ir/types.h"

namespace kiln::ir {

/// conv, conv_input_grad and conv_weight_grad: library ops, which the CPU runs on oneDNN
/// and other targets lower to im2col and matmuls (ir/decompose.h).
inline bool is_convolution(Op op) { return op == Op::Conv || op == Op::ConvInputGrad || op == Op::ConvWeightGrad; }

/// One windowed op's geometry, each vector with one entry per spatial dim.
struct Window {
  std::vector<int64_t> input;   ///< D_i
  std::vector<int64_t> window;  ///< K_i
  std::vector<int64_t> strides, dilations;
  std::vector<int64_t> pad_lo, pad_hi;
  std::vector<int64_t> output;  ///< E_i
  bool ceil_mode = false;

  int64_t spatial_rank() const { return static_cast<int64_t>(input.size()); }
  /// The input positions one window spans: dil·(K−1) + 1.
  int64_t extent(int64_t d) const { return dilations[d] * (window[d] - 1) + 1; }
  /// The padded input's end (past D + lo) that the last window reaches, which exceeds
  /// D + lo + hi only with ceil_mode.
  int64_t padded_end(int64_t d) const { return (output[d] - 1) * strides[d] + extent(d); }
};

/// The geometry of `op` over x's spatial dims. For conv, `window` is the weights' spatial
/// shape; for the pools it is the `window` attribute. Errors name the op, the shapes and
/// the attribute at fault.
Result<Window> window_of(Op op, const Shape& x, const std::vector<int64_t>& window, const Attrs& attrs);

/// pad's `pads` attribute checked against x: all begin pads, then all end pads.
struct Padding {
  std::vector<int64_t> lo, hi;
};
Result<Padding> padding_of(const Shape& x, const Attrs& attrs);

/// The shape of conv(x, w), max_pool(x), avg_pool(x) or pad(x).
Result<TensorType> infer_window_op(Op op, std::span<const TensorType> in, const Attrs& attrs);

}  // namespace kiln::ir
