// lower-conv: convolutions (conv, conv_input_grad, conv_weight_grad) as im2col and matmuls.
#pragma once

#include "passes/pass.h"

namespace kiln::passes {

/// Rewrites each convolution into strided slices of its padded input (which fusion makes
/// one gather kernel) and a matmul per group: for targets without a convolution library
/// (CUDA, until cuDNN). The CPU runs convolutions on oneDNN: with keep_library, those of
/// f32, bf16 and f16 stay library ops, and only the others (f64) and those whose columns
/// beat oneDNN (columns_beat_library) are lowered.
class LowerConvPass : public Pass {
 public:
  /// Long 1-D windows over few positions, with columns that stay in cache (wav2vec2's
  /// positional convolution) ran faster as columns and a GEMM than on oneDNN, whose direct
  /// kernels won on images (a ResNet stem, 5x5 and 7x7 convolutions; docs/cpu.md).
  static constexpr int64_t kManyTaps = 16, kFewPositions = 1024, kMaxColumns = int64_t{1} << 21;
  /// Fewer output channels than one of oneDNN's 16-channel blocks: a 1x1 convolution to
  /// them (a segmentation head's classes) ran padded to the block, several times slower
  /// than the same product as a matmul (docs/cpu.md).
  static constexpr int64_t kFewChannels = 16;
  /// A strided 1-D convolution of one group whose column rows are long (in-channels x
  /// taps of at least kLongRows: wav2vec2's feature encoder, 512 channels by 3 or 2 taps at
  /// stride 2) ran 1.4-1.6x faster as columns and oneDNN's GEMM than on its brgconv, which
  /// kept up at stride 1 (docs/cpu.md); its columns may hold up to kMaxWideColumns elements.
  static constexpr int64_t kLongRows = 1024, kMaxWideColumns = int64_t{1} << 23;

  explicit LowerConvPass(bool keep_library = false) : keep_library_(keep_library) {}
  std::string_view name() const override { return "lower-conv"; }
  Result<bool> run(ir::Graph& graph) override;

  /// A 1-D conv (not depthwise) with more than kManyTaps taps, at most kFewPositions
  /// output positions, and columns (channels x taps x batch x positions) of at most
  /// kMaxColumns elements.
  static bool columns_beat_library(const ir::Graph& graph, const ir::Node& n);
  /// A 1-D conv of one group at a stride above 1 with at least kLongRows channels x taps
  /// per column and at most kMaxWideColumns column elements, which columns_beat_library
  /// also lowers.
  static bool strided_long_rows(const ir::Graph& graph, const ir::Node& n);
  /// A 1x1 convolution (stride 1, no padding, one group) to fewer than kFewChannels
  /// channels over at least kFewPositions pixels: a matmul over them, which
  /// columns_beat_library also lowers.
  static bool pointwise_to_few_channels(const ir::Graph& graph, const ir::Node& n);

 private:
  bool keep_library_;
};

}  // namespace kiln::passes
