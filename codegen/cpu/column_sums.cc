// Sums over leading dims (bias and layer-norm parameter gradients), walked a row of the
// operand at a time over a block of columns, where the row walk (row_kernels.cc) would read
// each column with a stride of a whole row (docs/cpu.md).
#include "codegen/cpu/kernel_emitter_class.h"
#include "codegen/cpu/scalar_ops.h"

namespace kiln::codegen::cpu::detail {

bool KernelEmitter::walks_columns(const RowKernel& k) const {
  if (k.rc.contiguous() || k.rc.kept.empty() || k.last_reduction < 0) return false;
  for (size_t d = 0; d < k.rc.reduced.size(); ++d)
    if (k.rc.reduced[d] != static_cast<int64_t>(d)) return false;  // the reduced dims lead
  int reductions = 0;
  for (int n : step_.nodes) reductions += ir::op_kind(g_.nodes[n].op) == OpKind::Reduction;
  const Node& sum = g_.nodes[k.last_reduction];
  if (reductions != 1 || sum.op != Op::ReduceSum || !ir::is_float(type(sum.operands[0]).dtype)) return false;
  // A full-shape output that needs the sum would need a second walk.
  for (ValueId o : k.full_outputs) {
    std::vector<ValueId> todo{o};
    std::vector<char> seen(g_.values.size(), 0);
    while (!todo.empty()) {
      ValueId v = todo.back();
      todo.pop_back();
      if (!computed_here(v) || seen[v]) continue;
      seen[v] = 1;
      if (v == sum.result) return false;
      for (ValueId operand : g_.nodes[producer_[v]].operands) todo.push_back(operand);
    }
  }
  return true;
}

Status KernelEmitter::emit_columns(RowKernel& k) {
  const Node& sum = g_.nodes[k.last_reduction];
  const ValueId x = sum.operands[0];
  llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  llvm::AllocaInst* sums = entry.CreateAlloca(llvm::ArrayType::get(b_.getDoubleTy(), kColumnBlock));
  sums->setAlignment(llvm::Align(64));
  auto sum_at = [&](llvm::Value* c) { return b_.CreateGEP(b_.getDoubleTy(), sums, c); };
  llvm::Value* begin = fn_->getArg(1);
  llvm::Value* end = fn_->getArg(2);
  llvm::Value* blocks = b_.CreateSDiv(b_.CreateAdd(b_.CreateSub(end, begin), i64(kColumnBlock - 1)), i64(kColumnBlock));
  return loop(i64(0), blocks, [&](llvm::Value* block) -> Status {
    llvm::Value* first = b_.CreateAdd(begin, b_.CreateMul(block, i64(kColumnBlock)));
    llvm::Value* count = b_.CreateSub(end, first);
    count = b_.CreateSelect(b_.CreateICmpSLT(count, i64(kColumnBlock)), count, i64(kColumnBlock));
    KILN_RETURN_IF_ERROR(loop(
        i64(0), count,
        [&](llvm::Value* c) {
          b_.CreateStore(llvm::ConstantFP::get(b_.getDoubleTy(), 0.0), sum_at(c));
          return Status::Ok();
        },
        Unroll::kDefault, 0, Iterations::kIndependent));
    // Row i of the operand, over the block's columns: consecutive elements.
    KILN_RETURN_IF_ERROR(loop(i64(0), i64(k.row_length), [&](llvm::Value* i) -> Status {
      Index reduced = unflatten(i, k.rc.reduced_shape);
      return loop(
          i64(0), count,
          [&](llvm::Value* c) -> Status {
            Index kept = unflatten(b_.CreateAdd(first, c), k.rc.kept_shape);
            Index full{nullptr, k.rc.full_index(kept.dims, reduced.dims)};
            auto before = memo_;
            KILN_ASSIGN_OR_RETURN(llvm::Value * v, value_at(x, full));
            // Sums of floats accumulate in double, as the interpreter does; each column's own.
            b_.CreateStore(
                b_.CreateFAdd(b_.CreateLoad(b_.getDoubleTy(), sum_at(c)), b_.CreateFPExt(v, b_.getDoubleTy())),
                sum_at(c));
            for (ValueId o : k.full_outputs) {
              KILN_ASSIGN_OR_RETURN(llvm::Value * out, value_at(o, full));
              store_element(b_, type(o).dtype, bases_[slot_[o]], flat_of(k.rc.full, full), out);
            }
            memo_ = before;
            return Status::Ok();
          },
          Unroll::kDefault, 0, Iterations::kIndependent);
    }));
    // Each column's row values and row-shaped outputs, from its sum.
    return loop(i64(0), count, [&](llvm::Value* c) -> Status {
      k.column_sum = b_.CreateLoad(b_.getDoubleTy(), sum_at(c));
      Status row = emit_row(k, b_.CreateAdd(first, c), nullptr);
      k.column_sum = nullptr;
      return row;
    });
  });
}

}  // namespace kiln::codegen::cpu::detail
