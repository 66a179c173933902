#include "codegen/cuda/attention_f32_kernel.h"

#include <fmt/format.h>

#include <vector>

#include "codegen/cuda/attention_helpers.h"
#include "codegen/cuda/scalar_ops.h"

namespace kiln::codegen::cuda {
namespace {

using ir::DType;
using ir::ValueId;

// A block's query rows, keys per tile and threads: thread (ty, tx) = (tid / 8, tid % 8)
// holds the scores of rows 4ty..4ty+3 and keys 4tx..4tx+3 of a tile, and the outputs of
// those rows at columns 32c + 4tx..32c + 4tx+3.
constexpr int kRows = kAttentionF32QueryRows;
constexpr int kKeys = 32;
constexpr int kThreads = kRows / 4 * 8;
// Each shared row's floats: a multiple of 4 (16-byte reads), 4 past the last read so that
// the transposed stores spread over the banks.
constexpr int kPaddedRows = kRows + 4, kPaddedKeys = kKeys + 4;

class F32AttentionWriter {
 public:
  F32AttentionWriter(const ir::Graph& g, const ir::AttentionMatch& m) : g_(g), m_(m) {
    const size_t nb = m.q_view.shape.size() - 2;
    for (size_t d = 0; d < nb; ++d) indices_ *= m.q_view.shape[d];
    queries_ = m.q_view.shape[nb];
    head_dim_ = m.q_view.shape[nb + 1];
    keys_ = m.k_view.shape[nb];
    value_dim_ = m.v_view.shape[nb + 1];
    chunks_ = (value_dim_ + 31) / 32;
    q_stride_ = m.q_view.strides[nb];
    k_stride_ = m.k_view.strides[nb];
    v_stride_ = m.v_view.strides[nb];
    out_stride_ = m.out_view.strides[nb];
  }

  Result<Launch> write(const ir::Step& step, const std::string& symbol, std::string& out) {
    KILN_ASSIGN_OR_RETURN(std::vector<std::string> params, attention_kernel_params(g_, step, m_));
    for (ValueId v : {m_.q, m_.k, m_.v, m_.result})
      if (g_.type(v).dtype != DType::F32)
        return make_error(fmt::format("cuda codegen: f32 attention step {} reads or writes a {} value", step.name,
                                      ir::dtype_name(g_.type(v).dtype)));
    const int64_t items = indices_ * ((queries_ + kRows - 1) / kRows);

    out += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n", kThreads, symbol,
                       fmt::join(params, ", "));
    // q's rows and k's tile transposed ([d][row], [d][key]), so that a thread reads its 4
    // rows or keys at one d as 16 bytes; v's tile and P as they are read, [key][col] and
    // [key][row]: in dynamic shared memory (past the 48 KB of static shared memory at head
    // dims over 64), each array at a multiple of 16 bytes.
    const int64_t qs_floats = head_dim_ * kPaddedRows, ks_floats = head_dim_ * kPaddedKeys,
                  vs_floats = kKeys * chunks_ * 32, ps_floats = kKeys * kPaddedRows;
    line("KILN_DYNAMIC_SHARED(float, kiln_shared);");
    line(fmt::format("float (*qs)[{}] = reinterpret_cast<float (*)[{}]>(kiln_shared);", kPaddedRows, kPaddedRows));
    line(
        fmt::format("float (*ks)[{0}] = reinterpret_cast<float (*)[{0}]>(kiln_shared + {1});", kPaddedKeys, qs_floats));
    line(fmt::format("float (*vs)[{0}] = reinterpret_cast<float (*)[{0}]>(kiln_shared + {1});", chunks_ * 32,
                     qs_floats + ks_floats));
    line(fmt::format("float (*ps)[{0}] = reinterpret_cast<float (*)[{0}]>(kiln_shared + {1});", kPaddedRows,
                     qs_floats + ks_floats + vs_floats));
    const int shared_bytes = static_cast<int>((qs_floats + ks_floats + vs_floats + ps_floats) * 4);
    line("const int ty = threadIdx.x >> 3, tx = threadIdx.x & 7;");
    line("const float kNegInf = __int_as_float(0xff800000), kLog2e = 1.4426950408889634f;");
    line(fmt::format("for (long long w = blockIdx.x; w < {}LL; w += gridDim.x) {{", items));
    body_ += attention_offsets(m_, kRows, "  ");
    line("  __syncthreads();");  // the last work item is done with qs
    line(fmt::format("  for (int i = threadIdx.x; i < {}; i += {}) {{", kRows * head_dim_, kThreads));
    line(fmt::format("    const int r = i / {0}, d = i % {0}, row = r0 + r;", head_dim_));
    line(fmt::format("    qs[d][r] = row < {} ? q[qo + (long long)row * {}LL + d] : 0.f;", queries_, q_stride_));
    line("  }");
    line(fmt::format("  float o[4][{}];", chunks_ * 4));
    line("  float m[4], l[4];");
    line("  #pragma unroll");
    line("  for (int i = 0; i < 4; ++i) {");
    line("    m[i] = kNegInf; l[i] = 0.f;");
    line("    #pragma unroll");
    line(fmt::format("    for (int c = 0; c < {}; ++c) o[i][c] = 0.f;", chunks_ * 4));
    line("  }");
    tiles_loop();
    store();
    line("}");
    out += body_ + "}\n";
    Launch launch{kThreads, items};
    launch.shared_bytes = shared_bytes;
    return launch;
  }

 private:
  void line(const std::string& s) { body_ += "  " + s + "\n"; }

  void tiles_loop() {
    const int64_t tiles = (keys_ + kKeys - 1) / kKeys;
    const bool causal_last = !m_.transforms.empty() && m_.transforms.back().kind == ir::ScoreTransform::Kind::Causal;
    if (causal_last)  // tiles past the block's last query hold only the mask's fill
      line(fmt::format("  const int tiles_needed = min({}, (min(r0 + {}, {}) - 1) / {} + 1);", tiles, kRows, queries_,
                       kKeys));
    line(fmt::format("  for (int kb = 0; kb < {}; ++kb) {{", tiles));
    if (causal_last) {
      // They are taken all the same where exp(fill - max) is not 0 for some row.
      const std::string fill = constant(DType::F32, m_.transforms.back().value, 0);
      line("    if (kb == tiles_needed) {");
      line("      bool needed = false;");
      line("      #pragma unroll");
      line(
          fmt::format("      for (int i = 0; i < 4; ++i) needed = needed || (r0 + ty * 4 + i < {} && !({} - m[i] < "
                      "-104.f));",
                      queries_, fill));
      line("      if (!__syncthreads_or(needed)) break;");
      line("    }");
    }
    line("    __syncthreads();");  // every thread is done with the last tile (and qs is stored)
    line(fmt::format("    for (int i = threadIdx.x; i < {}; i += {}) {{", kKeys * head_dim_, kThreads));
    line(fmt::format("      const int c = i / {0}, d = i % {0}, key = kb * {1} + c;", head_dim_, kKeys));
    line(fmt::format("      ks[d][c] = key < {} ? k[ko + (long long)key * {}LL + d] : 0.f;", keys_, k_stride_));
    line("    }");
    line(fmt::format("    for (int i = threadIdx.x; i < {}; i += {}) {{", kKeys * value_dim_, kThreads));
    line(fmt::format("      const int c = i / {0}, e = i % {0}, key = kb * {1} + c;", value_dim_, kKeys));
    line(fmt::format("      vs[c][e] = key < {} ? v[vo + (long long)key * {}LL + e] : 0.f;", keys_, v_stride_));
    line("    }");
    line("    __syncthreads();");
    // q·kᵀ for the thread's 4x4 scores.
    line("    float s[4][4] = {};");
    line("    #pragma unroll 8");
    line(fmt::format("    for (int d = 0; d < {}; ++d) {{", head_dim_));
    line("      const kiln_vec4<float> a = *reinterpret_cast<const kiln_vec4<float>*>(&qs[d][ty * 4]);");
    line("      const kiln_vec4<float> b = *reinterpret_cast<const kiln_vec4<float>*>(&ks[d][tx * 4]);");
    line("      #pragma unroll");
    line("      for (int i = 0; i < 4; ++i)");
    line("        #pragma unroll");
    line("        for (int j = 0; j < 4; ++j) s[i][j] = fmaf(a.v[i], b.v[j], s[i][j]);");
    line("    }");
    // f on each score; rows and keys past the end take -inf. Then the online softmax: each
    // row's maximum over the 8 threads (consecutive lanes) that hold it.
    line("    #pragma unroll");
    line("    for (int i = 0; i < 4; ++i) {");
    line("      const int row = r0 + ty * 4 + i;");
    line("      float mx = kNegInf;");
    line("      #pragma unroll");
    line("      for (int j = 0; j < 4; ++j) {");
    line(fmt::format("        const int key = kb * {} + tx * 4 + j;", kKeys));
    line("        float x = s[i][j];");
    line(fmt::format("        if (row < {} && key < {}) {{", queries_, keys_));
    for (size_t i = 0; i < m_.transforms.size(); ++i) line("          " + attention_score_transform(m_, i));
    line("        } else {");
    line("          x = kNegInf;");
    line("        }");
    line("        s[i][j] = x; mx = fmaxf(mx, x);");
    line("      }");
    line("      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));");
    line("      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));");
    line("      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));");
    line("      const float next = fmaxf(m[i], mx), shift = next == kNegInf ? 0.f : next;");
    line("      const float alpha = exp2f((m[i] - shift) * kLog2e);");
    line("      m[i] = next;");
    line("      float sum = 0.f;");
    line("      #pragma unroll");
    line("      for (int j = 0; j < 4; ++j) { s[i][j] = exp2f((s[i][j] - shift) * kLog2e); sum += s[i][j]; }");
    line("      l[i] = l[i] * alpha + sum;");
    line("      #pragma unroll");
    line(fmt::format("      for (int c = 0; c < {}; ++c) o[i][c] *= alpha;", chunks_ * 4));
    line("    }");
    // P to shared memory as [key][row], then P·v.
    line("    #pragma unroll");
    line("    for (int j = 0; j < 4; ++j) {");
    line("      kiln_vec4<float> p;");
    line("      p.v[0] = s[0][j]; p.v[1] = s[1][j]; p.v[2] = s[2][j]; p.v[3] = s[3][j];");
    line("      *reinterpret_cast<kiln_vec4<float>*>(&ps[tx * 4 + j][ty * 4]) = p;");
    line("    }");
    line("    __syncthreads();");
    line("    #pragma unroll 4");
    line(fmt::format("    for (int c = 0; c < {}; ++c) {{", kKeys));
    line("      const kiln_vec4<float> pc = *reinterpret_cast<const kiln_vec4<float>*>(&ps[c][ty * 4]);");
    line("      #pragma unroll");
    line(fmt::format("      for (int h = 0; h < {}; ++h) {{", chunks_));
    line("        const kiln_vec4<float> b = *reinterpret_cast<const kiln_vec4<float>*>(&vs[c][h * 32 + tx * 4]);");
    line("        #pragma unroll");
    line("        for (int i = 0; i < 4; ++i) {");
    line("          #pragma unroll");
    line("          for (int e = 0; e < 4; ++e) o[i][h * 4 + e] = fmaf(pc.v[i], b.v[e], o[i][h * 4 + e]);");
    line("        }");
    line("      }");
    line("    }");
    line("  }");
  }

  // Each row's sum over its 8 threads, then its outputs divided by it.
  void store() {
    line("  #pragma unroll");
    line("  for (int i = 0; i < 4; ++i) {");
    line("    float sum = l[i];");
    line("    sum += __shfl_xor_sync(0xffffffffu, sum, 1);");
    line("    sum += __shfl_xor_sync(0xffffffffu, sum, 2);");
    line("    sum += __shfl_xor_sync(0xffffffffu, sum, 4);");
    line("    const int row = r0 + ty * 4 + i;");
    line(fmt::format("    if (row >= {}) continue;", queries_));
    line("    const float inv = 1.f / sum;");
    line("    #pragma unroll");
    line(fmt::format("    for (int c = 0; c < {}; ++c) {{", chunks_ * 4));
    line("      const int col = (c >> 2) * 32 + tx * 4 + (c & 3);");
    line(fmt::format("      if (col < {}) out[oo + (long long)row * {}LL + col] = o[i][c] * inv;", value_dim_,
                     out_stride_));
    line("    }");
    line("  }");
  }

  const ir::Graph& g_;
  const ir::AttentionMatch& m_;
  int64_t indices_ = 1, queries_ = 0, head_dim_ = 0, keys_ = 0, value_dim_ = 0, chunks_ = 0;
  int64_t q_stride_ = 0, k_stride_ = 0, v_stride_ = 0, out_stride_ = 0;
  std::string body_;
};

}  // namespace

Result<Launch> emit_f32_attention_kernel(const ir::Graph& g, const ir::Step& step, const ir::AttentionMatch& m,
                                         const std::string& symbol, std::string& out) {
  return F32AttentionWriter(g, m).write(step, symbol, out);
}

}  // namespace kiln::codegen::cuda
