// Loop kernels walked in tiles: an input read across rows (ir/element_probe.h) takes a
// cache line per element when the kernel walks a row at a time (a transpose of
// [128,1024] ran at 0.04 of copy). In square tiles of one vector of f32 a side, each such
// input is first loaded into a stack buffer along its own lines (down each column of the
// tile, one vector per column where the rows' indices are consecutive), transposed there
// by vector shuffles, and the tile's rows then read the buffer along theirs, vectorized
// (docs/cpu.md has the measurements). Every index is the element walker's, as in the row
// walk: filling keeps only the loads of those inputs.
#include <llvm/IR/IRBuilder.h>

#include <algorithm>
#include <functional>

#include "codegen/cpu/kernel_emitter_class.h"
#include "codegen/cpu/scalar_ops.h"

namespace kiln::codegen::cpu::detail {

bool KernelEmitter::tiles_fit(const ir::ReadAcrossRows& across) const {
  const Shape& shape = type(step_.outputs[0]).shape;
  const size_t dim = static_cast<size_t>(across.dim);
  int64_t columns = 1;
  for (size_t d = dim + 1; d < shape.size(); ++d) columns *= shape[d];
  return shape[dim] >= tile_side() && columns >= tile_side() &&
         std::all_of(across.inputs.begin(), across.inputs.end(),
                     [&](ValueId x) { return compute_type(ctx_, type(x).dtype)->isFloatTy(); });
}

Status KernelEmitter::emit_tiles(const ir::ReadAcrossRows& read_across,
                                 const std::function<Status(llvm::Value*, llvm::Value*)>& walk_rows) {
  const std::vector<ValueId>& across = read_across.inputs;
  const int64_t side = tile_side();
  const Shape& shape = type(step_.outputs[0]).shape;
  // Rows over the dims up to the one they run down, columns over the dims after it.
  const auto split = shape.begin() + read_across.dim + 1;
  const Shape leading(shape.begin(), split), trailing(split, shape.end());
  const int64_t last = ir::num_elements(trailing);
  const int64_t rows_per_run = leading.back();  // rows of one index of the dims before
  llvm::Value* begin = fn_->getArg(1);
  llvm::Value* end = fn_->getArg(2);
  // A tile's column is a vector: copied by a call to memcpy (LLVM's idiom for the fill)
  // it took longer than the loads it replaced.
  fn_->addFnAttr("no-builtin-memcpy");
  llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  auto buffer = [&] {
    llvm::AllocaInst* tile = entry.CreateAlloca(llvm::ArrayType::get(b_.getFloatTy(), side * side));
    tile->setAlignment(llvm::Align(64));
    return tile;
  };
  for (ValueId x : across) tile_buffers_[x] = TileBuffers{buffer(), buffer()};
  auto outputs_at_column = [&](const Index& row, llvm::Value* c) {
    Index idx = row;
    if (trailing.size() == 1) idx.dims.push_back(c);
    else
      for (llvm::Value* d : unflatten(c, trailing).dims) idx.dims.push_back(d);
    return outputs_at(idx);
  };
  // A tile is rows [band_first, band_first + side), all in the work range, by columns
  // [chunk_first, chunk_end). A whole one is side columns wide, and its rows share every
  // index but the last of theirs (a row's index is then the band's first plus j): its
  // loops have constant trip counts. Each phase is emitted for whole tiles and for parts
  // of one, and the transpose between once: emitted twice, LLVM took twice as long over
  // a kernel.
  struct Tile {
    llvm::Value *whole, *band_first, *chunk_first, *chunk_end;
    const Index& band_row;  // the index of the band's first row
  };
  auto row_index = [&](const Tile& t, bool whole, llvm::Value* j) {
    if (!whole) return unflatten(b_.CreateAdd(t.band_first, j), leading);
    Index row = t.band_row;
    row.dims.back() = b_.CreateAdd(row.dims.back(), j);
    return row;
  };
  auto width = [&](const Tile& t, bool whole) { return whole ? i64(side) : b_.CreateSub(t.chunk_end, t.chunk_first); };
  // Loads each input's elements of the tile into its buffer, column by column.
  auto fill = [&](const Tile& t, bool whole) -> Status {
    return loop(i64(0), width(t, whole), [&](llvm::Value* k) -> Status {
      llvm::Value* c = b_.CreateAdd(t.chunk_first, k);
      llvm::Value* column_at = b_.CreateMul(k, i64(side));
      return loop(
          i64(0), i64(side),
          [&](llvm::Value* j) -> Status {
            tile_at_ = b_.CreateAdd(column_at, j);
            auto values = outputs_at_column(row_index(t, whole, j), c);
            return values.ok() ? Status::Ok() : Status(values.error());
          },
          whole ? Unroll::kVectorOnly : Unroll::kDefault);
    });
  };
  // Computes and stores the tile's outputs row by row, reading those inputs from their buffers.
  auto compute = [&](const Tile& t, bool whole) -> Status {
    return loop(i64(0), i64(side), [&](llvm::Value* j) -> Status {
      llvm::Value* row_chunk = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(t.band_first, j), i64(last)), t.chunk_first);
      llvm::Value* row_at = b_.CreateMul(j, i64(side));
      const Index row = row_index(t, whole, j);
      return loop(
          i64(0), width(t, whole),
          [&](llvm::Value* k) -> Status {
            tile_at_ = b_.CreateAdd(row_at, k);
            KILN_ASSIGN_OR_RETURN(std::vector<llvm::Value*> v, outputs_at_column(row, b_.CreateAdd(t.chunk_first, k)));
            for (size_t o = 0; o < v.size(); ++o)
              store_element(b_, type(step_.outputs[o]).dtype, bases_[slot_[step_.outputs[o]]],
                            b_.CreateAdd(row_chunk, k), v[o]);
            return Status::Ok();
          },
          whole ? Unroll::kVectorOnly : Unroll::kDefault);
    });
  };
  // phase(whole) if t.whole, else phase(part), then on.
  auto both = [&](const Tile& t, const std::function<Status(const Tile&, bool)>& phase) -> Status {
    auto* whole = llvm::BasicBlock::Create(ctx_, "tile.whole", fn_);
    auto* part = llvm::BasicBlock::Create(ctx_, "tile.part", fn_);
    auto* next = llvm::BasicBlock::Create(ctx_, "tile.next", fn_);
    b_.CreateCondBr(t.whole, whole, part);
    b_.SetInsertPoint(whole);
    tile_loops_ = TileLoops::kWhole;
    KILN_RETURN_IF_ERROR(phase(t, true));
    b_.CreateBr(next);
    b_.SetInsertPoint(part);
    tile_loops_ = TileLoops::kPart;
    KILN_RETURN_IF_ERROR(phase(t, false));
    tile_loops_ = TileLoops::kNone;
    b_.CreateBr(next);
    b_.SetInsertPoint(next);
    return Status::Ok();
  };
  auto tile = [&](const Tile& t) -> Status {
    tile_walk_ = TileWalk::kFill;
    KILN_RETURN_IF_ERROR(both(t, fill));
    for (ValueId x : across) transpose_tile(tile_buffers_[x].by_columns, tile_buffers_[x].by_rows);
    tile_walk_ = TileWalk::kRead;
    KILN_RETURN_IF_ERROR(both(t, compute));
    tile_walk_ = TileWalk::kNone;
    return Status::Ok();
  };
  // Bands of `side` rows wholly in the work range are tiled; the rows before and after
  // them (a thread's range may start or end within a band) are walked as rows, in two
  // passes of one loop. As tiles cut by the range, they took twice as long as rows.
  const int64_t band_elements = side * last;
  llvm::Value* bands_from = b_.CreateSDiv(b_.CreateAdd(begin, i64(band_elements - 1)), i64(band_elements));
  llvm::Value* bands_to = b_.CreateSDiv(end, i64(band_elements));
  bands_to = b_.CreateSelect(b_.CreateICmpSGT(bands_to, bands_from), bands_to, bands_from);
  llvm::Value* tiles_begin = b_.CreateMul(bands_from, i64(band_elements));
  tiles_begin = b_.CreateSelect(b_.CreateICmpSLT(tiles_begin, end), tiles_begin, end);
  llvm::Value* tiles_end = b_.CreateMul(bands_to, i64(band_elements));
  tiles_end = b_.CreateSelect(b_.CreateICmpSGT(tiles_end, tiles_begin), tiles_end, tiles_begin);
  KILN_RETURN_IF_ERROR(loop(i64(0), i64(2), [&](llvm::Value* pass) -> Status {
    llvm::Value* before = b_.CreateICmpEQ(pass, i64(0));
    return walk_rows(b_.CreateSelect(before, begin, tiles_end), b_.CreateSelect(before, tiles_begin, end));
  }));
  const int64_t chunks = (last + side - 1) / side;
  Status done = loop(bands_from, bands_to, [&](llvm::Value* band) -> Status {
    llvm::Value* band_first = b_.CreateMul(band, i64(side));
    const Index band_row = unflatten(band_first, leading);
    llvm::Value* one_run =
        b_.CreateICmpSLE(b_.CreateAdd(b_.CreateSRem(band_first, i64(rows_per_run)), i64(side)), i64(rows_per_run));
    return loop(i64(0), i64(chunks), [&](llvm::Value* chunk) -> Status {
      llvm::Value* chunk_first = b_.CreateMul(chunk, i64(side));
      llvm::Value* chunk_end = b_.CreateAdd(chunk_first, i64(side));
      llvm::Value* chunk_whole = b_.CreateICmpSLE(chunk_end, i64(last));
      chunk_end = b_.CreateSelect(chunk_whole, chunk_end, i64(last));
      return tile(Tile{b_.CreateAnd(one_run, chunk_whole), band_first, chunk_first, chunk_end, band_row});
    });
  });
  tile_buffers_.clear();
  return done;
}

// Rounds of interleaving the vectors of rows k and k + side/2, log2(side) of them, make
// rows of columns: vector shuffles (one two-source permute each with AVX-512).
void KernelEmitter::transpose_tile(llvm::Value* from, llvm::Value* to) {
  const int64_t side = tile_side();
  auto* row_type = llvm::FixedVectorType::get(b_.getFloatTy(), side);
  std::vector<llvm::Value*> rows;
  for (int64_t k = 0; k < side; ++k)
    rows.push_back(b_.CreateAlignedLoad(row_type, b_.CreateConstGEP1_64(b_.getFloatTy(), from, k * side),
                                        llvm::Align(static_cast<uint64_t>(side) * 4)));
  std::vector<int> low, high;
  for (int k = 0; k < side / 2; ++k) {
    low.insert(low.end(), {k, k + static_cast<int>(side)});
    high.insert(high.end(), {k + static_cast<int>(side) / 2, k + static_cast<int>(side) * 3 / 2});
  }
  for (int64_t width = 1; width < side; width *= 2) {
    std::vector<llvm::Value*> next(rows.size());
    for (size_t k = 0; k < rows.size() / 2; ++k) {
      next[2 * k] = b_.CreateShuffleVector(rows[k], rows[k + rows.size() / 2], low);
      next[2 * k + 1] = b_.CreateShuffleVector(rows[k], rows[k + rows.size() / 2], high);
    }
    rows = std::move(next);
  }
  for (int64_t k = 0; k < side; ++k)
    b_.CreateAlignedStore(rows[static_cast<size_t>(k)], b_.CreateConstGEP1_64(b_.getFloatTy(), to, k * side),
                          llvm::Align(static_cast<uint64_t>(side) * 4));
}

}  // namespace kiln::codegen::cpu::detail
