#include <fmt/format.h>
#include <algorithm>

#include "codegen/cpu/kernel_emitter_class.h"
#include "codegen/cpu/scalar_ops.h"
#include "ir/shape_inference.h"

namespace kiln::codegen::cpu::detail {

llvm::Value* KernelEmitter::unflatten_dim(llvm::Value* flat, int64_t stride, int64_t extent, bool outermost) {
  llvm::Value* q = b_.CreateUDiv(flat, i64(stride));
  llvm::Value* index = outermost ? q : b_.CreateURem(q, i64(extent));
  unflattened_.try_emplace(index, ir::Unflattened<llvm::Value*>{flat, stride, extent, outermost});
  return index;
}

llvm::Value* KernelEmitter::clamp_index(llvm::Value* j, int64_t extent_value) {
  j = b_.CreateSExt(j, b_.getInt64Ty());
  llvm::Value* extent = i64(extent_value);
  j = b_.CreateSelect(b_.CreateICmpSLT(j, i64(0)), b_.CreateAdd(j, extent), j);
  j = b_.CreateSelect(b_.CreateICmpSLT(j, i64(0)), i64(0), j);
  return b_.CreateSelect(b_.CreateICmpSGE(j, extent), b_.CreateSub(extent, i64(1)), j);
}

llvm::Value* KernelEmitter::load(ValueId v, llvm::Value* flat) {
  if (tile_walk_ == TileWalk::kNone) return load_element(b_, type(v).dtype, bases_[slot_[v]], flat);
  llvm::Type* t = compute_type(ctx_, type(v).dtype);
  auto buffer = tile_buffers_.find(v);
  if (buffer == tile_buffers_.end())  // filling a tile needs no other input
    return tile_walk_ == TileWalk::kFill ? llvm::PoisonValue::get(t)
                                         : load_element(b_, type(v).dtype, bases_[slot_[v]], flat);
  if (tile_walk_ == TileWalk::kRead) return b_.CreateLoad(t, b_.CreateGEP(t, buffer->second.by_rows, tile_at_));
  llvm::Value* x = load_element(b_, type(v).dtype, bases_[slot_[v]], flat);
  b_.CreateStore(x, b_.CreateGEP(t, buffer->second.by_columns, tile_at_));
  return x;
}

Result<llvm::Value*> KernelEmitter::elementwise(const Node& n, std::span<llvm::Value* const> operands,
                                                std::span<const ir::DType> dtypes) {
  // Filling a tile computes nothing: only its loads are kept.
  if (tile_walk_ == TileWalk::kFill) return llvm::PoisonValue::get(compute_type(ctx_, type(n.result).dtype));
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

bool KernelEmitter::padding(ValueId x) const {
  for (int p = producer_[x]; p >= 0 && member_[p]; p = producer_[x]) {
    const Node& q = g_.nodes[p];
    if (ir::op_kind(q.op) == ir::OpKind::Source) return true;
    if (q.op != ir::Op::Broadcast && q.op != ir::Op::Reshape) return false;
    x = q.operands[0];
  }
  return false;
}

std::pair<int64_t, int64_t> KernelEmitter::padded_columns() const {
  int64_t lead = 0, trail = 0;
  for (int m : step_.nodes) {
    const Node& n = g_.nodes[m];
    const int64_t rank = type(n.result).rank();
    if (n.op != ir::Op::Concat || *ir::normalize_axis(n.attrs.get_int("axis"), rank) != rank - 1) continue;
    int64_t front = 0, back = 0;
    for (size_t k = 0; k < n.operands.size() && padding(n.operands[k]); ++k) front += type(n.operands[k]).shape.back();
    for (size_t k = n.operands.size(); k-- > 0 && padding(n.operands[k]);) back += type(n.operands[k]).shape.back();
    lead = std::max(lead, front);
    trail = std::max(trail, back);
  }
  return {lead, trail};
}

std::vector<int64_t> KernelEmitter::joined_columns(int64_t last) const {
  std::vector<int64_t> boundaries;
  for (int m : step_.nodes) {
    const Node& n = g_.nodes[m];
    const ir::Shape& shape = type(n.result).shape;
    const int64_t rank = static_cast<int64_t>(shape.size());
    if (n.op != ir::Op::Concat || rank == 0 || shape.back() != last ||
        *ir::normalize_axis(n.attrs.get_int("axis"), rank) != rank - 1)
      continue;
    int64_t offset = 0;
    for (size_t k = 0; k + 1 < n.operands.size(); ++k) {
      offset += type(n.operands[k]).shape.back();
      if (offset > 0 && offset < last) boundaries.push_back(offset);
    }
  }
  std::sort(boundaries.begin(), boundaries.end());
  boundaries.erase(std::unique(boundaries.begin(), boundaries.end()), boundaries.end());
  if (boundaries.size() + 1 > kMostJoinedParts) boundaries.clear();
  return boundaries;
}

bool KernelEmitter::speculatable(ValueId v) const {
  if (!computed_here(v)) return true;
  const Node& n = g_.nodes[producer_[v]];
  const ir::OpKind kind = ir::op_kind(n.op);
  if (kind == ir::OpKind::Source) return true;
  return kind == ir::OpKind::Movement &&
         std::all_of(n.operands.begin(), n.operands.end(), [&](ValueId x) { return speculatable(x); });
}

std::optional<std::pair<int64_t, int64_t>> KernelEmitter::range_of(llvm::Value* v) const {
  if (auto* c = llvm::dyn_cast<llvm::ConstantInt>(v)) return std::pair{c->getSExtValue(), c->getSExtValue()};
  if (column_range_ && v == column_range_->column) return std::pair{column_range_->first, column_range_->last};
  auto* op = llvm::dyn_cast<llvm::BinaryOperator>(v);
  if (!op) return std::nullopt;
  auto a = range_of(op->getOperand(0)), b = range_of(op->getOperand(1));
  if (!a || !b) return std::nullopt;
  switch (op->getOpcode()) {
    case llvm::Instruction::Add: return std::pair{a->first + b->first, a->second + b->second};
    case llvm::Instruction::Sub: return std::pair{a->first - b->second, a->second - b->first};
    case llvm::Instruction::Mul: {
      if (a->first != a->second && b->first != b->second) return std::nullopt;
      const int64_t k = a->first == a->second ? a->first : b->first;
      const std::pair<int64_t, int64_t>& r = a->first == a->second ? *b : *a;
      return k >= 0 ? std::pair{r.first * k, r.second * k} : std::pair{r.second * k, r.first * k};
    }
    default: return std::nullopt;
  }
}

Result<llvm::Value*> KernelEmitter::concat(const Node& n, const Index& out) {
  int64_t axis = *ir::normalize_axis(n.attrs.get_int("axis"), type(n.result).rank());
  llvm::Value* at = out.dims[static_cast<size_t>(axis)];
  if (auto range = range_of(at)) {
    int64_t offset = 0;
    for (ValueId x : n.operands) {
      const int64_t extent = type(x).shape[static_cast<size_t>(axis)];
      if (range->first >= offset && range->second < offset + extent) {
        Index src = out;
        src.dims[static_cast<size_t>(axis)] = b_.CreateSub(at, i64(offset));
        return value_at(x, src);
      }
      offset += extent;
    }
  }
  // A padding along a dim before the last (a padded window's rows) picks the same operand
  // for a whole row: where its data is read from memory through movement ops, the data
  // is read at the index clamped into its range and a select picks, with no branch, so
  // that the loop over the row vectorizes. (A concat of many values keeps its branches:
  // reading every operand per element cost more.)
  const auto values = std::count_if(n.operands.begin(), n.operands.end(), [&](ValueId x) { return !padding(x); });
  if (axis + 1 < type(n.result).rank() && values <= 1 && speculatable(n.result)) {
    llvm::Value* picked = nullptr;
    int64_t offset = 0;
    for (ValueId x : n.operands) {
      const int64_t extent = type(x).shape[static_cast<size_t>(axis)];
      Index src = out;
      llvm::Value* j = b_.CreateSub(at, i64(offset));
      j = b_.CreateSelect(b_.CreateICmpSLT(j, i64(0)), i64(0), j);
      src.dims[static_cast<size_t>(axis)] = b_.CreateSelect(b_.CreateICmpSGT(j, i64(extent - 1)), i64(extent - 1), j);
      KILN_ASSIGN_OR_RETURN(llvm::Value * v, value_at(x, src));
      picked = picked ? b_.CreateSelect(b_.CreateICmpSLT(at, i64(offset)), picked, v) : v;
      offset += extent;
    }
    return picked;
  }
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
