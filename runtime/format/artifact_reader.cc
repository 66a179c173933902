#include <xxhash.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "base/memory_check.h"
#include "base/shape_limit.h"
#include "runtime/format/artifact.h"

namespace kiln::format {

int element_bytes(DType d) {
  switch (d) {
    case DType::F64:
    case DType::I64: return 8;
    case DType::F32:
    case DType::I32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::Bool:
    case DType::I8:
    case DType::U8: return 1;
  }
  return 0;
}

namespace {

using Kind = ArtifactErrorKind;

Error fail(Kind kind, const std::string& why) {
  return Error{"artifact: " + std::string(artifact_error_name(kind)) + ": " + why, static_cast<int>(kind)};
}

template <class T>
T load(std::span<const uint8_t> bytes, size_t at) {
  T v;
  std::memcpy(&v, bytes.data() + at, sizeof(T));
  return v;
}

std::string n(uint64_t v) { return std::to_string(v); }

// A byte range of the file: inside it (overflow-checked), aligned, and matching its hash.
Status check_section(std::span<const uint8_t> file, const Section& s, const std::string& what) {
  if (s.offset() % kSectionAlignment != 0)
    return fail(Kind::OutOfRange, what + " starts at " + n(s.offset()) + ", not 64-byte aligned");
  if (s.offset() < kHeaderBytes || s.offset() > file.size() || s.size() > file.size() - s.offset())
    return fail(Kind::Truncated, what + " [" + n(s.offset()) + ", +" + n(s.size()) + ") lies outside the " +
                                     n(file.size()) + "-byte file");
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  // (Fuzz builds skip this, so that mutations reach the structural checks behind it.)
  if (XXH64(file.data() + s.offset(), s.size(), 0) != s.xxh64())
    return fail(Kind::ChecksumMismatch, what + " does not match its xxh64");
#endif
  return Status::Ok();
}

template <class T>
uint32_t count(const flatbuffers::Vector<T>* v) {
  return v ? v->size() : 0;
}

// The elements of a vector that may be absent.
template <class T>
std::vector<T> items(const flatbuffers::Vector<T>* v) {
  return v ? std::vector<T>(v->begin(), v->end()) : std::vector<T>();
}

// Every byte outside the header and the sections must be zero, and sections must not
// overlap, so that no byte of the file goes unchecked.
Status check_coverage(std::span<const uint8_t> file, std::vector<std::pair<uint64_t, uint64_t>> ranges) {
  for (size_t i = 48; i < kHeaderBytes; ++i)
    if (file[i] != 0) return fail(Kind::MalformedMetadata, "the header's reserved bytes are not zero");
  std::sort(ranges.begin(), ranges.end());
  uint64_t cursor = kHeaderBytes;
  for (auto [offset, size] : ranges) {
    if (offset < cursor) return fail(Kind::OutOfRange, "sections overlap at byte " + n(offset));
    for (uint64_t i = cursor; i < offset; ++i)
      if (file[i] != 0) return fail(Kind::MalformedMetadata, "padding byte " + n(i) + " is not zero");
    cursor = offset + size;
  }
  for (uint64_t i = cursor; i < file.size(); ++i)
    if (file[i] != 0) return fail(Kind::MalformedMetadata, "trailing byte " + n(i) + " is not zero");
  return Status::Ok();
}

// A batch (format 1.6) is the first dim of every input and every result, and a model
// with state has none: a run that packs several requests' rows must not carry anything
// from one run to the next.
Status check_batch(const Artifact& a, const std::vector<int>& arg_kind) {
  if (a.batch() == 0) return Status::Ok();
  if (a.batch() < 0) return fail(Kind::OutOfRange, "the batch is " + std::to_string(a.batch()));
  auto named = [&](uint32_t v) {
    const Value* value = a.values()->Get(v);
    return value->name() ? "%" + value->name()->str() : "value " + n(v);
  };
  auto leads_with_batch = [&](uint32_t v) {
    const auto* shape = a.values()->Get(v)->shape();
    return count(shape) > 0 && shape->Get(0) == a.batch();
  };
  for (uint32_t v = 0; v < arg_kind.size(); ++v) {
    if (arg_kind[v] == static_cast<int>(ArgKind::State))
      return fail(Kind::ShapeMismatch,
                  "a model with state has no batch, but the batch is " + std::to_string(a.batch()));
    if (arg_kind[v] == static_cast<int>(ArgKind::Input) && !leads_with_batch(v))
      return fail(Kind::ShapeMismatch,
                  "input " + named(v) + " does not lead with the batch of " + std::to_string(a.batch()));
  }
  for (uint32_t i = 0; i < count(a.results()); ++i)
    if (!leads_with_batch(a.results()->Get(i)))
      return fail(Kind::ShapeMismatch, "result " + named(a.results()->Get(i)) + " does not lead with the batch of " +
                                           std::to_string(a.batch()));
  return Status::Ok();
}

// Kernels in oneDNN's layouts (format 1.10) exist for CPU steps over activations
// [N, C, D1..Dk] (k = 1..3: the largest rank among the step's values): loop steps in
// channels-last (0) or in blocks of 8 or 16 channels into which every activation splits,
// reduction steps in channels-last. A loop step's outputs are all activations.
Status check_channel_layouts(const Step& step, int s, bool cuda, const Artifact& a) {
  if (count(step.channel_layouts()) == 0) return Status::Ok();
  const bool loop = step.kind() == StepKind::Loop;
  if (cuda || (!loop && step.kind() != StepKind::Reduction))
    return fail(Kind::MalformedMetadata,
                "step " + n(s) + " has kernels in oneDNN's layouts, which only a CPU loop or reduction step has");
  auto rank_of = [&](uint32_t v) {
    const auto* shape = a.values()->Get(v)->shape();
    return shape ? shape->size() : 0u;
  };
  uint32_t rank = 0;
  for (const auto* values : {step.inputs(), step.outputs()})
    for (uint32_t v : *values) rank = std::max(rank, rank_of(v));
  for (uint32_t v : *step.outputs())
    if (rank < 3 || rank > 5 || (loop && rank_of(v) != rank))
      return fail(Kind::MalformedMetadata, "step " + n(s) + " has kernels in oneDNN's layouts, but its output " + n(v) +
                                               " is no activation [N, C, D1..Dk] of its values' rank");
  for (int32_t block : *step.channel_layouts()) {
    if (block != 0 && (!loop || (block != 8 && block != 16)))
      return fail(Kind::MalformedMetadata, "step " + n(s) + " has a kernel in layout " + std::to_string(block) +
                                               (loop ? " (oneDNN's are 0, channels-last, and blocks of 8 and 16)"
                                                     : " (a reduction step's is 0, channels-last)"));
    for (const auto* values : {step.inputs(), step.outputs()})
      for (uint32_t v : *values)
        if (block != 0 && rank_of(v) == rank && a.values()->Get(v)->shape()->Get(1) % block != 0)
          return fail(Kind::MalformedMetadata, "step " + n(s) + " has a kernel over blocks of " +
                                                   std::to_string(block) + " channels, which value " + n(v) +
                                                   " does not split into");
  }
  return Status::Ok();
}

// A kernel step's range of work items must be what its outputs hold: a loop kernel's,
// the elements of its first output; a reduction's, rows that divide every output (a row
// value per row, or whole rows); a scatter, one. (The kernels' code was compiled for
// those counts; a larger one would write past the outputs.)
Status check_work_items(const Step& step, int s, const std::vector<uint64_t>& value_bytes, const Artifact& a) {
  if (step.kind() == StepKind::Library) return Status::Ok();
  if (count(step.outputs()) == 0) return fail(Kind::MalformedMetadata, "kernel step " + n(s) + " has no outputs");
  const uint64_t items = static_cast<uint64_t>(step.work_items());
  auto elements = [&](uint32_t v) {
    return value_bytes[v] / static_cast<uint64_t>(element_bytes(a.values()->Get(v)->dtype()));
  };
  bool fits = true;
  switch (step.kind()) {
    case StepKind::Loop: fits = items == elements(step.outputs()->Get(0)); break;
    case StepKind::Scatter: fits = items == 1; break;
    case StepKind::Reduction:
      for (uint32_t v : *step.outputs())
        fits = fits && (elements(v) == 0 || (items > 0 && items <= elements(v) && elements(v) % items == 0));
      break;
    case StepKind::Library: break;
  }
  if (!fits)
    return fail(Kind::ShapeMismatch,
                "step " + n(s) + " has " + n(items) + " work items, which its outputs do not hold");
  return Status::Ok();
}

// Why a library convolution's parameters are inconsistent, or "" when they are not: ranks,
// ranges, groups, and each output extent from the input's, as the IR's conv computes it.
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

// Whether the post-ops are a chain cublasLt's epilogues apply: a bias, then at most one of
// relu and tanh GELU (ir/epilogue.h's MatmulEpilogues::kCublasLt).
bool cublaslt_epilogue(const PostOps* post_ops) {
  uint32_t i = 0;
  if (i < post_ops->size() && post_ops->Get(i) && post_ops->Get(i)->kind() == PostOpKind::Bias) ++i;
  if (i < post_ops->size() && post_ops->Get(i) &&
      (post_ops->Get(i)->kind() == PostOpKind::Relu || post_ops->Get(i)->kind() == PostOpKind::GeluTanh))
    ++i;
  return i == post_ops->size();
}

// Why a library call's post-ops are inconsistent, or "": each of a known kind, a bias only
// first and of `channels` values, an added tensor of the result's shape `y`, each operand
// the step input after the previous one's, clip bounds in order. A matmul's take a bias,
// clips and activations only.
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

// Why a library attention's parameters do not fit its step's values, or "" when they do:
// its dims and strides in range, q, k, v and the result f32 or of its precision (f32, bf16
// or f16), Add's mask f32 and Keep's bool, each matrix with rows or columns adjacent, and
// every element it reads inside its input.
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
  if (gradient && precision != DType::F32) return "computes a backward in a type other than f32";
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
      return "reads dO past its input, from one not f32, or as a matrix with neither its rows nor its columns "
             "adjacent";
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
      if (values.Get(id)->dtype() != DType::F32 || end < 0 || end * 4 > static_cast<__int128>(value_bytes[id]) ||
          !blas_matrix(rows[i], cols[i], strides[rank - 2], strides[rank - 1]))
        return "writes a gradient past its f32 output or with neither its rows nor its columns adjacent";
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

std::optional<BlasMatrix> blas_matrix(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if ((cols == 1 || col_stride == 1) && (rows == 1 || row_stride >= cols))
    return BlasMatrix{false, rows == 1 ? std::max<int64_t>(cols, 1) : row_stride};
  if ((rows == 1 || row_stride == 1) && (cols == 1 || col_stride >= rows))
    return BlasMatrix{true, cols == 1 ? std::max<int64_t>(rows, 1) : col_stride};
  return std::nullopt;
}

bool post_op_reads_input(PostOpKind kind) {
  return kind == PostOpKind::Bias || kind == PostOpKind::Add || kind == PostOpKind::ChannelAdd ||
         kind == PostOpKind::ChannelSub || kind == PostOpKind::ChannelMul;
}

std::string_view artifact_error_name(ArtifactErrorKind kind) {
  switch (kind) {
    case Kind::BadMagic: return "bad magic";
    case Kind::UnsupportedVersion: return "unsupported version";
    case Kind::Truncated: return "truncated";
    case Kind::ChecksumMismatch: return "checksum mismatch";
    case Kind::MalformedMetadata: return "malformed metadata";
    case Kind::OutOfRange: return "out of range";
    case Kind::ShapeMismatch: return "shape mismatch";
    case Kind::BadMemoryPlan: return "bad memory plan";
    case Kind::UseBeforeProduce: return "use before produce";
    case Kind::WrongTarget: return "wrong target";
    case Kind::TrailingBytes: return "trailing bytes";
    case Kind::MissingCpuFeatures: return "missing CPU features";
  }
  return "unknown";
}

Result<ArtifactView> read_artifact(std::span<const uint8_t> file, std::string_view expected_target) {
  if (file.size() < 8 || std::memcmp(file.data(), kMagic, 8) != 0)
    return fail(Kind::BadMagic, "this is not a .kiln artifact");
  if (file.size() < kHeaderBytes)
    return fail(Kind::Truncated, "the file is " + n(file.size()) + " bytes, shorter than its header");
  ArtifactView view;
  view.major_ = load<uint16_t>(file, 8);
  view.minor_ = load<uint16_t>(file, 10);
  if (view.major_ != kFormatMajor || view.minor_ > kFormatMinor)
    return fail(Kind::UnsupportedVersion, "format " + n(view.major_) + "." + n(view.minor_) + " (this runtime reads " +
                                              n(kFormatMajor) + ".0 to " + n(kFormatMajor) + "." + n(kFormatMinor) +
                                              ")");
  if (load<uint32_t>(file, 12) != kHeaderBytes) return fail(Kind::MalformedMetadata, "the header size is not 64");
  uint64_t declared = load<uint64_t>(file, 16);
  if (declared > file.size())
    return fail(Kind::Truncated, "the file is " + n(file.size()) + " bytes, its header says " + n(declared));
  if (declared < file.size())
    return fail(Kind::TrailingBytes, "the file is " + n(file.size()) + " bytes, its header says " + n(declared));
  Section meta(load<uint64_t>(file, 24), load<uint64_t>(file, 32), load<uint64_t>(file, 40));
  KILN_RETURN_IF_ERROR(check_section(file, meta, "the metadata"));
  if (reinterpret_cast<uintptr_t>(file.data()) % 8 != 0)
    return fail(Kind::OutOfRange,
                "the artifact's bytes are not 8-byte aligned in memory; load it into an aligned buffer");
  flatbuffers::Verifier::Options options;
  options.max_depth = 16;
  options.max_tables = 1u << 20;
  flatbuffers::Verifier verifier(file.data() + meta.offset(), meta.size(), options);
  if (!VerifyArtifactBuffer(verifier))
    return fail(Kind::MalformedMetadata, "the FlatBuffers verifier refused the metadata");
  const Artifact& a = *GetArtifact(file.data() + meta.offset());
  view.bytes_ = file;
  view.metadata_ = &a;

  if (!a.target()) return fail(Kind::MalformedMetadata, "no target");
  // The loaders walk these without checking each: a writer always writes them, if empty.
  if (!a.values() || !a.args() || !a.results() || !a.buffers() || !a.steps())
    return fail(Kind::MalformedMetadata, "no values, arguments, results, buffers or steps table");
  if (!expected_target.empty() && a.target()->string_view() != expected_target)
    return fail(Kind::WrongTarget,
                "compiled for " + a.target()->str() + ", but this runtime runs " + std::string(expected_target));
  const bool cuda = a.target()->string_view().starts_with("cuda-");

  // FlatBuffers' verifier checks vector alignment only to 4 bytes; non-empty vectors of
  // 8-byte elements must be 8-byte aligned to be read without undefined behavior.
  auto aligned8 = [](const auto* v) { return !v || v->size() == 0 || reinterpret_cast<uintptr_t>(v->data()) % 8 == 0; };
  if (!aligned8(a.weights())) return fail(Kind::MalformedMetadata, "the weights table is misaligned");
  for (uint32_t i = 0; i < count(a.values()); ++i)
    if (!aligned8(a.values()->Get(i)->shape()))
      return fail(Kind::MalformedMetadata, "the shape of value " + n(i) + " is misaligned");

  // Values: element types and shapes (element counts bounded, so byte sizes never overflow).
  const uint32_t values = count(a.values());
  std::vector<uint64_t> value_bytes(values);
  for (uint32_t i = 0; i < values; ++i) {
    const Value* v = a.values()->Get(i);
    if (static_cast<int>(v->dtype()) > static_cast<int>(DType::MAX))
      return fail(Kind::OutOfRange, "value " + n(i) + " has an unknown element type");
    if (count(v->shape()) > 16)
      return fail(Kind::OutOfRange, "value " + n(i) + " has rank " + n(count(v->shape())) + ", more than 16");
    const std::vector<int64_t> shape = items(v->shape());
    for (int64_t d : shape)
      if (d < 0) return fail(Kind::ShapeMismatch, "value " + n(i) + " has a negative dimension");
    if (!dims_within_limit(shape)) return fail(Kind::OutOfRange, "value " + n(i) + " " + dims_limit_error(shape));
    uint64_t elements = 1;
    for (int64_t d : shape) elements *= static_cast<uint64_t>(d);
    value_bytes[i] = elements * static_cast<uint64_t>(element_bytes(v->dtype()));
  }
  auto value_ok = [&](uint32_t v) { return v < values; };

  // Sections.
  for (uint32_t i = 0; i < count(a.code()); ++i) {
    const CodeObject* c = a.code()->Get(i);
    if (!c->section()) return fail(Kind::MalformedMetadata, "code object " + n(i) + " has no section");
    KILN_RETURN_IF_ERROR(check_section(file, *c->section(), "code object " + n(i)));
  }
  for (uint32_t i = 0; i < count(a.weights()); ++i)
    KILN_RETURN_IF_ERROR(check_section(file, *a.weights()->Get(i), "weights section " + n(i)));
  if (!a.ir()) return fail(Kind::MalformedMetadata, "no IR section");
  KILN_RETURN_IF_ERROR(check_section(file, *a.ir(), "the IR section"));
  std::vector<std::pair<uint64_t, uint64_t>> ranges = {{meta.offset(), meta.size()},
                                                       {a.ir()->offset(), a.ir()->size()}};
  for (uint32_t i = 0; i < count(a.code()); ++i)
    ranges.emplace_back(a.code()->Get(i)->section()->offset(), a.code()->Get(i)->section()->size());
  for (uint32_t i = 0; i < count(a.weights()); ++i)
    ranges.emplace_back(a.weights()->Get(i)->offset(), a.weights()->Get(i)->size());
  KILN_RETURN_IF_ERROR(check_coverage(file, std::move(ranges)));

  // Signature.
  std::vector<int> available(values, -2);  // the step after which a value can be read; -1: an argument
  std::vector<int> arg_kind(values, -1);   // per value: its ArgKind if it is an argument
  for (uint32_t i = 0; i < count(a.args()); ++i) {
    const Argument* arg = a.args()->Get(i);
    if (!value_ok(arg->value()) || static_cast<int>(arg->kind()) > static_cast<int>(ArgKind::MAX))
      return fail(Kind::OutOfRange, "argument " + n(i) + " names value " + n(arg->value()) + " of " + n(values));
    const bool has_weights = arg->kind() == ArgKind::Param || (arg->kind() == ArgKind::State && arg->weight() != -1);
    if (arg->kind() == ArgKind::Input && arg->weight() != -1)
      return fail(Kind::OutOfRange, "input " + n(i) + " names a weights section");
    if (has_weights) {
      const char* what = arg->kind() == ArgKind::Param ? "param " : "state ";
      if (arg->weight() < 0 || static_cast<uint32_t>(arg->weight()) >= count(a.weights()))
        return fail(Kind::OutOfRange, what + n(i) + " names weights section " + std::to_string(arg->weight()));
      if (a.weights()->Get(arg->weight())->size() != value_bytes[arg->value()])
        return fail(Kind::ShapeMismatch, what + n(i) + " needs " + n(value_bytes[arg->value()]) +
                                             " bytes of weights, its section has " +
                                             n(a.weights()->Get(arg->weight())->size()));
    }
    if (arg_kind[arg->value()] >= 0) return fail(Kind::OutOfRange, "value " + n(arg->value()) + " is two arguments");
    arg_kind[arg->value()] = static_cast<int>(arg->kind());
    available[arg->value()] = -1;
  }
  auto is_arg = [&](uint32_t v, ArgKind kind) { return arg_kind[v] == static_cast<int>(kind); };

  // Memory plan.
  const int steps = static_cast<int>(count(a.steps()));
  std::vector<int> buffer_of(values, -1);
  std::vector<ArenaBuffer> arena;
  std::vector<int> arena_index(count(a.buffers()), -1);
  for (uint32_t i = 0; i < count(a.buffers()); ++i) {
    const Buffer* b = a.buffers()->Get(i);
    if (!value_ok(b->value()) || static_cast<int>(b->home()) > static_cast<int>(Home::MAX))
      return fail(Kind::OutOfRange, "buffer " + n(i) + " names value " + n(b->value()) + " of " + n(values));
    if (b->bytes() != value_bytes[b->value()])
      return fail(Kind::ShapeMismatch,
                  "buffer " + n(i) + " has " + n(b->bytes()) + " bytes for a value of " + n(value_bytes[b->value()]));
    if (b->first_step() < -1 || b->last_step() > steps || b->first_step() > b->last_step() || b->first_step() >= steps)
      return fail(Kind::OutOfRange, "buffer " + n(i) + " lives over steps " + std::to_string(b->first_step()) + ".." +
                                        std::to_string(b->last_step()) + " of " + std::to_string(steps));
    if ((b->in_place_of() != -1 && (b->in_place_of() < 0 || static_cast<uint32_t>(b->in_place_of()) >= values)) ||
        (b->state() != -1 && (b->state() < 0 || static_cast<uint32_t>(b->state()) >= values)))
      return fail(Kind::OutOfRange, "buffer " + n(i) + " names a value out of range");
    if (buffer_of[b->value()] >= 0) return fail(Kind::BadMemoryPlan, "value " + n(b->value()) + " has two buffers");
    buffer_of[b->value()] = static_cast<int>(i);
    // Buffers outside the arena are arguments' own bytes, or a state's in an update in place.
    if ((b->home() == Home::Input && !is_arg(b->value(), ArgKind::Input)) ||
        (b->home() == Home::Param && !is_arg(b->value(), ArgKind::Param)))
      return fail(Kind::BadMemoryPlan,
                  "buffer " + n(i) + " is homed in an argument that value " + n(b->value()) + " is not");
    if (b->home() == Home::State) {
      const uint32_t state = b->state() >= 0 ? static_cast<uint32_t>(b->state()) : b->value();
      if (!is_arg(state, ArgKind::State) || value_bytes[state] != value_bytes[b->value()])
        return fail(Kind::BadMemoryPlan,
                    "buffer " + n(i) + " is homed in value " + n(state) + ", which is no state argument of its size");
    }
    if (b->home() != Home::Arena) continue;
    if (b->offset() > std::numeric_limits<int64_t>::max() || b->bytes() > std::numeric_limits<int64_t>::max())
      return fail(Kind::OutOfRange, "buffer " + n(i) + " has an offset or size beyond 2^63");
    arena_index[i] = static_cast<int>(arena.size());
    arena.push_back({"buffer " + n(i), static_cast<int64_t>(b->offset()), static_cast<int64_t>(b->bytes()),
                     b->first_step(), b->last_step(), -1});
  }
  for (uint32_t i = 0; i < count(a.buffers()); ++i) {
    const Buffer* b = a.buffers()->Get(i);
    if (arena_index[i] < 0 || b->in_place_of() < 0) continue;
    int from = buffer_of[b->in_place_of()];
    if (from < 0 || arena_index[from] < 0)
      return fail(Kind::BadMemoryPlan, "buffer " + n(i) + " is in place of a value outside the arena");
    arena[arena_index[i]].in_place_of = arena_index[from];
  }
  // A split reduction step's scratch (format 1.4): arena bytes live during the step only.
  for (int s = 0; s < steps; ++s) {
    const Step* step = a.steps()->Get(s);
    const bool partial = step->partial_symbol() && step->partial_symbol()->size() > 0;
    if (!partial && step->scratch_bytes() == 0 && step->partial_items() == 0 && step->scratch_offset() == 0) continue;
    // Format 1.19: CUDA's attention backward, whose first kernel writes each query row's
    // values for its second.
    const bool attention_gradient = cuda && step->attention() && step->attention()->gradient();
    if (!partial || (step->kind() != StepKind::Reduction && !attention_gradient))
      return fail(Kind::MalformedMetadata, "step " + n(s) +
                                               " has scratch or a partial kernel, which only a split reduction step "
                                               "or a CUDA attention backward has");
    if (cuda && (step->partial_block_threads() < 32 || step->partial_block_threads() > 1024 ||
                 step->partial_block_threads() % 32 != 0 || step->partial_grid_blocks() < 1 ||
                 step->partial_grid_blocks() > INT32_MAX))
      return fail(Kind::OutOfRange, "step " + n(s) + " launches its partial kernel with " +
                                        std::to_string(step->partial_block_threads()) + " threads per block in " +
                                        std::to_string(step->partial_grid_blocks()) + " blocks");
    if (step->partial_items() < 1 || step->partial_items() > (int64_t{1} << 40) || step->scratch_bytes() < 8 ||
        step->scratch_bytes() > (int64_t{1} << 48) || step->scratch_offset() < 0 ||
        step->scratch_offset() > (int64_t{1} << 48))
      return fail(Kind::OutOfRange, "step " + n(s) + " has " + std::to_string(step->partial_items()) +
                                        " partial work items and " + std::to_string(step->scratch_bytes()) +
                                        " bytes of scratch at " + std::to_string(step->scratch_offset()));
    arena.push_back({"step " + n(s) + "'s scratch", step->scratch_offset(), step->scratch_bytes(), s, s, -1});
  }
  if (a.alignment() == 0 || (a.alignment() & (a.alignment() - 1)) != 0 || a.arena_bytes() > (uint64_t{1} << 48))
    return fail(Kind::OutOfRange, "arena of " + n(a.arena_bytes()) + " bytes with alignment " + n(a.alignment()));
  Status plan = check_arena(arena, static_cast<int64_t>(a.arena_bytes()), static_cast<int64_t>(a.alignment()));
  if (!plan.ok()) return fail(Kind::BadMemoryPlan, plan.error().message);

  // Steps: every input produced before use and still live; every output has its buffer.
  for (int s = 0; s < steps; ++s) {
    const Step* step = a.steps()->Get(s);
    if (static_cast<int>(step->kind()) > static_cast<int>(StepKind::MAX))
      return fail(Kind::OutOfRange, "step " + n(s) + " has an unknown kind");
    if (!step->symbol() || step->symbol()->size() == 0)
      return fail(Kind::MalformedMetadata, "step " + n(s) + " has no entry point");
    if (!step->inputs() || !step->outputs())
      return fail(Kind::MalformedMetadata, "step " + n(s) + " has no inputs or outputs list");
    if (step->work_items() < 0 || step->work_items() > (int64_t{1} << 40))
      return fail(Kind::OutOfRange, "step " + n(s) + " has " + std::to_string(step->work_items()) + " work items");
    if (step->flops() < 0)
      return fail(Kind::OutOfRange, "step " + n(s) + " does " + std::to_string(step->flops()) + " flops");
    // The most dynamic shared memory a block of any GPU kiln compiles for takes (sm_90's
    // 227 KB).
    constexpr int32_t kMaxSharedBytes = 232448;
    for (int32_t bytes : {step->shared_bytes(), step->partial_shared_bytes()})
      if (bytes < 0 || bytes > kMaxSharedBytes || (!cuda && bytes != 0))
        return fail(Kind::OutOfRange,
                    "step " + n(s) + " takes " + std::to_string(bytes) + " bytes of dynamic shared memory" +
                        (cuda ? " (at most " + std::to_string(kMaxSharedBytes) + ")" : " on the CPU"));
    if (cuda && step->kind() != StepKind::Library &&
        (step->block_threads() < 32 || step->block_threads() > 1024 || step->block_threads() % 32 != 0 ||
         step->grid_blocks() < 1 || step->grid_blocks() > INT32_MAX))
      return fail(Kind::OutOfRange, "step " + n(s) + " launches " + std::to_string(step->block_threads()) +
                                        " threads per block in " + std::to_string(step->grid_blocks()) + " blocks");
    for (uint32_t v : items(step->inputs())) {
      if (!value_ok(v)) return fail(Kind::OutOfRange, "step " + n(s) + " reads value " + n(v) + " of " + n(values));
      if (available[v] == -2)
        return fail(Kind::UseBeforeProduce, "step " + n(s) + " reads value " + n(v) + " (%" +
                                                (a.values()->Get(v)->name() ? a.values()->Get(v)->name()->str() : "") +
                                                ") before any step produces it");
      int b = buffer_of[v];
      if (b < 0 || a.buffers()->Get(b)->last_step() < s)
        return fail(Kind::BadMemoryPlan, "step " + n(s) + " reads value " + n(v) + " after its buffer is gone");
    }
    for (uint32_t v : items(step->outputs())) {
      if (!value_ok(v)) return fail(Kind::OutOfRange, "step " + n(s) + " writes value " + n(v) + " of " + n(values));
      int b = buffer_of[v];
      if (b < 0 || a.buffers()->Get(b)->first_step() != s)
        return fail(Kind::BadMemoryPlan,
                    "step " + n(s) + " writes value " + n(v) + ", which has no buffer born at that step");
      available[v] = s;
    }
    KILN_RETURN_IF_ERROR(check_work_items(*step, s, value_bytes, a));
    KILN_RETURN_IF_ERROR(check_channel_layouts(*step, s, cuda, a));
  }
  // Library steps: the matmul's reach into each operand stays inside it.
  for (int s = 0; s < steps; ++s) {
    const Step* step = a.steps()->Get(s);
    if (step->kind() != StepKind::Library) continue;
    if (const Attention* at = step->attention()) {
      std::string why = attention_problem(*at, *step, *a.values(), value_bytes);
      // CUDA runs it with the kernel the compiler wrote for it (format 1.16: bf16 or f16;
      // 1.17: f32 too).
      // 1.19: a backward on two kernels, the first writing two f32 values per query row.
      if (why.empty() && cuda && at->gradient()) {
        int64_t rows = at->queries();
        if (at->batch())
          for (int64_t d : *at->batch()) rows *= d;
        if (!step->partial_symbol() || step->partial_symbol()->size() == 0 || step->scratch_bytes() < rows * 8)
          why = "is a backward without its first kernel for CUDA or the scratch it writes";
      }
      if (why.empty() && cuda && (step->block_threads() <= 0 || step->grid_blocks() <= 0))
        why = "has no kernel launch for CUDA";
      if (!why.empty()) return fail(Kind::ShapeMismatch, "the attention of step " + n(s) + " " + why);
      continue;
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
        return fail(Kind::ShapeMismatch, "the convolution of step " + n(s) +
                                             " adds an f32 tensor to a bf16 or f16 result (its sum post-op)");
      continue;
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
  }
  for (uint32_t i = 0; i < count(a.results()); ++i) {
    uint32_t v = a.results()->Get(i);
    if (!value_ok(v)) return fail(Kind::OutOfRange, "result " + n(i) + " names value " + n(v) + " of " + n(values));
    if (available[v] == -2) return fail(Kind::UseBeforeProduce, "result " + n(i) + " is produced by no step");
  }
  KILN_RETURN_IF_ERROR(check_batch(a, arg_kind));
  for (uint32_t i = 0; i < count(a.state_copies()); ++i) {
    const StateCopy* c = a.state_copies()->Get(i);
    if (!value_ok(c->state()) || !value_ok(c->value()))
      return fail(Kind::OutOfRange, "state copy " + n(i) + " names a value out of range");
    if (!is_arg(c->state(), ArgKind::State) || value_bytes[c->state()] != value_bytes[c->value()])
      return fail(Kind::BadMemoryPlan, "state copy " + n(i) + " copies value " + n(c->value()) + " into value " +
                                           n(c->state()) + ", which is no state argument of its size");
    if (available[c->value()] == -2 || buffer_of[c->value()] < 0)
      return fail(Kind::UseBeforeProduce,
                  "state copy " + n(i) + " copies value " + n(c->value()) + ", which no step produces");
  }
  return view;
}

}  // namespace kiln::format
