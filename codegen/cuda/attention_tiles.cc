#include "codegen/cuda/attention_tiles.h"

#include <fmt/format.h>

#include "codegen/cuda/attention_kernel.h"

namespace kiln::codegen::cuda {

using ir::DType;

bool rows_aligned(const ir::StridedView& view, int64_t elements) {
  if (view.offset % elements != 0) return false;
  for (size_t d = 0; d + 1 < view.strides.size(); ++d)
    if (view.strides[d] % elements != 0) return false;
  return true;
}

// Eight elements of row `key` of k or v from `at` (their first) into `e` as halves'
// bits, zero past the keys.
void AttentionTiles::load_chunk(const AttentionOperand& o, const std::string& indent) {
  const int64_t row_stride = o.view->strides[batch_dims_];
  const std::string at = fmt::format("{}o + (long long)key * {}LL + c8", o.name, row_stride);
  line(indent + "unsigned e[4] = {0u, 0u, 0u, 0u};");
  line(fmt::format("{}if (key < {}) {{", indent, keys_));
  // 16-byte loads where the view's rows allow them and (checked as the kernel starts: a
  // caller's device pointer may lie anywhere) k and v are 16-byte aligned.
  const bool vectors = rows_aligned(*o.view, o.dtype == DType::F32 ? 4 : 8);
  if (vectors) line(indent + "  if (kv_aligned) {");
  if (vectors && o.dtype != DType::F32) {
    line(fmt::format("{}    const kiln_vec4<unsigned> x = *reinterpret_cast<const kiln_vec4<unsigned>*>({} + {});",
                     indent, o.name, at));
    line(indent + "    e[0] = x.v[0]; e[1] = x.v[1]; e[2] = x.v[2]; e[3] = x.v[3];");
  } else if (vectors) {
    line(fmt::format("{}    const kiln_vec4<float> x0 = *reinterpret_cast<const kiln_vec4<float>*>({} + {});", indent,
                     o.name, at));
    line(fmt::format("{}    const kiln_vec4<float> x1 = *reinterpret_cast<const kiln_vec4<float>*>({} + {} + 4);",
                     indent, o.name, at));
    line(indent + "    e[0] = kiln_att_pack(x0.v[0], x0.v[1]); e[1] = kiln_att_pack(x0.v[2], x0.v[3]);");
    line(indent + "    e[2] = kiln_att_pack(x1.v[0], x1.v[1]); e[3] = kiln_att_pack(x1.v[2], x1.v[3]);");
  }
  if (vectors) line(indent + "  } else {");
  auto element = [&](const std::string& plus) {
    const std::string stored = fmt::format("{}[{} + i{}]", o.name, at, plus);
    return o.dtype == DType::F32 ? stored : fmt::format("{}({})", half_to_f32_, stored);
  };
  const std::string inner = indent + (vectors ? "    " : "  ");
  line(inner + "#pragma unroll");
  line(fmt::format("{}for (int i = 0; i < 8; i += 2) e[i / 2] = kiln_att_pack({}, {});", inner, element(""),
                   element(" + 1")));
  if (vectors) line(indent + "  }");
  line(indent + "}");
}

// A loop over the 16-byte chunks of tile `tile` of k or v (`cols` halves a row), a
// thread's at a time: chunk c is row r's halves c8.., of key `key`.
void AttentionTiles::open_tile_chunks(int64_t cols, const std::string& indent, const std::string& tile) {
  line(fmt::format("{}for (int c = threadIdx.x; c < {}; c += {}) {{", indent, kAttentionKeyTile * cols / 8, threads_));
  line(fmt::format("{0}  const int r = c / {1}, c8 = (c % {1}) * 8, key = {2} * {3} + r;", indent, cols / 8, tile,
                   kAttentionKeyTile));
}

// Tile `tile` of k or v (`cols` halves a row) into shared array `smem` as it lies, 16
// bytes a thread at a time, through registers.
void AttentionTiles::store_tile(const AttentionOperand& o, const std::string& smem, int64_t cols,
                                const std::string& indent, const std::string& tile) {
  open_tile_chunks(cols, indent, tile);
  load_chunk(o, indent + "  ");
  line(indent + "  kiln_vec4<unsigned> x; x.v[0] = e[0]; x.v[1] = e[1]; x.v[2] = e[2]; x.v[3] = e[3];");
  line(fmt::format("{}  *reinterpret_cast<kiln_vec4<unsigned>*>(&{}[r][c8]) = x;", indent, smem));
  line(indent + "}");
}

// With cp.async: the tile by cp.async where k and v are 16-byte aligned (copy_tile),
// else an element at a time through registers at the same point of the loop (halves as
// they lie: cp.async takes half-precision rows only), each landing before the barrier
// that follows its wait either way.
void AttentionTiles::async_tile(const AttentionOperand& o, const std::string& smem, int64_t cols,
                                const std::string& indent, const std::string& tile) {
  line(indent + "if (kv_aligned) {");
  copy_tile(o, smem, cols, indent + "  ", tile);
  line(indent + "} else {");
  const int64_t row_stride = o.view->strides[batch_dims_];
  open_tile_chunks(cols, indent + "  ", tile);
  line(indent + "    #pragma unroll");
  line(
      fmt::format("{}    for (int i = 0; i < 8; ++i) {}[r][c8 + i] = key < {} ? {}[{}o + (long long)key * {}LL + c8 + "
                  "i] : (unsigned short)0;",
                  indent, smem, keys_, o.name, o.name, row_stride));
  line(indent + "  }");
  line(indent + "}");
}

// Tile `tile` of k or v into `smem` by cp.async, 16 bytes a thread at a time (zeros past
// the keys), as one commit group.
void AttentionTiles::copy_tile(const AttentionOperand& o, const std::string& smem, int64_t cols,
                               const std::string& indent, const std::string& tile) {
  const int64_t row_stride = o.view->strides[batch_dims_];
  open_tile_chunks(cols, indent, tile);
  if (keys_ % kAttentionKeyTile == 0)  // every tile is whole
    line(fmt::format("{}  kiln_att_copy16(&{}[r][c8], {} + {}o + (long long)key * {}LL + c8, true);", indent, smem,
                     o.name, o.name, row_stride));
  else
    line(fmt::format("{}  kiln_att_copy16(&{}[r][c8], {} + {}o + (long long)min(key, {}) * {}LL + c8, key < {});",
                     indent, smem, o.name, o.name, keys_ - 1, row_stride, keys_));
  line(indent + "}");
  line(indent + "kiln_att_copy_commit();");
}

}  // namespace kiln::codegen::cuda
