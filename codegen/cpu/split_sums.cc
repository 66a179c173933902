// A reduction step split into parts (ir/reduction_split.h): the partial kernel sums each
// part into the scratch, the step's kernel adds each row's parts in a fixed order and
// finishes the row, so both kernels spread over every core where the rows alone could not.
#include "codegen/cpu/kernel_emitter_class.h"

namespace kiln::codegen::cpu::detail {

using Walk = ir::ReductionSplit::Walk;

Status KernelEmitter::emit_partial_sums(RowKernel& k) {
  const ir::ReductionSplit& split = *split_;
  llvm::Type* f64 = b_.getDoubleTy();
  llvm::Value* begin = fn_->getArg(1);
  llvm::Value* end = fn_->getArg(2);
  if (split.walk == Walk::Columns) {
    const int64_t columns = k.rc.rows();
    return loop(begin, end, [&](llvm::Value* p) {
      llvm::Value* row_begin = b_.CreateMul(p, i64(split.part_length));
      llvm::Value* row_end = b_.CreateAdd(row_begin, i64(split.part_length));
      row_end = b_.CreateSelect(b_.CreateICmpSLT(row_end, i64(k.row_length)), row_end, i64(k.row_length));
      return sum_columns(k, row_begin, row_end, i64(0), i64(columns),
                         [&](llvm::Value* first, llvm::Value* count, llvm::AllocaInst* sums) {
                           llvm::Value* out = b_.CreateGEP(f64, scratch_, b_.CreateMul(p, i64(columns)));
                           return loop(
                               i64(0), count,
                               [&](llvm::Value* c) {
                                 b_.CreateStore(b_.CreateLoad(f64, b_.CreateGEP(f64, sums, c)),
                                                b_.CreateGEP(f64, out, b_.CreateAdd(first, c)));
                                 return Status::Ok();
                               },
                               Unroll::kDefault, 0, Iterations::kIndependent);
                         });
    });
  }
  // Rows: work item q is part q % parts of row q / parts.
  llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  const Node& sum = g_.nodes[k.last_reduction];
  return loop(begin, end, [&](llvm::Value* q) -> Status {
    llvm::Value* r = b_.CreateSDiv(q, i64(split.parts));
    llvm::Value* start = b_.CreateMul(b_.CreateSRem(q, i64(split.parts)), i64(split.part_length));
    Index kept = unflatten(r, k.rc.kept_shape);
    auto full_index = [&](llvm::Value* j) { return full_row_index(k, kept, b_.CreateAdd(start, j)); };
    KILN_RETURN_IF_ERROR(
        reduce(sum, split.part_length, k.rc.full, full_index, row_value_index(k, kept, type(sum.result).shape), entry));
    b_.CreateStore(last_total_, b_.CreateGEP(f64, scratch_, q));
    if (!k.full_outputs.empty()) {
      // The full-shape outputs (none needs the sum): a second walk of the part, which the
      // rule sized to be in L2 still. No row buffers: they hold the part, not the row.
      RowToWrite row{kept, b_.CreateMul(r, i64(k.row_length)), memo_, {}};
      KILN_RETURN_IF_ERROR(store_range(
          start, b_.CreateAdd(start, i64(split.part_length)), k.full_outputs, false,
          [&](llvm::Value* j) { return b_.CreateAdd(row.row_start, j); },
          [&](llvm::Value* j) { return row_outputs(k, row, j); }));
    }
    drop_loop_values();
    return Status::Ok();
  });
}

Status KernelEmitter::emit_split_rows(RowKernel& k) {
  const ir::ReductionSplit& split = *split_;
  const int64_t rows = k.rc.rows();
  llvm::Type* f64 = b_.getDoubleTy();
  llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  llvm::AllocaInst* total = entry.CreateAlloca(f64);
  return loop(fn_->getArg(1), fn_->getArg(2), [&](llvm::Value* r) -> Status {
    b_.CreateStore(llvm::ConstantFP::get(f64, 0.0), total);
    // In part order: the same sum whatever thread summed each part.
    KILN_RETURN_IF_ERROR(loop(i64(0), i64(split.parts), [&](llvm::Value* p) {
      llvm::Value* at = split.walk == Walk::Columns ? b_.CreateAdd(b_.CreateMul(p, i64(rows)), r)
                                                    : b_.CreateAdd(b_.CreateMul(r, i64(split.parts)), p);
      b_.CreateStore(b_.CreateFAdd(b_.CreateLoad(f64, total), b_.CreateLoad(f64, b_.CreateGEP(f64, scratch_, at))),
                     total);
      return Status::Ok();
    }));
    k.column_sum = b_.CreateLoad(f64, total);
    Status row = emit_row(k, r, nullptr);
    k.column_sum = nullptr;
    return row;
  });
}

}  // namespace kiln::codegen::cpu::detail
