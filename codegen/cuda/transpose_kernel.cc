// A step that only transposes, moving the innermost dim: through shared memory a tile at
// a time, so that both the reads and the writes run along a row. The loop kernel reads
// such a transpose an element per output element at a stride of a whole row: attention's
// kᵀ and v's heads in a training step ran at 0.18 of copy on an H200
// (docs/benchmarks.md).
#include <fmt/format.h>

#include "codegen/cuda/kernel_emitter_class.h"

namespace kiln::codegen::cuda::detail {

namespace {

constexpr int kTile = 32;  // a warp's row of the tile; kLoopThreads / kTile rows at a time

std::vector<int64_t> row_major_strides(const Shape& s) {
  std::vector<int64_t> strides(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) strides[d - 1] = strides[d] * s[d];
  return strides;
}

}  // namespace

const Node* KernelEmitter::tiled_transpose() const {
  if (step_.kind != ir::StepKind::Loop || step_.nodes.size() != 1 || step_.outputs.size() != 1) return nullptr;
  const Node& n = g_.nodes[step_.nodes[0]];
  if (n.op != Op::Transpose || n.result != step_.outputs[0] || computed_here(n.operands[0])) return nullptr;
  const std::vector<int64_t>& perm = n.attrs.get_ints("perm");
  const int64_t rank = static_cast<int64_t>(perm.size());
  if (rank < 2 || perm.back() == rank - 1) return nullptr;  // the innermost dim stays: rows already run along
  return &n;
}

Status KernelEmitter::transpose_kernel(const Node& n, Launch& launch) {
  const Shape& in = type(n.operands[0]).shape;
  const Shape& out = type(n.result).shape;
  const std::vector<int64_t>& perm = n.attrs.get_ints("perm");
  const int64_t rank = static_cast<int64_t>(in.size());
  const std::vector<int64_t> in_strides = row_major_strides(in), out_strides = row_major_strides(out);
  std::vector<int64_t> out_dim_of(static_cast<size_t>(rank));  // the output dim each input dim becomes
  for (int64_t d = 0; d < rank; ++d) out_dim_of[static_cast<size_t>(perm[static_cast<size_t>(d)])] = d;
  // The tile: input dim `a` (innermost in the input) by input dim `b` (innermost in the
  // output); every other dim is a batch of tiles.
  const int64_t a = rank - 1, b = perm.back();
  const int64_t extent_a = in[static_cast<size_t>(a)], extent_b = in[static_cast<size_t>(b)];
  const int64_t tiles_a = (extent_a + kTile - 1) / kTile, tiles_b = (extent_b + kTile - 1) / kTile;
  int64_t batches = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (d != a && d != b) batches *= in[static_cast<size_t>(d)];
  const int64_t tiles = batches * tiles_a * tiles_b;
  launch.block_threads = kLoopThreads;
  launch.grid_blocks = tiles;
  const std::string t(storage_type(type(n.result).dtype)), x = param(n.operands[0]), y = param(n.result);
  // Odd rows keep a column's elements in different banks.
  line(fmt::format("__shared__ {} tile[{}][{}];", t, kTile, kTile + 1));
  line(fmt::format("const int tx = threadIdx.x % {0}, ty = threadIdx.x / {0};", kTile));
  open(fmt::format("for (long long w = blockIdx.x; w < {}LL; w += gridDim.x)", tiles));
  line(fmt::format("const long long ta = w % {0}LL, tb = w / {0}LL % {1}LL;", tiles_a, tiles_b));
  line(fmt::format("long long rest = w / {}LL, in_at = 0, out_at = 0;", tiles_a * tiles_b));
  for (int64_t d = rank; d-- > 0;) {
    if (d == a || d == b) continue;
    line(fmt::format("{{ const long long i = rest % {0}LL; rest /= {0}LL; in_at += i * {1}LL; out_at += i * {2}LL; }}",
                     in[static_cast<size_t>(d)], in_strides[static_cast<size_t>(d)],
                     out_strides[static_cast<size_t>(out_dim_of[static_cast<size_t>(d)])]));
  }
  line("__syncthreads();");  // the last tile's reads of `tile` are done
  open(fmt::format("for (int r = ty; r < {}; r += {})", kTile, kLoopThreads / kTile));
  line(fmt::format("const long long ib = tb * {0} + r, ia = ta * {0} + tx;", kTile));
  line(fmt::format("if (ib < {}LL && ia < {}LL) tile[r][tx] = {}[in_at + ib * {}LL + ia];", extent_b, extent_a, x,
                   in_strides[static_cast<size_t>(b)]));
  close();
  line("__syncthreads();");
  open(fmt::format("for (int r = ty; r < {}; r += {})", kTile, kLoopThreads / kTile));
  line(fmt::format("const long long ia = ta * {0} + r, ib = tb * {0} + tx;", kTile));
  line(fmt::format("if (ia < {}LL && ib < {}LL) {}[out_at + ia * {}LL + ib] = tile[tx][r];", extent_a, extent_b, y,
                   out_strides[static_cast<size_t>(out_dim_of[static_cast<size_t>(a)])]));
  close();
  close();
  return Status::Ok();
}

}  // namespace kiln::codegen::cuda::detail
