#include <xxhash.h>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "runtime/format/artifact.h"

namespace kiln::format {
namespace {

void put(std::vector<uint8_t>& out, size_t at, const void* data, size_t size) {
  std::memcpy(out.data() + at, data, size);
}

// The sections' places, then their bytes: the file is allocated once at its size and each
// blob copied once (appending grew a vector of a model's weights, GPT-2 small's 500 MB,
// through copies of everything before).
class SectionLayout {
 public:
  // Places a blob at the next 64-byte boundary and describes it.
  Section place(std::span<const uint8_t> blob) {
    const uint64_t offset = (end_ + kSectionAlignment - 1) / kSectionAlignment * kSectionAlignment;
    end_ = offset + blob.size();
    blobs_.emplace_back(offset, blob);
    return Section(offset, blob.size(), XXH64(blob.data(), blob.size(), 0));
  }
  // The file: the header's bytes zero, every placed blob where it was placed.
  std::vector<uint8_t> write() const {
    std::vector<uint8_t> out(end_, 0);
    for (const auto& [offset, blob] : blobs_)
      if (!blob.empty()) std::memcpy(out.data() + offset, blob.data(), blob.size());
    return out;
  }

 private:
  uint64_t end_ = kHeaderBytes;
  std::vector<std::pair<uint64_t, std::span<const uint8_t>>> blobs_;
};

}  // namespace

std::vector<uint8_t> write_artifact(const ArtifactContents& c) {
  // Header first, then the sections, then the metadata that points at them.
  SectionLayout layout;
  std::vector<std::pair<const ArtifactContents::CodeInfo*, Section>> code;
  for (const auto& obj : c.code) code.emplace_back(&obj, layout.place(obj.bytes));
  std::vector<Section> weights;
  for (const auto& w : c.weights) weights.push_back(layout.place(w));
  Section ir = layout.place(std::span(reinterpret_cast<const uint8_t*>(c.ir.data()), c.ir.size()));

  flatbuffers::FlatBufferBuilder fb;
  std::vector<flatbuffers::Offset<flatbuffers::String>> flags;
  for (const auto& f : c.flags) flags.push_back(fb.CreateString(f));
  std::vector<flatbuffers::Offset<Value>> values;
  for (const auto& v : c.values)
    values.push_back(CreateValue(fb, fb.CreateString(v.name), v.dtype, fb.CreateVector(v.shape),
                                 v.source_name.empty() ? 0 : fb.CreateString(v.source_name)));
  std::vector<flatbuffers::Offset<Argument>> args;
  for (const auto& a : c.args) args.push_back(CreateArgument(fb, a.value, a.kind, a.weight));
  std::vector<flatbuffers::Offset<Buffer>> buffers;
  for (const auto& b : c.buffers)
    buffers.push_back(
        CreateBuffer(fb, b.value, b.home, b.offset, b.bytes, b.first_step, b.last_step, b.in_place_of, b.state));
  std::vector<flatbuffers::Offset<Step>> steps;
  for (const auto& s : c.steps) {
    flatbuffers::Offset<Matmul> matmul = 0;
    flatbuffers::Offset<Conv> conv = 0;
    flatbuffers::Offset<Attention> attention = 0;
    auto post_ops_of = [&](const std::vector<ArtifactContents::PostOpInfo>& ops) {
      std::vector<flatbuffers::Offset<PostOp>> offsets;
      for (const auto& p : ops) offsets.push_back(CreatePostOp(fb, p.kind, p.input, p.lo, p.hi));
      return offsets.empty() ? 0 : fb.CreateVector(offsets);
    };
    if (s.kind == StepKind::Library && s.attention) {
      const ArtifactContents::AttentionInfo& at = *s.attention;
      std::vector<flatbuffers::Offset<ScoreTransform>> transforms;
      for (const auto& t : at.transforms)
        transforms.push_back(CreateScoreTransform(fb, t.kind, t.value, t.input, t.offset, fb.CreateVector(t.strides)));
      attention = CreateAttention(
          fb, fb.CreateVector(at.batch), at.queries, at.keys, at.head_dim, at.value_dim, at.q_offset,
          fb.CreateVector(at.q_strides), at.k_offset, fb.CreateVector(at.k_strides), at.v_offset,
          fb.CreateVector(at.v_strides), fb.CreateVector(transforms),
          at.out_strides.empty() ? 0 : fb.CreateVector(at.out_strides), at.precision, at.gradient, at.d_out_offset,
          at.gradient ? fb.CreateVector(at.d_out_strides) : 0, at.gradient ? fb.CreateVector(at.gradient_outputs) : 0,
          at.gradient ? fb.CreateVector(at.gradient_offsets) : 0,
          at.gradient ? fb.CreateVector(at.gradient_strides) : 0);
    } else if (s.kind == StepKind::Library && s.conv) {
      auto post_ops = post_ops_of(s.conv->post_ops);
      conv =
          CreateConv(fb, s.conv->kind, fb.CreateVector(s.conv->x), fb.CreateVector(s.conv->w),
                     fb.CreateVector(s.conv->y), fb.CreateVector(s.conv->strides), fb.CreateVector(s.conv->dilations),
                     fb.CreateVector(s.conv->pads_lo), fb.CreateVector(s.conv->pads_hi), s.conv->groups, post_ops);
    } else if (s.kind == StepKind::Library) {
      auto post_ops = post_ops_of(s.matmul.post_ops);
      matmul = CreateMatmul(fb, s.matmul.m, s.matmul.n, s.matmul.k, s.matmul.trans_a, s.matmul.trans_b,
                            fb.CreateVectorOfStructs(s.matmul.batch), post_ops, s.matmul.lda, s.matmul.ldb,
                            s.matmul.a_offset, s.matmul.b_offset);
    }
    steps.push_back(CreateStep(fb, s.kind, fb.CreateString(s.name), fb.CreateString(s.symbol),
                               fb.CreateVector(s.inputs), fb.CreateVector(s.outputs), matmul, s.work_items,
                               s.block_threads, s.grid_blocks, fb.CreateVectorOfStrings(s.ops), s.flops,
                               s.partial_symbol.empty() ? 0 : fb.CreateString(s.partial_symbol), s.partial_items,
                               s.scratch_offset, s.scratch_bytes, s.partial_block_threads, s.partial_grid_blocks, conv,
                               s.channel_layouts.empty() ? 0 : fb.CreateVector(s.channel_layouts), attention,
                               s.shared_bytes, s.partial_shared_bytes));
  }
  std::vector<flatbuffers::Offset<StateCopy>> copies;
  for (auto [state, value] : c.state_copies) copies.push_back(CreateStateCopy(fb, state, value));
  std::vector<flatbuffers::Offset<CodeObject>> objects;
  for (auto& [obj, section] : code)
    objects.push_back(CreateCodeObject(fb, fb.CreateString(obj->kind), fb.CreateString(obj->arch), &section,
                                       obj->kind == "elf" ? fb.CreateVectorOfStrings(obj->cpu_features) : 0,
                                       obj->cpu.empty() ? 0 : fb.CreateString(obj->cpu)));
  auto root = CreateArtifact(fb, fb.CreateString(c.compiler_version), fb.CreateVector(flags), fb.CreateString(c.target),
                             fb.CreateVector(values), fb.CreateVector(args), fb.CreateVector(c.results),
                             fb.CreateVector(buffers), c.arena_bytes, c.alignment, fb.CreateVector(steps),
                             fb.CreateVector(copies), fb.CreateVector(objects), fb.CreateVectorOfStructs(weights), &ir,
                             c.allow_tf32, c.batch);
  FinishArtifactBuffer(fb, root);
  Section metadata = layout.place(std::span(fb.GetBufferPointer(), fb.GetSize()));
  std::vector<uint8_t> out = layout.write();

  put(out, 0, kMagic, 8);
  uint16_t major = kFormatMajor, minor = kFormatMinor;
  uint32_t header = kHeaderBytes;
  uint64_t file = out.size(), offset = metadata.offset(), size = metadata.size(), hash = metadata.xxh64();
  put(out, 8, &major, 2);
  put(out, 10, &minor, 2);
  put(out, 12, &header, 4);
  put(out, 16, &file, 8);
  put(out, 24, &offset, 8);
  put(out, 32, &size, 8);
  put(out, 40, &hash, 8);
  return out;
}

}  // namespace kiln::format
