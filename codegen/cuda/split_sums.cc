// A reduction step split into parts (ir/reduction_split.h, ir::kCudaSplit): the partial
// kernel sums each part into a double of parts_scratch, the step's kernel adds each row's
// parts in a fixed order (a fixed tree of lanes) and finishes the row, so results are the
// same from run to run whatever the grid the runtime launches.
#include <fmt/format.h>

#include "codegen/cuda/kernel_emitter_class.h"

namespace kiln::codegen::cuda::detail {

using Walk = ir::ReductionSplit::Walk;

Status KernelEmitter::partial_kernel(Launch& launch) {
  auto cls = ir::row_class(g_, step_);
  if (!cls || !split_) return make_error(fmt::format("cuda codegen: step {} is not a split reduction", step_.name));
  const ir::RowClass& rc = *cls;
  const ir::ReductionSplit& split = *split_;
  const Node* sum = nullptr;
  for (int i : step_.nodes)
    if (ir::op_kind(g_.nodes[i].op) == OpKind::Reduction) sum = &g_.nodes[i];
  const ValueId x = sum->operands[0];
  std::vector<ValueId> full_outputs;
  for (ValueId o : step_.outputs)
    if (type(o).shape == rc.full) full_outputs.push_back(o);
  KILN_RETURN_IF_ERROR(hoist_scalars());
  const int64_t rows = rc.rows();
  if (split.walk == Walk::Columns) {
    // A thread per column and part: the threads of a warp read consecutive columns of one
    // operand row.
    const int64_t tiles = (rows + kLoopThreads - 1) / kLoopThreads;
    launch.block_threads = kLoopThreads;
    launch.grid_blocks = split.parts * tiles;
    open(fmt::format("for (long long b = blockIdx.x; b < {}LL; b += gridDim.x)", split.parts * tiles));
    line(fmt::format("const long long p = b / {}LL;", tiles));
    line(fmt::format("const long long c = (b % {}LL) * {} + threadIdx.x;", tiles, kLoopThreads));
    open(fmt::format("if (c < {}LL)", rows));
    line("double acc = 0;");
    line(fmt::format("const long long rows_end = min((p + 1) * {0}LL, {1}LL);", split.part_length, rc.row_length()));
    Index kept = unflatten("c", rc.kept_shape);
    line("#pragma unroll 4");
    open(fmt::format("for (long long i = p * {}LL; i < rows_end; ++i)", split.part_length));
    auto saved = memo_;
    Index full{"", rc.full_index(kept.dims, unflatten("i", rc.reduced_shape).dims)};
    KILN_ASSIGN_OR_RETURN(std::string v, value_at(x, full));
    line(fmt::format("acc += (double)({});", v));
    KILN_RETURN_IF_ERROR(store_outputs(full_outputs, full, rc.full));
    memo_ = std::move(saved);
    close();
    line(fmt::format("parts_scratch[p * {}LL + c] = acc;", rows));
    close();
    close();
    return Status::Ok();
  }
  // Rows: a block per part of a row, the block's lanes over the part (writing the full-shape
  // outputs on the way), then a block sum.
  launch.block_threads = kLoopThreads;
  launch.grid_blocks = split.partial_items;
  line("__shared__ double lane_sums[32];");
  open(fmt::format("for (long long b = blockIdx.x; b < {}LL; b += gridDim.x)", split.partial_items));
  line(fmt::format("const long long r = b / {}LL;", split.parts));
  line(fmt::format("const long long start = (b % {}LL) * {}LL;", split.parts, split.part_length));
  Index kept = unflatten("r", rc.kept_shape);
  line("double acc = 0;");
  line("#pragma unroll 4");
  open(fmt::format("for (long long j = threadIdx.x; j < {}LL; j += {})", split.part_length, kLoopThreads));
  auto saved = memo_;
  Index full{"", rc.full_index(kept.dims, unflatten(index_let("start + j"), rc.reduced_shape).dims)};
  KILN_ASSIGN_OR_RETURN(std::string v, value_at(x, full));
  line(fmt::format("acc += (double)({});", v));
  KILN_RETURN_IF_ERROR(store_outputs(full_outputs, full, rc.full));
  memo_ = std::move(saved);
  close();
  line("acc = kiln_block_reduce(acc, kiln_sum_op(), lane_sums);");
  line("if (threadIdx.x == 0) parts_scratch[b] = acc;");
  close();
  return Status::Ok();
}

Status KernelEmitter::sum_parts(const Node& n, const ir::RowClass& rc, const Index& at) {
  const ir::ReductionSplit& split = *split_;
  const std::string acc = fmt::format("acc{}", next_++);
  line(fmt::format("double {} = 0;", acc));
  KILN_RETURN_IF_ERROR(row_loop([&](const std::string& j) {
    const std::string part = split.walk == Walk::Columns ? fmt::format("{} * {}LL + r", j, rc.rows())
                                                         : fmt::format("r * {}LL + {}", split.parts, j);
    line(fmt::format("{} += parts_scratch[{}];", acc, part));
    return Status::Ok();
  }));
  if (row_threads_ > 32)
    line(fmt::format("{0} = kiln_block_reduce({0}, kiln_sum_op(), reinterpret_cast<double*>(scratch));", acc));
  else line(fmt::format("{0} = kiln_warp_reduce({0}, kiln_sum_op());", acc));
  const ir::TensorType& rt = type(n.result);
  const DType f64 = DType::F64;
  KILN_ASSIGN_OR_RETURN(std::string rounded,
                        cuda::elementwise(Op::Cast, attrs_to(rt.dtype), {&acc, 1}, {&f64, 1}, rt.dtype));
  remember_row_value(n, let(compute_type(rt.dtype), rounded), at);
  return Status::Ok();
}

}  // namespace kiln::codegen::cuda::detail
