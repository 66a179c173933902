#include "codegen/cuda/attention_kernel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <tuple>
#include <vector>

#include "codegen/cuda/attention_f32_kernel.h"
#include "codegen/cuda/attention_helpers.h"
#include "codegen/cuda/attention_tiles.h"
#include "codegen/cuda/scalar_ops.h"
#include "ir/shape_inference.h"

namespace kiln::codegen::cuda {
namespace {

using ir::DType;
using ir::StridedView;
using ir::ValueId;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

using Operand = AttentionOperand;

class AttentionWriter {
 public:
  AttentionWriter(const ir::Graph& g, const ir::AttentionMatch& m, const AttentionVariant& variant)
      : g_(g), m_(m), async_head_dim_(variant.async_head_dim) {
    batch_.assign(m.q_view.shape.begin(), m.q_view.shape.end() - 2);
    const size_t nb = batch_.size();
    queries_ = m.q_view.shape[nb];
    head_dim_ = m.q_view.shape[nb + 1];
    keys_ = m.k_view.shape[nb];
    value_dim_ = m.v_view.shape[nb + 1];
    // Head dims that are multiples of 8 but not 16 are padded with zeros to the mma's 16.
    head16_ = (head_dim_ + 15) / 16 * 16;
    value16_ = (value_dim_ + 15) / 16 * 16;
    const bool bf16 = m.precision == DType::BF16;
    to_half_ = bf16 ? "kiln_f32_to_bf16" : "kiln_f32_to_f16";
    half_to_f32_ = bf16 ? "kiln_bf16_to_f32" : "kiln_f16_to_f32";
    round_ = bf16 ? "kiln_round_bf16" : "kiln_round_f16";
    suffix_ = bf16 ? "bf16" : "f16";
    // 32 rows a warp (two mma row blocks, FlashAttention-2's split) need q's and the
    // outputs' fragments twice: head dims up to 64 only.
    atoms_ = variant.warp_rows == 32 && std::max(head16_, value16_) <= 64 ? 2 : 1;
    block_rows_ = kWarps * 16 * atoms_;
    tiles_.emplace(body_, batch_.size(), keys_, half_to_f32_, kThreads);
  }

  Result<Launch> write(const ir::Step& step, const std::string& symbol, std::string& out) {
    KILN_ASSIGN_OR_RETURN(std::vector<std::string> params, attention_kernel_params(g_, step, m_));
    const int64_t query_blocks = (queries_ + block_rows_ - 1) / block_rows_;
    int64_t indices = 1;
    for (int64_t b : batch_) indices *= b;

    out += attention_helpers(m_.precision);
    out += fmt::format(
        "#define kiln_att_pack kiln_att_pack_{0}\n#define kiln_att_round kiln_att_round_{0}\n#define kiln_att_mma "
        "kiln_att_mma_{0}\n",
        suffix_);
    // With cp.async at head dims up to 64 the kernel fits 4 blocks an SM (128 registers);
    // ptxas, left to itself, took 133 for the causal kernel once the unaligned fallback
    // joined it, which holds 3. At 128, 3 blocks (168 registers, where ptxas took 194-197
    // and 2 blocks since the fallback, 170-171 before it); with 32 rows a warp, 2 blocks
    // (up to 255 registers).
    std::string bounds = std::to_string(kThreads);
    if (atoms_ == 2) bounds = fmt::format("{}, 2", kThreads);
    else if (copies_async()) bounds = fmt::format("{}, {}", kThreads, std::max(head16_, value16_) <= 64 ? 4 : 3);
    out += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n", bounds, symbol,
                       fmt::join(params, ", "));
    line(fmt::format("__shared__ __align__(16) unsigned short ks[{}][{}];", kAttentionKeyTile, head16_ + 8));
    line(fmt::format("__shared__ __align__(16) unsigned short vs[{}][{}];", kAttentionKeyTile, value16_ + 8));
    // A head dim padded to 16: the columns past it, which no tile writes, are zeros.
    for (auto [smem, dim, padded] : {std::tuple{"ks", head_dim_, head16_}, {"vs", value_dim_, value16_}})
      if (padded != dim)
        line(fmt::format("for (int i = threadIdx.x; i < {0}; i += {1}) {2}[i / {3}][{4} + i % {3}] = 0;",
                         kAttentionKeyTile * (padded - dim), kThreads, smem, padded - dim, dim));
    line("const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;");
    line(
        "const bool kv_aligned = ((reinterpret_cast<unsigned long long>(k) | reinterpret_cast<unsigned long long>(v)) "
        "& "
        "15ull) == 0;");
    line("const float kNegInf = __int_as_float(0xff800000);");
    line(fmt::format("for (long long w = blockIdx.x; w < {}LL; w += gridDim.x) {{", indices * query_blocks));
    body_ += attention_offsets(m_, block_rows_, "  ");
    load_q();
    scores_loop();
    store();
    line("}");
    out += body_ + "}\n#undef kiln_att_pack\n#undef kiln_att_round\n#undef kiln_att_mma\n";
    return Launch{kThreads, indices * query_blocks};
  }

 private:
  DType dtype(ValueId v) const { return g_.type(v).dtype; }
  void line(const std::string& s) { body_ += "  " + s + "\n"; }
  static std::string at(const std::string& text, int i) { return attention_row_block(text, i); }
  // `text` as row block i's line.
  void line(const std::string& text, int i) { line(at(text, i)); }
  // `text` as a line for each row block.
  void lines(const std::string& text) {
    for (int i = 0; i < atoms_; ++i) line(text, i);
  }

  // q's rows of the warp as A fragments: [D/16][4] registers of two halves each (zeros
  // past a head dim padded to 16), for each of the warp's row blocks: rows row_a and
  // row_b (the mma's g and g + 8), and row_a1 and row_b1 16 rows further.
  void load_q() {
    const int64_t row_stride = m_.q_view.strides[batch_.size()];
    line(fmt::format("const int row_a = r0 + warp * {} + g, row_b = row_a + 8;", 16 * atoms_));
    if (atoms_ == 2) line("const int row_a1 = row_a + 16, row_b1 = row_a + 24;");
    lines(fmt::format("unsigned qf`[{}][4];", head16_ / 16));
    line("#pragma unroll");
    line(fmt::format("for (int kd = 0; kd < {}; ++kd) {{", head16_ / 16));
    line("  const int c = kd * 16 + 2 * t;");
    lines(fmt::format(
        "  const long long qa` = qo + (long long)row_a` * {0}LL + c, qb` = qo + (long long)row_b` * {0}LL + c;",
        row_stride));
    auto pair = [&](const std::string& at) {
      return dtype(m_.q) != DType::F32 ? fmt::format("((unsigned)q[{0}] | ((unsigned)q[{0} + 1] << 16))", at)
                                       : fmt::format("kiln_att_pack(q[{0}], q[{0} + 1])", at);
    };
    const std::string low = head16_ == head_dim_ ? "" : fmt::format(" && c < {}", head_dim_);
    const std::string high = head16_ == head_dim_ ? "" : fmt::format(" && c + 8 < {}", head_dim_);
    for (int i = 0; i < atoms_; ++i) {
      line(fmt::format("  qf`[kd][0] = row_a` < {0}{3} ? {1} : 0u; qf`[kd][1] = row_b` < {0}{3} ? {2} : 0u;", queries_,
                       pair("qa`"), pair("qb`"), low),
           i);
      line(fmt::format("  qf`[kd][2] = row_a` < {0}{3} ? {1} : 0u; qf`[kd][3] = row_b` < {0}{3} ? {2} : 0u;", queries_,
                       pair("qa` + 8"), pair("qb` + 8"), high),
           i);
    }
    line("}");
    for (int i = 0; i < atoms_; ++i) {
      line(fmt::format("float o`[{}][4];", value16_ / 8), i);
      line("#pragma unroll");
      line(
          at(fmt::format("for (int j = 0; j < {}; ++j) o`[j][0] = o`[j][1] = o`[j][2] = o`[j][3] = 0.f;", value16_ / 8),
             i));
      line("float m_a` = kNegInf, m_b` = kNegInf, l_a` = 0.f, l_b` = 0.f;", i);
    }
  }

  // Whether k's and v's tiles reach shared memory by cp.async: half-precision rows that
  // load as 16-byte chunks (f32 operands are rounded on the way, through registers), at
  // head dims up to the variant's bound (64 unless KILN_CUDA_ATTENTION_ASYNC_HEAD_DIM
  // says 128). At 128 the copies cost registers that let an SM hold a third block of the
  // kernel unless the launch bounds cap them (docs/cuda.md), which only a GPU can weigh.
  bool copies_async() const {
    const DType half = m_.precision;
    return dtype(m_.k) == half && dtype(m_.v) == half && rows_aligned(m_.k_view, 8) && rows_aligned(m_.v_view, 8) &&
           std::max(head16_, value16_) <= async_head_dim_;
  }

  // The loop over key tiles: k and v's tile to shared memory, scores, f, the online
  // softmax and P·v. With cp.async (FlashAttention-2's order), v's tile is copied while
  // the scores are computed and the next k tile while P·v is.
  void scores_loop() {
    const bool async = copies_async();
    const Operand k{"k", dtype(m_.k), &m_.k_view}, v{"v", dtype(m_.v), &m_.v_view};
    if (async) tiles_->async_tile(k, "ks", head_dim_, "", "0");
    const bool causal_last = !m_.transforms.empty() && m_.transforms.back().kind == ir::ScoreTransform::Kind::Causal;
    const int64_t tiles = (keys_ + kAttentionKeyTile - 1) / kAttentionKeyTile;
    if (causal_last) {
      // Tiles past the block's last query hold only the mask's fill.
      line(fmt::format("const int tiles_needed = min({}, (min(r0 + {}, {}) - 1) / {} + 1);", tiles, block_rows_,
                       queries_, kAttentionKeyTile));
    }
    line(fmt::format("for (int kb = 0; kb < {}; ++kb) {{", tiles));
    if (causal_last) {
      const std::string fill = constant(DType::F32, m_.transforms.back().value, 0);
      std::vector<std::string> needed;
      for (int i = 0; i < atoms_; ++i)
        needed.push_back(at(fmt::format("(row_a` < {0} && !({1} - m_a` < -104.f)) || (row_b` < {0} && !({1} - m_b` "
                                        "< -104.f))",
                                        queries_, fill),
                            i));
      line("  if (kb == tiles_needed) {");
      line(fmt::format("    const bool needed = {};", fmt::join(needed, " || ")));
      line("    if (!__syncthreads_or(needed)) break;");
      line("  }");
    }
    if (async) {
      // k's tile has landed, for every thread; all are done with v's last tile.
      line("  kiln_att_copy_wait();");
      line("  __syncthreads();");
      tiles_->async_tile(v, "vs", value_dim_, "  ", "kb");
    } else {
      line("  __syncthreads();");
      tiles_->store_tile(k, "ks", head_dim_, "  ", "kb");
      tiles_->store_tile(v, "vs", value_dim_, "  ", "kb");
      line("  __syncthreads();");
    }
    const int n_tiles = kAttentionKeyTile / 8;
    for (int i = 0; i < atoms_; ++i) {
      line(fmt::format("  float s`[{}][4];", n_tiles), i);
      line("  #pragma unroll");
      line(fmt::format("  for (int j = 0; j < {}; ++j) s`[j][0] = s`[j][1] = s`[j][2] = s`[j][3] = 0.f;", n_tiles), i);
    }
    line("  #pragma unroll");
    line(fmt::format("  for (int kd = 0; kd < {}; ++kd) {{", head16_ / 16));
    // Two key tiles' B fragments per ldmatrix: lanes 8i..8i+7 give the rows of matrix i,
    // (tile j, d low), (tile j, d high), (tile j+1, d low), (tile j+1, d high). Each serves
    // every row block of the warp.
    line("    #pragma unroll");
    line(fmt::format("    for (int j = 0; j < {}; j += 2) {{", n_tiles));
    line("      unsigned b[4];");
    line("      kiln_att_ldsm(b, &ks[j * 8 + (lane >> 4) * 8 + (lane & 7)][kd * 16 + ((lane >> 3) & 1) * 8]);");
    for (int i = 0; i < atoms_; ++i) {
      line("      kiln_att_mma(s`[j], qf`[kd], b[0], b[1]);", i);
      line("      kiln_att_mma(s`[j + 1], qf`[kd], b[2], b[3]);", i);
    }
    line("    }");
    line("  }");
    // f on each score, rounded to the precision first (a pair at a time). A tile whose rows
    // and keys all exist, and whose keys all precede its rows where f has a causal mask,
    // skips those checks; elsewhere keys past the end and rows past the queries take no
    // part.
    for (int i = 0; i < atoms_; ++i) {
      line("  #pragma unroll");
      line(fmt::format("  for (int j = 0; j < {}; ++j) {{ kiln_att_round(s`[j][0], s`[j][1]); kiln_att_round(s`[j][2], "
                       "s`[j][3]); }}",
                       n_tiles),
           i);
    }
    bool causal = false;
    for (const ir::ScoreTransform& t : m_.transforms) causal = causal || t.kind == ir::ScoreTransform::Kind::Causal;
    std::string full =
        fmt::format("(kb + 1) * {} <= {} && r0 + {} <= {}", kAttentionKeyTile, keys_, block_rows_, queries_);
    if (causal) full += fmt::format(" && kb * {} + {} <= r0", kAttentionKeyTile, kAttentionKeyTile - 1);
    line(fmt::format("  if ({}) {{", full));
    for (int i = 0; i < atoms_; ++i) score_transforms("    ", false, i);
    line("  } else {");
    for (int i = 0; i < atoms_; ++i) score_transforms("    ", true, i);
    line("  }");
    for (int i = 0; i < atoms_; ++i) online_softmax(i);
    if (async) {
      // v's tile has landed, for every thread; all are done with k's tile.
      line("  kiln_att_copy_wait();");
      line("  __syncthreads();");
      line(fmt::format("  if (kb + 1 < {}) {{", tiles));
      tiles_->async_tile(k, "ks", head_dim_, "    ", "(kb + 1)");
      line("  }");
    }
    // P·v: a pair of score tiles is the A fragment of 16 keys, as the mma's C layout is.
    line("  #pragma unroll");
    line(fmt::format("  for (int kc = 0; kc < {}; ++kc) {{", kAttentionKeyTile / 16));
    lines(
        "    const unsigned pa`[4] = {kiln_att_pack(s`[2 * kc][0], s`[2 * kc][1]), kiln_att_pack(s`[2 * kc][2], s`[2 * "
        "kc][3]), kiln_att_pack(s`[2 * kc + 1][0], s`[2 * kc + 1][1]), kiln_att_pack(s`[2 * kc + 1][2], s`[2 * kc + "
        "1][3])};");
    // v's rows are keys: transposed, each 8x8 block is a B fragment; matrices (keys low,
    // tile j), (keys high, tile j), (keys low, tile j+1), (keys high, tile j+1).
    line("    #pragma unroll");
    line(fmt::format("    for (int j = 0; j < {}; j += 2) {{", value16_ / 8));
    line("      unsigned b[4];");
    line("      kiln_att_ldsm_trans(b, &vs[kc * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)][j * 8 + (lane >> 4) * 8]);");
    for (int i = 0; i < atoms_; ++i) {
      line("      kiln_att_mma(o`[j], pa`, b[0], b[1]);", i);
      line("      kiln_att_mma(o`[j + 1], pa`, b[2], b[3]);", i);
    }
    line("    }");
    line("  }");
    line("}");
    // A loop left early (a causal mask's last tiles) may have a copy of k in flight, and
    // the next work item copies into the same tiles.
    if (async) line("kiln_att_copy_wait(); __syncthreads();");
  }

  // The online softmax of row block i (attention_online_softmax).
  void online_softmax(int i) {
    for (const std::string& text : attention_online_softmax(kAttentionKeyTile / 8, value16_ / 8, i == 0)) line(text, i);
  }

  // f over row block i's scores of the tile; `checked`: rows and keys past the end take
  // -inf instead, and a causal mask applies (else it passes every score of the tile).
  void score_transforms(const std::string& indent, bool checked, int i) {
    bool reads_position = checked;
    for (const ir::ScoreTransform& t : m_.transforms)
      reads_position =
          reads_position || t.kind == ir::ScoreTransform::Kind::Add || t.kind == ir::ScoreTransform::Kind::Keep;
    line(indent + "#pragma unroll");
    line(fmt::format("{}for (int j = 0; j < {}; ++j) {{", indent, kAttentionKeyTile / 8));
    line(indent + "  #pragma unroll");
    line(indent + "  for (int e = 0; e < 4; ++e) {");
    if (reads_position)
      line(fmt::format("{}    const int row = e < 2 ? row_a` : row_b`, key = kb * {} + j * 8 + 2 * t + (e & 1);",
                       indent, kAttentionKeyTile),
           i);
    line(indent + "    float x = s`[j][e];", i);
    if (checked) line(fmt::format("{}    if (row < {} && key < {}) {{", indent, queries_, keys_));
    for (size_t t = 0; t < m_.transforms.size(); ++t)
      if (checked || m_.transforms[t].kind != ir::ScoreTransform::Kind::Causal)
        line(indent + (checked ? "      " : "    ") + attention_score_transform(m_, t));
    if (checked) {
      line(indent + "    } else {");
      line(indent + "      x = kNegInf;");
      line(indent + "    }");
    }
    line(indent + "    s`[j][e] = x;", i);
    line(indent + "  }");
    line(indent + "}");
  }

  // Each row's sum over its quad, then its outputs divided by it, rounded to the
  // precision and stored in the result's type.
  void store() {
    const DType out_type = dtype(m_.result);
    const std::string stored = out_type == DType::F32 ? round_ + "(x)" : to_half_ + "(x)";
    const int64_t row_stride = m_.out_view.strides[batch_.size()];
    const std::string in_row = value16_ == value_dim_ ? "" : fmt::format(" && col < {}", value_dim_);
    for (int i = 0; i < atoms_; ++i) {
      if (i > 0) line("{", i);
      line("l_a` += __shfl_xor_sync(0xffffffffu, l_a`, 1); l_a` += __shfl_xor_sync(0xffffffffu, l_a`, 2);", i);
      line("l_b` += __shfl_xor_sync(0xffffffffu, l_b`, 1); l_b` += __shfl_xor_sync(0xffffffffu, l_b`, 2);", i);
      line("const float inv_a = 1.f / l_a`, inv_b = 1.f / l_b`;", i);
      line("#pragma unroll", i);
      line(fmt::format("for (int j = 0; j < {}; ++j) {{", value16_ / 8), i);
      line("  #pragma unroll", i);
      line("  for (int e = 0; e < 4; ++e) {", i);
      line("    const int row = e < 2 ? row_a` : row_b`, col = j * 8 + 2 * t + (e & 1);", i);
      line("    const float x = o`[j][e] * (e < 2 ? inv_a : inv_b);", i);
      line(fmt::format("    if (row < {}{}) out[oo + (long long)row * {}LL + col] = {};", queries_, in_row, row_stride,
                       stored),
           i);
      line("  }", i);
      line("}", i);
      if (i > 0) line("}", i);
    }
  }

  const ir::Graph& g_;
  const ir::AttentionMatch& m_;
  std::vector<int64_t> batch_;
  int64_t queries_ = 0, head_dim_ = 0, keys_ = 0, value_dim_ = 0, head16_ = 0, value16_ = 0;
  int atoms_ = 1, block_rows_ = 0;  // mma row blocks of 16 a warp; query rows a block
  int async_head_dim_ = 64;
  std::string to_half_, half_to_f32_, round_, suffix_;
  std::string body_;
  std::optional<AttentionTiles> tiles_;
};

}  // namespace

Result<AttentionVariant> attention_variant() {
  AttentionVariant variant;
  // Each setting: unset or empty for the default, else one of two values.
  auto read = [](const char* name, int fallback, int other) -> Result<int> {
    const char* setting = std::getenv(name);
    if (setting == nullptr || *setting == '\0' || std::string(setting) == std::to_string(fallback)) return fallback;
    if (std::string(setting) == std::to_string(other)) return other;
    return make_error(
        fmt::format("cuda codegen: {} is '{}'; it takes {} (the default) or {}", name, setting, fallback, other));
  };
  KILN_ASSIGN_OR_RETURN(variant.warp_rows, read("KILN_CUDA_ATTENTION_WARP_ROWS", 16, 32));
  KILN_ASSIGN_OR_RETURN(variant.async_head_dim, read("KILN_CUDA_ATTENTION_ASYNC_HEAD_DIM", 64, 128));
  return variant;
}

Result<Launch> emit_attention_kernel(const ir::Graph& g, const ir::Step& step, const ir::AttentionMatch& m,
                                     const std::string& symbol, std::string& out) {
  if (!ir::cuda_runs_attention(m))
    return make_error(fmt::format(
        "cuda codegen: step {} is an attention that CUDA's kernels do not run (they take bf16 or f16 products with "
        "head dims that are multiples of 8 up to {}, or f32 products with head dims that are multiples of 4 up to "
        "{}, and rows read contiguously)",
        step.name, ir::kCudaAttentionMaxHeadDim, ir::kCudaF32AttentionMaxHeadDim));
  if (m.precision == ir::DType::F32) return emit_f32_attention_kernel(g, step, m, symbol, out);
  KILN_ASSIGN_OR_RETURN(AttentionVariant variant, attention_variant());
  return AttentionWriter(g, m, variant).write(step, symbol, out);
}

}  // namespace kiln::codegen::cuda
