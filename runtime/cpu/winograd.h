// Forward 3x3 convolutions of stride 1 as Winograd's minimal filtering (Lavin and Gray,
// "Fast Algorithms for Convolutional Neural Networks", 2015): F(4x4, 3x3) makes each 4x4
// block of outputs from a 6x6 block of inputs with 36 products per pair of channels
// instead of 144, F(2x2, 3x3) each 2x2 block from a 4x4 one with 16 instead of 36. The
// products are (m + 2)² GEMMs, one batched oneDNN matmul, between a transform of the
// input and one of the output; the weights are transformed once, when a session packs
// them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "runtime/cpu/dnnl.h"
#include "runtime/cpu/post_ops.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/cpu/winograd_tiles.h"
#include "runtime/format/artifact.h"

namespace kiln::runtime::cpu {

/// KILN_CPU_WINOGRAD, read once: unset or "on" lets eligible convolutions run as Winograd,
/// "off" keeps them on oneDNN's direct kernels (for comparisons); another value is an
/// error, which loading a CPU artifact returns.
Result<bool> winograd_allowed();

/// Tiles (over the batch and both spatial dims) below which a tile size is not used: with
/// few tiles the transformed weights, 36/9 or 16/9 of the direct ones, are read for
/// little work. A convolution takes 4x4 tiles where it has this many of them, else 2x2
/// ones, else stays direct (ResNet's 7x7 layers, 16 tiles of 2x2, took 1.4x the direct
/// kernel's time; its 14x14 ones 0.9 with 49 tiles of 2x2 and 1.2 with 16 of 4x4; its
/// 28x28 ones 0.64 with 49 tiles of 4x4; docs/cpu.md).
constexpr int64_t kWinogradMinTiles = 40;

/// Input and output channels below which a convolution stays direct: the products'
/// GEMMs are then too thin, and the transforms (whose work grows with C + K, the GEMMs'
/// with C·K) too large a part (16 to 16 channels at 56x56 took 1.39x the direct kernel's
/// time, 16 to 32 at 112x112 1.08x, 32 to 32 at 32x32 0.93x, 64 to 64 at 28x28 0.66x;
/// docs/cpu.md).
constexpr int64_t kWinogradMinChannels = 32;

class WinogradConv {
 public:
  /// The plan for `conv` with x and y channels-last (nhwc), or null where it does not
  /// apply: a CPU without AVX-512, oneDNN without a matmul for the products, or a
  /// convolution that is not forward, 2-D, ungrouped, 3x3, of stride and dilation 1, of
  /// at least kWinogradMinChannels input and output channels in multiples of 16 and at
  /// least kWinogradMinTiles tiles of 2x2, or one whose post-ops include an erf GELU.
  static std::unique_ptr<WinogradConv> plan(const DnnlApi& api, const format::Conv& conv);

  /// The bytes of the transformed weights, in the layout the matmul reads.
  size_t packed_bytes() const { return packed_bytes_; }
  /// Transforms OIHW weights `w` into `to` (packed_bytes of them, 64-byte aligned).
  Status pack(const uint8_t* w, uint8_t* to, int threads) const;
  /// y = the convolution of x (both nhwc) with the packed weights, then the post-ops
  /// (`post`: their operands; an added tensor is read from y itself, where the caller put
  /// it, as oneDNN's sum post-op reads it). The transforms run on `pool`.
  Status run(const uint8_t* x, const uint8_t* packed, uint8_t* y, const PostOpOperands& post, int threads,
             ThreadPool* pool) const;
  /// "winograd_4x4_3x3 + " (or 2x2) and oneDNN's name for the matmul's kernel.
  const std::string& implementation() const { return implementation_; }

 private:
  WinogradConv() = default;
  const DnnlApi* api_ = nullptr;
  WinogradShape shape_{};
  std::vector<WinogradPostOp> post_ops_;
  DnnlPrimitive products_, pack_reorder_;
  dnnl_memory_desc_t v_md_{}, u_plain_md_{}, u_md_{}, m_md_{};
  size_t packed_bytes_ = 0;
  std::string what_, implementation_;
};

}  // namespace kiln::runtime::cpu
