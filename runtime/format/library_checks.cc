#include "runtime/format/library_checks.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::format::detail {
namespace {

using Kind = ArtifactErrorKind;

// Why a library convolution's parameters are inconsistent, or "": ranks, ranges, groups,
// and each output extent from the input's, as the IR's conv computes it.
std::string conv_problem(const Conv& c) {
  if (static_cast<int>(c.kind()) > static_cast<int>(ConvKind::MAX)) return "has an unknown kind";
  if (!c.x() || !c.w() || !c.y() || !c.strides() || !c.dilations() || !c.pads_lo() || !c.pads_hi())
    return "lacks a shape or an attribute";
  const uint32_t rank = c.x()->size();
  if (rank < 3 || rank > 5 || c.w()->size() != rank || c.y()->size() != rank) return "has shapes of the wrong ranks";
  const uint32_t k = rank - 2;
  if (c.strides()->size() != k || c.dilations()->size() != k || c.pads_lo()->size() != k || c.pads_hi()->size() != k)
    return "has attributes of the wrong lengths";
  const int64_t limit = int64_t{1} << 32;
  for (const auto* v : {c.x(), c.w(), c.y()})
    for (int64_t d : *v)
      if (d < 1 || d > limit) return "has a dimension out of range";
  const int64_t groups = c.groups();
  if (groups < 1 || c.x()->Get(1) % groups != 0 || c.w()->Get(0) % groups != 0 ||
      c.w()->Get(1) * groups != c.x()->Get(1) || c.y()->Get(0) != c.x()->Get(0) || c.y()->Get(1) != c.w()->Get(0))
    return "has channels or groups that do not fit";
  for (uint32_t d = 0; d < k; ++d) {
    const int64_t stride = c.strides()->Get(d), dilation = c.dilations()->Get(d), lo = c.pads_lo()->Get(d),
                  hi = c.pads_hi()->Get(d);
    if (stride < 1 || stride > limit || dilation < 1 || dilation > limit || lo < 0 || lo > limit || hi < 0 ||
        hi > limit)
      return "has a stride, dilation or pad out of range";
    const int64_t span = c.x()->Get(2 + d) + lo + hi - dilation * (c.w()->Get(2 + d) - 1) - 1;
    if (span < 0 || span / stride + 1 != c.y()->Get(2 + d)) return "gives an output extent its input does not";
  }
  return "";
}

// The inputs a library call's post-ops read (a bias, a tensor to add, per-channel values).
uint32_t post_op_operands(const PostOps* post_ops) {
  uint32_t inputs = 0;
  if (post_ops)
    for (const PostOp* p : *post_ops) inputs += p && post_op_reads_input(p->kind());
  return inputs;
}

// Whether a post-op of `kind` computes on its value alone (an activation).
bool activation(PostOpKind kind) { return !post_op_reads_input(kind) && kind != PostOpKind::Clip; }

// Whether the post-ops are a chain cublasLt's epilogues apply: a bias, then at most one
// of relu and tanh GELU (ir/epilogue.h's MatmulEpilogues::kCublasLt).
bool cublaslt_epilogue(const PostOps* post_ops) {
  uint32_t i = 0;
  if (i < post_ops->size() && post_ops->Get(i) && post_ops->Get(i)->kind() == PostOpKind::Bias) ++i;
  if (i < post_ops->size() && post_ops->Get(i) &&
      (post_ops->Get(i)->kind() == PostOpKind::Relu || post_ops->Get(i)->kind() == PostOpKind::GeluTanh))
    ++i;
  return i == post_ops->size();
}

// Why a library call's post-ops are inconsistent, or "": each of a known kind, a bias
// only first and of `channels` values, an added tensor of the result's shape `y`, each
// operand the step input after the previous one's, clip bounds in order. A matmul's take
// a bias, clips and activations only.
std::string post_op_problem(const PostOps* post_ops, bool matmul, int64_t channels,
                            const flatbuffers::Vector<int64_t>* y, const Step& step,
                            const flatbuffers::Vector<flatbuffers::Offset<Value>>& values) {
  if (!post_ops || post_ops->size() == 0) return "";
  uint32_t next_input = 2;
  for (uint32_t i = 0; i < post_ops->size(); ++i) {
    const PostOp* p = post_ops->Get(i);
    if (!p || static_cast<int>(p->kind()) > static_cast<int>(PostOpKind::MAX))
      return "has a post-op of an unknown kind";
    if (matmul && p->kind() != PostOpKind::Bias && p->kind() != PostOpKind::Clip && !activation(p->kind()))
      return std::string("has a post-op a matmul does not apply (") + EnumNamePostOpKind(p->kind()) + ")";
    const bool reads = post_op_reads_input(p->kind());
    if (p->input() != (reads ? static_cast<int32_t>(next_input) : -1)) return "has a post-op reading the wrong input";
    if (p->kind() == PostOpKind::Bias && i != 0) return "adds its bias after another post-op";
    if (p->kind() == PostOpKind::Clip && !(p->lo() <= p->hi())) return "clips to bounds out of order";
    if (!reads) continue;
    const Value* v = values.Get(step.inputs()->Get(next_input++));
    if (v->dtype() != DType::F32 || !v->shape()) return "has a post-op operand that is not f32";
    int64_t elements = 1;
    for (int64_t d : *v->shape()) elements *= d;
    if (p->kind() != PostOpKind::Add && elements != channels)
      return "has a bias or per-channel operand that is not one value per output channel";
    if (p->kind() == PostOpKind::Add &&
        (v->shape()->size() != y->size() || !std::equal(v->shape()->begin(), v->shape()->end(), y->begin())))
      return "adds a tensor of another shape than its result's";
  }
  return "";
}

// Why a library attention's parameters do not fit its step's values, or "": its dims and
// strides in range, q, k, v and the result f32 or of its precision (f32, bf16 or f16),
// Add's mask f32 and Keep's bool, each matrix with rows or columns adjacent, and every
// element it reads inside its input; a backward's dO and gradients too (its precision f32,
// or bf16 or f16 on the CPU since 1.20 and on CUDA since 1.21; its gradients f32, or of
// the precision since 1.21).
std::string attention_problem(const Attention& at, const Step& step,
                              const flatbuffers::Vector<flatbuffers::Offset<Value>>& values,
                              const std::vector<uint64_t>& value_bytes) {
  constexpr int64_t limit = int64_t{1} << 40;
  if (!at.batch() || !at.q_strides() || !at.k_strides() || !at.v_strides()) return "lacks a shape or strides";
  const uint32_t rank = at.batch()->size() + 2;
  int64_t batch = 1;
  for (int64_t d : *at.batch()) {
    if (d < 1 || d > limit) return "has a batch dim out of range";
    batch *= d;
    if (batch > limit) return "has a batch dim out of range";
  }
  for (int64_t d : {at.queries(), at.keys(), at.head_dim(), at.value_dim()})
    if (d < 1 || d > limit) return "has a dim out of range";
  const DType precision = at.precision();
  if (precision != DType::F32 && precision != DType::BF16 && precision != DType::F16)
    return "computes in a type other than f32, bf16 and f16";
  auto f32_or_precision = [&](DType t) { return t == DType::F32 || t == precision; };
  uint32_t inputs = 3;
  if (at.transforms())
    for (const ScoreTransform* t : *at.transforms()) {
      if (!t || static_cast<int>(t->kind()) > static_cast<int>(ScoreTransformKind::MAX))
        return "has a score transform of an unknown kind";
      const bool reads = t->kind() == ScoreTransformKind::Add || t->kind() == ScoreTransformKind::Keep;
      if (t->input() != (reads ? static_cast<int32_t>(inputs) : -1)) return "has a transform reading the wrong input";
      if (t->kind() == ScoreTransformKind::Scale && !std::isfinite(t->value())) return "scales by a value not finite";
      inputs += reads;
    }
  const bool gradient = at.gradient();
  if (gradient && (!at.d_out_strides() || at.out_strides() || !at.gradient_outputs() || !at.gradient_offsets() ||
                   !at.gradient_strides()))
    return "is a backward without dO's strides or where it writes, or with out_strides";
  const uint32_t outputs = count(step.outputs());
  if (count(step.inputs()) != inputs + gradient || (gradient ? outputs < 1 || outputs > 3 : outputs != 1))
    return "needs " + n(inputs + gradient) + " inputs and " + (gradient ? "one to three outputs" : "one output");
  // The element past the last one a view reaches, or -1 where its strides do not fit.
  auto reach_of = [&](int64_t offset, const std::vector<int64_t>& strides, int64_t rows, int64_t cols) -> __int128 {
    if (strides.size() != rank || offset < 0 || offset > limit) return -1;
    __int128 last = offset;
    for (uint32_t d = 0; d < rank; ++d) {
      const int64_t stride = strides[d];
      if (stride < 0 || stride > limit) return -1;
      const int64_t extent = d + 2 < rank ? at.batch()->Get(d) : d + 2 == rank ? rows : cols;
      last += static_cast<__int128>(extent - 1) * stride;
    }
    return last + 1;
  };
  auto reach = [&](int64_t offset, const flatbuffers::Vector<int64_t>* strides, int64_t rows,
                   int64_t cols) -> __int128 {
    if (!strides) return -1;
    return reach_of(offset, std::vector<int64_t>(strides->begin(), strides->end()), rows, cols);
  };
  // Whether the elements up to `end` lie inside the input, of a type `type_ok` takes.
  auto fits = [&](uint32_t input, __int128 end, auto type_ok) {
    const Value* v = values.Get(step.inputs()->Get(input));
    return end >= 0 && type_ok(v->dtype()) &&
           end * element_bytes(v->dtype()) <= static_cast<__int128>(value_bytes[step.inputs()->Get(input)]);
  };
  auto matrix = [&](const flatbuffers::Vector<int64_t>* strides, int64_t rows, int64_t cols) {
    return blas_matrix(rows, cols, strides->Get(rank - 2), strides->Get(rank - 1));
  };
  const int64_t t = at.queries(), keys = at.keys(), d = at.head_dim(), dv = at.value_dim();
  if (!fits(0, reach(at.q_offset(), at.q_strides(), t, d), f32_or_precision) ||
      !fits(1, reach(at.k_offset(), at.k_strides(), keys, d), f32_or_precision) ||
      !fits(2, reach(at.v_offset(), at.v_strides(), keys, dv), f32_or_precision))
    return "reads q, k or v past its input or from one that is neither f32 nor of its precision";
  if (!matrix(at.q_strides(), t, d) || !matrix(at.k_strides(), keys, d) || !matrix(at.v_strides(), keys, dv))
    return "reads q, k or v as a matrix with neither its rows nor its columns adjacent";
  if (at.transforms())
    for (const ScoreTransform* tr : *at.transforms()) {
      if (tr->input() < 0) continue;
      const DType type = tr->kind() == ScoreTransformKind::Add ? DType::F32 : DType::Bool;
      if (!fits(static_cast<uint32_t>(tr->input()), reach(tr->offset(), tr->strides(), t, keys),
                [&](DType given) { return given == type; }))
        return "reads a mask past its input or of the wrong element type";
    }
  if (gradient) {
    if (!fits(inputs, reach(at.d_out_offset(), at.d_out_strides(), t, dv), f32_or_precision) ||
        !matrix(at.d_out_strides(), t, dv))
      return "reads dO past its input, from one neither f32 nor of its precision, or as a matrix with neither its "
             "rows nor its columns adjacent";
    if (at.gradient_outputs()->size() != 3 || at.gradient_offsets()->size() != 3 ||
        at.gradient_strides()->size() != 3 * rank)
      return "writes other than three gradients";
    const int64_t rows[3] = {t, d, keys}, cols[3] = {d, keys, dv};  // dq, d(kᵀ), dv
    for (uint32_t i = 0; i < 3; ++i) {
      const int32_t o = at.gradient_outputs()->Get(i);
      if (o < 0 || static_cast<uint32_t>(o) >= outputs) return "writes a gradient into an output it does not have";
      const uint32_t id = step.outputs()->Get(static_cast<uint32_t>(o));
      std::vector<int64_t> strides(at.gradient_strides()->begin() + i * rank,
                                   at.gradient_strides()->begin() + (i + 1) * rank);
      const __int128 end = reach_of(at.gradient_offsets()->Get(i), strides, rows[i], cols[i]);
      const DType type = values.Get(id)->dtype();
      if (!f32_or_precision(type) || end < 0 || end * element_bytes(type) > static_cast<__int128>(value_bytes[id]) ||
          !blas_matrix(rows[i], cols[i], strides[rank - 2], strides[rank - 1]))
        return "writes a gradient past its output, into one neither f32 nor of its precision, or with neither its "
               "rows nor its columns adjacent";
    }
    return "";
  }
  const Value* out = values.Get(step.outputs()->Get(0));
  const uint64_t out_element = element_bytes(out->dtype());
  if (!f32_or_precision(out->dtype()) ||
      value_bytes[step.outputs()->Get(0)] != static_cast<uint64_t>(batch) * static_cast<uint64_t>(t * dv) * out_element)
    return "writes a result that is not [batch.., T, Dv] of f32 or its precision";
  if (at.out_strides()) {
    const __int128 end = reach(0, at.out_strides(), t, dv);
    if (end < 0 || end * out_element > static_cast<__int128>(value_bytes[step.outputs()->Get(0)]))
      return "writes past its result";
    const std::optional<BlasMatrix> rows = matrix(at.out_strides(), t, dv);  // C: never transposed
    if (!rows || rows->transposed) return "writes rows whose elements are not adjacent";
  }
  return "";
}

}  // namespace

Status check_library_step(const Artifact& a, int s, const std::vector<uint64_t>& value_bytes, bool cuda) {
  const Step* step = a.steps()->Get(s);
  if (step->kind() != StepKind::Library) return Status::Ok();
  if (const Attention* at = step->attention()) {
    std::string why = attention_problem(*at, *step, *a.values(), value_bytes);
    // CUDA runs it with the kernel the compiler wrote for it (format 1.16: bf16 or f16;
    // 1.17: f32 too; 1.19: a backward on two kernels, the first writing three f32 values
    // per query row). attention_problem bounds the batch and T by 2^40 each, so their
    // product, 2^80 at most, is counted in 128 bits.
    if (why.empty() && cuda && at->gradient()) {
      __int128 rows = at->queries();
      if (at->batch())
        for (int64_t d : *at->batch()) rows *= d;
      if (!step->partial_symbol() || step->partial_symbol()->size() == 0 ||
          static_cast<__int128>(step->scratch_bytes()) < rows * 12)
        why = "is a backward without its first kernel for CUDA or the scratch it writes";
    }
    if (why.empty() && cuda && (step->block_threads() <= 0 || step->grid_blocks() <= 0))
      why = "has no kernel launch for CUDA";
    if (!why.empty()) return fail(Kind::ShapeMismatch, "the attention of step " + n(s) + " " + why);
    return Status::Ok();
  }
  const PostOps* post_ops = step->conv()     ? step->conv()->post_ops()
                            : step->matmul() ? step->matmul()->post_ops()
                                             : nullptr;
  const uint32_t post_op_inputs = post_op_operands(post_ops);
  if (count(step->inputs()) != 2 + post_op_inputs || count(step->outputs()) != 1)
    return fail(Kind::MalformedMetadata,
                "library step " + n(s) + " needs " + n(2 + post_op_inputs) + " inputs and one output");
  if (const Conv* conv = step->conv()) {
    std::string why = conv_problem(*conv);
    if (why.empty() && post_ops && post_ops->size() > 0 && conv->kind() != ConvKind::Forward)
      why = "has post-ops but is not a forward convolution";
    if (why.empty()) why = post_op_problem(post_ops, false, conv->y()->Get(1), conv->y(), *step, *a.values());
    if (!why.empty()) return fail(Kind::ShapeMismatch, "the convolution of step " + n(s) + " " + why);
    // Its operands are tensors of exactly those shapes, f32, or (1.15) bf16 or f16 alike,
    // the result then also f32 where post-ops apply to the f32 sums.
    const flatbuffers::Vector<int64_t>* shapes[3][3] = {
        {conv->x(), conv->w(), conv->y()}, {conv->y(), conv->w(), conv->x()}, {conv->x(), conv->y(), conv->w()}};
    const uint32_t operands[3] = {step->inputs()->Get(0), step->inputs()->Get(1), step->outputs()->Get(0)};
    const DType type = a.values()->Get(operands[0])->dtype();
    const bool has_post_ops = post_ops && post_ops->size() > 0;
    for (int o = 0; o < 3; ++o) {
      const Value* v = a.values()->Get(operands[o]);
      const auto* want = shapes[static_cast<int>(conv->kind())][o];
      if (!v->shape() || v->shape()->size() != want->size() ||
          !std::equal(want->begin(), want->end(), v->shape()->begin()))
        return fail(Kind::ShapeMismatch, "the convolution of step " + n(s) + ": operand " + n(o) +
                                             " is not a tensor of the shape the convolution gives it");
      const bool typed = v->dtype() == type || (o == 2 && has_post_ops && v->dtype() == DType::F32);
      if (!(type == DType::F32 || type == DType::BF16 || type == DType::F16) || !typed)
        return fail(Kind::ShapeMismatch,
                    "the convolution of step " + n(s) + ": operand " + n(o) +
                        " is not of its type (f32, bf16 or f16 operands alike; an f32 result for post-ops)");
    }
    if (has_post_ops && a.values()->Get(operands[2])->dtype() != DType::F32 &&
        std::any_of(post_ops->begin(), post_ops->end(), [](const PostOp* p) { return p->kind() == PostOpKind::Add; }))
      return fail(Kind::ShapeMismatch,
                  "the convolution of step " + n(s) + " adds an f32 tensor to a bf16 or f16 result (its sum post-op)");
    return Status::Ok();
  }
  const Matmul* mm = step->matmul();
  if (!mm) return fail(Kind::MalformedMetadata, "library step " + n(s) + " needs matmul or convolution parameters");
  if (mm->batch() && reinterpret_cast<uintptr_t>(mm->batch()->data()) % 8 != 0 && mm->batch()->size() > 0)
    return fail(Kind::MalformedMetadata, "the batch dims of step " + n(s) + " are misaligned");
  const int64_t limit = int64_t{1} << 40;
  if (mm->m() < 0 || mm->n() < 0 || mm->k() < 0 || mm->m() > limit || mm->n() > limit || mm->k() > limit)
    return fail(Kind::OutOfRange, "step " + n(s) + " has matmul dims out of range");
  // Leading dims and offsets (1.11): at least the packed ones' (BLAS's rule).
  if (mm->lda() < 0 || mm->ldb() < 0 || mm->a_offset() < 0 || mm->b_offset() < 0 || mm->lda() > limit ||
      mm->ldb() > limit || mm->a_offset() > limit || mm->b_offset() > limit)
    return fail(Kind::OutOfRange, "step " + n(s) + " has a matmul leading dim or offset out of range");
  const int64_t a_cols = mm->trans_a() ? mm->m() : mm->k(), b_cols = mm->trans_b() ? mm->k() : mm->n();
  if ((mm->lda() != 0 && mm->lda() < a_cols) || (mm->ldb() != 0 && mm->ldb() < b_cols))
    return fail(Kind::ShapeMismatch, "the matmul of step " + n(s) + " has a leading dim below its operand's columns");
  // The last element each operand's matrices reach (plus one), over every batch index.
  auto matrix_reach = [](int64_t rows, int64_t cols, int64_t ld, int64_t offset) -> __int128 {
    if (rows == 0 || cols == 0) return 0;
    return offset + static_cast<__int128>(rows - 1) * (ld ? ld : cols) + cols;
  };
  __int128 reach[3] = {matrix_reach(mm->trans_a() ? mm->k() : mm->m(), a_cols, mm->lda(), mm->a_offset()),
                       matrix_reach(mm->trans_b() ? mm->n() : mm->k(), b_cols, mm->ldb(), mm->b_offset()),
                       static_cast<__int128>(mm->m()) * mm->n()};
  if (mm->batch())
    for (const BatchDim* d : *mm->batch()) {
      if (d->count() < 1 || d->count() > limit || d->a_stride() < 0 || d->b_stride() < 0 || d->c_stride() < 0 ||
          d->a_stride() > limit || d->b_stride() > limit || d->c_stride() > limit)
        return fail(Kind::OutOfRange, "step " + n(s) + " has a batch dim out of range");
      reach[0] += static_cast<__int128>(d->count() - 1) * d->a_stride();
      reach[1] += static_cast<__int128>(d->count() - 1) * d->b_stride();
      reach[2] += static_cast<__int128>(d->count() - 1) * d->c_stride();
    }
  const uint32_t operands[3] = {step->inputs()->Get(0), step->inputs()->Get(1), step->outputs()->Get(0)};
  for (int o = 0; o < 3; ++o) {
    uint64_t bytes = value_bytes[operands[o]];
    int size = element_bytes(a.values()->Get(operands[o])->dtype());
    if (reach[o] * size > static_cast<__int128>(bytes))
      return fail(Kind::ShapeMismatch, "the matmul of step " + n(s) + " reaches past operand " + n(o));
  }
  // C is of A's type, or (1.14, CPU) f32 where a bf16 or f16 matmul's post-ops apply to
  // its f32 sums.
  const DType a_type = a.values()->Get(operands[0])->dtype(), c_type = a.values()->Get(operands[2])->dtype();
  const bool half = a_type == DType::BF16 || a_type == DType::F16;
  const bool has_post_ops = post_ops && post_ops->size() > 0;
  if (c_type != a_type && !(half && has_post_ops && c_type == DType::F32))
    return fail(Kind::ShapeMismatch,
                "the matmul of step " + n(s) + " writes a result of another type than its operands'");
  if (has_post_ops) {
    const Value* c = a.values()->Get(step->outputs()->Get(0));
    std::string why = c->dtype() != DType::F32 && !half ? "has post-ops on a result that is not f32"
                      : half && cuda ? "has post-ops on a bf16 or f16 product, which only the CPU applies"
                      : cuda && !cublaslt_epilogue(post_ops)
                          ? "has post-ops that cublasLt does not apply (a bias, then at most one of Relu and "
                            "GeluTanh)"
                          : post_op_problem(post_ops, true, mm->n(), c->shape(), *step, *a.values());
    if (!why.empty()) return fail(Kind::ShapeMismatch, "the matmul of step " + n(s) + " " + why);
  }
  return Status::Ok();
}

}  // namespace kiln::format::detail
