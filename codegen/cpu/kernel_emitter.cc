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



using Memo = std::map<std::pair<ValueId, std::vector<llvm::Value*>>, llvm::Value*>;

// What every emission of a row kernel's rows shares.
struct RowKernel {
  const ir::RowClass& rc;
  int64_t row_length;
  Shape keepdims;
  std::vector<ValueId> full_outputs, row_inputs;  // row_inputs: full-shape inputs of contiguous rows
  int last_reduction = -1;                        // the node of the last reduction pass
  bool pipelined = false;                         // whether this emission pipelines rows
  llvm::Value* line_start = nullptr;              // pipelined: the first row position on a line
};

// A row whose full-shape outputs are to be written: the current row of a kernel that
// runs one row at a time, or the row before in a pipelined one.
struct RowToWrite {
  Index kept;
  llvm::Value* row_start = nullptr;
  Memo memo;                                 // its row values
  std::map<ValueId, llvm::Value*> row_cache;  // its row buffers
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

  // How loop() may unroll a loop. kVectorOnly: never whole before the vectorizer sees it
  // (which would turn a short fixed-count loop into scalar code), and whole after. kWhole:
  // whole (a loop of a few vector operations). kRolled: not at all. kVectorOnly and kWhole
  // loops run exactly end - begin times (the caller guarantees begin <= end): exiting on
  // i == end rather than i < end, their trip count is a constant wherever end - begin is,
  // even when neither bound is (a chunk of a row), so they vectorize without a remainder
  // loop. A remainder loop's variable index kept the lane sums of softmax's exp pass in
  // memory.
  enum class Unroll { kDefault, kVectorOnly, kWhole, kRolled };

  // for (i = begin; i < end; ++i) body(i), leaving the builder after the loop.
  Status loop(llvm::Value* begin, llvm::Value* end, const std::function<Status(llvm::Value*)>& body, Unroll unroll = Unroll::kDefault) {
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
    auto flag = [&](const char* name) { return llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, name)}); };
    std::vector<llvm::Metadata*> hints{nullptr};
    if (unroll == Unroll::kRolled || (unroll == Unroll::kDefault && rolled_loops_ && instructions_from(inner) < kRolledBodyLimit))
      hints.push_back(flag("llvm.loop.unroll.disable"));
    if (unroll == Unroll::kWhole) hints.push_back(flag("llvm.loop.unroll.full"));
    if (unroll == Unroll::kVectorOnly) {
      // Once vectorized, the loop may be unrolled whole: its stores to the stack buffer
      // then forward straight to the streaming stores.
      llvm::Metadata* followup[] = {llvm::MDString::get(ctx_, "llvm.loop.vectorize.followup_vectorized"), flag("llvm.loop.unroll.full")};
      hints.push_back(flag("llvm.loop.unroll.disable"));
      hints.push_back(llvm::MDNode::get(ctx_, followup));
    }
    if (hints.size() > 1) {
      llvm::MDNode* self = llvm::MDNode::getDistinct(ctx_, hints);
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
                     const std::function<void(llvm::Value*, int64_t)>& per_block = nullptr) {
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
    auto one_block = [&](llvm::Value* n) -> Status {
      llvm::Value* start = b_.CreateAdd(head_end, b_.CreateMul(n, i64(block)));
      if (per_block) per_block(start, block);
      return stream_block(outs, start, block, flat_at(start), values);
    };
    // Two streams: block n of each half of the blocks in turn. The memory system serves
    // two sequential streams per thread faster than one (y = x*2 + 1: 0.90-0.93 of
    // memcpy with one, 1.05-1.12 with two).
    llvm::Value* half = b_.CreateSDiv(blocks, i64(2));
    KILN_RETURN_IF_ERROR(loop(i64(0), half, [&](llvm::Value* n) -> Status {
      KILN_RETURN_IF_ERROR(one_block(n));
      return one_block(b_.CreateAdd(n, half));
    }));
    return loop(b_.CreateMul(half, i64(2)), blocks, one_block);
  }

  // Computes `outs` at work indexes [start, start + count) into a stack buffer and copies
  // them out with non-temporal stores from flat index `flat_start` on, which must be on a
  // line boundary of every output (count must fill whole lines).
  Status stream_block(const std::vector<ValueId>& outs, llvm::Value* start, int64_t count, llvm::Value* flat_start,
                      const std::function<Result<std::vector<llvm::Value*>>(llvm::Value*)>& values) {
    llvm::IRBuilder<> entry(&fn_->getEntryBlock(), fn_->getEntryBlock().begin());
    std::vector<llvm::Value*> staging;
    for (ValueId o : outs) {
      llvm::AllocaInst* buffer = entry.CreateAlloca(llvm::ArrayType::get(storage_type(ctx_, type(o).dtype), static_cast<uint64_t>(count)));
      buffer->setAlignment(llvm::Align(64));
      staging.push_back(buffer);
    }
    KILN_RETURN_IF_ERROR(loop(i64(0), i64(count), [&](llvm::Value* j) -> Status {
      KILN_ASSIGN_OR_RETURN(std::vector<llvm::Value*> v, values(b_.CreateAdd(start, j)));
      for (size_t k = 0; k < outs.size(); ++k) store_element(b_, type(outs[k]).dtype, staging[k], j, v[k]);
      return Status::Ok();
    }, Unroll::kVectorOnly));
    // Chunks of the vector width: what the vectorized loop stores, so each load forwards
    // from one store.
    const int64_t chunk = vector_bytes_;
    auto* chunk_type = llvm::FixedVectorType::get(b_.getInt64Ty(), static_cast<unsigned>(chunk / 8));
    auto* nontemporal = llvm::MDNode::get(ctx_, llvm::ConstantAsMetadata::get(b_.getInt32(1)));
    for (size_t k = 0; k < outs.size(); ++k) {
      int64_t size = ir::dtype_size(type(outs[k]).dtype);
      llvm::Value* to = b_.CreateGEP(b_.getInt8Ty(), bases_[slot_[outs[k]]], b_.CreateMul(flat_start, i64(size)));
      KILN_RETURN_IF_ERROR(loop(i64(0), i64(count * size / chunk), [&](llvm::Value* c) -> Status {
        llvm::Value* offset = b_.CreateMul(c, i64(chunk));
        llvm::Value* line = b_.CreateAlignedLoad(chunk_type, b_.CreateGEP(b_.getInt8Ty(), staging[k], offset), llvm::Align(chunk));
        llvm::StoreInst* store = b_.CreateAlignedStore(line, b_.CreateGEP(b_.getInt8Ty(), to, offset), llvm::Align(chunk));
        store->setMetadata(llvm::LLVMContext::MD_nontemporal, nontemporal);
        return Status::Ok();
      }, Unroll::kWhole));  // rolled, each line went through the stack buffer
    }
    streamed_ = true;
    return Status::Ok();
  }

  // Asks for the lines of each input that hold flat indexes [at, at + count) to be brought
  // into L2. A row kernel does this for the next row while it computes the current one:
  // the next row's first pass then reads from cache, where it would otherwise wait on
  // memory with nothing else to do. A prefetch past the end of a buffer does not fault.
  void prefetch_lines(const std::vector<ValueId>& inputs, llvm::Value* at, int64_t count) {
    for (ValueId x : inputs) {
      int64_t size = ir::dtype_size(type(x).dtype);
      llvm::Value* first = b_.CreateGEP(b_.getInt8Ty(), bases_[slot_[x]], b_.CreateMul(at, i64(size)));
      for (int64_t offset = 0; offset < count * size; offset += 64) {
        llvm::Value* address = b_.CreateConstGEP1_64(b_.getInt8Ty(), first, static_cast<uint64_t>(offset));
        b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {address->getType()}, {address, b_.getInt32(0), b_.getInt32(2), b_.getInt32(1)});
      }
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

  // Makes the row values cached in `cache` (by default, the current row's so far) the
  // values at row position j, whose index over the row class's full shape is `full`.
  void use_row_cache(const Index& full, llvm::Value* j, const std::map<ValueId, llvm::Value*>* cache = nullptr) {
    for (auto [v, buffer] : cache ? *cache : row_cache_) {
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
    // Inputs of the output's shape are read at the output's flat index. Each streamed block
    // asks for theirs kPrefetchBlocks blocks ahead (y = x*2 + 1 with two streams: 1.05-1.12
    // of memcpy without, 1.13-1.18 with).
    std::vector<ValueId> same_shape;
    for (ValueId x : step_.inputs)
      if (type(x).shape == shape) same_shape.push_back(x);
    auto prefetch_ahead = [&](llvm::Value* i, int64_t count) { prefetch_lines(same_shape, b_.CreateAdd(i, i64(kPrefetchBlocks * count)), count); };
    const int64_t last = shape.empty() ? 1 : shape.back();
    if (flat || shape.size() < 2 || last < 16) {
      return store_range(fn_->getArg(1), fn_->getArg(2), step_.outputs, worth_streaming(step_.outputs, 0), identity,
                         [&](llvm::Value* i) { return outputs_at(flat ? Index{i, {}} : unflatten(i, shape)); }, prefetch_ahead);
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
      }, prefetch_ahead);
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
  bool pipelines(const RowKernel& k) const;
  bool transcendental_in(ValueId v) const;
  Status emit_row(const RowKernel& k, llvm::Value* r, const RowToWrite* pending);
  RowToWrite pending_row(const RowKernel& k, llvm::Value* r);
  Status write_pending(const RowKernel& k, const RowToWrite& p, llvm::Value* start, int64_t count);
  Result<std::vector<llvm::Value*>> row_outputs(const RowKernel& k, const RowToWrite& row, llvm::Value* j);
  // The index of a row value of shape s in the row whose kept index is `kept`: over the
  // kept dims, or over the full shape with 0 at the reduced dims.
  Index row_value_index(const RowKernel& k, const Index& kept, const Shape& s) {
    return s == k.keepdims && s != k.rc.kept_shape ? Index{nullptr, k.rc.keepdims_index(kept.dims, i64(0))} : kept;
  }
  // The index over the full shape of row position j in that row.
  Index full_row_index(const RowKernel& k, const Index& kept, llvm::Value* j) {
    return Index{nullptr, k.rc.full_index(kept.dims, unflatten(j, k.rc.reduced_shape).dims)};
  }
  // Where row r's half of a pipelined kernel's row buffers starts.
  llvm::Value* row_half(const RowKernel& k, llvm::Value* r) { return b_.CreateMul(b_.CreateAnd(r, i64(1)), i64(k.row_length)); }
  // Whether the reduction n over rows of this length is a float sum in chunks of kSumLanes.
  bool chunked_sum(const Node& n, int64_t row_length) const {
    return n.op == Op::ReduceSum && ir::is_float(type(n.operands[0]).dtype) && compute_type(ctx_, type(n.operands[0]).dtype)->isFloatTy() &&
           row_length > kSumBlock;
  }
  Status emit_scatter();
  // Emits the loop of one reduction over a row and records its result for the row.
  Status reduce(const Node& n, int64_t row_length, const Shape& full_shape, const std::function<Index(llvm::Value*)>& full_index,
                const Index& at, llvm::IRBuilder<>& entry);

  static constexpr int64_t kRowCacheBytes = 256 << 10;  // per cached value; fits in L2
  static constexpr int64_t kPrefetchBlocks = 32;          // how far ahead a loop kernel prefetches

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
  llvm::Value* row_offset_ = nullptr;  // where the current row's half starts (pipelined)
  std::map<ValueId, llvm::AllocaInst*> carried_;  // row values of a pipelined kernel's row, for the next
  const ir::Graph& g_;
  const ir::Step& step_;
  const int64_t streaming_bytes_;
  const int vector_bytes_;  // this kernel's vector width: 64 where wide_vectors_pay, else 32
  bool streamed_ = false;  // whether any stream_block used non-temporal stores
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
  Memo memo_, invariant_;
  std::map<ValueId, llvm::Value*> row_cache_;
};


// ---- reduction kernels: one row per work item ------------------------------------

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
  if (!pipelines(k)) return loop(begin, end, one_row_at_a_time);
  row_buffers_ = 2;
  // Each output row is written from its first line boundary on (the same row position in
  // every row, as rows fill whole lines); the elements before it and after the last whole
  // line get ordinary stores. Pipelined when that position is the same for every output
  // (always, for one output of a whole number of bytes from a line); otherwise one row at
  // a time, as above.
  auto address = [&](ValueId o) { return b_.CreatePtrToInt(bases_[slot_[o]], b_.getInt64Ty()); };
  const int64_t first_size = ir::dtype_size(type(k.full_outputs[0]).dtype);
  k.line_start = b_.CreateUDiv(b_.CreateAnd(b_.CreateNeg(address(k.full_outputs[0])), i64(63)), i64(first_size));
  llvm::Value* aligned = b_.getTrue();
  for (ValueId o : k.full_outputs) {
    llvm::Value* at = b_.CreateAdd(address(o), b_.CreateMul(k.line_start, i64(ir::dtype_size(type(o).dtype))));
    aligned = b_.CreateAnd(aligned, b_.CreateICmpEQ(b_.CreateAnd(at, i64(63)), i64(0)));
  }
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
  KILN_RETURN_IF_ERROR(store_range(i64(0), i64(k.row_length), k.full_outputs, true, [&](llvm::Value* j) { return b_.CreateAdd(last.row_start, j); },
                                   [&](llvm::Value* j) { return row_outputs(k, last, j); }));
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  return Status::Ok();
}

// Whether the kernel's rows are software-pipelined: the full-shape outputs of row r are
// written, with streaming stores, inside the last reduction pass over row r + 1, and the
// row after that is prefetched there too. Otherwise the core computes while memory idles
// (the exp pass of softmax) and memory works while the core waits (the output pass):
// `softmax_4096` ran at 0.50-0.57 of copy that way. This needs that last pass to be a
// chunked float sum (kSumLanes elements at a time) covering whole rows of whole lines,
// with a transcendental function in its terms: with light terms (layer_norm's variance)
// there is too little to overlap; pipelined, `layernorm` was no faster (0.61-0.66 of copy
// against 0.62-0.67) and `residual_layernorm` slower (0.75-0.77 against 0.78-0.79).
bool KernelEmitter::pipelines(const RowKernel& k) const {
  const int64_t length = k.row_length;
  if (!k.rc.contiguous() || k.full_outputs.empty() || k.last_reduction < 0 || !worth_streaming(k.full_outputs, length)) return false;
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
    switch (n.op) {
      case Op::Cos: case Op::Erf: case Op::Exp: case Op::Log: case Op::Pow: case Op::Sigmoid: case Op::Sin: case Op::Tanh: return true;
      default: break;
    }
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
  auto prefetch_next_row = [&](llvm::Value* j, int64_t count) { prefetch_lines(k.row_inputs, b_.CreateAdd(b_.CreateAdd(row_start, i64(length)), j), count); };
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
  } else if (!k.full_outputs.empty()) {
    RowToWrite row{kept, row_start, memo_, row_cache_};
    auto flat_at = [&](llvm::Value* j) { return k.rc.contiguous() ? b_.CreateAdd(row_start, j) : flat_of(k.rc.full, full_index(j)); };
    KILN_RETURN_IF_ERROR(store_range(i64(0), i64(length), k.full_outputs, k.rc.contiguous() && worth_streaming(k.full_outputs, length), flat_at,
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
    p.memo[{v, key_of(canonical(v, row_value_index(k, p.kept, shape)))}] = b_.CreateLoad(slot->getAllocatedType(), slot);
  }
  llvm::Value* offset = row_half(k, r);
  for (auto [v, buffer] : keep_buffers_) p.row_cache[v] = b_.CreateGEP(buffer->getAllocatedType()->getArrayElementType(), buffer, offset);
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
Result<std::vector<llvm::Value*>> KernelEmitter::row_outputs(const RowKernel& k, const RowToWrite& row, llvm::Value* j) {
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
  llvm::Value* keep = nullptr;
  if (computed_here(x) && fp && type(x).shape == full_shape && !row_cache_.count(x) && row_length * 4 <= kRowCacheBytes) {
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
      llvm::Value* begin = b_.CreateMul(block, i64(kSumBlock), "", true, true);
      llvm::Value* end = b_.CreateAdd(begin, i64(kSumBlock), "", true, true);
      end = b_.CreateSelect(b_.CreateICmpSLT(end, i64(row_length)), end, i64(row_length));
      b_.CreateStore(llvm::ConstantFP::get(ct, 0.0), block_acc);
      b_.CreateStore(llvm::ConstantAggregateZero::get(lanes->getAllocatedType()), lanes);
      llvm::Value* chunks = b_.CreateSDiv(b_.CreateSub(end, begin), i64(kSumLanes));
      KILN_RETURN_IF_ERROR(loop(i64(0), chunks, [&](llvm::Value* c) -> Status {
        llvm::Value* start = b_.CreateAdd(begin, b_.CreateMul(c, i64(kSumLanes), "", true, true), "", true, true);
        // Over row positions, not 0..kSumLanes plus `start`: InstCombine makes that sum an
        // `or` (start is a multiple of kSumLanes), and the loads through it became gathers.
        // No wrap: the trip count is then the constant kSumLanes, so the loop vectorizes
        // without a remainder loop, whose variable lane index kept the lanes in memory.
        KILN_RETURN_IF_ERROR(loop(start, b_.CreateAdd(start, i64(kSumLanes), "", true, true), [&](llvm::Value* j) -> Status {
          sum_into = b_.CreateGEP(ct, lanes, b_.CreateSub(j, start));
          return element(j);
        }, Unroll::kVectorOnly));
        return per_chunk_ ? per_chunk_(start, kSumLanes) : Status::Ok();
      }, Unroll::kRolled));  // unrolled, the lanes went through the stack between chunks
      sum_into = block_acc;
      KILN_RETURN_IF_ERROR(loop(b_.CreateAdd(begin, b_.CreateMul(chunks, i64(kSumLanes))), end, element));
      KILN_RETURN_IF_ERROR(loop(i64(0), i64(kSumLanes), [&](llvm::Value* k) -> Status {
        auto* sum = llvm::cast<llvm::Instruction>(b_.CreateFAdd(b_.CreateLoad(ct, block_acc), b_.CreateLoad(ct, b_.CreateGEP(ct, lanes, k))));
        sum->setHasAllowReassoc(true);
        b_.CreateStore(sum, block_acc);
        return Status::Ok();
      }, Unroll::kVectorOnly));
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
