// The emitter of one kernel step's LLVM function. Internal to codegen/cpu: its methods are
// defined in kernel_emitter.cc (loops, streaming stores, loop and scatter kernels),
// element_values.cc (a value at an index), row_kernels.cc (reductions over rows),
// column_sums.cc (sums over leading dims), split_sums.cc (sums split into parts across
// work items, ir/reduction_split.h) and tiled_loops.cc (loop kernels walked in tiles).
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>
#include <functional>
#include <map>
#include <vector>

#include "base/result.h"
#include "ir/element_probe.h"
#include "ir/element_walker.h"
#include "ir/graph.h"
#include "ir/reduction_split.h"
#include "ir/row_class.h"

namespace kiln::codegen::cpu::detail {

using ir::Node;
using ir::Op;
using ir::OpKind;
using ir::Shape;
using ir::ValueId;

class KernelEmitter;
using ElementWalker = ir::ElementWalker<KernelEmitter, llvm::Value*>;
// An index into a value (ir/element_walker.h), and the values already emitted.
using Index = ir::ElementIndex<llvm::Value*>;
using Memo = ElementWalker::Memo;

// What every emission of a row kernel's rows shares.
struct RowKernel {
  const ir::RowClass& rc;
  int64_t row_length;
  Shape keepdims;
  std::vector<ValueId> full_outputs, row_inputs;  // row_inputs: full-shape inputs of contiguous rows
  int last_reduction = -1;                        // the node of the last reduction pass
  bool pipelined = false;                         // whether this emission pipelines rows
  llvm::Value* line_start = nullptr;              // pipelined: the first row position on a line
  // Walked by columns (emit_columns) or added from a split's parts: the sum of the row
  // being emitted, already taken (a double), and its full-shape outputs already written.
  llvm::Value* column_sum = nullptr;
};

// A row whose full-shape outputs are to be written: the current row of a kernel that
// runs one row at a time, or the row before in a pipelined one.
struct RowToWrite {
  Index kept;
  llvm::Value* row_start = nullptr;
  Memo memo;                                  // its row values
  std::map<ValueId, llvm::Value*> row_cache;  // its row buffers
};

// Emits one kernel step (a loop, row or scatter kernel) as a function of the module. Its
// values element by element come from the element walker it derives from, over LLVM values.
class KernelEmitter : public ElementWalker {
 public:
  // `partial`: the first kernel of a split reduction step (kiln_STEP_partial), which sums
  // the parts into scratch, rather than the step's kernel.
  KernelEmitter(const ir::Graph& g, const ir::Step& step, llvm::Module& m, int64_t streaming_bytes, int vector_bytes,
                bool partial = false);

  Status emit();

 private:
  friend ElementWalker;
  llvm::Value* i64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }

  // ---- loops, streaming stores, loop and scatter kernels (kernel_emitter.cc)

  // How loop() may unroll a loop. kVectorOnly: never whole before the vectorizer sees it
  // (which would turn a short fixed-count loop into scalar code), and whole after. kWhole:
  // whole (a loop of a few vector operations). kRolled: not at all. kVectorOnly and kWhole
  // loops run exactly end - begin times (the caller guarantees begin <= end): exiting on
  // i == end rather than i < end, their trip count is a constant wherever end - begin is,
  // even when neither bound is (a chunk of a row), so they vectorize without a remainder
  // loop. A remainder loop's variable index kept the lane sums of softmax's exp pass in
  // memory.
  enum class Unroll { kDefault, kVectorOnly, kWhole, kRolled };

  // Whether a loop's iterations touch memory another iteration touches. A loop kernel's
  // never do (the runtime splits them across threads), nor emit_columns' loops over columns.
  enum class Iterations { kMayDepend, kIndependent };

  // for (i = begin; i < end; ++i) body(i), leaving the builder after the loop. With
  // `interleave`, the vectorizer interleaves that many vectors (else it chooses).
  // Independent iterations (always, in a loop kernel) are said to the vectorizer.
  Status loop(llvm::Value* begin, llvm::Value* end, const std::function<Status(llvm::Value*)>& body,
              Unroll unroll = Unroll::kDefault, int interleave = 0, Iterations iterations = Iterations::kMayDepend);

  // `first` and every block created after it (a loop body, with the loops nested in it).
  std::vector<llvm::BasicBlock*> blocks_from(llvm::BasicBlock* first) const;

  // Stores `outs`, whose values at work index i `values(i)` gives, at flat index flat_at(i)
  // for i in [begin, end). With `stream` (the caller guarantees flat_at(i) = flat_at(0) + i),
  // whole blocks of one cache line (of the smallest output element) are computed into a
  // stack buffer and copied out with non-temporal stores. These skip the read of each
  // destination line that an ordinary store makes, which costs a memory-bound kernel a
  // third of its bandwidth. Whether the buffers allow it is checked here, at run time, so
  // any buffer may be passed.
  Status store_range(llvm::Value* begin, llvm::Value* end, const std::vector<ValueId>& outs, bool stream,
                     const std::function<llvm::Value*(llvm::Value*)>& flat_at,
                     const std::function<Result<std::vector<llvm::Value*>>(llvm::Value*)>& values,
                     const std::function<void(llvm::Value*, int64_t)>& per_block = nullptr);

  // The elements from flat index `at` to the first line boundary of outs[0]'s address,
  // and whether every output's address is on a line boundary there (the caller's buffers
  // decide it at run time). Streaming stores start at that boundary.
  std::pair<llvm::Value*, llvm::Value*> to_line_boundary(const std::vector<ValueId>& outs, llvm::Value* at);

  // Computes `outs` at work indexes [start, start + count) into a stack buffer and copies
  // them out with non-temporal stores from flat index `flat_start` on, which must be on a
  // line boundary of every output (count must fill whole lines).
  Status stream_block(const std::vector<ValueId>& outs, llvm::Value* start, int64_t count, llvm::Value* flat_start,
                      const std::function<Result<std::vector<llvm::Value*>>(llvm::Value*)>& values);

  // Asks for the lines of each input that hold flat indexes [at, at + count) to be brought
  // into L2. A row kernel does this for the next row while it computes the current one:
  // the next row's first pass then reads from cache, where it would otherwise wait on
  // memory with nothing else to do. A loop kernel asks for lines kPrefetchBlocks blocks
  // ahead. A prefetch past the end of a buffer does not fault.
  void prefetch_lines(const std::vector<ValueId>& inputs, llvm::Value* at, int64_t count);

  // Whether outputs of these shapes and this total size are written with streaming stores.
  // Rows (row_length > 0) must each span several lines, or their heads and tails dominate.
  bool worth_streaming(const std::vector<ValueId>& outs, int64_t row_length) const;

  // A loop kernel: its outputs over the work range, streamed where worth it.
  Status emit_loop();
  // The step's outputs at idx, then the values computed for them forgotten.
  Result<std::vector<llvm::Value*>> outputs_at(const Index& idx);
  // Whether a loop kernel reading inputs across rows (ir/element_probe.h) is walked in
  // tiles: at least one whole tile fits down and across, and the tile buffers (f32) hold
  // those inputs' elements.
  bool tiles_fit(const ir::ReadAcrossRows& across) const;
  // A loop kernel's work range walked in tiles of tile_side() by tile_side(): rows down
  // `across.dim`, columns along the dims after it. Rows of a band of tiles the work range
  // only partly holds (a thread's range starts or ends within it) are walked as rows, by
  // walk_rows(flat begin, flat end).
  Status emit_tiles(const ir::ReadAcrossRows& across,
                    const std::function<Status(llvm::Value*, llvm::Value*)>& walk_rows);
  // A tile's side: one vector of f32 (16 with AVX-512, 8 with AVX2), whose transpose takes
  // log2 of it rounds of shuffles; 16 by 16 with AVX2 took LLVM twice as long to compile.
  int64_t tile_side() const { return vector_bytes_ / 4; }
  // Transposes the tile_side() x tile_side() f32 buffer `from` into `to`.
  void transpose_tile(llvm::Value* from, llvm::Value* to);

  // Scalars that depend on no loop (rank-0 inputs, and rank-0 ops on them that no
  // reduction feeds) are computed once, in the entry block, so every use is dominated.
  Status hoist_scalars();

  // Values computed inside a loop body are not valid after it.
  void drop_loop_values() { memo_ = invariant_; }

  // A scatter kernel (scatter_add): one work item.
  Status emit_scatter();

  // ---- the element walker's arithmetic, over LLVM values (element_values.cc)

  llvm::Value* index_constant(int64_t c) { return i64(c); }
  llvm::Value* index_add(llvm::Value* a, llvm::Value* b) { return b_.CreateAdd(a, b); }
  llvm::Value* index_mul(llvm::Value* a, int64_t c) { return b_.CreateMul(a, i64(c)); }
  llvm::Value* index_finish(llvm::Value* flat) { return flat; }
  llvm::Value* unflatten_dim(llvm::Value* flat, int64_t stride, int64_t extent, bool outermost);
  // How each dim index unflatten_dim made came from its flat index, so that flat_of sums a
  // run of them as the flat index itself: a full-tensor sum over [8,512,768] otherwise
  // divided each element's position by 768 and 512 again to load it, and did not vectorize.
  std::map<llvm::Value*, ir::Unflattened<llvm::Value*>> unflattened_;
  std::optional<ir::Unflattened<llvm::Value*>> unflattened(llvm::Value* const& dim) const {
    auto it = unflattened_.find(dim);
    return it == unflattened_.end() ? std::nullopt : std::optional(it->second);
  }
  llvm::Value* affine(llvm::Value* i, int64_t start, int64_t step) {
    return b_.CreateAdd(i64(start), b_.CreateMul(i, i64(step)));
  }
  llvm::Value* clamp_index(llvm::Value* j, int64_t extent);
  std::optional<llvm::Value*> special_value(ValueId, const ElementWalker::Key&) { return std::nullopt; }
  llvm::Value* load(ValueId v, llvm::Value* flat);
  Result<llvm::Value*> elementwise(const Node& n, std::span<llvm::Value* const> operands,
                                   std::span<const ir::DType> dtypes);
  Result<llvm::Value*> iota(llvm::Value* index, ir::DType dtype);
  llvm::Value* scalar_constant(ir::DType dtype, double value, int64_t int_value);
  llvm::Value* dense_constant(const ir::Literal& literal, ir::DType dtype, llvm::Value* flat);
  // Picks the operand whose range along the axis holds the index, with branches so that
  // no other operand is read out of its bounds; where the index's range is known to lie
  // in one operand's, reads that one directly.
  Result<llvm::Value*> concat(const Node& n, const Index& out);
  // The columns at the start and at the end of a row (of the last dim) where the step's
  // concats along their last dims read their padding operands (broadcast constants), at
  // most: the row walk runs them apart from the columns between, where those concats
  // read their data operand alone.
  std::pair<int64_t, int64_t> padded_columns() const;
  // The columns (of rows of `last`) where the step's concats along their last dims pass
  // from one operand to the next, sorted; none when there would be more than
  // kMostJoinedParts runs (each is a loop of its own).
  std::vector<int64_t> joined_columns(int64_t last) const;
  static constexpr size_t kMostJoinedParts = 64;
  // Whether x is a broadcast constant (through broadcasts and reshapes in the step).
  bool padding(ValueId x) const;
  // Whether v's elements come from the step's inputs or constants through movement ops
  // only: reading one at any index in range cannot trap, and costs a load at most.
  bool speculatable(ValueId v) const;
  // The values an index can take, where known: a constant, the row walk's column (while a
  // part of the row of known columns is emitted), and sums and multiples of those.
  std::optional<std::pair<int64_t, int64_t>> range_of(llvm::Value* v) const;
  struct ColumnRange {
    llvm::Value* column;
    int64_t first, last;  // inclusive
  };
  std::optional<ColumnRange> column_range_;
  std::string_view codegen_name() const { return "cpu codegen"; }

  // ---- row kernels (row_kernels.cc)

  // Makes the row values cached in `cache` (by default, the current row's so far) the
  // values at row position j, whose index over the row class's full shape is `full`.
  void use_row_cache(const Index& full, llvm::Value* j, const std::map<ValueId, llvm::Value*>* cache = nullptr);

  // A row kernel: one row per work item, pipelined where pipelines() says.
  Status emit_reduction();
  bool pipelines(const RowKernel& k) const;
  bool transcendental_in(ValueId v) const;
  Status emit_row(const RowKernel& k, llvm::Value* r, const RowToWrite* pending);
  RowToWrite pending_row(const RowKernel& k, llvm::Value* r);
  Status write_pending(const RowKernel& k, const RowToWrite& p, llvm::Value* start, int64_t count);
  Result<std::vector<llvm::Value*>> row_outputs(const RowKernel& k, const RowToWrite& row, llvm::Value* j);
  // The index of a row value of shape s in the row whose kept index is `kept`: over the
  // kept dims, or over the full shape with 0 at the reduced dims.
  Index row_value_index(const RowKernel& k, const Index& kept, const Shape& s);
  // The index over the full shape of row position j in that row.
  Index full_row_index(const RowKernel& k, const Index& kept, llvm::Value* j);
  // Where row r's half of a pipelined kernel's row buffers starts.
  llvm::Value* row_half(const RowKernel& k, llvm::Value* r) {
    return b_.CreateMul(b_.CreateAnd(r, i64(1)), i64(k.row_length));
  }
  // Whether the reduction n over rows of this length is a float sum in chunks of kSumLanes.
  bool chunked_sum(const Node& n, int64_t row_length) const;
  // Over the columns [col_begin, col_end) in blocks of kColumnBlock, adds operand rows
  // [row_begin, row_end) into a double sum per column (contiguous loads, vectorized
  // across columns; full-shape outputs written on the way), then calls
  // finish(first column, count, sums) for the block.
  using ColumnBlockDone = std::function<Status(llvm::Value*, llvm::Value*, llvm::AllocaInst*)>;
  Status sum_columns(RowKernel& k, llvm::Value* row_begin, llvm::Value* row_end, llvm::Value* col_begin,
                     llvm::Value* col_end, const ColumnBlockDone& finish);
  // A float sum over leading dims (ir::sums_columns: bias and layer-norm parameter
  // gradients), walked a row of the operand at a time; each column's row values and
  // outputs from its sum.
  Status emit_columns(RowKernel& k);
  // A split step's first kernel: each work item one part, its sums into scratch.
  Status emit_partial_sums(RowKernel& k);
  // A split step's kernel: each row's sum added from its parts in order, then the row.
  Status emit_split_rows(RowKernel& k);
  // Records a reduction's result (in its accumulator type) as the value of n at `at`.
  void remember_reduction(const Node& n, const Index& at, llvm::Value* total);
  // Emits the loop of one reduction over a row and records its result for the row.
  Status reduce(const Node& n, int64_t row_length, const Shape& full_shape,
                const std::function<Index(llvm::Value*)>& full_index, const Index& at, llvm::IRBuilder<>& entry);

  static constexpr int64_t kRowCacheBytes = 256 << 10;  // per cached value; fits in L2
  static constexpr int64_t kPrefetchBlocks = 32;        // how far ahead a loop kernel prefetches

  // Float sums add blocks of kSumBlock elements in float, each block into the double
  // total. Within a block, kSumLanes partial sums (a few vectors' worth) take chunks of
  // consecutive elements; each float partial sum holds kSumBlock / kSumLanes terms, so the
  // result stays as close as the interpreter's double sum once rounded to float.
  static constexpr int64_t kSumBlock = 512, kSumLanes = 64;

  // Called by a chunked sum pass after each chunk, with its first row position and its
  // length: where a pipelined row kernel prefetches and writes the row before.
  std::function<Status(llvm::Value*, int64_t)> per_chunk_;
  // Row buffers (reduce's `keep`) by value, shared by every emission of the rows; each
  // holds row_buffers_ rows (two when pipelined: the row reduced and the row written).
  std::map<ValueId, llvm::AllocaInst*> keep_buffers_;
  int row_buffers_ = 1;
  llvm::Value* row_offset_ = nullptr;             // where the current row's half starts (pipelined)
  std::map<ValueId, llvm::AllocaInst*> carried_;  // row values of a pipelined kernel's row, for the next
  const int64_t streaming_bytes_;
  const int vector_bytes_;  // this kernel's vector width: 64 where wide_vectors_pay, else 32
  // Vectors interleaved in a loop kernel's loops that store outputs, where computing
  // them makes more than one call to the math library (0: the vectorizer chooses). The
  // vectorizer orders an interleaved body op by op across its vectors, so in cos(cos(x))
  // four first calls run before the four second calls that wait on them. One vector at a
  // time, each second call waited on the call just before it, and the fused loop ran
  // slower than the unfused pair (docs/cpu.md). A kernel with one call keeps the
  // vectorizer's choice.
  const int call_interleave_;
  static constexpr int kCallInterleave = 4;
  bool streamed_ = false;  // whether any stream_block used non-temporal stores
  // Whether loops with a light body (under kRolledBodyLimit IR instructions) are kept
  // rolled; the vectorizer still interleaves them. Unrolled whole over a row of constant
  // length, layer_norm's sum passes became thousands of instructions, and GVN kept the
  // row's loads live from one pass to the next, spilled to the stack (docs/cpu.md).
  // Softmax's max pass runs slightly faster unrolled, and its exp pass is not light, so
  // only sum passes are rolled.
  bool rolled_loops_ = false;
  // Set while emit_loop walks rows shorter than kShortRow (without concats): the
  // vectorizer's default body (8 lanes, interleaved 4 times) needs 32 elements, so such a
  // row ran all in its scalar remainder. With AVX-512 masked vector ops take the tail; AVX2's
  // masked strided loads are scalar, so there 4-lane vectors run the row uninterleaved
  // (docs/cpu.md).
  bool short_rows_ = false;
  // A tiled walk (emit_tiles): kFill keeps only the loads of the inputs with tile buffers
  // and stores them in by_columns; kRead reads those inputs from by_rows (its transpose).
  // tile_at_ is the element's offset in the tile.
  enum class TileWalk { kNone, kFill, kRead };
  TileWalk tile_walk_ = TileWalk::kNone;
  // Loops over a whole tile's row or column, or a part of one (their vector width).
  enum class TileLoops { kNone, kWhole, kPart };
  TileLoops tile_loops_ = TileLoops::kNone;
  struct TileBuffers {
    llvm::AllocaInst *by_columns, *by_rows;
  };
  std::map<ValueId, TileBuffers> tile_buffers_;
  llvm::Value* tile_at_ = nullptr;
  static constexpr int64_t kShortRow = 32;
  static constexpr size_t kRolledBodyLimit = 24;
  const std::optional<ir::ReductionSplit> split_;
  const bool partial_;
  const bool masked_tails_;                      // the CPU has AVX-512 (its mask registers)
  llvm::Value* scratch_ = nullptr;               // a split step's parts: doubles
  llvm::Value* last_total_ = nullptr;            // reduce()'s last total, in its accumulator type
  static constexpr int64_t kColumnBlock = 1024;  // columns summed at once: 8 KiB of double sums
  static constexpr int64_t kColumnRows = 8;      // rows summed in the compute type before the double sum
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;
  std::vector<llvm::Value*> bases_;
  Memo invariant_;
  std::map<ValueId, llvm::Value*> row_cache_;
};

}  // namespace kiln::codegen::cpu::detail
