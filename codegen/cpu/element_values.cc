#include <fmt/format.h>

#include "codegen/cpu/kernel_emitter_class.h"
#include "codegen/cpu/scalar_ops.h"
#include "ir/movement_index.h"
#include "ir/shape_inference.h"

namespace kiln::codegen::cpu::detail {

llvm::Value* KernelEmitter::flat_of(const Shape& shape, const Index& idx) {
  if (shape.empty()) return i64(0);
  if (idx.flat) return idx.flat;
  std::vector<int64_t> st = ir::row_major_strides(shape);
  llvm::Value* f = i64(0);
  for (size_t d = 0; d < shape.size(); ++d) f = b_.CreateAdd(f, b_.CreateMul(idx.dims[d], i64(st[d])));
  return f;
}

Index KernelEmitter::unflatten(llvm::Value* flat, const Shape& shape) {
  Index idx;
  std::vector<int64_t> st = ir::row_major_strides(shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    llvm::Value* q = b_.CreateUDiv(flat, i64(st[d]));
    idx.dims.push_back(d == 0 ? q : b_.CreateURem(q, i64(shape[d])));
  }
  return idx;
}

Index KernelEmitter::canonical(ValueId v, Index idx) {
  const Shape& shape = type(v).shape;
  if (type(v).rank() == 0) idx = Index{};
  else if (idx.flat && type(v).num_elements() == 1) idx.flat = i64(0);
  else if (!idx.flat)
    for (size_t d = 0; d < shape.size(); ++d)
      if (shape[d] == 1) idx.dims[d] = i64(0);
  return idx;
}

Result<llvm::Value*> KernelEmitter::value_at(ValueId v, Index idx) {
  idx = canonical(v, idx);
  std::vector<llvm::Value*> key = key_of(idx);
  auto memo = memo_.find({v, key});
  if (memo != memo_.end()) return memo->second;
  llvm::Value* result;
  if (!computed_here(v)) {
    if (slot_[v] < 0) return make_error(fmt::format("cpu codegen: step {} reads a value it does not list as an input", step_.name));
    result = load_element(b_, type(v).dtype, bases_[slot_[v]], flat_of(type(v).shape, idx));
  } else {
    KILN_ASSIGN_OR_RETURN(result, compute(g_.nodes[producer_[v]], idx));
  }
  memo_[{v, key}] = result;
  return result;
}

Result<llvm::Value*> KernelEmitter::compute(const Node& n, const Index& idx) {
  const ir::TensorType& rt = type(n.result);
  switch (ir::op_kind(n.op)) {
    case OpKind::Elementwise: {
      std::vector<llvm::Value*> operands;
      std::vector<ir::DType> dtypes;
      for (ValueId x : n.operands) {
        KILN_ASSIGN_OR_RETURN(llvm::Value * v, value_at(x, idx));
        operands.push_back(v);
        dtypes.push_back(type(x).dtype);
      }
      return elementwise(b_, m_, n.op, n.attrs, operands, dtypes, rt.dtype);
    }
    case OpKind::Source: return source(n, idx);
    case OpKind::Movement: return movement(n, dims_of(rt.shape, idx));
    default: break;
  }
  return make_error(fmt::format("cpu codegen: {} cannot be computed per element in step {}", ir::op_name(n.op), step_.name));
}

Result<llvm::Value*> KernelEmitter::source(const Node& n, const Index& idx) {
  const ir::TensorType& rt = type(n.result);
  if (n.op == Op::Iota) {
    int64_t axis = *ir::normalize_axis(n.attrs.get_int("axis"), rt.rank());
    llvm::Value* i = dims_of(rt.shape, idx).dims[static_cast<size_t>(axis)];
    llvm::Type* t = compute_type(ctx_, rt.dtype);
    return ir::is_float(rt.dtype) ? round_to(b_, rt.dtype, b_.CreateSIToFP(i, t)) : b_.CreateSExtOrTrunc(i, t);
  }
  const ir::Literal& lit = n.attrs.get_literal("value");
  if (rt.rank() == 0) return constant(b_, rt.dtype, lit.floats[0], lit.ints[0]);
  // A dense constant: a private global array in the compute type.
  std::vector<llvm::Constant*> elements;
  for (size_t k = 0; k < lit.floats.size(); ++k)
    elements.push_back(llvm::cast<llvm::Constant>(constant(b_, rt.dtype, lit.floats[k], lit.ints[k])));
  llvm::Type* t = compute_type(ctx_, rt.dtype);
  auto* array_type = llvm::ArrayType::get(t, elements.size());
  auto* global = new llvm::GlobalVariable(m_, array_type, true, llvm::GlobalValue::PrivateLinkage,
                                          llvm::ConstantArray::get(array_type, elements));
  return b_.CreateLoad(t, b_.CreateGEP(t, global, flat_of(rt.shape, idx)));
}

Result<llvm::Value*> KernelEmitter::movement(const Node& n, const Index& out) {
  const ir::TensorType& rt = type(n.result);
  ValueId x = n.operands[0];
  const Shape& xs = type(x).shape;
  auto affine = [&](llvm::Value* i, int64_t start, int64_t step) { return b_.CreateAdd(i64(start), b_.CreateMul(i, i64(step))); };
  if (auto source = ir::movement_source(n, xs, out.dims, [&] { return i64(0); }, affine)) return value_at(x, Index{nullptr, std::move(*source)});
  switch (n.op) {
    case Op::Reshape: return value_at(x, unflatten(flat_of(rt.shape, out), xs));
    case Op::Gather: {
      int64_t axis = *ir::normalize_axis(n.attrs.get_int("axis", 0), static_cast<int64_t>(xs.size()));
      KILN_ASSIGN_OR_RETURN(Index src, table_index(out, n.operands[1], axis, xs));
      return value_at(x, src);
    }
    case Op::Concat: return concat(n, out);
    default: break;
  }
  return make_error(fmt::format("cpu codegen: {} is not supported inside a kernel", ir::op_name(n.op)));
}

Result<Index> KernelEmitter::table_index(const Index& gathered, ValueId indices, int64_t axis, const Shape& table) {
  size_t rank = type(indices).shape.size();
  Index at, result;
  for (size_t k = 0; k < rank; ++k) at.dims.push_back(gathered.dims[static_cast<size_t>(axis) + k]);
  KILN_ASSIGN_OR_RETURN(llvm::Value * j, value_at(indices, at));
  j = b_.CreateSExt(j, b_.getInt64Ty());
  llvm::Value* extent = i64(table[static_cast<size_t>(axis)]);
  j = b_.CreateSelect(b_.CreateICmpSLT(j, i64(0)), b_.CreateAdd(j, extent), j);
  j = b_.CreateSelect(b_.CreateICmpSLT(j, i64(0)), i64(0), j);
  j = b_.CreateSelect(b_.CreateICmpSGE(j, extent), b_.CreateSub(extent, i64(1)), j);
  for (size_t d = 0; d < table.size(); ++d) {
    if (static_cast<int64_t>(d) < axis) result.dims.push_back(gathered.dims[d]);
    else if (static_cast<int64_t>(d) == axis) result.dims.push_back(j);
    else result.dims.push_back(gathered.dims[d + rank - 1]);
  }
  return result;
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
