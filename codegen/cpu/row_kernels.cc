#include <fmt/format.h>
#include <llvm/IR/IntrinsicsX86.h>

#include "codegen/cpu/kernel_emitter_class.h"
#include "codegen/cpu/scalar_ops.h"
#include "ir/shape_inference.h"

namespace kiln::codegen::cpu::detail {

void KernelEmitter::use_row_cache(const Index& full, llvm::Value* j, const std::map<ValueId, llvm::Value*>* cache) {
  for (auto [v, buffer] : cache ? *cache : row_cache_) {
    llvm::Type* t = compute_type(ctx_, type(v).dtype);
    memo_[{v, key_of(canonical(v, full))}] = b_.CreateLoad(t, b_.CreateGEP(t, buffer, j));
  }
}

Index KernelEmitter::row_value_index(const RowKernel& k, const Index& kept, const Shape& s) {
  return s == k.keepdims && s != k.rc.kept_shape ? Index{nullptr, k.rc.keepdims_index(kept.dims, i64(0))} : kept;
}

Index KernelEmitter::full_row_index(const RowKernel& k, const Index& kept, llvm::Value* j) {
  return Index{nullptr, k.rc.full_index(kept.dims, unflatten(j, k.rc.reduced_shape).dims)};
}

bool KernelEmitter::chunked_sum(const Node& n, int64_t row_length) const {
  return n.op == Op::ReduceSum && ir::is_float(type(n.operands[0]).dtype) &&
         compute_type(ctx_, type(n.operands[0]).dtype)->isFloatTy() && row_length > kSumBlock;
}

Status KernelEmitter::emit_reduction() {
  auto cls = ir::row_class(g_, step_);
  if (!cls) return make_error(fmt::format("cpu codegen: step {} has no row structure", step_.name));
  KILN_RETURN_IF_ERROR(hoist_scalars());
  RowKernel k{*cls, cls->row_length(), cls->keepdims_shape(), {}, {}};
  for (ValueId i : step_.inputs)
    if (k.rc.contiguous() && type(i).shape == k.rc.full) k.row_inputs.push_back(i);
  for (ValueId o : step_.outputs)
    if (type(o).shape == k.rc.full) k.full_outputs.push_back(o);
  for (int n : step_.nodes)
    if (ir::op_kind(g_.nodes[n].op) == OpKind::Reduction) k.last_reduction = n;
  llvm::Value* begin = fn_->getArg(1);
  llvm::Value* end = fn_->getArg(2);
  auto one_row_at_a_time = [&](llvm::Value* r) { return emit_row(k, r, nullptr); };
  if (split_) return partial_ ? emit_partial_sums(k) : emit_split_rows(k);
  if (ir::sums_columns(g_, step_, k.rc)) return emit_columns(k);
  if (!pipelines(k)) return loop(begin, end, one_row_at_a_time);
  row_buffers_ = 2;
  // Each output row is written from its first line boundary on (the same row position in
  // every row, as rows fill whole lines); the elements before it and after the last whole
  // line get ordinary stores. Pipelined when that position is the same for every output
  // (always, for one output of a whole number of bytes from a line); otherwise one row at
  // a time, as above.
  auto [line_start, aligned] = to_line_boundary(k.full_outputs, i64(0));
  k.line_start = line_start;
  auto* pipelined = llvm::BasicBlock::Create(ctx_, "rows.pipelined", fn_);
  auto* sequential = llvm::BasicBlock::Create(ctx_, "rows.sequential", fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, "rows.done", fn_);
  b_.CreateCondBr(b_.CreateAnd(aligned, b_.CreateICmpSLT(begin, end)), pipelined, sequential);
  b_.SetInsertPoint(sequential);
  KILN_RETURN_IF_ERROR(loop(begin, end, one_row_at_a_time));
  b_.CreateBr(done);
  // The first row is reduced alone; each later row is reduced while the one before it is
  // written; the last row is written alone.
  b_.SetInsertPoint(pipelined);
  k.pipelined = true;
  KILN_RETURN_IF_ERROR(emit_row(k, begin, nullptr));
  KILN_RETURN_IF_ERROR(loop(b_.CreateAdd(begin, i64(1)), end, [&](llvm::Value* r) {
    RowToWrite before = pending_row(k, b_.CreateSub(r, i64(1)));
    return emit_row(k, r, &before);
  }));
  RowToWrite last = pending_row(k, b_.CreateSub(end, i64(1)));
  KILN_RETURN_IF_ERROR(store_range(
      i64(0), i64(k.row_length), k.full_outputs, true, [&](llvm::Value* j) { return b_.CreateAdd(last.row_start, j); },
      [&](llvm::Value* j) { return row_outputs(k, last, j); }));
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  return Status::Ok();
}

// Whether the kernel's rows are software-pipelined: the full-shape outputs of row r are
// written, with streaming stores, inside the last reduction pass over row r + 1, and the
// row after that is prefetched there too. Otherwise the core computes while memory idles
// (the exp pass of softmax) and memory works while the core waits (the output pass).
// This needs that last pass to be a chunked float sum (kSumLanes elements at a time)
// covering whole rows of whole lines, with a transcendental function in its terms: with
// light terms (layer_norm's variance) there is too little to overlap, and pipelined
// layer norms were no faster or slower (docs/cpu.md).
bool KernelEmitter::pipelines(const RowKernel& k) const {
  const int64_t length = k.row_length;
  if (!k.rc.contiguous() || k.full_outputs.empty() || k.last_reduction < 0 || !worth_streaming(k.full_outputs, length))
    return false;
  const Node& last = g_.nodes[k.last_reduction];
  if (!chunked_sum(last, length) || length % kSumLanes != 0 || !transcendental_in(last.operands[0])) return false;
  for (ValueId o : k.full_outputs)
    if (length * ir::dtype_size(type(o).dtype) % 64 != 0) return false;
  return true;
}

// Whether computing v, element by element in this step, calls a transcendental function.
bool KernelEmitter::transcendental_in(ValueId v) const {
  std::vector<ValueId> todo{v};
  std::vector<char> seen(g_.values.size(), 0);
  while (!todo.empty()) {
    ValueId x = todo.back();
    todo.pop_back();
    if (!computed_here(x) || seen[x]) continue;
    seen[x] = 1;
    const Node& n = g_.nodes[producer_[x]];
    if (ir::op_kind(n.op) == OpKind::Reduction) continue;  // a row value, once per row
    if (ir::op_cpu_math(n.op) != ir::CpuMath::Inline) return true;
    for (ValueId operand : n.operands) todo.push_back(operand);
  }
  return false;
}

// Emits row r: its reductions and row values, then (unless pipelined) its full-shape
// outputs, and its row-shaped outputs. In a pipelined kernel, `pending` is the row before,
// whose full-shape outputs the last reduction pass writes; r's row values are kept for
// the next row's pass in carried_.
Status KernelEmitter::emit_row(const RowKernel& k, llvm::Value* r, const RowToWrite* pending) {
  const int64_t length = k.row_length;
  Index kept = unflatten(r, k.rc.kept_shape);
  auto row_index = [&](const Shape& s) { return row_value_index(k, kept, s); };
  auto full_index = [&](llvm::Value* j) { return full_row_index(k, kept, j); };
  llvm::Value* row_start = b_.CreateMul(r, i64(length));
  auto prefetch_next_row = [&](llvm::Value* j, int64_t count) {
    prefetch_lines(k.row_inputs, b_.CreateAdd(b_.CreateAdd(row_start, i64(length)), j), count);
  };
  llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  row_cache_.clear();
  row_offset_ = k.pipelined ? row_half(k, r) : nullptr;
  for (int n : step_.nodes) {
    const Node& node = g_.nodes[n];
    const ir::TensorType& t = type(node.result);
    if (ir::op_kind(node.op) == OpKind::Reduction) {
      if (k.pipelined && n == k.last_reduction)
        per_chunk_ = [&](llvm::Value* start, int64_t count) -> Status {
          prefetch_next_row(start, count);
          return pending ? write_pending(k, *pending, start, count) : Status::Ok();
        };
      if (k.column_sum) {
        remember_reduction(node, row_index(t.shape), k.column_sum);
        continue;
      }
      Status reduced = reduce(node, length, k.rc.full, full_index, row_index(t.shape), entry);
      per_chunk_ = nullptr;
      KILN_RETURN_IF_ERROR(reduced);
    } else if (t.shape != k.rc.full) {
      auto v = value_at(node.result, row_index(t.shape));  // a row value: once per row
      if (!v.ok()) return v.error();
    }
  }
  if (k.pipelined) {
    for (int n : step_.nodes) {
      const ir::TensorType& t = type(g_.nodes[n].result);
      if (t.shape == k.rc.full) continue;
      KILN_ASSIGN_OR_RETURN(llvm::Value * v, value_at(g_.nodes[n].result, row_index(t.shape)));
      llvm::AllocaInst*& slot = carried_[g_.nodes[n].result];
      if (!slot) slot = entry.CreateAlloca(v->getType());
      b_.CreateStore(v, slot);
    }
  } else if (!k.full_outputs.empty() && !k.column_sum) {
    RowToWrite row{kept, row_start, memo_, row_cache_};
    auto flat_at = [&](llvm::Value* j) {
      return k.rc.contiguous() ? b_.CreateAdd(row_start, j) : flat_of(k.rc.full, full_index(j));
    };
    KILN_RETURN_IF_ERROR(store_range(
        i64(0), i64(length), k.full_outputs, k.rc.contiguous() && worth_streaming(k.full_outputs, length), flat_at,
        [&](llvm::Value* j) { return row_outputs(k, row, j); }, prefetch_next_row));
  }
  for (ValueId o : step_.outputs) {
    if (type(o).shape == k.rc.full) continue;
    Index at = row_index(type(o).shape);
    KILN_ASSIGN_OR_RETURN(llvm::Value * v, value_at(o, at));
    store_element(b_, type(o).dtype, bases_[slot_[o]], flat_of(type(o).shape, at), v);
  }
  drop_loop_values();
  return Status::Ok();
}

// Row r of a pipelined kernel as the next row's pass sees it: its row values loaded from
// carried_, its row buffers in their half.
RowToWrite KernelEmitter::pending_row(const RowKernel& k, llvm::Value* r) {
  RowToWrite p;
  p.kept = unflatten(r, k.rc.kept_shape);
  p.row_start = b_.CreateMul(r, i64(k.row_length));
  p.memo = invariant_;
  for (int n : step_.nodes) {
    ValueId v = g_.nodes[n].result;
    const Shape& shape = type(v).shape;
    if (shape == k.rc.full) continue;
    llvm::AllocaInst* slot = carried_.at(v);
    p.memo[{v, key_of(canonical(v, row_value_index(k, p.kept, shape)))}] =
        b_.CreateLoad(slot->getAllocatedType(), slot);
  }
  llvm::Value* offset = row_half(k, r);
  for (auto [v, buffer] : keep_buffers_)
    p.row_cache[v] = b_.CreateGEP(buffer->getAllocatedType()->getArrayElementType(), buffer, offset);
  return p;
}

// Writes the pending row's outputs at row positions [from, from + count), from =
// start + line_start, with streaming stores; where that passes the row's end (in its last
// chunk, when line_start > 0), the rest of the row and its head [0, line_start) instead,
// with ordinary stores.
Status KernelEmitter::write_pending(const RowKernel& k, const RowToWrite& p, llvm::Value* start, int64_t count) {
  llvm::Value* from = b_.CreateAdd(start, k.line_start);
  auto values = [&](llvm::Value* j) { return row_outputs(k, p, j); };
  auto* stream = llvm::BasicBlock::Create(ctx_, "pending.stream", fn_);
  auto* ends = llvm::BasicBlock::Create(ctx_, "pending.ends", fn_);
  auto* done = llvm::BasicBlock::Create(ctx_, "pending.done", fn_);
  b_.CreateCondBr(b_.CreateICmpSLE(b_.CreateAdd(from, i64(count)), i64(k.row_length)), stream, ends);
  b_.SetInsertPoint(stream);
  KILN_RETURN_IF_ERROR(stream_block(k.full_outputs, from, count, b_.CreateAdd(p.row_start, from), values));
  b_.CreateBr(done);
  b_.SetInsertPoint(ends);
  auto flat_at = [&](llvm::Value* j) { return b_.CreateAdd(p.row_start, j); };
  KILN_RETURN_IF_ERROR(store_range(from, i64(k.row_length), k.full_outputs, false, flat_at, values));
  KILN_RETURN_IF_ERROR(store_range(i64(0), k.line_start, k.full_outputs, false, flat_at, values));
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  return Status::Ok();
}

// The full-shape outputs of `row` at row position j. The builder's memo is as before.
Result<std::vector<llvm::Value*>> KernelEmitter::row_outputs(const RowKernel& k, const RowToWrite& row,
                                                             llvm::Value* j) {
  auto saved = memo_;
  memo_ = row.memo;
  Index full = full_row_index(k, row.kept, j);
  use_row_cache(full, j, &row.row_cache);
  std::vector<llvm::Value*> v;
  for (ValueId o : k.full_outputs) {
    auto x = value_at(o, full);
    if (!x.ok()) {
      memo_ = saved;
      return x.error();
    }
    v.push_back(*x);
  }
  memo_ = saved;
  return v;
}

Status KernelEmitter::reduce(const Node& n, int64_t row_length, const Shape& full_shape,
                             const std::function<Index(llvm::Value*)>& full_index, const Index& at,
                             llvm::IRBuilder<>& entry) {
  ValueId x = n.operands[0];
  ir::DType dt = type(x).dtype;
  bool fp = ir::is_float(dt);
  llvm::Type* ct = compute_type(ctx_, dt);
  // Sums of floats accumulate in double, as the interpreter does.
  llvm::Type* acc_type = fp && n.op == Op::ReduceSum ? b_.getDoubleTy() : fp ? ct : b_.getInt64Ty();
  llvm::AllocaInst* acc = entry.CreateAlloca(acc_type);
  llvm::AllocaInst* best = n.op == Op::Argmax ? entry.CreateAlloca(b_.getInt64Ty()) : nullptr;
  const bool min_or_max = fp && (n.op == Op::ReduceMax || n.op == Op::ReduceMin);
  llvm::AllocaInst* saw_nan = min_or_max ? entry.CreateAlloca(b_.getInt1Ty()) : nullptr;
  if (saw_nan) b_.CreateStore(b_.getFalse(), saw_nan);
  llvm::Value* init;
  if (n.op == Op::ReduceSum) init = llvm::Constant::getNullValue(acc_type);
  else if (n.op == Op::ReduceMin)
    init = fp ? llvm::ConstantFP::getInfinity(acc_type) : llvm::ConstantInt::get(acc_type, INT64_MAX);
  else
    init = fp ? llvm::ConstantFP::getInfinity(acc_type, true)
              : llvm::ConstantInt::get(acc_type, static_cast<uint64_t>(INT64_MIN));
  b_.CreateStore(init, acc);
  if (best) b_.CreateStore(i64(0), best);
  // An operand computed here that other nodes of the step also read is kept in a row
  // buffer, so later loops over the row load it instead of computing it again (softmax's
  // exp, layer_norm's x - mean).
  llvm::Value* keep = nullptr;
  if (computed_here(x) && fp && type(x).shape == full_shape && !row_cache_.count(x) &&
      row_length * 4 <= kRowCacheBytes) {
    if (ir::uses_in_step(g_, step_, x) > 1) {
      llvm::AllocaInst*& buffer = keep_buffers_[x];
      if (!buffer) {
        buffer = entry.CreateAlloca(llvm::ArrayType::get(ct, static_cast<uint64_t>(row_buffers_ * row_length)));
        buffer->setAlignment(llvm::Align(64));
      }
      keep = row_offset_ ? b_.CreateGEP(ct, buffer, row_offset_) : buffer;
    }
  }
  const bool blocked = chunked_sum(n, row_length);
  llvm::AllocaInst* block_acc = blocked ? entry.CreateAlloca(ct) : nullptr;
  llvm::AllocaInst* lanes = blocked ? entry.CreateAlloca(llvm::ArrayType::get(ct, kSumLanes)) : nullptr;
  if (lanes) lanes->setAlignment(llvm::Align(64));
  llvm::Value* sum_into = block_acc;  // where `element` adds a blocked sum's term
  auto before = memo_;
  auto element = [&](llvm::Value* j) -> Status {
    Index full = full_index(j);
    use_row_cache(full, j);
    KILN_ASSIGN_OR_RETURN(llvm::Value * v, value_at(x, full));
    if (keep) b_.CreateStore(v, b_.CreateGEP(ct, keep, j));
    if (blocked) {
      auto* sum = llvm::cast<llvm::Instruction>(b_.CreateFAdd(b_.CreateLoad(ct, sum_into), v));
      sum->setHasAllowReassoc(true);
      b_.CreateStore(sum, sum_into);
      memo_ = before;
      return Status::Ok();
    }
    llvm::Value* a = b_.CreateLoad(acc_type, acc);
    if (!fp) v = b_.CreateSExt(v, b_.getInt64Ty());
    llvm::Value* next;
    switch (n.op) {
      case Op::ReduceSum: {
        // Reassociable, so the vectorizer may keep several partial sums (in double).
        if (fp) next = b_.CreateFAdd(a, b_.CreateFPExt(v, acc_type));
        else next = b_.CreateAdd(a, v);
        if (fp) llvm::cast<llvm::Instruction>(next)->setHasAllowReassoc(true);
        break;
      }
      case Op::ReduceMax:
      case Op::ReduceMin: {
        bool is_max = n.op == Op::ReduceMax;
        if (!fp) {
          next = b_.CreateSelect(is_max ? b_.CreateICmpSGT(v, a) : b_.CreateICmpSLT(v, a), v, a);
          break;
        }
        // maxnum marked "no NaNs" vectorizes as a reduction of single vmaxps; a NaN makes
        // its result poison, so a separate flag records whether one was seen, and the
        // result is NaN then (a select never returns its unchosen poison operand).
        // llvm.maximum would do both at once, at twice the instructions per element.
        // Between -0 and +0 either may be returned; they compare equal.
        next = b_.CreateIntrinsic(is_max ? llvm::Intrinsic::maxnum : llvm::Intrinsic::minnum, {acc_type}, {a, v});
        llvm::FastMathFlags no_nans;
        no_nans.setNoNaNs();
        no_nans.setNoSignedZeros();
        llvm::cast<llvm::Instruction>(next)->setFastMathFlags(no_nans);
        b_.CreateStore(b_.CreateOr(b_.CreateLoad(b_.getInt1Ty(), saw_nan), b_.CreateFCmpUNO(v, v)), saw_nan);
        break;
      }
      default: {  // argmax: the first maximum; the first NaN wins
        llvm::Value* better =
            fp ? b_.CreateAnd(b_.CreateFCmpORD(a, a), b_.CreateOr(b_.CreateFCmpOGT(v, a), b_.CreateFCmpUNO(v, v)))
               : b_.CreateICmpSGT(v, a);
        better = b_.CreateOr(better, b_.CreateICmpEQ(j, i64(0)));
        b_.CreateStore(b_.CreateSelect(better, j, b_.CreateLoad(b_.getInt64Ty(), best)), best);
        next = b_.CreateSelect(better, v, a);
      }
    }
    b_.CreateStore(next, acc);
    memo_ = before;
    return Status::Ok();
  };
  // A light sum pass (layer_norm's mean and variance) stays rolled; see rolled_loops_.
  rolled_loops_ = n.op == Op::ReduceSum;
  if (!blocked) {
    KILN_RETURN_IF_ERROR(loop(i64(0), i64(row_length), element));
  } else {
    const int64_t blocks = (row_length + kSumBlock - 1) / kSumBlock;
    KILN_RETURN_IF_ERROR(loop(i64(0), i64(blocks), [&](llvm::Value* block) -> Status {
      llvm::Value* begin = b_.CreateMul(block, i64(kSumBlock));
      llvm::Value* end = b_.CreateAdd(begin, i64(kSumBlock));
      end = b_.CreateSelect(b_.CreateICmpSLT(end, i64(row_length)), end, i64(row_length));
      b_.CreateStore(llvm::ConstantFP::get(ct, 0.0), block_acc);
      b_.CreateStore(llvm::ConstantAggregateZero::get(lanes->getAllocatedType()), lanes);
      llvm::Value* chunks = b_.CreateSDiv(b_.CreateSub(end, begin), i64(kSumLanes));
      KILN_RETURN_IF_ERROR(loop(
          i64(0), chunks,
          [&](llvm::Value* c) -> Status {
            llvm::Value* start = b_.CreateAdd(begin, b_.CreateMul(c, i64(kSumLanes)));
            // Over row positions, not 0..kSumLanes plus `start`: InstCombine makes that sum an
            // `or` (start is a multiple of kSumLanes), and the loads through it became gathers.
            KILN_RETURN_IF_ERROR(loop(
                start, b_.CreateAdd(start, i64(kSumLanes)),
                [&](llvm::Value* j) -> Status {
                  sum_into = b_.CreateGEP(ct, lanes, b_.CreateSub(j, start));
                  return element(j);
                },
                Unroll::kVectorOnly));
            return per_chunk_ ? per_chunk_(start, kSumLanes) : Status::Ok();
          },
          Unroll::kRolled));  // unrolled, the lanes went through the stack between chunks
      sum_into = block_acc;
      KILN_RETURN_IF_ERROR(loop(b_.CreateAdd(begin, b_.CreateMul(chunks, i64(kSumLanes))), end, element));
      KILN_RETURN_IF_ERROR(loop(
          i64(0), i64(kSumLanes),
          [&](llvm::Value* k) -> Status {
            auto* sum = llvm::cast<llvm::Instruction>(
                b_.CreateFAdd(b_.CreateLoad(ct, block_acc), b_.CreateLoad(ct, b_.CreateGEP(ct, lanes, k))));
            sum->setHasAllowReassoc(true);
            b_.CreateStore(sum, block_acc);
            return Status::Ok();
          },
          Unroll::kVectorOnly));
      auto* total = llvm::cast<llvm::Instruction>(
          b_.CreateFAdd(b_.CreateLoad(acc_type, acc), b_.CreateFPExt(b_.CreateLoad(ct, block_acc), acc_type)));
      b_.CreateStore(total, acc);
      return Status::Ok();
    }));
  }
  rolled_loops_ = false;
  if (keep) row_cache_[x] = keep;
  if (n.op == Op::Argmax) {
    remember_reduction(n, at, b_.CreateLoad(b_.getInt64Ty(), best));
    return Status::Ok();
  }
  llvm::Value* total = b_.CreateLoad(acc_type, acc);
  if (saw_nan)
    total = b_.CreateSelect(b_.CreateLoad(b_.getInt1Ty(), saw_nan), llvm::ConstantFP::getNaN(acc_type), total);
  last_total_ = total;
  remember_reduction(n, at, total);
  return Status::Ok();
}

void KernelEmitter::remember_reduction(const Node& n, const Index& at, llvm::Value* total) {
  const ir::TensorType& rt = type(n.result);
  llvm::Value* result = total;
  if (n.op != Op::Argmax) {
    if (total->getType()->isFloatingPointTy())
      result = round_to(b_, rt.dtype, b_.CreateFPCast(total, compute_type(ctx_, rt.dtype)));
    else result = round_to(b_, rt.dtype, b_.CreateTrunc(total, compute_type(ctx_, rt.dtype)));
  }
  Index key = at;
  const Shape& rshape = rt.shape;
  for (size_t d = 0; d < key.dims.size() && d < rshape.size(); ++d)
    if (rshape[d] == 1) key.dims[d] = i64(0);
  if (rshape.empty()) key = Index{};
  memo_[{n.result, key.dims}] = result;
}

}  // namespace kiln::codegen::cpu::detail
