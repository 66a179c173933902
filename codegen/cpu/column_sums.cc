// Sums over leading dims (bias and layer-norm parameter gradients) or over dims inside kept
// ones (a grouped-query attention's key and value gradients summed over each group),
// walked a row of the operand at a time over a block of columns, where the row walk
// (row_kernels.cc) would read each column with a stride of a whole row (docs/cpu.md).
#include <algorithm>

#include "codegen/cpu/kernel_emitter_class.h"
#include "codegen/cpu/scalar_ops.h"

namespace kiln::codegen::cpu::detail {

Status KernelEmitter::sum_columns(RowKernel& k, llvm::Value* row_begin, llvm::Value* row_end, llvm::Value* col_begin,
                                  llvm::Value* col_end, const ColumnBlockDone& finish) {
  const Node& sum = g_.nodes[k.last_reduction];
  const ValueId x = sum.operands[0];
  llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  llvm::AllocaInst* sums = entry.CreateAlloca(llvm::ArrayType::get(b_.getDoubleTy(), kColumnBlock));
  sums->setAlignment(llvm::Align(64));
  auto sum_at = [&](llvm::Value* c) { return b_.CreateGEP(b_.getDoubleTy(), sums, c); };
  // Reduced dims inside kept ones ([B, H, G, T, D] summed over G): the columns are the
  // kept dims outside them (an outer index) times those after them (a run of `inner`
  // columns adjacent in the operand), and a block stays within one outer index, so that
  // its columns' elements lie at one address plus the column, which the vectorizer reads
  // as one vector.
  const auto outside = static_cast<size_t>(k.rc.reduced.front());
  const Shape outer_shape(k.rc.full.begin(), k.rc.full.begin() + static_cast<std::ptrdiff_t>(outside));
  const Shape inner_shape(k.rc.full.begin() + k.rc.reduced.back() + 1, k.rc.full.end());
  const int64_t inner = std::max<int64_t>(ir::num_elements(inner_shape), 1);
  // Block `first` + [0, count) of the columns of outer index `outer` (first within it).
  auto block = [&](llvm::Value* outer, llvm::Value* first, llvm::Value* count) -> Status {
    llvm::Value* inner_first = b_.CreateSub(first, b_.CreateMul(outer, i64(inner)));
    Index outer_index = unflatten(outer, outer_shape);
    auto kept_of = [&](llvm::Value* c) {
      Index kept = outer_index;
      for (llvm::Value* d : unflatten(b_.CreateAdd(inner_first, c), inner_shape).dims) kept.dims.push_back(d);
      return kept;
    };
    KILN_RETURN_IF_ERROR(loop(
        i64(0), count,
        [&](llvm::Value* c) {
          b_.CreateStore(llvm::ConstantFP::get(b_.getDoubleTy(), 0.0), sum_at(c));
          return Status::Ok();
        },
        Unroll::kDefault, 0, Iterations::kIndependent));
    // Row i of the operand, over the block's columns: consecutive elements. Rows come in
    // groups of kColumnRows, summed per column in the compute type, then added into the
    // column's double sum: a float chain of kColumnRows terms, as close to the
    // interpreter's double sum as the row sums' lanes (kSumBlock / kSumLanes terms), at
    // one vector add per vector of elements instead of two conversions and two adds.
    auto group = [&](llvm::Value* first_row, int64_t rows) -> Status {
      return loop(
          i64(0), count,
          [&](llvm::Value* c) -> Status {
            Index kept = kept_of(c);
            llvm::Value* partial = nullptr;
            for (int64_t u = 0; u < rows; ++u) {
              Index reduced = unflatten(b_.CreateAdd(first_row, i64(u)), k.rc.reduced_shape);
              Index full{nullptr, k.rc.full_index(kept.dims, reduced.dims)};
              auto before = memo_;
              KILN_ASSIGN_OR_RETURN(llvm::Value * v, value_at(x, full));
              partial = partial ? b_.CreateFAdd(partial, v) : v;
              for (ValueId o : k.full_outputs) {
                KILN_ASSIGN_OR_RETURN(llvm::Value * out, value_at(o, full));
                store_element(b_, type(o).dtype, bases_[slot_[o]], flat_of(k.rc.full, full), out);
              }
              memo_ = before;
            }
            b_.CreateStore(
                b_.CreateFAdd(b_.CreateLoad(b_.getDoubleTy(), sum_at(c)), b_.CreateFPExt(partial, b_.getDoubleTy())),
                sum_at(c));
            return Status::Ok();
          },
          Unroll::kDefault, 0, Iterations::kIndependent);
    };
    llvm::Value* groups = b_.CreateSDiv(b_.CreateSub(row_end, row_begin), i64(kColumnRows));
    KILN_RETURN_IF_ERROR(loop(i64(0), groups, [&](llvm::Value* g) {
      return group(b_.CreateAdd(row_begin, b_.CreateMul(g, i64(kColumnRows))), kColumnRows);
    }));
    llvm::Value* tail = b_.CreateAdd(row_begin, b_.CreateMul(groups, i64(kColumnRows)));
    KILN_RETURN_IF_ERROR(loop(tail, row_end, [&](llvm::Value* i) { return group(i, 1); }));
    return finish(first, count, sums);
  };
  // The outer indices whose columns meet [col_begin, col_end), each in blocks of
  // kColumnBlock of its columns there (one outer index of all columns when the reduced
  // dims lead).
  llvm::Value* outer_end = b_.CreateSDiv(b_.CreateAdd(col_end, i64(inner - 1)), i64(inner));
  return loop(b_.CreateSDiv(col_begin, i64(inner)), outer_end, [&](llvm::Value* outer) -> Status {
    llvm::Value* start = b_.CreateMul(outer, i64(inner));
    llvm::Value* stop = b_.CreateAdd(start, i64(inner));
    start = b_.CreateSelect(b_.CreateICmpSGT(col_begin, start), col_begin, start);
    stop = b_.CreateSelect(b_.CreateICmpSLT(col_end, stop), col_end, stop);
    llvm::Value* blocks =
        b_.CreateSDiv(b_.CreateAdd(b_.CreateSub(stop, start), i64(kColumnBlock - 1)), i64(kColumnBlock));
    return loop(i64(0), blocks, [&](llvm::Value* n) -> Status {
      llvm::Value* first = b_.CreateAdd(start, b_.CreateMul(n, i64(kColumnBlock)));
      llvm::Value* count = b_.CreateSub(stop, first);
      count = b_.CreateSelect(b_.CreateICmpSLT(count, i64(kColumnBlock)), count, i64(kColumnBlock));
      return block(outer, first, count);
    });
  });
}

Status KernelEmitter::emit_columns(RowKernel& k) {
  return sum_columns(k, i64(0), i64(k.row_length), fn_->getArg(1), fn_->getArg(2),
                     [&](llvm::Value* first, llvm::Value* count, llvm::AllocaInst* sums) {
                       return loop(i64(0), count, [&](llvm::Value* c) -> Status {
                         k.column_sum = b_.CreateLoad(b_.getDoubleTy(), b_.CreateGEP(b_.getDoubleTy(), sums, c));
                         Status row = emit_row(k, b_.CreateAdd(first, c), nullptr);
                         k.column_sum = nullptr;
                         return row;
                       });
                     });
}

}  // namespace kiln::codegen::cpu::detail
