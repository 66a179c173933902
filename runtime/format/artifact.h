// The .kiln artifact file: writing it, and reading it back only after verifying every
// byte range, index, size, shape and the memory plan (docs/artifact.md).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "runtime/format/artifact_generated.h"

namespace kiln::format {

/// The format version this code writes; it reads any 1.x with x <= kFormatMinor.
inline constexpr uint16_t kFormatMajor = 1;
inline constexpr uint16_t kFormatMinor = 21;
/// The first 8 bytes of every artifact.
inline constexpr char kMagic[8] = {'\x89', 'K', 'I', 'L', 'N', '\r', '\n', '\x1a'};
/// The fixed header at the start of every artifact, and the alignment of every section.
inline constexpr size_t kHeaderBytes = 64;
inline constexpr size_t kSectionAlignment = 64;

/// Why an artifact was refused (Error::code of read_artifact's errors).
enum class ArtifactErrorKind : int {
  BadMagic = 1,        ///< not a .kiln file
  UnsupportedVersion,  ///< a format major or minor this reader does not know
  Truncated,           ///< shorter than its header says, or a range past the end
  ChecksumMismatch,    ///< a section's bytes do not match their xxh64
  MalformedMetadata,   ///< the FlatBuffers verifier refused the metadata, or a field is missing
  OutOfRange,          ///< an index, offset, enum or size outside what it refers to
  ShapeMismatch,       ///< a byte count that does not match a shape and element type
  BadMemoryPlan,       ///< overlapping live buffers, or a buffer outside the arena
  UseBeforeProduce,    ///< a step reads a value before any step produces it
  WrongTarget,         ///< compiled for another target than the one loading it
  TrailingBytes,       ///< longer than its header says
  MissingCpuFeatures,  ///< CPU code that needs instructions this CPU lacks
};

/// "bad magic", "unsupported version", ...
std::string_view artifact_error_name(ArtifactErrorKind kind);

/// Everything an artifact holds, for the writer.
struct ArtifactContents {
  struct ValueInfo {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    std::string source_name;  ///< 1.7: the imported model's name for it, or empty
  };
  struct ArgInfo {
    uint32_t value = 0;
    ArgKind kind = ArgKind::Input;
    int32_t weight = -1;
  };
  struct BufferInfo {
    uint32_t value = 0;
    Home home = Home::Arena;
    uint64_t offset = 0, bytes = 0;
    int32_t first_step = -1, last_step = -1, in_place_of = -1, state = -1;
  };
  struct PostOpInfo {
    PostOpKind kind = PostOpKind::Relu;
    int32_t input = -1;
    float lo = 0, hi = 0;
  };
  struct MatmulInfo {
    int64_t m = 0, n = 0, k = 0;
    bool trans_a = false, trans_b = false;
    std::vector<BatchDim> batch;
    std::vector<PostOpInfo> post_ops;  ///< f32: CPU (format 1.11), CUDA (1.13)
    int64_t lda = 0, ldb = 0;          ///< 0: packed (format 1.11)
    int64_t a_offset = 0, b_offset = 0;
  };
  struct ConvInfo {
    ConvKind kind = ConvKind::Forward;
    std::vector<int64_t> x, w, y, strides, dilations, pads_lo, pads_hi;
    int64_t groups = 1;
    std::vector<PostOpInfo> post_ops;  ///< forward only (format 1.7)
  };
  struct ScoreTransformInfo {
    ScoreTransformKind kind = ScoreTransformKind::Scale;
    double value = 0;
    int32_t input = -1;
    int64_t offset = 0;
    std::vector<int64_t> strides;
  };
  struct AttentionInfo {
    std::vector<int64_t> batch;
    int64_t queries = 0, keys = 0, head_dim = 0, value_dim = 0;
    int64_t q_offset = 0, k_offset = 0, v_offset = 0;
    std::vector<int64_t> q_strides, k_strides, v_strides;
    std::vector<ScoreTransformInfo> transforms;
    std::vector<int64_t> out_strides;  ///< empty: packed
    DType precision = DType::F32;      ///< format 1.14
    bool gradient = false;             ///< the backward (format 1.18)
    int64_t d_out_offset = 0;
    std::vector<int64_t> d_out_strides;
    std::vector<int32_t> gradient_outputs;  ///< dq, d(kᵀ), dv: output, offset, rank strides each
    std::vector<int64_t> gradient_offsets, gradient_strides;
  };
  struct StepInfo {
    StepKind kind = StepKind::Loop;
    std::string name, symbol;
    std::vector<uint32_t> inputs, outputs;
    MatmulInfo matmul;             ///< for library matmul steps
    std::optional<ConvInfo> conv;  ///< for library convolution steps (format 1.5)
    int64_t work_items = 0;        ///< for kernel steps
    int32_t block_threads = 0;     ///< for CUDA kernel steps
    int64_t grid_blocks = 0;       ///< for CUDA kernel steps
    std::vector<std::string> ops;  ///< "%value = op" per node the step computes
    int64_t flops = 0;
    std::string partial_symbol;  ///< split reduction steps: the kernel summing the parts
    int64_t partial_items = 0;
    int64_t scratch_offset = 0;  ///< in the arena
    int64_t scratch_bytes = 0;
    int32_t partial_block_threads = 0;  ///< for CUDA split steps
    int64_t partial_grid_blocks = 0;
    std::vector<int32_t> channel_layouts;    ///< CPU steps' kernels in oneDNN's layouts (1.10)
    std::optional<AttentionInfo> attention;  ///< for library attention steps (format 1.12)
    int32_t shared_bytes = 0;                ///< CUDA kernels' dynamic shared memory (format 1.17)
    int32_t partial_shared_bytes = 0;        ///< and the partial kernel's (format 1.19)
  };
  struct CodeInfo {
    std::string kind, arch;
    std::vector<uint8_t> bytes;
    std::vector<std::string> cpu_features;  ///< ELF objects: what the code needs of the CPU
    std::string cpu;                        ///< ELF objects: the CPU it was compiled for
  };

  std::string compiler_version;
  std::vector<std::string> flags;
  std::string target;
  std::vector<ValueInfo> values;
  std::vector<ArgInfo> args;
  std::vector<uint32_t> results;
  std::vector<BufferInfo> buffers;
  uint64_t arena_bytes = 0;
  uint64_t alignment = 256;
  std::vector<StepInfo> steps;
  std::vector<std::pair<uint32_t, uint32_t>> state_copies;  ///< (state argument value, new value)
  std::vector<CodeInfo> code;
  std::vector<std::vector<uint8_t>> weights;
  std::string ir;
  bool allow_tf32 = false;  ///< CUDA f32 matmuls may use TF32 tensor cores
  int64_t batch = 0;        ///< > 0: every input's and result's first dim is a batch of this many rows
};

/// A library call's post-ops (Conv.post_ops, Matmul.post_ops).
using PostOps = flatbuffers::Vector<flatbuffers::Offset<PostOp>>;

/// A matmul's leading dims as its call reads them: format 1.11's, or the packed ones.
inline int64_t matmul_lda(const Matmul& mm) { return mm.lda() ? mm.lda() : mm.trans_a() ? mm.m() : mm.k(); }
inline int64_t matmul_ldb(const Matmul& mm) { return mm.ldb() ? mm.ldb() : mm.trans_b() ? mm.k() : mm.n(); }

/// Whether a post-op reads a step input: a bias, an added tensor, a per-channel value (the
/// activations read none).
bool post_op_reads_input(PostOpKind kind);

/// A [rows, cols] matrix at these strides as a BLAS call reads it (an attention's q, k, v
/// and result): columns adjacent and rows at least a row apart, else (transposed) the other
/// way round, a dim of extent 1 taking any stride; none where neither holds.
struct BlasMatrix {
  bool transposed = false;
  int64_t ld = 0;
};
std::optional<BlasMatrix> blas_matrix(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride);

/// Serializes an artifact: header, FlatBuffers metadata, then the code, weight and IR
/// sections, each 64-byte aligned with its xxh64.
std::vector<uint8_t> write_artifact(const ArtifactContents& contents);

/// A verified artifact: its metadata and its sections' bytes. Borrows the file's bytes.
class ArtifactView {
 public:
  const Artifact& metadata() const { return *metadata_; }
  /// The bytes of a section (verified to lie in the file and match its checksum).
  std::span<const uint8_t> section(const Section& s) const { return bytes_.subspan(s.offset(), s.size()); }
  uint16_t format_major() const { return major_; }
  uint16_t format_minor() const { return minor_; }
  size_t file_bytes() const { return bytes_.size(); }

 private:
  friend Result<ArtifactView> read_artifact(std::span<const uint8_t>, std::string_view);
  std::span<const uint8_t> bytes_;
  const Artifact* metadata_ = nullptr;
  uint16_t major_ = 0, minor_ = 0;
};

/// Reads an artifact file ("-" for stdin) only as far as its header says: a directory,
/// a device that never ends or a file longer than its header is refused without reading
/// it all ("artifact: trailing bytes: ..."). The bytes are 8-byte aligned in memory, as
/// read_artifact needs; read_artifact verifies them.
Result<std::vector<uint8_t>> read_artifact_file(const std::string& path);

/// Verifies an artifact completely before anything uses it, and returns a view of it.
/// `expected_target` ("cpu-x86_64", ...) refuses artifacts for other targets; empty
/// accepts any. Errors carry an ArtifactErrorKind as Error::code and say what is wrong
/// ("artifact: checksum mismatch: the weights section 2 ...").
Result<ArtifactView> read_artifact(std::span<const uint8_t> bytes, std::string_view expected_target = "");

/// Bytes per element of an element type (0 for a value the enum does not name).
int element_bytes(DType dtype);

}  // namespace kiln::format
