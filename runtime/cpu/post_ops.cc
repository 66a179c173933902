#include "runtime/cpu/post_ops.h"

#include "runtime/cpu/activation_rows.h"

#include <algorithm>
#include <cmath>
#include <optional>

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
    std::optional<Activation> activation;
    switch (p->kind()) {
      case format::PostOpKind::Sigmoid: activation = Activation::Sigmoid; break;
      case format::PostOpKind::Tanh: activation = Activation::Tanh; break;
      case format::PostOpKind::Silu: activation = Activation::Silu; break;
      case format::PostOpKind::GeluErf: activation = Activation::GeluErf; break;
      case format::PostOpKind::GeluTanh: activation = Activation::GeluTanh; break;
      default: break;
    }
    if (activation) {
      activation_in_place(y, elements, *activation);
      continue;
    }
    std::optional<ChannelOp> channel_op;
    switch (p->kind()) {
      case format::PostOpKind::Bias:
      case format::PostOpKind::ChannelAdd: channel_op = ChannelOp::Add; break;
      case format::PostOpKind::ChannelSub: channel_op = ChannelOp::Sub; break;
      case format::PostOpKind::ChannelMul: channel_op = ChannelOp::Mul; break;
      default: break;
    }
    if (channel_op) {
      if (channels * inner > 0)
        channel_op_in_place(y, operand, elements / (channels * inner), channels, inner, *channel_op);
      continue;
    }
    for (int64_t i = 0; i < elements; ++i) {
      float& v = y[i];
      switch (p->kind()) {
        case format::PostOpKind::Relu: v = std::isnan(v) ? v : std::max(v, 0.0f); break;
        case format::PostOpKind::Clip: v = std::isnan(v) ? v : std::min(std::max(v, p->lo()), p->hi()); break;
        case format::PostOpKind::Add: v += operand[i]; break;
        case format::PostOpKind::HardSwish: v = v * std::min(std::max(v / 6.0f + 0.5f, 0.0f), 1.0f); break;
        case format::PostOpKind::Sigmoid:
        case format::PostOpKind::Tanh:
        case format::PostOpKind::Silu:
        case format::PostOpKind::GeluErf:
        case format::PostOpKind::GeluTanh:
        case format::PostOpKind::Bias:
        case format::PostOpKind::ChannelAdd:
        case format::PostOpKind::ChannelSub:
        case format::PostOpKind::ChannelMul: break;  // activation_in_place and channel_op_in_place above
      }
    }
  }
}

void apply_post_ops_to_rows(const PostOps* post_ops, const PostOpOperands& operands, int64_t rows, int64_t columns,
                            ThreadPool* pool, int threads) {
  if (!post_ops) return;
  // Below this many elements a split costs more than it saves.
  constexpr int64_t kElementsToSplit = int64_t{1} << 15;
  if (!pool || threads < 2 || rows < 2 || rows * columns < kElementsToSplit)
    return apply_post_ops(post_ops, operands, rows * columns, columns, 1);
  pool->parallel_for(rows, 1, [&](int64_t begin, int64_t end) {
    // The rows' part of the result and of each operand of the result's shape.
    PostOpOperands part = operands;
    const size_t offset = static_cast<size_t>(begin * columns) * sizeof(float);
    part.result += offset;
    for (uint32_t k = 0; k < post_ops->size(); ++k)
      if (post_ops->Get(k)->kind() == format::PostOpKind::Add) part.per_post_op[k] += offset;
    apply_post_ops(post_ops, part, (end - begin) * columns, columns, 1);
  });
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
