#include "codegen/cuda/kernel_emitter.h"

#include <fmt/format.h>
#include <algorithm>
#include <map>

#include "codegen/cuda/attention_gradient_kernel.h"
#include "codegen/cuda/attention_kernel.h"
#include "codegen/cuda/kernel_emitter_class.h"
#include "ir/shape_inference.h"

namespace kiln::codegen::cuda {
namespace detail {

// ---- loop kernels -----------------------------------------------------------------

Status KernelEmitter::loop_kernel(Launch& launch) {
  const Shape& shape = type(step_.outputs[0]).shape;
  const int64_t n = ir::num_elements(shape);
  // Each thread computes `lanes` consecutive elements, loading and storing whole vectors
  // of the values of the iteration shape: 4, or 8 where one of them is f16 or bf16 (16
  // bytes of it; issue 24). When indexing is not flat, the innermost extent must be a
  // multiple of the lanes, so they share every index but the innermost; other values (a
  // broadcast bias, a transposed operand) are read an element at a time.
  const bool flat = ir::flat_iteration(g_, step_);
  std::vector<ValueId> loaded;
  for (ValueId v : step_.inputs)
    if (type(v).rank() > 0 && type(v).shape == shape) loaded.push_back(v);
  std::vector<ValueId> vectors = loaded;
  vectors.insert(vectors.end(), step_.outputs.begin(), step_.outputs.end());
  auto fits = [&](int64_t lanes) { return n >= lanes && (flat || shape.back() % lanes == 0); };
  const bool halves =
      std::any_of(vectors.begin(), vectors.end(), [&](ValueId v) { return ir::dtype_size(type(v).dtype) == 2; });
  const int64_t lanes = halves && fits(8) ? 8 : fits(4) ? 4 : 1;
  launch.block_threads = kLoopThreads;
  launch.grid_blocks = (n / lanes + kLoopThreads - 1) / kLoopThreads;
  KILN_RETURN_IF_ERROR(hoist_scalars());
  line(fmt::format("const long long stride = (long long)gridDim.x * {};", kLoopThreads));
  line(fmt::format("const long long first = (long long)blockIdx.x * {} + threadIdx.x;", kLoopThreads));
  std::string scalar_start = "0";
  if (lanes > 1) {
    const std::string vec = fmt::format("kiln_vec{}", lanes);
    std::string aligned = "true";
    for (ValueId v : vectors)
      aligned += fmt::format(" && ((kiln_u64){} % {}) == 0", param(v), lanes * ir::dtype_size(type(v).dtype));
    line(fmt::format("const long long vector_end = {}LL;", n / lanes * lanes));
    line(fmt::format("const bool aligned = {};", aligned));
    open(fmt::format("if (aligned) for (long long q = first; q < {}LL; q += stride)", n / lanes));
    for (ValueId v : loaded) {
      std::string name = fmt::format("in{}", slot_[v]);
      line(fmt::format("const {0}<{1}> {2} = *reinterpret_cast<const {0}<{1}>*>({3} + q * {4});", vec,
                       storage_type(type(v).dtype), name, param(v), lanes));
      lane_loads_[v] = name;
    }
    for (ValueId o : step_.outputs) line(fmt::format("{}<{}> out{};", vec, storage_type(type(o).dtype), slot_[o]));
    Index first_lane = flat ? Index{} : unflatten(index_let(fmt::format("q * {}", lanes)), shape);
    for (int64_t e = 0; e < lanes; ++e) {
      lane_ = std::to_string(e);
      Index at = first_lane;
      if (flat) at.flat = index_let(fmt::format("q * {} + {}", lanes, e));
      else if (e > 0) at.dims.back() = index_let(fmt::format("{} + {}", first_lane.dims.back(), e));
      lane_key_ = key_of(at);
      for (ValueId o : step_.outputs) {
        KILN_ASSIGN_OR_RETURN(std::string v, value_at(o, at));
        line(fmt::format("out{}.v[{}] = {};", slot_[o], e, to_storage(type(o).dtype, v)));
      }
    }
    for (ValueId o : step_.outputs)
      line(fmt::format("*reinterpret_cast<{0}<{1}>*>({2} + q * {3}) = out{4};", vec, storage_type(type(o).dtype),
                       param(o), lanes, slot_[o]));
    close();
    lane_loads_.clear();
    memo_ = invariant_;
    scalar_start = "(aligned ? vector_end : 0)";
  }
  open(fmt::format("for (long long i = {} + first; i < {}LL; i += stride)", scalar_start, n));
  KILN_RETURN_IF_ERROR(store_outputs(step_.outputs, flat ? Index{"i", {}} : unflatten("i", shape), shape));
  close();
  memo_ = invariant_;
  return Status::Ok();
}

// ---- scatter_add: the base copied, then the updates added in order ------------------------

Status KernelEmitter::scatter_kernel(Launch& launch) {
  const Node* scatter = nullptr;
  for (int i : step_.nodes)
    if (g_.nodes[i].op == Op::ScatterAdd) scatter = &g_.nodes[i];
  if (!scatter) return make_error(fmt::format("cuda codegen: step {} has no scatter_add", step_.name));
  ValueId out = scatter->result, base = scatter->operands[0], indices = scatter->operands[1],
          updates = scatter->operands[2];
  const Shape &shape = type(out).shape, &ushape = type(updates).shape;
  int64_t axis = *ir::normalize_axis(scatter->attrs.get_int("axis", 0), static_cast<int64_t>(shape.size()));
  DType dt = type(out).dtype;
  launch.block_threads = kLoopThreads;
  launch.grid_blocks = 1;
  open(fmt::format("for (long long i = threadIdx.x; i < {}LL; i += blockDim.x)", ir::num_elements(shape)));
  KILN_ASSIGN_OR_RETURN(std::string v, value_at(base, unflatten("i", shape)));
  line(fmt::format("{}[i] = {};", param(out), to_storage(dt, v)));
  close();
  memo_.clear();
  // Repeated indices make the additions depend on each other: one thread, in order.
  line("__syncthreads();");
  line("if (threadIdx.x != 0) return;");
  open(fmt::format("for (long long u = 0; u < {}LL; ++u)", ir::num_elements(ushape)));
  Index src = unflatten("u", ushape);
  KILN_ASSIGN_OR_RETURN(Index dst, table_index(src, indices, axis, shape));
  std::string at = flat_of(shape, dst);
  KILN_ASSIGN_OR_RETURN(std::string add_value, value_at(updates, src));
  std::string old = let(compute_type(dt), from_storage(dt, fmt::format("{}[{}]", param(out), at)));
  std::array<std::string, 2> operands{old, add_value};
  std::array<DType, 2> dtypes{dt, dt};
  KILN_ASSIGN_OR_RETURN(std::string sum, cuda::elementwise(Op::Add, {}, operands, dtypes, dt));
  line(fmt::format("{}[{}] = {};", param(out), at, to_storage(dt, sum)));
  close();
  memo_.clear();
  return Status::Ok();
}

}  // namespace detail

Result<ProgramSource> emit_kernels(const ir::Graph& g, std::string_view symbol_prefix) {
  if (!g.program) return make_error("cuda codegen: the graph has no program; run fusion first");
  ProgramSource program;
  const std::vector<ir::AttentionMatch> attentions = ir::attention_matches(g);
  const std::vector<ir::AttentionGradientMatch> gradients = ir::attention_gradient_matches(g);
  // Each step's kernels are written under one placeholder name (which generated code never
  // uses otherwise), so two steps' texts compare equal exactly when their code is the same.
  const std::string placeholder = "KILN_STEP_KERNEL";
  std::map<std::string, std::string> symbol_of_text;
  for (const ir::Step& step : g.program->steps) {
    std::string text;
    Launch launch;
    if (step.kind == ir::StepKind::Library) {
      // Matmuls run on cuBLAS; an attention step on a kernel of its own, its backward on two.
      if (const ir::AttentionMatch* attention = ir::attention_of(attentions, step)) {
        KILN_ASSIGN_OR_RETURN(launch, emit_attention_kernel(g, step, *attention, placeholder, text));
      } else if (const ir::AttentionGradientMatch* gradient = ir::attention_gradient_of(gradients, step)) {
        KILN_ASSIGN_OR_RETURN(launch, emit_attention_gradient_kernels(g, step, *gradient, placeholder, text));
      } else {
        program.launches.push_back({});
        program.symbols.emplace_back();
        continue;
      }
    } else {
      Launch partial;
      if (step.kind == ir::StepKind::Reduction && ir::reduction_split(g, step, ir::kCudaSplit)) {
        KILN_ASSIGN_OR_RETURN(partial, detail::KernelEmitter(g, step, placeholder, true).write(text));
      }
      KILN_ASSIGN_OR_RETURN(launch, detail::KernelEmitter(g, step, placeholder).write(text));
      launch.partial_block_threads = partial.block_threads;
      launch.partial_grid_blocks = partial.grid_blocks;
    }
    const auto [first, is_new] = symbol_of_text.emplace(text, std::string(symbol_prefix) + step.name);
    const std::string& symbol = first->second;
    if (is_new) {
      for (size_t at = text.find(placeholder); at != std::string::npos; at = text.find(placeholder, at))
        text.replace(at, placeholder.size(), symbol);
      program.kernels += text;
    }
    program.launches.push_back(launch);
    program.symbols.push_back(symbol);
  }
  return program;
}

Result<ProgramSource> emit_program(const ir::Graph& g) {
  KILN_ASSIGN_OR_RETURN(ProgramSource program, emit_kernels(g));
  program.kernels = std::string(prelude()) + "\n" + program.kernels;
  return program;
}

}  // namespace kiln::codegen::cuda
