#include "compiler/artifact_contents.h"

#include <fmt/format.h>
#include <algorithm>
#include <cstdint>
#include <map>

#include "ir/attention_match.h"
#include "ir/channel_layouts.h"
#include "ir/epilogue.h"
#include "ir/matmul_views.h"
#include "ir/reduction_split.h"
#include "ir/row_class.h"
#include "ir/window.h"
#include "runtime/format/target.h"

namespace kiln {
namespace {

// The IR's element types are the artifact's, in the same order.
#define KILN_SAME_DTYPE(name) static_assert(static_cast<int>(ir::DType::name) == static_cast<int>(format::DType::name));
KILN_SAME_DTYPE(F32)
KILN_SAME_DTYPE(F64)
KILN_SAME_DTYPE(F16)
KILN_SAME_DTYPE(BF16)
KILN_SAME_DTYPE(I32)
KILN_SAME_DTYPE(I64)
KILN_SAME_DTYPE(Bool)
KILN_SAME_DTYPE(I8)
KILN_SAME_DTYPE(U8)
#undef KILN_SAME_DTYPE
static_assert(static_cast<int>(format::DType::MAX) == static_cast<int>(ir::DType::U8),
              "an element type the artifact lacks");

format::DType to_format(ir::DType d) { return static_cast<format::DType>(d); }

format::StepKind to_format(ir::StepKind k) {
  switch (k) {
    case ir::StepKind::Loop: return format::StepKind::Loop;
    case ir::StepKind::Reduction: return format::StepKind::Reduction;
    case ir::StepKind::Library: return format::StepKind::Library;
    case ir::StepKind::Scatter: return format::StepKind::Scatter;
  }
  return format::StepKind::Loop;
}

format::Home to_format(ir::Home h) {
  switch (h) {
    case ir::Home::Arena: return format::Home::Arena;
    case ir::Home::Input: return format::Home::Input;
    case ir::Home::Param: return format::Home::Param;
    case ir::Home::State: return format::Home::State;
  }
  return format::Home::Arena;
}

struct MatmulCall {
  int node = -1;  // the matmul's
  ir::ValueId a, b;
  format::ArtifactContents::MatmulInfo params;
};

// The BLAS parameters of a library step: its matmul, each operand read through the step's
// movement ops before it (a transpose of the last two dims, or with matmul views the heads
// of attention sliced and transposed out of a projection) by strides, and numpy batch
// broadcasting as per-dim strides.
Result<MatmulCall> matmul_call(const ir::Graph& g, const ir::Step& step) {
  MatmulCall call;
  for (int n : step.nodes)
    if (g.nodes[n].op == ir::Op::Matmul) call.node = n;
  if (call.node < 0) return make_error(fmt::format("artifact: library step {} has no matmul", step.name));
  const ir::Node* mm = &g.nodes[call.node];
  std::vector<int> producer = g.producers();
  auto in_step = [&](int n) { return std::find(step.nodes.begin(), step.nodes.end(), n) != step.nodes.end(); };
  struct Operand {
    ir::ValueId value;
    ir::StridedView view;
    ir::MatrixView matrix;
  };
  auto operand = [&](ir::ValueId v) -> Result<Operand> {
    std::vector<int> chain;
    for (int p = producer[v]; p >= 0 && in_step(p) && ir::op_kind(g.nodes[p].op) == ir::OpKind::Movement;
         p = producer[v]) {
      chain.insert(chain.begin(), p);
      v = g.nodes[p].operands[0];
    }
    std::optional<ir::StridedView> view = ir::view_through(g, g.type(v).shape, chain);
    std::optional<ir::MatrixView> matrix = view ? ir::matrix_view(*view) : std::nullopt;
    if (!matrix)
      return make_error(
          fmt::format("artifact: library step {} reads a matmul operand through movement ops that no "
                      "strides express",
                      step.name));
    return Operand{v, *view, *matrix};
  };
  KILN_ASSIGN_OR_RETURN(Operand a, operand(mm->operands[0]));
  KILN_ASSIGN_OR_RETURN(Operand b, operand(mm->operands[1]));
  call.a = a.value;
  call.b = b.value;
  auto& p = call.params;
  p.trans_a = a.matrix.transposed;
  p.trans_b = b.matrix.transposed;
  const ir::Shape &as = a.view.shape, &bs = b.view.shape, &cs = g.type(mm->result).shape;
  p.m = as[as.size() - 2];
  p.k = as.back();
  p.n = bs.back();
  p.a_offset = a.view.offset;
  p.b_offset = b.view.offset;
  // Batch dims, aligned from the right: the operands' own strides (0 where one broadcasts).
  const std::vector<int64_t> c_st = ir::row_major_strides(cs);
  size_t batch = cs.size() - 2;
  for (size_t i = 0; i < batch; ++i) {
    auto stride_of = [&](const ir::StridedView& v) -> int64_t {
      size_t vb = v.shape.size() - 2;
      if (i + vb < batch) return 0;  // a missing leading dim broadcasts
      size_t d = i + vb - batch;
      return v.shape[d] == 1 ? 0 : v.strides[d];
    };
    p.batch.emplace_back(cs[i], stride_of(a.view), stride_of(b.view), c_st[i]);
  }
  // A batch dim B does not have, over which A's and C's matrices lie back to back (A not
  // transposed), is more rows of one GEMM: a linear layer's [B,T,C] @ [C,N] is one GEMM of
  // B·T rows rather than B GEMMs of T. Innermost dims first; a dim of one is no dim.
  auto& dims = p.batch;
  while (!dims.empty()) {
    const format::BatchDim& d = dims.back();
    if (d.count() != 1 && (p.trans_a || d.b_stride() != 0 || d.a_stride() != p.m * a.matrix.ld ||
                           d.c_stride() != p.m * p.n || p.m * d.count() > INT32_MAX))
      break;  // (BLAS takes M as an int)
    p.m *= d.count();
    dims.pop_back();
  }
  // Batch dims over which every operand's matrices lie at one stride inside the next are
  // one dim: a single strided-batched call instead of a loop of calls over the outer one.
  std::vector<format::BatchDim> merged;
  for (const format::BatchDim& d : dims) {  // outermost first
    if (d.count() == 1) continue;
    if (!merged.empty()) {
      const format::BatchDim& o = merged.back();
      if (o.a_stride() == d.a_stride() * d.count() && o.b_stride() == d.b_stride() * d.count() &&
          o.c_stride() == d.c_stride() * d.count() && o.count() * d.count() <= INT32_MAX) {
        merged.back() = format::BatchDim(o.count() * d.count(), d.a_stride(), d.b_stride(), d.c_stride());
        continue;
      }
    }
    merged.push_back(d);
  }
  dims = std::move(merged);
  // Leading dims other than the packed ones' (which format 1.10 and CUDA artifacts imply).
  p.lda = a.matrix.ld == (p.trans_a ? p.m : p.k) ? 0 : a.matrix.ld;
  p.ldb = b.matrix.ld == (p.trans_b ? p.k : p.n) ? 0 : b.matrix.ld;
  return call;
}

format::PostOpKind to_format(ir::PostOp::Kind k) {
  switch (k) {
    case ir::PostOp::Kind::Bias: return format::PostOpKind::Bias;
    case ir::PostOp::Kind::Relu: return format::PostOpKind::Relu;
    case ir::PostOp::Kind::Clip: return format::PostOpKind::Clip;
    case ir::PostOp::Kind::Sigmoid: return format::PostOpKind::Sigmoid;
    case ir::PostOp::Kind::Tanh: return format::PostOpKind::Tanh;
    case ir::PostOp::Kind::Silu: return format::PostOpKind::Silu;
    case ir::PostOp::Kind::HardSwish: return format::PostOpKind::HardSwish;
    case ir::PostOp::Kind::Add: return format::PostOpKind::Add;
    case ir::PostOp::Kind::ChannelAdd: return format::PostOpKind::ChannelAdd;
    case ir::PostOp::Kind::ChannelSub: return format::PostOpKind::ChannelSub;
    case ir::PostOp::Kind::ChannelMul: return format::PostOpKind::ChannelMul;
    case ir::PostOp::Kind::GeluErf: return format::PostOpKind::GeluErf;
    case ir::PostOp::Kind::GeluTanh: return format::PostOpKind::GeluTanh;
  }
  return format::PostOpKind::Relu;
}

// The parameters of a library convolution step: its one node, with the IR's attributes.
Result<format::ArtifactContents::ConvInfo> conv_call(const ir::Graph& g, const ir::Node& n) {
  format::ArtifactContents::ConvInfo c;
  const bool input_grad = n.op == ir::Op::ConvInputGrad, weight_grad = n.op == ir::Op::ConvWeightGrad;
  c.kind = input_grad    ? format::ConvKind::BackwardData
           : weight_grad ? format::ConvKind::BackwardWeights
                         : format::ConvKind::Forward;
  c.x = input_grad ? n.attrs.get_ints("shape") : g.type(n.operands[0]).shape;
  c.w = weight_grad ? n.attrs.get_ints("shape") : g.type(n.operands[1]).shape;
  c.y = input_grad ? g.type(n.operands[0]).shape : weight_grad ? g.type(n.operands[1]).shape : g.type(n.result).shape;
  KILN_ASSIGN_OR_RETURN(ir::Window win,
                        ir::window_of(ir::Op::Conv, c.x, ir::Shape(c.w.begin() + 2, c.w.end()), n.attrs));
  c.strides = win.strides;
  c.dilations = win.dilations;
  c.pads_lo = win.pad_lo;
  c.pads_hi = win.pad_hi;
  c.groups = n.attrs.get_int("groups", 1);
  const ir::DType t = g.type(n.operands[0]).dtype;
  if (t != ir::DType::F32 && t != ir::DType::BF16 && t != ir::DType::F16)
    return make_error(fmt::format("artifact: {} of {} on the CPU's convolution library takes f32, bf16 or f16 only",
                                  ir::op_name(n.op), g.type(n.operands[0]).to_string()));
  return c;
}

format::ScoreTransformKind to_format(ir::ScoreTransform::Kind k) {
  switch (k) {
    case ir::ScoreTransform::Kind::Scale: return format::ScoreTransformKind::Scale;
    case ir::ScoreTransform::Kind::Add: return format::ScoreTransformKind::Add;
    case ir::ScoreTransform::Kind::Keep: return format::ScoreTransformKind::Keep;
    case ir::ScoreTransform::Kind::Causal: return format::ScoreTransformKind::Causal;
  }
  return format::ScoreTransformKind::Scale;
}

// The parameters of a library attention step; `input` names a value among the step's
// inputs (appending it), for the masks' operands.
template <class Input>
format::ArtifactContents::AttentionInfo attention_call(const ir::AttentionMatch& m, const Input& input) {
  format::ArtifactContents::AttentionInfo at;
  const ir::Shape& q = m.q_view.shape;
  at.batch.assign(q.begin(), q.end() - 2);
  at.queries = q[q.size() - 2];
  at.head_dim = q.back();
  at.keys = m.k_view.shape[q.size() - 2];
  at.value_dim = m.v_view.shape.back();
  at.q_offset = m.q_view.offset;
  at.k_offset = m.k_view.offset;
  at.v_offset = m.v_view.offset;
  at.q_strides = m.q_view.strides;
  at.k_strides = m.k_view.strides;
  at.v_strides = m.v_view.strides;
  at.precision = to_format(m.precision);
  input(m.q);
  input(m.k);
  input(m.v);
  for (const ir::ScoreTransform& t : m.transforms) {
    format::ArtifactContents::ScoreTransformInfo info{to_format(t.kind), t.value, -1, 0, {}};
    if (t.operand != ir::kNoValue) {
      info.input = input(t.operand);
      info.offset = t.view.offset;
      info.strides = t.view.strides;
    }
    at.transforms.push_back(std::move(info));
  }
  if (m.out_view.strides != ir::row_major_strides(m.out_view.shape)) at.out_strides = m.out_view.strides;
  return at;
}

}  // namespace

std::string compiler_version() { return "kiln " + std::string(kVersion); }

Error missing_param_weights(const std::string& name, const ir::TensorType& type) {
  return Error{
      fmt::format("param %{}: {} has no value; give it in the weights (a safetensors file with a tensor named \"{}\")",
                  name, type.to_string(), name)};
}

Result<format::ArtifactContents> artifact_contents(const ir::Graph& g, const std::map<std::string, ir::Tensor>& weights,
                                                   const std::string& target, const std::string& ir_text) {
  if (!g.program || !g.memory)
    return make_error("artifact: the graph has no program and memory plan; run the default pipeline first");
  format::ArtifactContents c;
  c.compiler_version = compiler_version();
  c.target = target;
  c.ir = ir_text;
  c.arena_bytes = static_cast<uint64_t>(g.memory->arena_bytes);
  c.alignment = static_cast<uint64_t>(g.memory->alignment);
  std::vector<std::string> names = ir::display_names(g);
  // The artifact's value table holds what crosses step boundaries: arguments, step
  // inputs and outputs, results.
  std::vector<int> index(g.values.size(), -1);
  auto value = [&](ir::ValueId v) {
    if (index[v] < 0) {
      index[v] = static_cast<int>(c.values.size());
      c.values.push_back({names[v], to_format(g.type(v).dtype), g.type(v).shape, ""});
    }
    return static_cast<uint32_t>(index[v]);
  };
  for (const ir::Arg& a : g.args) {
    format::ArtifactContents::ArgInfo arg{value(a.value), format::ArgKind::Input, -1};
    if (a.kind == ir::ArgKind::State) {
      arg.kind = format::ArgKind::State;
      auto it = weights.find(g.value_name(a.value));
      if (it != weights.end()) {
        if (it->second.type != g.type(a.value))
          return make_error(fmt::format("state %{} is {}, but its initial value is {}", g.value_name(a.value),
                                        g.type(a.value).to_string(), it->second.type.to_string()));
        arg.weight = static_cast<int32_t>(c.weights.size());
        c.weights.push_back(ir::tensor_to_bytes(it->second));
      }
    }
    if (a.kind == ir::ArgKind::Param) {
      const std::string& name = g.value_name(a.value);
      auto it = weights.find(name);
      if (it == weights.end()) return missing_param_weights(name, g.type(a.value));
      if (it->second.type != g.type(a.value))
        return make_error(fmt::format("param %{} is {}, but its weights are {}", name, g.type(a.value).to_string(),
                                      it->second.type.to_string()));
      arg.kind = format::ArgKind::Param;
      arg.weight = static_cast<int32_t>(c.weights.size());
      c.weights.push_back(ir::tensor_to_bytes(it->second));
    }
    c.args.push_back(arg);
  }
  // The library calls that apply their epilogues: those whose step fusion made end with
  // the epilogue's result, as the target's library takes them (compile's fusion options).
  const ir::MatmulEpilogues library =
      target == format::kCpuTarget ? ir::MatmulEpilogues::kOneDnn : ir::MatmulEpilogues::kCublasLt;
  const std::vector<ir::Epilogue> epilogues = ir::library_epilogues(g, library, ir::matmul_operand_folds(g));
  std::map<int, const ir::Epilogue*> epilogue_of;
  for (const ir::Epilogue& e : epilogues) epilogue_of[e.call] = &e;
  auto post_ops = [&](const ir::Step& step, int call, std::vector<uint32_t>& inputs) {
    std::vector<format::ArtifactContents::PostOpInfo> ops;
    auto e = epilogue_of.find(call);
    if (e == epilogue_of.end() || step.outputs != std::vector<ir::ValueId>{e->second->result}) return ops;
    for (const ir::PostOp& p : e->second->post_ops) {
      format::ArtifactContents::PostOpInfo post{to_format(p.kind), -1, static_cast<float>(p.lo),
                                                static_cast<float>(p.hi)};
      if (p.operand != ir::kNoValue) {
        post.input = static_cast<int32_t>(inputs.size());
        inputs.push_back(value(p.operand));
      }
      ops.push_back(post);
    }
    return ops;
  };
  // The attention steps: those that fusion made of a match's two calls (and the rest).
  const std::vector<ir::AttentionMatch> attentions = ir::attention_matches(g);
  const std::vector<ir::AttentionGradientMatch> attention_gradients = ir::attention_gradient_matches(g);
  const uint64_t scratch_at = (c.arena_bytes + c.alignment - 1) / c.alignment * c.alignment;
  // The loop steps whose code also runs over activations in oneDNN's layouts.
  const std::vector<std::vector<int64_t>> blocks = target == format::kCpuTarget
                                                       ? ir::channel_layouts_of_steps(g)
                                                       : std::vector<std::vector<int64_t>>(g.program->steps.size());
  for (size_t s = 0; s < g.program->steps.size(); ++s) {
    const ir::Step& step = g.program->steps[s];
    format::ArtifactContents::StepInfo info;
    info.kind = to_format(step.kind);
    info.name = step.name;
    info.symbol = step.kind == ir::StepKind::Library ? "matmul" : format::kernel_symbol(step.name);
    info.work_items = ir::work_items(g, step);
    info.flops = ir::step_flops(g, step);
    for (int64_t b : blocks[s]) info.channel_layouts.push_back(static_cast<int32_t>(b));
    for (int n : step.nodes) {
      const ir::Node& node = g.nodes[static_cast<size_t>(n)];
      if (node.op != ir::Op::Constant)
        info.ops.push_back(fmt::format("%{} = {}", names[node.result], ir::op_name(node.op)));
    }
    const auto conv_node = std::find_if(step.nodes.begin(), step.nodes.end(),
                                        [&](int n) { return ir::is_convolution(g.nodes[static_cast<size_t>(n)].op); });
    const ir::AttentionMatch* attention =
        step.kind == ir::StepKind::Library ? ir::attention_of(attentions, step) : nullptr;
    const ir::AttentionGradientMatch* gradient =
        step.kind == ir::StepKind::Library ? ir::attention_gradient_of(attention_gradients, step) : nullptr;
    if (gradient) {
      // The CPU's runtime runs it; CUDA's launches the step's two kernels
      // (codegen/cuda/attention_gradient_kernel.h), the first writing each query row's values
      // into the step's scratch.
      info.symbol = target == format::kCpuTarget ? "attention" : format::kernel_symbol(step.name);
      if (target != format::kCpuTarget) {
        const int64_t bytes = ir::cuda_attention_gradient_scratch_bytes(*gradient);
        info.partial_symbol = format::partial_kernel_symbol(info.symbol);
        info.partial_items = bytes / (ir::kCudaAttentionGradientRowValues * static_cast<int64_t>(sizeof(float)));
        info.scratch_offset = static_cast<int64_t>(scratch_at);
        info.scratch_bytes = bytes;
        c.arena_bytes = std::max<uint64_t>(c.arena_bytes, scratch_at + static_cast<uint64_t>(bytes));
      }
      auto input = [&](ir::ValueId v) {
        info.inputs.push_back(value(v));
        return static_cast<int32_t>(info.inputs.size() - 1);
      };
      info.attention = attention_call(gradient->scores, input);
      info.attention->gradient = true;
      info.attention->d_out_offset = gradient->d_out_view.offset;
      info.attention->d_out_strides = gradient->d_out_view.strides;
      input(gradient->d_out);
      // Where it writes dq, d(kᵀ) and dv, which must be all the step writes.
      for (ir::ValueId v : step.outputs)
        if (std::find(gradient->written.begin(), gradient->written.end(), v) == gradient->written.end())
          return make_error(
              fmt::format("artifact: the attention backward {} writes values other than dq, dk and dv", step.name));
      for (ir::ValueId v : step.outputs) info.outputs.push_back(value(v));
      for (size_t i = 0; i < 3; ++i) {
        const auto at = std::find(step.outputs.begin(), step.outputs.end(), gradient->written[i]);
        if (at == step.outputs.end())
          return make_error(
              fmt::format("artifact: the attention backward {} writes a gradient nothing reads", step.name));
        info.attention->gradient_outputs.push_back(static_cast<int32_t>(at - step.outputs.begin()));
        info.attention->gradient_offsets.push_back(gradient->written_views[i].offset);
        const std::vector<int64_t>& strides = gradient->written_views[i].strides;
        info.attention->gradient_strides.insert(info.attention->gradient_strides.end(), strides.begin(), strides.end());
      }
    } else if (attention) {
      // The CPU's runtime runs it; CUDA's launches the step's kernel (codegen/cuda/attention_kernel.h).
      info.symbol = target == format::kCpuTarget ? "attention" : format::kernel_symbol(step.name);
      info.attention = attention_call(*attention, [&](ir::ValueId v) {
        info.inputs.push_back(value(v));
        return static_cast<int32_t>(info.inputs.size() - 1);
      });
    } else if (step.kind == ir::StepKind::Library && conv_node != step.nodes.end()) {
      const ir::Node& conv = g.nodes[static_cast<size_t>(*conv_node)];
      KILN_ASSIGN_OR_RETURN(info.conv, conv_call(g, conv));
      info.symbol = "conv";
      info.inputs = {value(conv.operands[0]), value(conv.operands[1])};
      info.conv->post_ops = post_ops(step, *conv_node, info.inputs);
    } else if (step.kind == ir::StepKind::Library) {
      KILN_ASSIGN_OR_RETURN(MatmulCall call, matmul_call(g, step));
      info.matmul = call.params;
      info.inputs = {value(call.a), value(call.b)};
      info.matmul.post_ops = post_ops(step, call.node, info.inputs);
      // Fusion run with another library's epilogues (kiln opt's options) may leave ops in
      // the step that this target's call would not apply: never silently dropped.
      if (info.matmul.post_ops.empty() && step.outputs != std::vector<ir::ValueId>{g.nodes[call.node].result})
        return make_error(fmt::format("artifact: step {} computes ops after its matmul that {} does not apply",
                                      step.name, target == format::kCpuTarget ? "oneDNN" : "cublasLt"));
    } else {
      for (ir::ValueId v : step.inputs) info.inputs.push_back(value(v));
    }
    if (!gradient)
      for (ir::ValueId v : step.outputs) info.outputs.push_back(value(v));
    // A split reduction's scratch lives during its step only: every step's in one region
    // past the planned buffers.
    const ir::SplitRule& rule = target == format::kCpuTarget ? ir::kCpuSplit : ir::kCudaSplit;
    if (auto split = ir::reduction_split(g, step, rule)) {
      info.partial_symbol = format::partial_kernel_symbol(info.symbol);
      info.partial_items = split->partial_items;
      info.scratch_offset = static_cast<int64_t>(scratch_at);
      info.scratch_bytes = split->scratch_bytes;
      c.arena_bytes = std::max<uint64_t>(c.arena_bytes, scratch_at + static_cast<uint64_t>(split->scratch_bytes));
    }
    c.steps.push_back(std::move(info));
  }
  for (ir::ValueId v : g.results) c.results.push_back(value(v));
  for (const ir::Buffer& b : g.memory->buffers)
    c.buffers.push_back({value(b.value), to_format(b.home), static_cast<uint64_t>(b.offset),
                         static_cast<uint64_t>(b.bytes), b.first_step, b.last_step,
                         b.in_place_of >= 0 ? static_cast<int32_t>(value(b.in_place_of)) : -1,
                         b.state >= 0 ? static_cast<int32_t>(value(b.state)) : -1});
  for (auto [state, v] : g.memory->state_copies) c.state_copies.emplace_back(value(state), value(v));
  return c;
}

}  // namespace kiln
