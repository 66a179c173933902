#include "codegen/cpu/kernel_emitter.h"

#include <fmt/format.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Operator.h>
#include <algorithm>
#include <optional>
#include <set>

#include "codegen/cpu/identical_kernels.h"
#include "codegen/cpu/kernel_emitter_class.h"
#include "codegen/cpu/scalar_ops.h"
#include "ir/channel_layouts.h"
#include "ir/element_probe.h"
#include "ir/shape_inference.h"
#include "runtime/format/target.h"

namespace kiln::codegen::cpu {
namespace detail {
namespace {

// Whether a loop step reads windows (two or more slices: a pool's taps) that each keep
// the last dim whole, over rows of whole 64-byte lines: a pool over activations in a
// channel layout (ir/channel_layouts.h). Each tap is then a run of whole vector loads,
// and twice the lanes halve the steps of each row (docs/cpu.md has the measurements).
bool windows_over_whole_rows(const ir::Graph& g, const ir::Step& step) {
  const ir::TensorType& out = g.type(step.outputs[0]);
  if (out.rank() == 0 || out.shape.back() * ir::dtype_size(out.dtype) % 64 != 0) return false;
  int slices = 0;
  for (int n : step.nodes) {
    const ir::Node& node = g.nodes[n];
    if (node.op != ir::Op::Slice) continue;
    const ir::Shape& from = g.type(node.operands[0]).shape;
    const auto& strides = node.attrs.get_ints("strides");
    if (from.back() != out.shape.back() || node.attrs.get_ints("starts").back() != 0 ||
        (!strides.empty() && strides.back() != 1))
      return false;
    ++slices;
  }
  return slices >= 2;
}

// 512-bit vectors (where the CPU has them) pay in compute-bound kernels: row reductions
// and the inlined exp, erf and tanh polynomials. A memory-bound loop streams a little slower
// with them, and libmvec's 512-bit cos is no faster than its 256-bit one (docs/cpu.md).
bool wide_vectors_pay(const ir::Graph& g, const ir::Step& step) {
  if (step.kind == ir::StepKind::Reduction) return true;
  if (windows_over_whole_rows(g, step)) return true;
  for (int n : step.nodes)
    if (ir::op_cpu_math(g.nodes[n].op) == ir::CpuMath::Polynomial) return true;
  return false;
}

// The nodes of `step` that call the math library.
int math_library_calls(const ir::Graph& g, const ir::Step& step) {
  int calls = 0;
  for (int n : step.nodes) calls += calls_math_library(g.nodes[n].op, g.type(g.nodes[n].result).dtype);
  return calls;
}

}  // namespace

KernelEmitter::KernelEmitter(const ir::Graph& g, const ir::Step& step, llvm::Module& m, int64_t streaming_bytes,
                             int vector_bytes, bool partial)
    : ElementWalker(g, step),
      streaming_bytes_(streaming_bytes),
      vector_bytes_(vector_bytes >= 64 && wide_vectors_pay(g, step) ? 64 : 32),
      call_interleave_(step.kind == ir::StepKind::Loop && math_library_calls(g, step) >= 2 ? kCallInterleave : 0),
      split_(ir::reduction_split(g, step, ir::kCpuSplit)),
      partial_(partial),
      masked_tails_(vector_bytes >= 64),
      m_(m),
      ctx_(m.getContext()),
      b_(ctx_) {}

Status KernelEmitter::emit() {
  auto* i64 = b_.getInt64Ty();
  auto* ptr = llvm::PointerType::getUnqual(ctx_);
  auto* fn_type = llvm::FunctionType::get(b_.getVoidTy(), {ptr, i64, i64}, false);
  const std::string symbol = format::kernel_symbol(step_.name);
  fn_ = llvm::Function::Create(fn_type, llvm::Function::ExternalLinkage,
                               partial_ ? format::partial_kernel_symbol(symbol) : symbol, m_);
  fn_->setDoesNotThrow();
  fn_->addFnAttr("prefer-vector-width", std::to_string(vector_bytes_ * 8));
  auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  b_.SetInsertPoint(entry);
  llvm::Value* args = fn_->getArg(0);
  for (size_t k = 0; k < step_.inputs.size() + step_.outputs.size(); ++k)
    bases_.push_back(b_.CreateLoad(ptr, b_.CreateConstGEP1_64(ptr, args, k)));
  if (split_)  // the scratch follows the outputs
    scratch_ = b_.CreateLoad(ptr, b_.CreateConstGEP1_64(ptr, args, step_.inputs.size() + step_.outputs.size()));
  Status body = step_.kind == ir::StepKind::Loop        ? emit_loop()
                : step_.kind == ir::StepKind::Reduction ? emit_reduction()
                                                        : emit_scatter();
  KILN_RETURN_IF_ERROR(body);
  // Non-temporal stores are weakly ordered: fence them before the caller's threads sync.
  // Once per call, not per row: a fence waits for the write-combining buffers to drain.
  if (streamed_) b_.CreateIntrinsic(llvm::Intrinsic::x86_sse_sfence, {}, {});
  b_.CreateRetVoid();
  // A row kernel divides by a row's value (softmax's sum) through its reciprocal, which
  // LICM then computes once per row: a multiply per element instead of a division,
  // within 1 ulp of it.
  if (step_.kind == ir::StepKind::Reduction)
    for (llvm::BasicBlock& block : *fn_)
      for (llvm::Instruction& i : block)
        if (i.getOpcode() == llvm::Instruction::FDiv) i.setHasAllowReciprocal(true);
  return Status::Ok();
}

namespace {

// The vector lanes of a loop that rounds to f16 or bf16 in an instruction (F16C's or
// AVX512-BF16's conversion).
constexpr int kHalfLanes = 16;

// Whether `body` carries a float value in an order it must keep: it stores to a stack
// slot it also loads from (an accumulator, which the optimizer turns into a value the
// loop carries) a float computed by an op that may not be reordered. Sums marked
// reassociable and maxima or minima of no NaNs (the row reductions') may be.
bool carries_ordered_float(const std::vector<llvm::BasicBlock*>& body) {
  std::set<const llvm::Value*> loaded;
  std::vector<const llvm::StoreInst*> stores;
  for (llvm::BasicBlock* block : body)
    for (llvm::Instruction& instruction : *block) {
      if (auto* load = llvm::dyn_cast<llvm::LoadInst>(&instruction))
        loaded.insert(llvm::getUnderlyingObject(load->getPointerOperand()));
      if (auto* store = llvm::dyn_cast<llvm::StoreInst>(&instruction)) stores.push_back(store);
    }
  auto reorderable = [](const llvm::Value* v) {
    auto* op = llvm::dyn_cast<llvm::FPMathOperator>(v);
    if (!op) return false;
    if (auto* call = llvm::dyn_cast<llvm::IntrinsicInst>(v))
      return (call->getIntrinsicID() == llvm::Intrinsic::maxnum || call->getIntrinsicID() == llvm::Intrinsic::minnum) &&
             op->hasNoNaNs();
    return op->hasAllowReassoc();
  };
  for (const llvm::StoreInst* store : stores) {
    const llvm::Value* slot = llvm::getUnderlyingObject(store->getPointerOperand());
    const llvm::Value* value = store->getValueOperand();
    if (llvm::isa<llvm::AllocaInst>(slot) && loaded.count(slot) && value->getType()->isFloatingPointTy() &&
        !reorderable(value))
      return true;
  }
  return false;
}

// end - begin where both are constants.
std::optional<int64_t> constant_trip_count(llvm::Value* begin, llvm::Value* end) {
  auto* first = llvm::dyn_cast<llvm::ConstantInt>(begin);
  auto* past = llvm::dyn_cast<llvm::ConstantInt>(end);
  if (!first || !past) return std::nullopt;
  return past->getSExtValue() - first->getSExtValue();
}

}  // namespace

Status KernelEmitter::loop(llvm::Value* begin, llvm::Value* end, const std::function<Status(llvm::Value*)>& body,
                           Unroll unroll, int interleave, Iterations iterations) {
  const bool exact = unroll == Unroll::kVectorOnly || unroll == Unroll::kWhole;
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(ctx_, "loop", fn_);
  auto* inner = llvm::BasicBlock::Create(ctx_, "body", fn_);
  auto* exit = llvm::BasicBlock::Create(ctx_, "exit", fn_);
  b_.CreateBr(header);
  b_.SetInsertPoint(header);
  llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2);
  i->addIncoming(begin, pre);
  b_.CreateCondBr(exact ? b_.CreateICmpNE(i, end) : b_.CreateICmpSLT(i, end), inner, exit);
  b_.SetInsertPoint(inner);
  KILN_RETURN_IF_ERROR(body(i));
  llvm::Value* next = b_.CreateAdd(i, i64(1), "", true, true);
  i->addIncoming(next, b_.GetInsertBlock());
  llvm::BranchInst* back = b_.CreateBr(header);
  // The body's blocks: `inner` and every block created after it (with the loops nested in it).
  const std::vector<llvm::BasicBlock*> body_blocks = blocks_from(inner);
  size_t body_instructions = 0;
  bool converts_half = false;  // a conversion between float and f16 or bf16
  for (llvm::BasicBlock* block : body_blocks) {
    body_instructions += block->size();
    for (llvm::Instruction& instruction : *block)
      converts_half =
          converts_half ||
          (instruction.getOpcode() == llvm::Instruction::FPTrunc && instruction.getType()->is16bitFPTy()) ||
          (instruction.getOpcode() == llvm::Instruction::FPExt && instruction.getOperand(0)->getType()->is16bitFPTy());
  }
  auto flag = [&](const char* name) { return llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, name)}); };
  std::vector<llvm::Metadata*> hints{nullptr};
  if (unroll == Unroll::kRolled ||
      (unroll == Unroll::kDefault && rolled_loops_ && body_instructions < kRolledBodyLimit))
    hints.push_back(flag("llvm.loop.unroll.disable"));
  if (unroll == Unroll::kWhole) hints.push_back(flag("llvm.loop.unroll.full"));
  if (unroll == Unroll::kVectorOnly) {
    // Once vectorized, the loop may be unrolled whole: its stores to the stack buffer
    // then forward straight to the streaming stores.
    llvm::Metadata* followup[] = {llvm::MDString::get(ctx_, "llvm.loop.vectorize.followup_vectorized"),
                                  flag("llvm.loop.unroll.full")};
    hints.push_back(flag("llvm.loop.unroll.disable"));
    hints.push_back(llvm::MDNode::get(ctx_, followup));
  }
  auto hint = [&](const char* name, llvm::Constant* value) {
    hints.push_back(llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, name), llvm::ConstantAsMetadata::get(value)}));
  };
  bool width_given = false;
  if (tile_loops_ != TileLoops::kNone && (unroll == Unroll::kDefault || unroll == Unroll::kVectorOnly)) {
    // A whole tile's row or column is one vector, rather than the vectorizer's 4
    // interleaved, which left every column of a tile to the scalar remainder loop. In a
    // part of a tile (at the edges of the output or of a thread's range) the rows are
    // vectors with masked tails where the CPU has them, and the fill is scalar: vectorized,
    // it took LLVM longer to compile than the rest of the kernel.
    const bool scalar = tile_loops_ == TileLoops::kPart && tile_walk_ == TileWalk::kFill;
    hint("llvm.loop.vectorize.width", b_.getInt32(scalar ? 1 : static_cast<int>(tile_side())));
    hint("llvm.loop.interleave.count", b_.getInt32(1));
    if (tile_loops_ == TileLoops::kPart && !scalar && masked_tails_)
      hint("llvm.loop.vectorize.predicate.enable", b_.getTrue());
    width_given = true;
  }
  if (short_rows_ && unroll == Unroll::kDefault && interleave == 0) {
    if (masked_tails_) {
      hint("llvm.loop.vectorize.predicate.enable", b_.getTrue());
    } else {
      hint("llvm.loop.vectorize.width", b_.getInt32(4));
      hint("llvm.loop.interleave.count", b_.getInt32(1));
      width_given = true;
    }
  }
  // LLVM 19 costs the conversions between float and f16 or bf16 too high and vectorizes
  // a loop with one by 4 lanes (whose stores then lose their non-temporal hint); 16 (one
  // 512-bit conversion, or two 256-bit ones) ran fastest (docs/cpu.md). Not where the
  // loop carries a float in an order: a width lets the vectorizer reorder it.
  const bool ordered = header->phis().end() != std::next(header->phis().begin()) || carries_ordered_float(body_blocks);
  if (!width_given && converts_half && !ordered) hint("llvm.loop.vectorize.width", b_.getInt32(kHalfLanes));
  // A row kernel's pass over a row of constant length: the vectorizer's remainder loop
  // is scalar, so a softmax row of 208 floats (13 vectors, interleaved by 2) ran its last
  // 16 through scalar exp, at half the speed of a row of 192 (docs/cpu.md). Whole vectors
  // interleave by a count that divides them; with AVX-512 a partial vector of 3 lanes or
  // more is folded into masked iterations (for 1 or 2, the masks cost more than the
  // scalar lanes: rows of 49 took 1.04 times as long masked, rows of 51 0.96).
  if (step_.kind == ir::StepKind::Reduction && unroll == Unroll::kDefault && interleave == 0)
    if (auto trip = constant_trip_count(begin, end)) {
      const int64_t lanes = vector_bytes_ / 4;
      if (*trip % lanes >= 3 && masked_tails_) hint("llvm.loop.vectorize.predicate.enable", b_.getTrue());
      if (*trip % lanes == 0) interleave = *trip % (4 * lanes) == 0 ? 4 : *trip % (2 * lanes) == 0 ? 2 : 1;
    }
  if (interleave > 0)
    hints.push_back(llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.interleave.count"),
                                             llvm::ConstantAsMetadata::get(b_.getInt32(interleave))}));
  // A loop kernel's elements are independent (the runtime already splits them across
  // threads). An output written in place over an input (an optimizer's state update)
  // aliases it at the same index only, which the vectorizer cannot prove: its runtime
  // overlap check fails and the whole kernel runs scalar. Saying so lets it vectorize.
  // Loops nested in this one have tagged their own accesses first.
  if (step_.kind == ir::StepKind::Loop || iterations == Iterations::kIndependent) {
    llvm::MDNode* group = llvm::MDNode::getDistinct(ctx_, {});
    for (llvm::BasicBlock* block : body_blocks) {
      for (llvm::Instruction& instruction : *block)
        if (instruction.mayReadOrWriteMemory() && !instruction.getMetadata(llvm::LLVMContext::MD_access_group))
          instruction.setMetadata(llvm::LLVMContext::MD_access_group, group);
    }
    hints.push_back(llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.parallel_accesses"), group}));
  }
  if (hints.size() > 1) {
    llvm::MDNode* self = llvm::MDNode::getDistinct(ctx_, hints);
    self->replaceOperandWith(0, self);
    back->setMetadata(llvm::LLVMContext::MD_loop, self);
  }
  b_.SetInsertPoint(exit);
  return Status::Ok();
}

std::vector<llvm::BasicBlock*> KernelEmitter::blocks_from(llvm::BasicBlock* first) const {
  std::vector<llvm::BasicBlock*> blocks;
  for (llvm::BasicBlock& block : *fn_)
    if (!blocks.empty() || &block == first) blocks.push_back(&block);
  return blocks;
}

Status KernelEmitter::store_range(llvm::Value* begin, llvm::Value* end, const std::vector<ValueId>& outs, bool stream,
                                  const std::function<llvm::Value*(llvm::Value*)>& flat_at,
                                  const std::function<Result<std::vector<llvm::Value*>>(llvm::Value*)>& values,
                                  const std::function<void(llvm::Value*, int64_t)>& per_block) {
  auto one_at_a_time = [&](llvm::Value* i) -> Status {
    KILN_ASSIGN_OR_RETURN(std::vector<llvm::Value*> v, values(i));
    for (size_t k = 0; k < outs.size(); ++k)
      store_element(b_, type(outs[k]).dtype, bases_[slot_[outs[k]]], flat_at(i), v[k]);
    return Status::Ok();
  };
  if (!stream) return loop(begin, end, one_at_a_time, Unroll::kDefault, call_interleave_);
  // One line per block: longer blocks separate the loads from the stores and lose much
  // of the bandwidth (docs/cpu.md). Where
  // the loop calls the math library it is compute-bound, and a block holds the vectors
  // interleaved.
  int64_t block = 1;
  for (ValueId o : outs) {
    int64_t size = ir::dtype_size(type(o).dtype);
    block = std::max({block, 64 / size, call_interleave_ * vector_bytes_ / size});
  }
  // The head runs up to the first index where the first output's address is on a line
  // boundary; streaming needs every output to be on one there (caller buffers may not be).
  auto [skip, all_on_lines] = to_line_boundary(outs, flat_at(begin));
  llvm::Value* first = b_.CreateAdd(begin, skip);
  llvm::Value* aligned = b_.CreateAnd(b_.CreateICmpSLT(first, end), all_on_lines);
  llvm::Value* head_end = b_.CreateSelect(aligned, first, end);
  llvm::Value* blocks = b_.CreateSelect(aligned, b_.CreateSDiv(b_.CreateSub(end, first), i64(block)), i64(0));
  llvm::Value* blocks_end = b_.CreateAdd(head_end, b_.CreateMul(blocks, i64(block)));
  // The unaligned head [begin, head_end) and the tail [blocks_end, end): one loop, twice.
  KILN_RETURN_IF_ERROR(loop(i64(0), i64(2), [&](llvm::Value* pass) -> Status {
    llvm::Value* is_head = b_.CreateICmpEQ(pass, i64(0));
    return loop(b_.CreateSelect(is_head, begin, blocks_end), b_.CreateSelect(is_head, head_end, end), one_at_a_time);
  }));
  auto one_block = [&](llvm::Value* n) -> Status {
    llvm::Value* start = b_.CreateAdd(head_end, b_.CreateMul(n, i64(block)));
    if (per_block) per_block(start, block);
    return stream_block(outs, start, block, flat_at(start), values);
  };
  // Two streams: block n of each half of the blocks in turn. The memory system serves
  // two sequential streams per thread faster than one (docs/cpu.md).
  llvm::Value* half = b_.CreateSDiv(blocks, i64(2));
  KILN_RETURN_IF_ERROR(loop(i64(0), half, [&](llvm::Value* n) -> Status {
    KILN_RETURN_IF_ERROR(one_block(n));
    return one_block(b_.CreateAdd(n, half));
  }));
  return loop(b_.CreateMul(half, i64(2)), blocks, one_block);
}

Status KernelEmitter::stream_block(const std::vector<ValueId>& outs, llvm::Value* start, int64_t count,
                                   llvm::Value* flat_start,
                                   const std::function<Result<std::vector<llvm::Value*>>(llvm::Value*)>& values) {
  llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  std::vector<llvm::Value*> staging;
  for (ValueId o : outs) {
    llvm::AllocaInst* buffer =
        entry.CreateAlloca(llvm::ArrayType::get(storage_type(ctx_, type(o).dtype), static_cast<uint64_t>(count)));
    buffer->setAlignment(llvm::Align(64));
    staging.push_back(buffer);
  }
  KILN_RETURN_IF_ERROR(loop(
      i64(0), i64(count),
      [&](llvm::Value* j) -> Status {
        KILN_ASSIGN_OR_RETURN(std::vector<llvm::Value*> v, values(b_.CreateAdd(start, j)));
        for (size_t k = 0; k < outs.size(); ++k) store_element(b_, type(outs[k]).dtype, staging[k], j, v[k]);
        return Status::Ok();
      },
      Unroll::kVectorOnly, call_interleave_));
  // Chunks of the vector width: what the vectorized loop stores, so each load forwards
  // from one store.
  const int64_t chunk = vector_bytes_;
  auto* chunk_type = llvm::FixedVectorType::get(b_.getInt64Ty(), static_cast<unsigned>(chunk / 8));
  auto* nontemporal = llvm::MDNode::get(ctx_, llvm::ConstantAsMetadata::get(b_.getInt32(1)));
  auto* as_bits = llvm::FunctionType::get(chunk_type, {chunk_type}, false);
  for (size_t k = 0; k < outs.size(); ++k) {
    int64_t size = ir::dtype_size(type(outs[k]).dtype);
    const bool bf16_outputs = type(outs[k]).dtype == ir::DType::BF16 && uses_bf16_instructions(m_);
    llvm::Value* to = b_.CreateGEP(b_.getInt8Ty(), bases_[slot_[outs[k]]], b_.CreateMul(flat_start, i64(size)));
    KILN_RETURN_IF_ERROR(loop(
        i64(0), i64(count * size / chunk),
        [&](llvm::Value* c) -> Status {
          llvm::Value* offset = b_.CreateMul(c, i64(chunk));
          llvm::Value* line =
              b_.CreateAlignedLoad(chunk_type, b_.CreateGEP(b_.getInt8Ty(), staging[k], offset), llvm::Align(chunk));
          // LLVM 19 stores AVX512-BF16's conversion result with a plain store even where
          // the store is non-temporal (it has no pattern for bf16 vectors), so each line
          // was read before it was written. Through an empty asm the value is bits.
          if (bf16_outputs) line = b_.CreateCall(llvm::InlineAsm::get(as_bits, "", "=x,0", false), {line});
          llvm::StoreInst* store =
              b_.CreateAlignedStore(line, b_.CreateGEP(b_.getInt8Ty(), to, offset), llvm::Align(chunk));
          store->setMetadata(llvm::LLVMContext::MD_nontemporal, nontemporal);
          return Status::Ok();
        },
        Unroll::kWhole));  // rolled, each line went through the stack buffer
  }
  streamed_ = true;
  return Status::Ok();
}

std::pair<llvm::Value*, llvm::Value*> KernelEmitter::to_line_boundary(const std::vector<ValueId>& outs,
                                                                      llvm::Value* at) {
  auto address = [&](ValueId o, llvm::Value* i) {
    return b_.CreateAdd(b_.CreatePtrToInt(bases_[slot_[o]], b_.getInt64Ty()),
                        b_.CreateMul(i, i64(ir::dtype_size(type(o).dtype))));
  };
  llvm::Value* skip = b_.CreateUDiv(b_.CreateAnd(b_.CreateNeg(address(outs[0], at)), i64(63)),
                                    i64(ir::dtype_size(type(outs[0]).dtype)));
  llvm::Value* there = b_.CreateAdd(at, skip);
  llvm::Value* all_on_lines = b_.getTrue();
  for (ValueId o : outs)
    all_on_lines = b_.CreateAnd(all_on_lines, b_.CreateICmpEQ(b_.CreateAnd(address(o, there), i64(63)), i64(0)));
  return {skip, all_on_lines};
}

void KernelEmitter::prefetch_lines(const std::vector<ValueId>& inputs, llvm::Value* at, int64_t count) {
  for (ValueId x : inputs) {
    int64_t size = ir::dtype_size(type(x).dtype);
    llvm::Value* first = b_.CreateGEP(b_.getInt8Ty(), bases_[slot_[x]], b_.CreateMul(at, i64(size)));
    for (int64_t offset = 0; offset < count * size; offset += 64) {
      llvm::Value* address = b_.CreateConstGEP1_64(b_.getInt8Ty(), first, static_cast<uint64_t>(offset));
      b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {address->getType()},
                         {address, b_.getInt32(0), b_.getInt32(2), b_.getInt32(1)});
    }
  }
}

bool KernelEmitter::worth_streaming(const std::vector<ValueId>& outs, int64_t row_length) const {
  int64_t bytes = 0;
  for (ValueId o : outs) {
    int64_t size = ir::dtype_size(type(o).dtype);
    if (row_length > 0 && row_length * size < 256) return false;
    bytes += type(o).num_elements() * size;
  }
  return !outs.empty() && bytes >= streaming_bytes_;
}

Status KernelEmitter::emit_loop() {
  const Shape& shape = type(step_.outputs[0]).shape;
  // Flat indexing: the vectorizer's best case.
  const bool flat = ir::flat_iteration(g_, step_);
  KILN_RETURN_IF_ERROR(hoist_scalars());
  auto identity = [](llvm::Value* i) { return i; };
  // Inputs of the output's shape are read at the output's flat index. Each streamed block
  // asks for theirs kPrefetchBlocks blocks ahead, which pays with two streams
  // (docs/cpu.md).
  std::vector<ValueId> same_shape;
  for (ValueId x : step_.inputs)
    if (type(x).shape == shape) same_shape.push_back(x);
  auto prefetch_ahead = [&](llvm::Value* i, int64_t count) {
    prefetch_lines(same_shape, b_.CreateAdd(i, i64(kPrefetchBlocks * count)), count);
  };
  const int64_t last = shape.empty() ? 1 : shape.back();
  if (flat || shape.size() < 2 || last < 4) {
    return store_range(
        fn_->getArg(1), fn_->getArg(2), step_.outputs, worth_streaming(step_.outputs, 0), identity,
        [&](llvm::Value* i) {
          return outputs_at(flat ? Index{i, {}} : unflatten(i, shape));
        },
        prefetch_ahead);
  }
  // Otherwise the work range is walked a row (of the last dim) at a time. Within a row the
  // last index is the loop index itself, so a broadcast operand's elements are
  // consecutive and a strided slice's (a pool's tap) are a vector's interleaved lanes, and
  // the loop vectorizes; over a flat index, `i % last` vectorizes only when the whole range
  // lies within one row, and every element pays for its whole index (a max pool's rows of
  // 13, walked flat, ran at half the speed).
  const Shape leading(shape.begin(), shape.end() - 1);
  // A concat of values (a pool gradient's taps put back in place) picks each element's
  // operand by its index: its lanes gather, which masked tails made slower (docs/cpu.md).
  // A padding's concat is no such join.
  const bool joins_along_rows = std::any_of(step_.nodes.begin(), step_.nodes.end(), [&](int n) {
    const Node& c = g_.nodes[n];
    return c.op == ir::Op::Concat &&
           std::count_if(c.operands.begin(), c.operands.end(), [&](ValueId x) { return !padding(x); }) > 1;
  });
  const bool stream = worth_streaming(step_.outputs, last);
  // A padded window's taps (a pool's) read the padding only in the first and last few
  // columns of a row: those run apart, and between them each tap reads its input
  // directly (docs/cpu.md).
  auto [lead, trail] = padded_columns();
  if (lead + trail >= last) lead = trail = 0;
  std::vector<std::pair<int64_t, int64_t>> parts = {{0, last}};
  if (lead + trail > 0) parts = {{0, lead}, {lead, last - trail}, {last - trail, last}};
  // A concat of values along the rows (channels-last activations joined along their
  // channels) reads one operand per run of columns: each run is a part, walked with that
  // operand read directly, where choosing per element took a branch per operand and kept
  // the loop from vectorizing (a dense block's concats ran at 0.07 of copy).
  const std::vector<int64_t> joins = joined_columns(last);
  if (joins_along_rows && !joins.empty() && lead + trail == 0) {
    parts.clear();
    int64_t first = 0;
    for (int64_t boundary : joins) {
      parts.emplace_back(first, boundary);
      first = boundary;
    }
    parts.emplace_back(first, last);
  }
  // The rows of the flat range [range_begin, range_end) within the work range.
  auto walk_rows = [&](llvm::Value* range_begin, llvm::Value* range_end) -> Status {
    llvm::Value* first_row = b_.CreateSDiv(range_begin, i64(last));
    llvm::Value* end_row = b_.CreateSDiv(b_.CreateAdd(range_end, i64(last - 1)), i64(last));
    return loop(first_row, end_row, [&](llvm::Value* r) -> Status {
      llvm::Value* row_start = b_.CreateMul(r, i64(last));
      // The row's columns within the range.
      llvm::Value* from = b_.CreateSub(range_begin, row_start);
      from = b_.CreateSelect(b_.CreateICmpSGT(from, i64(0)), from, i64(0));
      llvm::Value* to = b_.CreateSub(range_end, row_start);
      to = b_.CreateSelect(b_.CreateICmpSLT(to, i64(last)), to, i64(last));
      Index row = unflatten(r, leading);
      short_rows_ = (last < kShortRow || parts.size() > 1) && !joins_along_rows;
      for (auto [first, past] : parts) {
        llvm::Value* lo = b_.CreateSelect(b_.CreateICmpSGT(from, i64(first)), from, i64(first));
        llvm::Value* hi = b_.CreateSelect(b_.CreateICmpSLT(to, i64(past)), to, i64(past));
        KILN_RETURN_IF_ERROR(store_range(
            lo, hi, step_.outputs, stream, [&](llvm::Value* c) { return b_.CreateAdd(row_start, c); },
            [&, first = first, past = past](llvm::Value* c) {
              Index idx = row;
              idx.dims.push_back(c);
              column_range_ = ColumnRange{c, first, past - 1};
              auto values = outputs_at(idx);
              column_range_.reset();
              return values;
            },
            [&](llvm::Value* c, int64_t count) { prefetch_ahead(b_.CreateAdd(row_start, c), count); }));
      }
      short_rows_ = false;
      return Status::Ok();
    });
  };
  if (parts.size() == 1)
    if (std::optional<ir::ReadAcrossRows> across = ir::inputs_read_across_rows(g_, step_); across && tiles_fit(*across))
      return emit_tiles(*across, walk_rows);
  return walk_rows(fn_->getArg(1), fn_->getArg(2));
}

Result<std::vector<llvm::Value*>> KernelEmitter::outputs_at(const Index& idx) {
  std::vector<llvm::Value*> v;
  for (ValueId o : step_.outputs) {
    KILN_ASSIGN_OR_RETURN(llvm::Value * x, value_at(o, idx));
    v.push_back(x);
  }
  drop_loop_values();
  return v;
}

Status KernelEmitter::hoist_scalars() {
  for (ValueId x : ir::invariant_scalars(g_, step_)) KILN_RETURN_IF_ERROR(value_at(x, Index{}));
  invariant_ = memo_;
  return Status::Ok();
}

// scatter_add: the base copied to the output, then each update added at its index.
// Repeated indices make the additions depend on each other, so it is one work item.
Status KernelEmitter::emit_scatter() {
  const Node* scatter = nullptr;
  for (int n : step_.nodes)
    if (g_.nodes[n].op == Op::ScatterAdd) scatter = &g_.nodes[n];
  if (!scatter) return make_error(fmt::format("cpu codegen: step {} has no scatter_add", step_.name));
  ValueId out = scatter->result, base = scatter->operands[0], indices = scatter->operands[1],
          updates = scatter->operands[2];
  const Shape &shape = type(out).shape, &ushape = type(updates).shape;
  int64_t axis = *ir::normalize_axis(scatter->attrs.get_int("axis", 0), static_cast<int64_t>(shape.size()));
  ir::DType dt = type(out).dtype;
  auto* first = llvm::BasicBlock::Create(ctx_, "scatter", fn_);
  auto* skip = llvm::BasicBlock::Create(ctx_, "scatter.skip", fn_);
  b_.CreateCondBr(b_.CreateICmpSLE(fn_->getArg(1), i64(0)), first, skip);
  b_.SetInsertPoint(first);
  KILN_RETURN_IF_ERROR(loop(i64(0), i64(ir::num_elements(shape)), [&](llvm::Value* k) -> Status {
    KILN_ASSIGN_OR_RETURN(llvm::Value * v, value_at(base, unflatten(k, shape)));
    store_element(b_, dt, bases_[slot_[out]], k, v);
    memo_.clear();
    return Status::Ok();
  }));
  KILN_RETURN_IF_ERROR(loop(i64(0), i64(ir::num_elements(ushape)), [&](llvm::Value* u) -> Status {
    Index src = unflatten(u, ushape);
    KILN_ASSIGN_OR_RETURN(Index dst, table_index(src, indices, axis, shape));
    llvm::Value* at_dst = flat_of(shape, dst);
    KILN_ASSIGN_OR_RETURN(llvm::Value * add, value_at(updates, src));
    llvm::Value* old = load_element(b_, dt, bases_[slot_[out]], at_dst);
    llvm::Value* sum = round_to(b_, dt, ir::is_float(dt) ? b_.CreateFAdd(old, add) : b_.CreateAdd(old, add));
    store_element(b_, dt, bases_[slot_[out]], at_dst, sum);
    memo_.clear();
    return Status::Ok();
  }));
  b_.CreateBr(skip);
  b_.SetInsertPoint(skip);
  return Status::Ok();
}

}  // namespace detail

namespace {

// The bytes of each argument the kernel was compiled for (inputs, then outputs), after
// their count: the runtime compares them with the artifact's metadata before it runs the
// kernel, so metadata that does not fit the code is refused rather than run off the end
// of a buffer.
void emit_signature(const ir::Graph& g, const ir::Step& step, llvm::Module& m) {
  llvm::Type* i64 = llvm::Type::getInt64Ty(m.getContext());
  std::vector<llvm::Constant*> words = {llvm::ConstantInt::get(i64, step.inputs.size() + step.outputs.size())};
  for (const auto* values : {&step.inputs, &step.outputs})
    for (ir::ValueId v : *values) {
      const ir::TensorType& t = g.type(v);
      words.push_back(llvm::ConstantInt::get(i64, static_cast<uint64_t>(t.num_elements() * ir::dtype_size(t.dtype))));
    }
  if (auto split = ir::reduction_split(g, step, ir::kCpuSplit)) {  // what the scratch must hold, and the parts
    words.push_back(llvm::ConstantInt::get(i64, static_cast<uint64_t>(split->scratch_bytes)));
    words.push_back(llvm::ConstantInt::get(i64, static_cast<uint64_t>(split->partial_items)));
  }
  auto* type = llvm::ArrayType::get(i64, words.size());
  new llvm::GlobalVariable(m, type, /*isConstant=*/true, llvm::GlobalValue::ExternalLinkage,
                           llvm::ConstantArray::get(type, words),
                           format::kernel_signature_symbol(format::kernel_symbol(step.name)));
}

}  // namespace

Status emit_kernels(const ir::Graph& g, llvm::Module& m, int64_t streaming_store_bytes, int vector_bytes) {
  if (!g.program) return make_error("cpu codegen: the graph has no program; run fusion first");
  const std::vector<std::vector<int64_t>> layouts = ir::channel_layouts_of_steps(g);
  IdenticalKernels kernels(m);
  auto add = [&](const ir::Graph& graph, const ir::Step& step, bool partial) {
    const std::string symbol = format::kernel_symbol(step.name);
    return kernels.add(partial ? format::partial_kernel_symbol(symbol) : symbol, [&](llvm::Module& module) {
      return detail::KernelEmitter(graph, step, module, streaming_store_bytes, vector_bytes, partial).emit();
    });
  };
  for (size_t s = 0; s < g.program->steps.size(); ++s) {
    const ir::Step& step = g.program->steps[s];
    if (step.kind == ir::StepKind::Library) continue;
    if (ir::reduction_split(g, step, ir::kCpuSplit)) KILN_RETURN_IF_ERROR(add(g, step, true));
    KILN_RETURN_IF_ERROR(add(g, step, false));
    emit_signature(g, step, m);
    // The same step over activations in oneDNN's layouts (ir/channel_layouts.h).
    for (int64_t layout : layouts[s]) {
      std::optional<ir::Graph> laid = ir::channel_layout_step(g, step, layout);
      if (!laid)
        return make_error(fmt::format("cpu codegen: internal error: step {} has no kernel in layout {}", step.name,
                                      ir::channel_layout_name(step.name, layout)));
      const ir::Step& only = laid->program->steps[0];
      KILN_RETURN_IF_ERROR(add(*laid, only, false));
      emit_signature(*laid, only, m);
    }
  }
  return Status::Ok();
}

}  // namespace kiln::codegen::cpu
