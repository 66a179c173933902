// How the bf16/f16 attention kernel's tiles of k and v reach shared memory
// (attention_kernel.cc): by cp.async, or through registers, 16 bytes or one element at a
// time as the views and k's and v's pointers allow. Internal to codegen/cuda.
#pragma once

#include <cstdint>
#include <string>

#include "ir/graph.h"
#include "ir/matmul_views.h"

namespace kiln::codegen::cuda {

/// An operand of the kernel: its parameter name, element type and view.
struct AttentionOperand {
  std::string name;
  ir::DType dtype;
  const ir::StridedView* view;
};

/// Whether every element offset of the view's rows is a multiple of `elements` (its
/// offset and every stride but the last), so a row's chunks of that many load as vectors.
bool rows_aligned(const ir::StridedView& view, int64_t elements);

/// Appends a kernel's tile loads to `body`, which reads operands through their element
/// offsets (`ko`, `vo`: AttentionOperand::name then "o") with `batch_dims` batch dims
/// before each view's rows, and a predicate `kv_aligned` (k's and v's pointers 16-byte
/// aligned) the kernel sets as it starts; tiles of kAttentionKeyTile rows of `keys` in all,
/// `threads` threads a block. A half-precision operand widens with `half_to_f32`.
class AttentionTiles {
 public:
  AttentionTiles(std::string& body, size_t batch_dims, int64_t keys, std::string half_to_f32, int threads)
      : body_(body), batch_dims_(batch_dims), keys_(keys), half_to_f32_(std::move(half_to_f32)), threads_(threads) {}

  /// Tile `tile` of k or v (`cols` halves a row) into shared array `smem` as it lies, 16
  /// bytes a thread at a time, through registers.
  void store_tile(const AttentionOperand& o, const std::string& smem, int64_t cols, const std::string& indent,
                  const std::string& tile);
  /// With cp.async: the tile by cp.async where k and v are 16-byte aligned, else an
  /// element at a time through registers at the same point of the loop.
  void async_tile(const AttentionOperand& o, const std::string& smem, int64_t cols, const std::string& indent,
                  const std::string& tile);

 private:
  void line(const std::string& s) { body_ += "  " + s + "\n"; }
  void load_chunk(const AttentionOperand& o, const std::string& indent);
  void open_tile_chunks(int64_t cols, const std::string& indent, const std::string& tile);
  void copy_tile(const AttentionOperand& o, const std::string& smem, int64_t cols, const std::string& indent,
                 const std::string& tile);

  std::string& body_;
  size_t batch_dims_;
  int64_t keys_;
  std::string half_to_f32_;
  int threads_;
};

}  // namespace kiln::codegen::cuda
