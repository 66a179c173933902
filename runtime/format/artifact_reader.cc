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
#include "runtime/format/library_checks.h"

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

using detail::count;
using detail::fail;
using detail::items;
using detail::n;
using Kind = ArtifactErrorKind;

template <class T>
T load(std::span<const uint8_t> bytes, size_t at) {
  T v;
  std::memcpy(&v, bytes.data() + at, sizeof(T));
  return v;
}

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
  for (int s = 0; s < steps; ++s) KILN_RETURN_IF_ERROR(detail::check_library_step(a, s, value_bytes, cuda));
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
