// The transforms of Winograd's F(2x2, 3x3) and F(4x4, 3x3) (winograd.h) over a range of
// tiles, with AVX-512: built at -O3 on their own, as score_rows.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/format/artifact.h"

namespace kiln::runtime::cpu {

/// A convolution's shape: x [n, h, w, c] and y [n, oh, ow, k] channels-last, the padding
/// before the first row and column, the tiles' m x m outputs (m = 2 or 4, from (m + 2) x
/// (m + 2) inputs), the tiles (tiles_h x tiles_w per image, `tiles` in all), and the
/// tiles of one pass (`rows` of each matrix of transformed inputs and products).
struct WinogradShape {
  int64_t n, c, h, w, k, oh, ow, pad_top, pad_left, m, tiles_h, tiles_w, tiles, rows;
};

/// A post-op the output transform applies: bias, per-channel add, subtract or multiply,
/// an added tensor, relu, clip, sigmoid, tanh, SiLU, hard swish or tanh GELU.
struct WinogradPostOp {
  format::PostOpKind kind;
  float lo, hi;
};

/// Writes Bᵀ d B for the (m + 2)² input block d of each tile in [begin, end) (zeros outside
/// the image) into v: (m + 2)² matrices [rows, c], matrix i*(m + 2)+j holding element
/// (i, j), tile t in row t - first.
void winograd_input_tiles(const WinogradShape& s, const float* x, float* v, int64_t first, int64_t begin, int64_t end);

/// Writes Aᵀ P A for each tile in [begin, end), P its block of the products p ((m + 2)²
/// matrices [rows, k], tile t in row t - first), into y, then the post-ops in order
/// (`operands[i]` post-op i's per-channel operand; an added tensor is read from y, where
/// the caller put it); outputs past the last row or column are dropped.
void winograd_output_tiles(const WinogradShape& s, const float* p, float* y, const std::vector<WinogradPostOp>& ops,
                           const float* const* operands, int64_t first, int64_t begin, int64_t end);

}  // namespace kiln::runtime::cpu
