#include "codegen/cuda/attention_gradient_kernel.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "codegen/cuda/attention_gradient_source.h"
#include "codegen/cuda/attention_helpers.h"
#include "codegen/cuda/scalar_ops.h"

namespace kiln::codegen::cuda {
namespace {

using ir::DType;
using ir::ScoreTransform;
using ir::ValueId;

constexpr int kThreads = 128;
// The first kernel's query rows a block and keys a tile; the second's keys a block and
// query rows a tile. Each shared row of floats is 4 longer than what it holds, so that a
// thread's 16-byte reads stay aligned and transposed stores spread over the banks.
constexpr int kRows = 64, kKeyTile = 32, kKeys = 64, kRowTile = 32;
// The same in bf16 and f16: four warps of 16 rows (keys), tiles of 64. Each shared row of
// halves is 8 longer than its 16-padded dim (16 bytes, so ldmatrix's rows stay aligned).
constexpr int kHalfTile = 64, kHalfPad = 8;
// An sm_90 SM's shared memory for blocks (228 KB, less 1 KB the system takes a block).
constexpr int kSmSharedBytes = 227 * 1024;

std::string replaced(std::string text, const std::vector<std::pair<std::string, std::string>>& parts) {
  for (const auto& [from, to] : parts)
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
      text.replace(at, from.size(), to);
  return text;
}

class GradientWriter {
 public:
  GradientWriter(const ir::Graph& g, const ir::AttentionGradientMatch& m)
      : g_(g), m_(m), a_(m.scores), half_(m.scores.precision != DType::F32) {
    nb_ = a_.q_view.shape.size() - 2;
    batch_.assign(a_.q_view.shape.begin(), a_.q_view.shape.begin() + static_cast<std::ptrdiff_t>(nb_));
    for (int64_t d : batch_) indices_ *= d;
    queries_ = a_.q_view.shape[nb_];
    head_dim_ = a_.q_view.shape[nb_ + 1];
    keys_ = a_.k_view.shape[nb_];
    value_dim_ = a_.v_view.shape[nb_ + 1];
  }

  Result<Launch> write(const ir::Step& step, const std::string& symbol, std::string& out) {
    KILN_ASSIGN_OR_RETURN(Parameters params, parameters(step));
    const int64_t dp = (head_dim_ + 31) / 32 * 32, dvp = (value_dim_ + 31) / 32 * 32;
    const int64_t d16 = (head_dim_ + 15) / 16 * 16, dv16 = (value_dim_ + 15) / 16 * 16;
    const int rows = half_ ? kHalfTile : kRows, key_tile = half_ ? kHalfTile : kKeyTile;
    const int keys = half_ ? kHalfTile : kKeys, row_tile = half_ ? kHalfTile : kRowTile;
    std::string constants = fmt::format(
        "  constexpr long long BATCH = {}LL;\n  constexpr int T = {}, S = {}, D = {}, DV = {}, DP = {}, DVP = {}, "
        "DC = DP / 32, VC = DVP / 32, D16 = {}, DV16 = {};\n  constexpr int R = {}, KT = {}, KB = {}, QT = {}, STATS "
        "= {};\n",
        indices_, queries_, keys_, head_dim_, value_dim_, dp, dvp, d16, dv16, rows, key_tile, keys, row_tile,
        ir::kCudaAttentionGradientRowValues);
    auto strides = [&](const char* name, const ir::StridedView& view) {
      constants += fmt::format("  constexpr long long {0}RS = {1}LL, {0}CS = {2}LL;\n", name, view.strides[nb_],
                               view.strides[nb_ + 1]);
    };
    strides("Q", a_.q_view);
    strides("K", a_.k_view);
    strides("V", a_.v_view);
    strides("G", m_.d_out_view);
    strides("DQ", m_.written_views[0]);
    strides("DK", m_.written_views[1]);
    strides("DV", m_.written_views[2]);
    const bool causal_last = !a_.transforms.empty() && a_.transforms.back().kind == ScoreTransform::Kind::Causal;
    double scale = 1;
    for (const ScoreTransform& t : a_.transforms)
      if (t.kind == ScoreTransform::Kind::Scale) scale *= t.value;
    constants += fmt::format(
        "  constexpr bool CAUSAL = {};\n  const float FILL = {}, SCALE = {};\n", causal_last ? "true" : "false",
        constant(DType::F32, causal_last ? a_.transforms.back().value : 0.0, 0), constant(DType::F32, scale, 0));
    std::vector<std::pair<std::string, const ir::StridedView*>> views = {{"qo", &a_.q_view},
                                                                         {"ko", &a_.k_view},
                                                                         {"vo", &a_.v_view},
                                                                         {"go", &m_.d_out_view},
                                                                         {"dqo", &m_.written_views[0]},
                                                                         {"dko", &m_.written_views[1]},
                                                                         {"dvo", &m_.written_views[2]}};
    for (size_t i = 0; i < a_.transforms.size(); ++i)
      if (a_.transforms[i].operand != ir::kNoValue) views.push_back({fmt::format("mo{}", i), &a_.transforms[i].view});
    std::string transforms, kept;
    for (size_t i = 0; i < a_.transforms.size(); ++i) {
      transforms += "            " + attention_score_transform(a_, i) + "\n";
      const ScoreTransform& t = a_.transforms[i];
      if (t.kind == ScoreTransform::Kind::Causal) kept += "            kept = kept && key <= row;\n";
      if (t.kind == ScoreTransform::Kind::Keep)
        kept +=
            fmt::format("            kept = kept && mask{}[mo{} + (long long)row * {}LL + (long long)key * {}LL];\n", i,
                        i, t.view.strides[nb_], t.view.strides[nb_ + 1]);
    }
    const std::vector<std::pair<std::string, std::string>> parts = {
        {"$OFFSETS", attention_batch_offsets(batch_, views, "    ")}, {"$TRANSFORMS\n", transforms}, {"$KEPT\n", kept}};
    Launch launch{kThreads, indices_ * ((keys_ + keys - 1) / keys)};
    launch.partial_block_threads = kThreads;
    launch.partial_grid_blocks = indices_ * ((queries_ + rows - 1) / rows);
    if (half_) {
      // Both kernels hold two 64-row tiles of each of the [.., D] and [.., DV] operands;
      // the second also the tile's row values.
      const int64_t halves = 2 * kHalfTile * (d16 + dv16 + 2 * kHalfPad);
      launch.partial_shared_bytes = static_cast<int>(halves * 2);
      launch.shared_bytes = static_cast<int>(halves * 2 + ir::kCudaAttentionGradientRowValues * kHalfTile * 4);
    } else {
      launch.partial_shared_bytes = static_cast<int>(
          ((head_dim_ + value_dim_) * (kRows + 4) + (dp + value_dim_) * (kKeyTile + 4) + kKeyTile * (kRows + 4)) * 4);
      launch.shared_bytes =
          static_cast<int>(((head_dim_ + value_dim_ + 2 * kRowTile) * (kKeys + 4) + (dp + dvp) * (kRowTile + 4) +
                            ir::kCudaAttentionGradientRowValues * kRowTile) *
                           4);
    }
    // As many blocks an SM as its shared memory holds (227 KB on sm_90, up to 4) is the
    // kernel's register budget: without it ptxas kept the second kernel at 128 registers
    // at D=64 and spilled, where more fit the 3 blocks its 69 KB allow. The half kernels
    // hold up to 192 floats of sums and products a thread at D=128 (dk, dv and a tile's
    // scores and dP), and 128 at 64, which only a budget of 2 blocks leaves in registers.
    auto kernel = [&](const std::string& name, const char* body, int shared_bytes) {
      const int blocks = std::clamp(kSmSharedBytes / std::max(shared_bytes, 1), 1, half_ ? 2 : 4);
      out += fmt::format("extern \"C\" __global__ void __launch_bounds__({}, {}) {}({}) {{\n", kThreads, blocks, name,
                         params.list);
      out += constants + params.gradients + replaced(body, parts) + "}\n";
    };
    if (!half_) {
      out += kAttentionGradientHelpers;
      kernel(symbol + "_partial", kAttentionGradientRowsKernel, launch.partial_shared_bytes);
      kernel(symbol, kAttentionGradientKeysKernel, launch.shared_bytes);
      return launch;
    }
    const std::string precision = a_.precision == DType::BF16 ? "bf16" : "f16";
    out += attention_helpers(a_.precision) + replaced(kAttentionGradientHalfHelpers, {{"$P", precision}});
    std::string defines, undefines;
    for (const char* name : {"kiln_att_pack", "kiln_att_round", "kiln_att_mma", "kiln_attg_tile", "kiln_attg_products",
                             "kiln_attg_accumulate", "kiln_attg_store"}) {
      defines += fmt::format("#define {0} {0}_{1}\n", name, precision);
      undefines += fmt::format("#undef {}\n", name);
    }
    out += defines;
    kernel(symbol + "_partial", kAttentionGradientHalfRowsKernel, launch.partial_shared_bytes);
    kernel(symbol, kAttentionGradientHalfKeysKernel, launch.shared_bytes);
    out += undefines;
    return launch;
  }

 private:
  struct Parameters {
    std::string list;       // the kernels' parameters
    std::string gradients;  // dq_out, dk_out and dv_out: each output a gradient goes to
  };

  // q, k, v, the masks' operands and dO as the artifact lists the step's inputs, its
  // outputs, then the scratch. In bf16 or f16, q, k, v and dO are f32 (rounded as the
  // kernels read them) or of the precision.
  Result<Parameters> parameters(const ir::Step& step) const {
    std::vector<std::string> params;
    auto operand = [&](const char* name, ValueId v) -> Status {
      const DType type = g_.type(v).dtype;
      if (type != DType::F32 && type != a_.precision)
        return make_error(
            fmt::format("cuda codegen: attention backward {} reads a {} {}", step.name, ir::dtype_name(type), name));
      params.push_back(fmt::format("const {}* __restrict__ {}", storage_type(type), name));
      return Status::Ok();
    };
    for (auto [name, v] : {std::pair{"q", a_.q}, {"k", a_.k}, {"v", a_.v}}) KILN_RETURN_IF_ERROR(operand(name, v));
    for (size_t i = 0; i < a_.transforms.size(); ++i) {
      const ScoreTransform& t = a_.transforms[i];
      if (t.operand == ir::kNoValue) continue;
      const DType mask_type = g_.type(t.operand).dtype;
      if (mask_type != (t.kind == ScoreTransform::Kind::Add ? DType::F32 : DType::Bool))
        return make_error(fmt::format("cuda codegen: attention backward {}: a mask of type {}", step.name,
                                      ir::dtype_name(mask_type)));
      params.push_back(fmt::format("const {}* __restrict__ mask{}", storage_type(mask_type), i));
    }
    KILN_RETURN_IF_ERROR(operand("dO", m_.d_out));
    params.back() = fmt::format("const {}* __restrict__ d_out", storage_type(g_.type(m_.d_out).dtype));
    for (size_t o = 0; o < step.outputs.size(); ++o) {
      const DType type = g_.type(step.outputs[o]).dtype;
      if (type != DType::F32 && type != a_.precision)
        return make_error(
            fmt::format("cuda codegen: attention backward {} writes a {} value", step.name, ir::dtype_name(type)));
      params.push_back(fmt::format("{}* __restrict__ out{}", storage_type(type), o));
    }
    params.push_back("float* __restrict__ scratch");
    Parameters out{fmt::format("{}", fmt::join(params, ", ")), ""};
    const char* names[3] = {"dq_out", "dk_out", "dv_out"};
    for (size_t i = 0; i < 3; ++i) {
      const auto at = std::find(step.outputs.begin(), step.outputs.end(), m_.written[i]);
      if (at == step.outputs.end())
        return make_error(
            fmt::format("cuda codegen: attention backward {} does not write one of its gradients", step.name));
      out.gradients += fmt::format("  {}* const {} = out{};\n", storage_type(g_.type(m_.written[i]).dtype), names[i],
                                   at - step.outputs.begin());
    }
    return out;
  }

  const ir::Graph& g_;
  const ir::AttentionGradientMatch& m_;
  const ir::AttentionMatch& a_;
  const bool half_;  // bf16 or f16: the tensor-core kernels
  size_t nb_ = 0;
  std::vector<int64_t> batch_;
  int64_t indices_ = 1, queries_ = 0, head_dim_ = 0, keys_ = 0, value_dim_ = 0;
};

}  // namespace

Result<Launch> emit_attention_gradient_kernels(const ir::Graph& g, const ir::Step& step,
                                               const ir::AttentionGradientMatch& m, const std::string& symbol,
                                               std::string& out) {
  if (!ir::cuda_runs_attention_gradient(m))
    return make_error(fmt::format(
        "cuda codegen: step {} is an attention backward that CUDA's kernels do not run (they take f32 with head dims "
        "up to {}, or bf16 and f16 with head dims up to {})",
        step.name, ir::kCudaF32AttentionMaxHeadDim, ir::kCudaAttentionMaxHeadDim));
  return GradientWriter(g, m).write(step, symbol, out);
}

}  // namespace kiln::codegen::cuda
