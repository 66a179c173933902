#include "runtime/cpu/post_ops.h"

#include <algorithm>
#include <cmath>

namespace kiln::runtime::cpu {

PostOpOperands post_op_operands(const PostOps* post_ops, uint8_t* const* args) {
  PostOpOperands operands;
  int next = 2;
  if (post_ops)
    for (const format::PostOp* p : *post_ops) {
      operands.per_post_op.push_back(format::post_op_reads_input(p->kind()) ? args[next++] : nullptr);
      if (p->kind() == format::PostOpKind::Bias) operands.bias = operands.per_post_op.back();
      if (p->kind() == format::PostOpKind::Add) operands.added = operands.per_post_op.back();
    }
  operands.result = args[next];
  return operands;
}

uint32_t result_argument(const PostOps* post_ops) {
  uint32_t at = 2;
  if (post_ops)
    for (const format::PostOp* p : *post_ops) at += format::post_op_reads_input(p->kind());
  return at;
}

void apply_post_ops(const PostOps* post_ops, const PostOpOperands& operands, int64_t elements, int64_t channels,
                    int64_t inner) {
  if (!post_ops) return;
  float* y = reinterpret_cast<float*>(operands.result);
  for (uint32_t k = 0; k < post_ops->size(); ++k) {
    const format::PostOp* p = post_ops->Get(k);
    const float* operand = reinterpret_cast<const float*>(operands.per_post_op[k]);
    for (int64_t i = 0; i < elements; ++i) {
      float& v = y[i];
      switch (p->kind()) {
        case format::PostOpKind::Bias:
        case format::PostOpKind::ChannelAdd: v += operand[i / inner % channels]; break;
        case format::PostOpKind::ChannelSub: v -= operand[i / inner % channels]; break;
        case format::PostOpKind::ChannelMul: v *= operand[i / inner % channels]; break;
        case format::PostOpKind::Relu: v = std::isnan(v) ? v : std::max(v, 0.0f); break;
        case format::PostOpKind::Clip: v = std::isnan(v) ? v : std::min(std::max(v, p->lo()), p->hi()); break;
        case format::PostOpKind::Add: v += operand[i]; break;
        case format::PostOpKind::Sigmoid: v = 1.0f / (1.0f + std::exp(-v)); break;
        case format::PostOpKind::Tanh: v = std::tanh(v); break;
        case format::PostOpKind::Silu: v = v / (1.0f + std::exp(-v)); break;
        case format::PostOpKind::HardSwish: v = v * std::min(std::max(v / 6.0f + 0.5f, 0.0f), 1.0f); break;
        case format::PostOpKind::GeluErf: v = 0.5f * v * (1.0f + std::erf(v * static_cast<float>(M_SQRT1_2))); break;
        case format::PostOpKind::GeluTanh:
          v = 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
          break;
      }
    }
  }
}

bool append_dnnl_activation(const DnnlApi& api, dnnl_post_ops_t to, const format::PostOp& op) {
  float alpha = 0.0f, beta = 0.0f;
  dnnl_alg_kind_t kind;
  switch (op.kind()) {
    case format::PostOpKind::Relu: kind = dnnl_eltwise_relu; break;
    case format::PostOpKind::Clip:
      kind = dnnl_eltwise_clip_v2;
      alpha = op.lo(), beta = op.hi();
      break;
    case format::PostOpKind::Sigmoid: kind = dnnl_eltwise_logistic; break;
    case format::PostOpKind::Tanh: kind = dnnl_eltwise_tanh; break;
    case format::PostOpKind::Silu:  // oneDNN's swish: x·sigmoid(alpha·x)
      kind = dnnl_eltwise_swish;
      alpha = 1.0f;
      break;
    case format::PostOpKind::HardSwish: kind = dnnl_eltwise_hardswish; break;
    case format::PostOpKind::GeluErf: kind = dnnl_eltwise_gelu_erf; break;
    case format::PostOpKind::GeluTanh: kind = dnnl_eltwise_gelu_tanh; break;
    default: return false;
  }
  return api.post_ops_append_eltwise(to, 1.0f, kind, alpha, beta) == dnnl_success;
}

}  // namespace kiln::runtime::cpu
