#include "codegen/cuda/attention_helpers.h"

#include <fmt/format.h>

#include <utility>
#include <vector>

#include "codegen/cuda/scalar_ops.h"

namespace kiln::codegen::cuda {

std::string attention_helpers(ir::DType precision) {
  const char* common = R"(#ifndef KILN_ATTENTION
#define KILN_ATTENTION
__device__ __forceinline__ unsigned kiln_att_shared(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void kiln_att_ldsm(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(kiln_att_shared(p)) : "memory");
}
__device__ __forceinline__ void kiln_att_ldsm_trans(unsigned* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(kiln_att_shared(p)) : "memory");
}
__device__ __forceinline__ float kiln_att_exp2(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
// 16 bytes from global to shared memory without registers; zeros where !valid.
__device__ __forceinline__ void kiln_att_copy16(void* shared, const void* global, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(kiln_att_shared(shared)), "l"(global), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void kiln_att_copy_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void kiln_att_copy_wait() { asm volatile("cp.async.wait_all;" ::: "memory"); }
#endif
)";
  const bool bf16 = precision == ir::DType::BF16;
  const char* unpack = bf16 ? "lo = __uint_as_float(d << 16); hi = __uint_as_float(d & 0xffff0000u);"
                            : "lo = kiln_f16_to_f32((unsigned short)(d & 0xffffu)); hi = kiln_f16_to_f32((unsigned "
                              "short)(d >> 16));";
  // {0}: the precision's name in PTX, {1}: mma.sync's operand types, {2}: a pair unpacked.
  const char* per_precision = R"(#ifndef KILN_ATTENTION_{0}
#define KILN_ATTENTION_{0}
__device__ __forceinline__ unsigned kiln_att_pack_{0}(float lo, float hi) {{ unsigned d; asm("cvt.rn.{0}x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo)); return d; }}
__device__ __forceinline__ void kiln_att_round_{0}(float& lo, float& hi) {{ const unsigned d = kiln_att_pack_{0}(lo, hi); {2} }}
__device__ __forceinline__ void kiln_att_mma_{0}(float* c, const unsigned* a, unsigned b0, unsigned b1) {{
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.{1}.f32 {{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, {{%8,%9}}, {{%0,%1,%2,%3}};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}}
#endif
)";
  return common +
         fmt::format(fmt::runtime(per_precision), bf16 ? "bf16" : "f16", bf16 ? "bf16.bf16" : "f16.f16", unpack);
}

std::string attention_offsets(const ir::AttentionMatch& m, int64_t rows_per_block, const std::string& indent) {
  const size_t nb = m.q_view.shape.size() - 2;
  const int64_t queries = m.q_view.shape[nb];
  const int64_t query_blocks = (queries + rows_per_block - 1) / rows_per_block;
  std::string out;
  auto line = [&](const std::string& s) { out += indent + s + "\n"; };
  line(fmt::format("const long long p = w / {0}; const int r0 = (int)({0} - 1 - w % {0}) * {1};", query_blocks,
                   rows_per_block));
  std::vector<std::pair<std::string, const ir::StridedView*>> views = {
      {"qo", &m.q_view}, {"ko", &m.k_view}, {"vo", &m.v_view}, {"oo", &m.out_view}};
  for (size_t i = 0; i < m.transforms.size(); ++i)
    if (m.transforms[i].operand != ir::kNoValue) views.push_back({fmt::format("mo{}", i), &m.transforms[i].view});
  return out + attention_batch_offsets(std::vector<int64_t>(m.q_view.shape.begin(), m.q_view.shape.begin() + nb), views,
                                       indent);
}

std::string attention_batch_offsets(const std::vector<int64_t>& batch,
                                    const std::vector<std::pair<std::string, const ir::StridedView*>>& views,
                                    const std::string& indent) {
  std::string out;
  auto line = [&](const std::string& s) { out += indent + s + "\n"; };
  for (const auto& [name, view] : views) line(fmt::format("long long {} = {}LL;", name, view->offset));
  line("long long rest = p;");
  for (size_t d = batch.size(); d-- > 0;) {
    line(fmt::format("{{ const long long i = rest % {0}LL; rest /= {0}LL;", batch[d]));
    for (const auto& [name, view] : views)
      if (view->strides[d] != 0) line(fmt::format("  {} += i * {}LL;", name, view->strides[d]));
    line("}");
  }
  return out;
}

Result<std::vector<std::string>> attention_kernel_params(const ir::Graph& g, const ir::Step& step,
                                                         const ir::AttentionMatch& m) {
  if (step.outputs.size() != 1 || step.outputs[0] != m.result)
    return make_error(fmt::format("cuda codegen: attention step {} must write its result alone", step.name));
  std::vector<std::string> params;
  for (auto [name, v] : {std::pair{"q", m.q}, {"k", m.k}, {"v", m.v}})
    params.push_back(fmt::format("const {}* __restrict__ {}", storage_type(g.type(v).dtype), name));
  for (size_t i = 0; i < m.transforms.size(); ++i) {
    const ir::ScoreTransform& t = m.transforms[i];
    if (t.operand == ir::kNoValue) continue;
    const ir::DType mask_type = g.type(t.operand).dtype;
    if (mask_type != (t.kind == ir::ScoreTransform::Kind::Add ? ir::DType::F32 : ir::DType::Bool))
      return make_error(
          fmt::format("cuda codegen: attention step {}: a mask of type {}", step.name, ir::dtype_name(mask_type)));
    params.push_back(fmt::format("const {}* __restrict__ mask{}", storage_type(mask_type), i));
  }
  params.push_back(fmt::format("{}* __restrict__ out", storage_type(g.type(m.result).dtype)));
  return params;
}

std::string attention_score_transform(const ir::AttentionMatch& m, size_t i) {
  const ir::ScoreTransform& t = m.transforms[i];
  const size_t nb = m.q_view.shape.size() - 2;
  const std::string value = constant(ir::DType::F32, t.value, 0);
  auto element = [&] {
    return fmt::format("mask{}[mo{} + (long long)row * {}LL + (long long)key * {}LL]", i, i, t.view.strides[nb],
                       t.view.strides[nb + 1]);
  };
  switch (t.kind) {
    case ir::ScoreTransform::Kind::Scale: return fmt::format("x *= {};", value);
    case ir::ScoreTransform::Kind::Add: return fmt::format("x += {};", element());
    case ir::ScoreTransform::Kind::Keep: return fmt::format("x = {} ? x : {};", element(), value);
    case ir::ScoreTransform::Kind::Causal: return fmt::format("x = key <= row ? x : {};", value);
  }
  return "";
}

std::string attention_row_block(const std::string& text, int i) {
  std::string out;
  for (char c : text)
    if (c == '`') out += i == 0 ? "" : std::to_string(i);
    else out += c;
  return out;
}

std::vector<std::string> attention_online_softmax(int key_tiles, int value_tiles, bool declare_log2e) {
  std::vector<std::string> lines = {
      "  float mx_a` = kNegInf, mx_b` = kNegInf;",
      "  #pragma unroll",
      fmt::format("  for (int j = 0; j < {}; ++j) {{ mx_a` = fmaxf(mx_a`, fmaxf(s`[j][0], s`[j][1])); mx_b` = "
                  "fmaxf(mx_b`, fmaxf(s`[j][2], s`[j][3])); }}",
                  key_tiles),
      "  mx_a` = fmaxf(mx_a`, __shfl_xor_sync(0xffffffffu, mx_a`, 1)); mx_a` = fmaxf(mx_a`, "
      "__shfl_xor_sync(0xffffffffu, mx_a`, 2));",
      "  mx_b` = fmaxf(mx_b`, __shfl_xor_sync(0xffffffffu, mx_b`, 1)); mx_b` = fmaxf(mx_b`, "
      "__shfl_xor_sync(0xffffffffu, mx_b`, 2));",
      "  const float new_a` = fmaxf(m_a`, mx_a`), new_b` = fmaxf(m_b`, mx_b`);",
      "  const float shift_a` = new_a` == kNegInf ? 0.f : new_a`, shift_b` = new_b` == kNegInf ? 0.f : new_b`;"};
  if (declare_log2e) lines.push_back("  const float kLog2e = 1.4426950408889634f;");
  const std::vector<std::string> rest = {
      "  const float alpha_a` = kiln_att_exp2((m_a` - shift_a`) * kLog2e), alpha_b` = kiln_att_exp2((m_b` - "
      "shift_b`) * kLog2e);",
      "  m_a` = new_a`; m_b` = new_b`;", "  float sum_a` = 0.f, sum_b` = 0.f;", "  #pragma unroll",
      fmt::format("  for (int j = 0; j < {}; ++j) {{", key_tiles),
      // The difference first, as the decomposition's softmax takes it: exact where a score
      // is the maximum, where fmaf(s, log2 e, -shift·log2 e) is off by up to half an ulp of
      // shift·log2 e (2^6 at a mask's fill of -1e9, so exp2 overflowed; -inf at -3.4e38).
      "    s`[j][0] = kiln_att_exp2((s`[j][0] - shift_a`) * kLog2e); s`[j][1] = kiln_att_exp2((s`[j][1] - shift_a`) * "
      "kLog2e);",
      "    s`[j][2] = kiln_att_exp2((s`[j][2] - shift_b`) * kLog2e); s`[j][3] = kiln_att_exp2((s`[j][3] - shift_b`) * "
      "kLog2e);",
      "    sum_a` += s`[j][0] + s`[j][1]; sum_b` += s`[j][2] + s`[j][3];", "  }",
      "  l_a` = l_a` * alpha_a` + sum_a`; l_b` = l_b` * alpha_b` + sum_b`;", "  #pragma unroll",
      fmt::format("  for (int j = 0; j < {}; ++j) {{ o`[j][0] *= alpha_a`; o`[j][1] *= alpha_a`; o`[j][2] *= "
                  "alpha_b`; o`[j][3] *= alpha_b`; }}",
                  value_tiles)};
  lines.insert(lines.end(), rest.begin(), rest.end());
  return lines;
}

}  // namespace kiln::codegen::cuda
