#include "codegen/cpu/kernel_emitter.h"

#include <algorithm>
#include <fmt/format.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <functional>
#include <map>
#include <optional>

#include "codegen/cpu/scalar_ops.h"
#include "ir/row_class.h"
#include "ir/shape_inference.h"

namespace kiln::codegen::cpu {
namespace {

using ir::Node;
using ir::Op;
using ir::OpKind;
using ir::Shape;
using ir::ValueId;

// 512-bit vectors (where the CPU has them) pay in compute-bound kernels: row reductions
// and the inlined exp and erf polynomials (softmax rows in cache: 1.2x). A memory-bound
// loop streams a little slower with them (y = x*2 + 1: 0.85-0.90 of memcpy against
// 0.89-0.92), and libmvec's 512-bit cos is no faster than its 256-bit one.
bool wide_vectors_pay(const ir::Graph& g, const ir::Step& step) {
  if (step.kind == ir::StepKind::Reduction) return true;
  for (int n : step.nodes) {
    Op op = g.nodes[n].op;
    if (op == Op::Exp || op == Op::Erf || op == Op::Sigmoid) return true;
  }
  return false;
}

// An index into a value: one index per dim, or (for values of the kernel's iteration
// shape when every value shares it) just the flat index.
struct Index {
  llvm::Value* flat = nullptr;
  std::vector<llvm::Value*> dims;
};



class KernelEmitter {
 public:
  KernelEmitter(const ir::Graph& g, const ir::Step& step, llvm::Module& m, int64_t streaming_bytes, int vector_bytes)
      : g_(g), step_(step), streaming_bytes_(streaming_bytes), vector_bytes_(vector_bytes >= 64 && wide_vectors_pay(g, step) ? 64 : 32), m_(m), ctx_(m.getContext()), b_(ctx_), slot_(g.values.size(), -1), producer_(g.producers()),
        member_(g.nodes.size(), 0) {
    int k = 0;
    for (ValueId v : step.inputs) slot_[v] = k++;
    for (ValueId v : step.outputs) slot_[v] = k++;
    for (int n : step.nodes) member_[n] = 1;
  }

  Status emit() {
    auto* i64 = b_.getInt64Ty();
    auto* ptr = llvm::PointerType::getUnqual(ctx_);
    auto* fn_type = llvm::FunctionType::get(b_.getVoidTy(), {ptr, i64, i64}, false);
    fn_ = llvm::Function::Create(fn_type, llvm::Function::ExternalLinkage, "kiln_" + step_.name, m_);
    fn_->setDoesNotThrow();
    fn_->addFnAttr("prefer-vector-width", std::to_string(vector_bytes_ * 8));
    auto* entry = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    b_.SetInsertPoint(entry);
    llvm::Value* args = fn_->getArg(0);
    for (size_t k = 0; k < step_.inputs.size() + step_.outputs.size(); ++k)
      bases_.push_back(b_.CreateLoad(ptr, b_.CreateConstGEP1_64(ptr, args, k)));
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

 private:
  const ir::TensorType& type(ValueId v) const { return g_.type(v); }
  bool computed_here(ValueId v) const { return producer_[v] >= 0 && member_[producer_[v]]; }
  llvm::Value* i64(int64_t v) { return b_.getInt64(static_cast<uint64_t>(v)); }

  // for (i = begin; i < end; ++i) body(i), leaving the builder after the loop. A loop
  // marked `vector_only` is never unrolled whole before the vectorizer sees it (which
  // would turn a short fixed-count loop into scalar code).
  Status loop(llvm::Value* begin, llvm::Value* end, const std::function<Status(llvm::Value*)>& body, bool vector_only = false) {
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* header = llvm::BasicBlock::Create(ctx_, "loop", fn_);
    auto* inner = llvm::BasicBlock::Create(ctx_, "body", fn_);
    auto* exit = llvm::BasicBlock::Create(ctx_, "exit", fn_);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2);
    i->addIncoming(begin, pre);
    b_.CreateCondBr(b_.CreateICmpSLT(i, end), inner, exit);
    b_.SetInsertPoint(inner);
    KILN_RETURN_IF_ERROR(body(i));
    llvm::Value* next = b_.CreateAdd(i, i64(1), "", true, true);
    i->addIncoming(next, b_.GetInsertBlock());
    llvm::BranchInst* back = b_.CreateBr(header);
    if (!vector_only && rolled_loops_ && instructions_from(inner) < kRolledBodyLimit) {
      llvm::MDNode* self = llvm::MDNode::getDistinct(ctx_, {nullptr, llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.unroll.disable")})});
      self->replaceOperandWith(0, self);
      back->setMetadata(llvm::LLVMContext::MD_loop, self);
    }
    if (vector_only) {
      auto flag = [&](const char* name) { return llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, name)}); };
      // Once vectorized, the loop may be unrolled whole: its stores to the stack buffer
      // then forward straight to the streaming stores.
      llvm::Metadata* followup[] = {llvm::MDString::get(ctx_, "llvm.loop.vectorize.followup_vectorized"), flag("llvm.loop.unroll.full")};
      llvm::MDNode* self = llvm::MDNode::getDistinct(ctx_, {nullptr, flag("llvm.loop.unroll.disable"), llvm::MDNode::get(ctx_, followup)});
      self->replaceOperandWith(0, self);
      back->setMetadata(llvm::LLVMContext::MD_loop, self);
    }
    b_.SetInsertPoint(exit);
    return Status::Ok();
  }

  // The instructions in `first` and every block created after it (a loop body, with the
  // loops nested in it).
  size_t instructions_from(llvm::BasicBlock* first) const {
    size_t count = 0;
    bool counting = false;
    for (llvm::BasicBlock& block : *fn_) {
      counting = counting || &block == first;
      if (counting) count += block.size();
    }
    return count;
  }

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
                     const std::function<void(llvm::Value*)>& per_block = nullptr) {
    auto one_at_a_time = [&](llvm::Value* i) -> Status {
      KILN_ASSIGN_OR_RETURN(std::vector<llvm::Value*> v, values(i));
      for (size_t k = 0; k < outs.size(); ++k) store_element(b_, type(outs[k]).dtype, bases_[slot_[outs[k]]], flat_at(i), v[k]);
      return Status::Ok();
    };
    if (!stream) return loop(begin, end, one_at_a_time);
    // One line per block: longer blocks separate the loads from the stores and lose a
    // quarter of the bandwidth (measured: 16 f32 0.95-1.02 of memcpy, 512 0.6-0.7).
    int64_t block = 1;
    for (ValueId o : outs) block = std::max<int64_t>(block, 64 / ir::dtype_size(type(o).dtype));
    // The head runs up to the first index where the first output's address is on a line
    // boundary; streaming needs every output to be on one there (caller buffers may not be).
    auto address = [&](ValueId o, llvm::Value* i) {
      return b_.CreateAdd(b_.CreatePtrToInt(bases_[slot_[o]], b_.getInt64Ty()), b_.CreateMul(flat_at(i), i64(ir::dtype_size(type(o).dtype))));
    };
    llvm::Value* pad = b_.CreateAnd(b_.CreateNeg(address(outs[0], begin)), i64(63));
    llvm::Value* first = b_.CreateAdd(begin, b_.CreateUDiv(pad, i64(ir::dtype_size(type(outs[0]).dtype))));
    llvm::Value* aligned = b_.CreateICmpSLT(first, end);
    for (ValueId o : outs) aligned = b_.CreateAnd(aligned, b_.CreateICmpEQ(b_.CreateAnd(address(o, first), i64(63)), i64(0)));
    llvm::Value* head_end = b_.CreateSelect(aligned, first, end);
    llvm::Value* blocks = b_.CreateSelect(aligned, b_.CreateSDiv(b_.CreateSub(end, first), i64(block)), i64(0));
    llvm::Value* blocks_end = b_.CreateAdd(head_end, b_.CreateMul(blocks, i64(block)));
    // The unaligned head [begin, head_end) and the tail [blocks_end, end): one loop, twice.
    KILN_RETURN_IF_ERROR(loop(i64(0), i64(2), [&](llvm::Value* pass) -> Status {
      llvm::Value* is_head = b_.CreateICmpEQ(pass, i64(0));
      return loop(b_.CreateSelect(is_head, begin, blocks_end), b_.CreateSelect(is_head, head_end, end), one_at_a_time);
    }));
    llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    std::vector<llvm::Value*> staging;
    for (ValueId o : outs) {
      llvm::AllocaInst* buffer = entry.CreateAlloca(llvm::ArrayType::get(storage_type(ctx_, type(o).dtype), block));
      buffer->setAlignment(llvm::Align(64));
      staging.push_back(buffer);
    }
    // Chunks of the vector width: what the vectorized loop stores, so each load forwards
    // from one store.
    const int64_t chunk = vector_bytes_;
    auto* chunk_type = llvm::FixedVectorType::get(b_.getInt64Ty(), static_cast<unsigned>(chunk / 8));
    auto* nontemporal = llvm::MDNode::get(ctx_, llvm::ConstantAsMetadata::get(b_.getInt32(1)));
    KILN_RETURN_IF_ERROR(loop(i64(0), blocks, [&](llvm::Value* n) -> Status {
      llvm::Value* start = b_.CreateAdd(head_end, b_.CreateMul(n, i64(block)));
      if (per_block) per_block(start);
      KILN_RETURN_IF_ERROR(loop(i64(0), i64(block), [&](llvm::Value* j) -> Status {
        KILN_ASSIGN_OR_RETURN(std::vector<llvm::Value*> v, values(b_.CreateAdd(start, j)));
        for (size_t k = 0; k < outs.size(); ++k) store_element(b_, type(outs[k]).dtype, staging[k], j, v[k]);
        return Status::Ok();
      }, /*vector_only=*/true));
      for (size_t k = 0; k < outs.size(); ++k) {
        int64_t size = ir::dtype_size(type(outs[k]).dtype);
        llvm::Value* to = b_.CreateGEP(b_.getInt8Ty(), bases_[slot_[outs[k]]], b_.CreateMul(flat_at(start), i64(size)));
        KILN_RETURN_IF_ERROR(loop(i64(0), i64(block * size / chunk), [&](llvm::Value* c) -> Status {
          llvm::Value* offset = b_.CreateMul(c, i64(chunk));
          llvm::Value* line = b_.CreateAlignedLoad(chunk_type, b_.CreateGEP(b_.getInt8Ty(), staging[k], offset), llvm::Align(chunk));
          llvm::StoreInst* store = b_.CreateAlignedStore(line, b_.CreateGEP(b_.getInt8Ty(), to, offset), llvm::Align(chunk));
          store->setMetadata(llvm::LLVMContext::MD_nontemporal, nontemporal);
          return Status::Ok();
        }));
      }
      return Status::Ok();
    }));
    streamed_ = true;
    return Status::Ok();
  }

  // Asks for one line of each input at flat index `at` to be brought into L2. A row kernel
  // does this for the next row while it writes the current one: its first pass over a row
  // then reads from cache, where it would otherwise wait on memory with nothing else to do.
  // A prefetch past the end of a buffer does not fault.
  void prefetch_next_row(const std::vector<ValueId>& inputs, llvm::Value* at) {
    for (ValueId x : inputs) {
      llvm::Value* address = b_.CreateGEP(b_.getInt8Ty(), bases_[slot_[x]], b_.CreateMul(at, i64(ir::dtype_size(type(x).dtype))));
      b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {address->getType()}, {address, b_.getInt32(0), b_.getInt32(2), b_.getInt32(1)});
    }
  }

  // Whether outputs of these shapes and this total size are written with streaming stores.
  // Rows (row_length > 0) must each span several lines, or their heads and tails dominate.
  bool worth_streaming(const std::vector<ValueId>& outs, int64_t row_length) const {
    int64_t bytes = 0;
    for (ValueId o : outs) {
      int64_t size = ir::dtype_size(type(o).dtype);
      if (row_length > 0 && row_length * size < 256) return false;
      bytes += type(o).num_elements() * size;
    }
    return !outs.empty() && bytes >= streaming_bytes_;
  }

  llvm::Value* flat_of(const Shape& shape, const Index& idx) {
    if (shape.empty()) return i64(0);
    if (idx.flat) return idx.flat;
    std::vector<int64_t> st = ir::row_major_strides(shape);
    llvm::Value* f = i64(0);
    for (size_t d = 0; d < shape.size(); ++d) f = b_.CreateAdd(f, b_.CreateMul(idx.dims[d], i64(st[d])));
    return f;
  }

  Index unflatten(llvm::Value* flat, const Shape& shape) {
    Index idx;
    std::vector<int64_t> st = ir::row_major_strides(shape);
    for (size_t d = 0; d < shape.size(); ++d) {
      llvm::Value* q = b_.CreateUDiv(flat, i64(st[d]));
      idx.dims.push_back(d == 0 ? q : b_.CreateURem(q, i64(shape[d])));
    }
    return idx;
  }

  Index dims_of(const Shape& shape, const Index& idx) { return idx.flat ? unflatten(idx.flat, shape) : idx; }

  // The value of v at idx (an index over v's shape).
  // Canonical indexes: an extent-1 dim is always index 0, so equal elements share a key.
  Index canonical(ValueId v, Index idx) {
    const Shape& shape = type(v).shape;
    if (type(v).rank() == 0) idx = Index{};
    else if (idx.flat && type(v).num_elements() == 1) idx.flat = i64(0);
    else if (!idx.flat)
      for (size_t d = 0; d < shape.size(); ++d)
        if (shape[d] == 1) idx.dims[d] = i64(0);
    return idx;
  }
  static std::vector<llvm::Value*> key_of(const Index& idx) { return idx.flat ? std::vector<llvm::Value*>{idx.flat} : idx.dims; }

  // Makes the row values cached so far (row_cache_) the values at row position j, whose
  // index over the row class's full shape is `full`.
  void use_row_cache(const Index& full, llvm::Value* j) {
    for (auto [v, buffer] : row_cache_) {
      llvm::Type* t = compute_type(ctx_, type(v).dtype);
      memo_[{v, key_of(canonical(v, full))}] = b_.CreateLoad(t, b_.CreateGEP(t, buffer, j));
    }
  }

  Result<llvm::Value*> value_at(ValueId v, Index idx) {
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

  Result<llvm::Value*> compute(const Node& n, const Index& idx) {
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

  Result<llvm::Value*> source(const Node& n, const Index& idx) {
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

  Result<llvm::Value*> movement(const Node& n, const Index& out) {
    const ir::TensorType& rt = type(n.result);
    ValueId x = n.operands[0];
    const Shape& xs = type(x).shape;
    Index src;
    switch (n.op) {
      case Op::Broadcast: {
        const auto& dims = n.attrs.get_ints("dims");
        for (size_t i = 0; i < dims.size(); ++i) src.dims.push_back(xs[i] == 1 ? i64(0) : out.dims[static_cast<size_t>(dims[i])]);
        return value_at(x, src);
      }
      case Op::Transpose: {
        const auto& perm = n.attrs.get_ints("perm");
        src.dims.resize(perm.size());
        for (size_t d = 0; d < perm.size(); ++d) src.dims[static_cast<size_t>(perm[d])] = out.dims[d];
        return value_at(x, src);
      }
      case Op::Reshape: return value_at(x, unflatten(flat_of(rt.shape, out), xs));
      case Op::Slice: {
        const auto& starts = n.attrs.get_ints("starts");
        std::vector<int64_t> steps = n.attrs.has("strides") ? n.attrs.get_ints("strides") : std::vector<int64_t>(xs.size(), 1);
        for (size_t d = 0; d < xs.size(); ++d) src.dims.push_back(b_.CreateAdd(i64(starts[d]), b_.CreateMul(out.dims[d], i64(steps[d]))));
        return value_at(x, src);
      }
      case Op::Gather: {
        int64_t axis = *ir::normalize_axis(n.attrs.get_int("axis", 0), static_cast<int64_t>(xs.size()));
        KILN_ASSIGN_OR_RETURN(src, table_index(out, n.operands[1], axis, xs));
        return value_at(x, src);
      }
      case Op::Concat: return concat(n, out);
      default: break;
    }
    return make_error(fmt::format("cpu codegen: {} is not supported inside a kernel", ir::op_name(n.op)));
  }

  // The index into a table (gather's operand, scatter_add's base) of the element that
  // `gathered` (an index into the gathered shape: table[:axis] + indices + table[axis+1:])
  // refers to. numpy take: negative indices count from the end; out-of-range ones are
  // clamped (the interpreter reports them; compiled code must not leave the table).
  Result<Index> table_index(const Index& gathered, ValueId indices, int64_t axis, const Shape& table) {
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

  // Picks the operand whose range along the axis holds the index, with branches so that
  // no other operand is read out of its bounds.
  Result<llvm::Value*> concat(const Node& n, const Index& out) {
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

  Status emit_loop() {
    const Shape& shape = type(step_.outputs[0]).shape;
    // Flat indexing: the vectorizer's best case.
    const bool flat = ir::flat_iteration(g_, step_);
    KILN_RETURN_IF_ERROR(hoist_scalars());
    auto outputs_at = [&](const Index& idx) -> Result<std::vector<llvm::Value*>> {
      std::vector<llvm::Value*> v;
      for (ValueId o : step_.outputs) {
        KILN_ASSIGN_OR_RETURN(llvm::Value * x, value_at(o, idx));
        v.push_back(x);
      }
      drop_loop_values();
      return v;
    };
    auto identity = [](llvm::Value* i) { return i; };
    const int64_t last = shape.empty() ? 1 : shape.back();
    if (flat || shape.size() < 2 || last < 16) {
      return store_range(fn_->getArg(1), fn_->getArg(2), step_.outputs, worth_streaming(step_.outputs, 0), identity,
                         [&](llvm::Value* i) { return outputs_at(flat ? Index{i, {}} : unflatten(i, shape)); });
    }
    // Otherwise the work range is walked a row (of the last dim) at a time. Within a row the
    // last index is the loop index itself, so a broadcast operand's elements are
    // consecutive and the loop vectorizes; over a flat index, `i % last` vectorizes only
    // when the whole range lies within one row.
    const Shape leading(shape.begin(), shape.end() - 1);
    llvm::Value* begin = fn_->getArg(1);
    llvm::Value* end = fn_->getArg(2);
    llvm::Value* first_row = b_.CreateSDiv(begin, i64(last));
    llvm::Value* end_row = b_.CreateSDiv(b_.CreateAdd(end, i64(last - 1)), i64(last));
    const bool stream = worth_streaming(step_.outputs, last);
    return loop(first_row, end_row, [&](llvm::Value* r) -> Status {
      llvm::Value* row_start = b_.CreateMul(r, i64(last));
      llvm::Value* from = b_.CreateSelect(b_.CreateICmpSGT(begin, row_start), begin, row_start);
      llvm::Value* row_end = b_.CreateAdd(row_start, i64(last));
      llvm::Value* to = b_.CreateSelect(b_.CreateICmpSLT(end, row_end), end, row_end);
      Index row = unflatten(r, leading);
      return store_range(from, to, step_.outputs, stream, identity, [&](llvm::Value* i) {
        Index idx = row;
        idx.dims.push_back(b_.CreateSub(i, row_start));
        return outputs_at(idx);
      });
    });
  }

  // Scalars that depend on no loop (rank-0 inputs, and rank-0 ops on them that no
  // reduction feeds) are computed once, in the entry block, so every use is dominated.
  Status hoist_scalars() {
    for (ValueId x : ir::invariant_scalars(g_, step_)) KILN_RETURN_IF_ERROR(value_at(x, Index{}));
    invariant_ = memo_;
    return Status::Ok();
  }

  // Values computed inside a loop body are not valid after it.
  void drop_loop_values() { memo_ = invariant_; }

  Status emit_reduction();
  Status emit_scatter();
  // Emits the loop of one reduction over a row and records its result for the row.
  Status reduce(const Node& n, int64_t row_length, const Shape& full_shape, const std::function<Index(llvm::Value*)>& full_index,
                const Index& at, llvm::IRBuilder<>& entry);

  static constexpr int64_t kRowCacheBytes = 256 << 10;  // per cached value; fits in L2

  const ir::Graph& g_;
  const ir::Step& step_;
  const int64_t streaming_bytes_;
  const int vector_bytes_;  // this kernel's vector width: 64 where wide_vectors_pay, else 32
  bool streamed_ = false;  // whether any store_range used non-temporal stores
  // Whether loops with a light body (under kRolledBodyLimit IR instructions) are kept
  // rolled; the vectorizer still interleaves them. Unrolled whole over a row of constant
  // length, layer_norm's sum passes became thousands of instructions, and GVN kept the
  // row's loads live from one pass to the next, spilled to the stack: rolled, `layernorm`
  // went from 0.54-0.60 to 0.66-0.69 of copy. Softmax's max pass runs slightly faster
  // unrolled, and its exp pass is not light, so only sum passes are rolled.
  bool rolled_loops_ = false;
  static constexpr size_t kRolledBodyLimit = 24;
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;
  std::vector<int> slot_;
  std::vector<int> producer_;
  std::vector<char> member_;
  std::vector<llvm::Value*> bases_;
  std::map<std::pair<ValueId, std::vector<llvm::Value*>>, llvm::Value*> memo_, invariant_;
  std::map<ValueId, llvm::Value*> row_cache_;
};


// ---- reduction kernels: one row per work item ------------------------------------

Status KernelEmitter::emit_reduction() {
  auto cls = ir::row_class(g_, step_);
  if (!cls) return make_error(fmt::format("cpu codegen: step {} has no row structure", step_.name));
  const ir::RowClass& rc = *cls;
  KILN_RETURN_IF_ERROR(hoist_scalars());
  llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
  const int64_t row_length = rc.row_length();
  const Shape keepdims = rc.keepdims_shape();
  const bool contiguous = rc.contiguous();
  return loop(fn_->getArg(1), fn_->getArg(2), [&](llvm::Value* r) -> Status {
    Index kept = unflatten(r, rc.kept_shape);
    // Indexes of a row value: over the kept dims, or over S with 0 at the reduced dims.
    Index row_idx = kept, keep_idx{nullptr, rc.keepdims_index(kept.dims, i64(0))};
    auto row_index = [&](const Shape& s) { return s == keepdims && s != rc.kept_shape ? keep_idx : row_idx; };
    auto full_index = [&](llvm::Value* j) { return Index{nullptr, rc.full_index(kept.dims, unflatten(j, rc.reduced_shape).dims)}; };
    for (int n : step_.nodes) {
      const Node& node = g_.nodes[n];
      const ir::TensorType& t = type(node.result);
      if (ir::op_kind(node.op) == OpKind::Reduction) {
        KILN_RETURN_IF_ERROR(reduce(node, row_length, rc.full, full_index, row_index(t.shape), entry));
      } else if (t.shape != rc.full) {
        auto v = value_at(node.result, row_index(t.shape));  // a row value: once per row
        if (!v.ok()) return v.error();
      }
    }
    auto row_memo = memo_;
    std::vector<ValueId> full_outputs, row_inputs;
    for (ValueId i : step_.inputs)
      if (contiguous && type(i).shape == rc.full) row_inputs.push_back(i);
    for (ValueId o : step_.outputs)
      if (type(o).shape == rc.full) full_outputs.push_back(o);
    if (!full_outputs.empty()) {
      llvm::Value* row_start = b_.CreateMul(r, i64(row_length));
      auto flat_at = [&](llvm::Value* j) { return contiguous ? b_.CreateAdd(row_start, j) : flat_of(rc.full, full_index(j)); };
      KILN_RETURN_IF_ERROR(store_range(i64(0), i64(row_length), full_outputs, contiguous && worth_streaming(full_outputs, row_length), flat_at,
                                       [&](llvm::Value* j) -> Result<std::vector<llvm::Value*>> {
                                         Index full = full_index(j);
                                         use_row_cache(full, j);
                                         std::vector<llvm::Value*> v;
                                         for (ValueId o : full_outputs) {
                                           KILN_ASSIGN_OR_RETURN(llvm::Value * x, value_at(o, full));
                                           v.push_back(x);
                                         }
                                         memo_ = row_memo;
                                         return v;
                                       },
                                       [&](llvm::Value* j) { prefetch_next_row(row_inputs, b_.CreateAdd(b_.CreateAdd(row_start, i64(row_length)), j)); }));
    }
    for (ValueId o : step_.outputs) {
      if (type(o).shape == rc.full) continue;
      Index at = row_index(type(o).shape);
      KILN_ASSIGN_OR_RETURN(llvm::Value * v, value_at(o, at));
      store_element(b_, type(o).dtype, bases_[slot_[o]], flat_of(type(o).shape, at), v);
    }
    drop_loop_values();
    return Status::Ok();
  });
}


Status KernelEmitter::reduce(const Node& n, int64_t row_length, const Shape& full_shape,
                             const std::function<Index(llvm::Value*)>& full_index, const Index& at, llvm::IRBuilder<>& entry) {
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
  else if (n.op == Op::ReduceMin) init = fp ? llvm::ConstantFP::getInfinity(acc_type) : llvm::ConstantInt::get(acc_type, INT64_MAX);
  else init = fp ? llvm::ConstantFP::getInfinity(acc_type, true) : llvm::ConstantInt::get(acc_type, static_cast<uint64_t>(INT64_MIN));
  b_.CreateStore(init, acc);
  if (best) b_.CreateStore(i64(0), best);
  // An operand computed here that other nodes of the step also read is kept in a row
  // buffer, so later loops over the row load it instead of computing it again (softmax's
  // exp, layer_norm's x - mean).
  llvm::AllocaInst* keep = nullptr;
  if (computed_here(x) && fp && type(x).shape == full_shape && !row_cache_.count(x) && row_length * 4 <= kRowCacheBytes) {
    if (ir::uses_in_step(g_, step_, x) > 1) {
      keep = entry.CreateAlloca(llvm::ArrayType::get(ct, static_cast<uint64_t>(row_length)));
      keep->setAlignment(llvm::Align(64));
    }
  }
  // Float sums add blocks of kSumBlock elements in float, which vectorizes at full width
  // with several partial sums, and each block's sum into the double total. Each float
  // partial sum holds a few dozen terms at most, so the result stays as close as the interpreter's
  // double sum once rounded to float.
  constexpr int64_t kSumBlock = 512;
  const bool blocked = fp && n.op == Op::ReduceSum && ct->isFloatTy() && row_length > kSumBlock;
  llvm::AllocaInst* block_acc = blocked ? entry.CreateAlloca(ct) : nullptr;
  auto before = memo_;
  auto element = [&](llvm::Value* j) -> Status {
    Index full = full_index(j);
    use_row_cache(full, j);
    KILN_ASSIGN_OR_RETURN(llvm::Value * v, value_at(x, full));
    if (keep) b_.CreateStore(v, b_.CreateGEP(ct, keep, j));
    if (blocked) {
      auto* sum = llvm::cast<llvm::Instruction>(b_.CreateFAdd(b_.CreateLoad(ct, block_acc), v));
      sum->setHasAllowReassoc(true);
      b_.CreateStore(sum, block_acc);
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
        llvm::Value* better = fp ? b_.CreateAnd(b_.CreateFCmpORD(a, a), b_.CreateOr(b_.CreateFCmpOGT(v, a), b_.CreateFCmpUNO(v, v)))
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
      KILN_RETURN_IF_ERROR(loop(begin, end, element));
      auto* total = llvm::cast<llvm::Instruction>(
          b_.CreateFAdd(b_.CreateLoad(acc_type, acc), b_.CreateFPExt(b_.CreateLoad(ct, block_acc), acc_type)));
      b_.CreateStore(total, acc);
      return Status::Ok();
    }));
  }
  rolled_loops_ = false;
  if (keep) row_cache_[x] = keep;
  const ir::TensorType& rt = type(n.result);
  llvm::Value* result;
  if (n.op == Op::Argmax) result = b_.CreateLoad(b_.getInt64Ty(), best);
  else {
    result = b_.CreateLoad(acc_type, acc);
    if (saw_nan) result = b_.CreateSelect(b_.CreateLoad(b_.getInt1Ty(), saw_nan), llvm::ConstantFP::getNaN(acc_type), result);
    if (fp) result = round_to(b_, rt.dtype, b_.CreateFPCast(result, compute_type(ctx_, rt.dtype)));
    else result = b_.CreateTrunc(result, compute_type(ctx_, rt.dtype));
  }
  Index key = at;
  const Shape& rshape = type(n.result).shape;
  for (size_t d = 0; d < key.dims.size() && d < rshape.size(); ++d)
    if (rshape[d] == 1) key.dims[d] = i64(0);
  if (rshape.empty()) key = Index{};
  memo_[{n.result, key.dims}] = result;
  return Status::Ok();
}

// scatter_add: the base copied to the output, then each update added at its index.
// Repeated indices make the additions depend on each other, so it is one work item.
Status KernelEmitter::emit_scatter() {
  const Node* scatter = nullptr;
  for (int n : step_.nodes)
    if (g_.nodes[n].op == Op::ScatterAdd) scatter = &g_.nodes[n];
  if (!scatter) return make_error(fmt::format("cpu codegen: step {} has no scatter_add", step_.name));
  ValueId out = scatter->result, base = scatter->operands[0], indices = scatter->operands[1], updates = scatter->operands[2];
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
    llvm::Value* sum = ir::is_float(dt) ? round_to(b_, dt, b_.CreateFAdd(old, add)) : b_.CreateAdd(old, add);
    store_element(b_, dt, bases_[slot_[out]], at_dst, sum);
    memo_.clear();
    return Status::Ok();
  }));
  b_.CreateBr(skip);
  b_.SetInsertPoint(skip);
  return Status::Ok();
}

}  // namespace

Status emit_kernels(const ir::Graph& g, llvm::Module& m, int64_t streaming_store_bytes, int vector_bytes) {
  if (!g.program) return make_error("cpu codegen: the graph has no program; run fusion first");
  for (const ir::Step& step : g.program->steps) {
    if (step.kind == ir::StepKind::Library) continue;
    KILN_RETURN_IF_ERROR(KernelEmitter(g, step, m, streaming_store_bytes, vector_bytes).emit());
  }
  return Status::Ok();
}

}  // namespace kiln::codegen::cpu
