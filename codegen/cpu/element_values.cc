#include <fmt/format.h>

#include "codegen/cpu/kernel_emitter_class.h"
#include "codegen/cpu/scalar_ops.h"
#include "ir/shape_inference.h"

namespace kiln::codegen::cpu::detail {

llvm::Value* KernelEmitter::unflatten_dim(llvm::Value* flat, int64_t stride, int64_t extent, bool outermost) {
  llvm::Value* q = b_.CreateUDiv(flat, i64(stride));
  return outermost ? q : b_.CreateURem(q, i64(extent));
}

llvm::Value* KernelEmitter::clamp_index(llvm::Value* j, int64_t extent_value) {
  j = b_.CreateSExt(j, b_.getInt64Ty());
  llvm::Value* extent = i64(extent_value);
  j = b_.CreateSelect(b_.CreateICmpSLT(j, i64(0)), b_.CreateAdd(j, extent), j);
  j = b_.CreateSelect(b_.CreateICmpSLT(j, i64(0)), i64(0), j);
  return b_.CreateSelect(b_.CreateICmpSGE(j, extent), b_.CreateSub(extent, i64(1)), j);
}

llvm::Value* KernelEmitter::load(ValueId v, llvm::Value* flat) {
  return load_element(b_, type(v).dtype, bases_[slot_[v]], flat);
}

Result<llvm::Value*> KernelEmitter::elementwise(const Node& n, std::span<llvm::Value* const> operands,
                                                std::span<const ir::DType> dtypes) {
  return cpu::elementwise(b_, m_, n.op, n.attrs, operands, dtypes, type(n.result).dtype);
}

Result<llvm::Value*> KernelEmitter::iota(llvm::Value* index, ir::DType dtype) {
  llvm::Type* t = compute_type(ctx_, dtype);
  return round_to(b_, dtype, ir::is_float(dtype) ? b_.CreateSIToFP(index, t) : b_.CreateSExtOrTrunc(index, t));
}

llvm::Value* KernelEmitter::scalar_constant(ir::DType dtype, double value, int64_t int_value) {
  return constant(b_, dtype, value, int_value);
}

// A dense constant: a private global array in the compute type.
llvm::Value* KernelEmitter::dense_constant(const ir::Literal& literal, ir::DType dtype, llvm::Value* flat) {
  std::vector<llvm::Constant*> elements;
  for (size_t k = 0; k < literal.floats.size(); ++k)
    elements.push_back(llvm::cast<llvm::Constant>(constant(b_, dtype, literal.floats[k], literal.ints[k])));
  llvm::Type* t = compute_type(ctx_, dtype);
  auto* array_type = llvm::ArrayType::get(t, elements.size());
  auto* global = new llvm::GlobalVariable(m_, array_type, true, llvm::GlobalValue::PrivateLinkage,
                                          llvm::ConstantArray::get(array_type, elements));
  return b_.CreateLoad(t, b_.CreateGEP(t, global, flat));
}

Result<llvm::Value*> KernelEmitter::concat(const Node& n, const Index& out) {
  int64_t axis = *ir::normalize_axis(n.attrs.get_int("axis"), type(n.result).rank());
  llvm::Value* at = out.dims[static_cast<size_t>(axis)];
  auto* done = llvm::BasicBlock::Create(ctx_, "concat.done", fn_);
  std::vector<std::pair<llvm::Value*, llvm::BasicBlock*>> incoming;
  int64_t offset = 0;
  for (size_t k = 0; k < n.operands.size(); ++k) {
    ValueId x = n.operands[k];
    int64_t extent = type(x).shape[static_cast<size_t>(axis)];
    auto* take = llvm::BasicBlock::Create(ctx_, "concat.take", fn_);
    auto* next = k + 1 < n.operands.size() ? llvm::BasicBlock::Create(ctx_, "concat.next", fn_) : nullptr;
    if (next) b_.CreateCondBr(b_.CreateICmpSLT(at, i64(offset + extent)), take, next);
    else b_.CreateBr(take);
    b_.SetInsertPoint(take);
    Index src = out;
    src.dims[static_cast<size_t>(axis)] = b_.CreateSub(at, i64(offset));
    // Values computed in this branch must not be reused outside it.
    auto saved = memo_;
    KILN_ASSIGN_OR_RETURN(llvm::Value * v, value_at(x, src));
    memo_ = std::move(saved);
    incoming.emplace_back(v, b_.GetInsertBlock());
    b_.CreateBr(done);
    if (next) b_.SetInsertPoint(next);
    offset += extent;
  }
  b_.SetInsertPoint(done);
  llvm::PHINode* phi = b_.CreatePHI(incoming[0].first->getType(), static_cast<unsigned>(incoming.size()));
  for (auto [v, block] : incoming) phi->addIncoming(v, block);
  return phi;
}

}  // namespace kiln::codegen::cpu::detail
