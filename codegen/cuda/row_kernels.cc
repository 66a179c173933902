#include <fmt/format.h>

#include "codegen/cuda/kernel_emitter_class.h"
#include "ir/shape_inference.h"

namespace kiln::codegen::cuda::detail {

// ---- reduction kernels: rows ----------------------------------------------------------

Status KernelEmitter::row_loop(const std::function<Status(const std::string&)>& body) {
  auto saved = memo_;
  if (items_ > 0) {
    line("#pragma unroll");
    open(fmt::format("for (int k = 0; k < {}; ++k)", items_));
    if (row_lanes_ > 1)
      line(fmt::format("const long long j = (k / {0} * {1}LL + lane) * {0} + k % {0};", row_lanes_, row_threads_));
    else line(fmt::format("const long long j = lane + k * {}LL;", row_threads_));
    const bool guard = row_has_tail();
    if (guard) open(fmt::format("if (j < {}LL)", row_length_));
    item_ = "k";
    Status s = body("j");
    item_.clear();
    KILN_RETURN_IF_ERROR(s);
    if (guard) close();
    close();
  } else {
    open(fmt::format("for (long long j = lane; j < {}LL; j += {}LL)", row_length_, row_threads_));
    KILN_RETURN_IF_ERROR(body("j"));
    close();
  }
  memo_ = std::move(saved);
  return Status::Ok();
}

// Elements a thread keeps of a row whose threads take `lanes` consecutive ones at a time.
int64_t KernelEmitter::row_items(int lanes) const {
  const int64_t per_pass = int64_t{row_threads_} * lanes;
  return (row_length_ + per_pass - 1) / per_pass * lanes;
}

bool KernelEmitter::row_has_tail() const { return row_length_ % (int64_t{row_threads_} * row_lanes_) != 0; }

// Each thread's elements of a row, in vectors of `lanes` consecutive ones: with 16-byte
// loads and stores a bf16 row takes an eighth of the memory instructions of 2-byte ones.
int KernelEmitter::row_vector_lanes(const ir::RowClass& rc, const std::vector<ValueId>& vectors, int limit) const {
  if (items_ == 0 || split_ || vectors.empty() || !rc.contiguous()) return 1;
  const bool halves =
      std::any_of(vectors.begin(), vectors.end(), [&](ValueId v) { return ir::dtype_size(type(v).dtype) == 2; });
  const int lanes = halves ? 8 : 4;
  return row_length_ % lanes == 0 && row_items(lanes) <= limit ? lanes : 1;
}

Status KernelEmitter::row_vector_loop(const std::function<Status(const std::string&)>& body) {
  auto saved = memo_;
  line("#pragma unroll");
  open(fmt::format("for (int g = 0; g < {}; ++g)", items_ / row_lanes_));
  line(fmt::format("const long long j0 = (g * {}LL + lane) * {};", row_threads_, row_lanes_));
  const bool guard = row_has_tail();
  if (guard) open(fmt::format("if (j0 < {}LL)", row_length_));
  KILN_RETURN_IF_ERROR(body("j0"));
  if (guard) close();
  close();
  memo_ = std::move(saved);
  return Status::Ok();
}

// Loads each input of the full shape into registers, a vector at a time where every row
// is aligned (a caller's buffer may not be), else an element at a time.
Status KernelEmitter::load_rows(const std::vector<ValueId>& loaded,
                                const std::function<Index(const std::string&)>& full_index) {
  if (row_lanes_ > 1) {
    open("if (rows_aligned)");
    KILN_RETURN_IF_ERROR(row_vector_loop([&](const std::string& j0) -> Status {
      for (ValueId v : loaded)
        line(fmt::format(
            "const kiln_vec{0}<{1}> in{2} = *reinterpret_cast<const kiln_vec{0}<{1}>*>({3} + r * {4}LL + {5});",
            row_lanes_, storage_type(type(v).dtype), slot_[v], param(v), row_length_, j0));
      line("#pragma unroll");
      open(fmt::format("for (int e = 0; e < {}; ++e)", row_lanes_));
      for (ValueId v : loaded)
        line(fmt::format("row{0}[g * {1} + e] = {2};", slot_[v], row_lanes_,
                         from_storage(type(v).dtype, fmt::format("in{}.v[e]", slot_[v]))));
      close();
      return Status::Ok();
    }));
    close();
    open("else");
  }
  KILN_RETURN_IF_ERROR(row_loop([&](const std::string& j) -> Status {
    Index full = full_index(j);
    for (ValueId v : loaded) {
      KILN_ASSIGN_OR_RETURN(std::string x, value_at(v, full));
      line(fmt::format("row{}[k] = {};", slot_[v], x));
    }
    return Status::Ok();
  }));
  if (row_lanes_ > 1) close();
  return Status::Ok();
}

Status KernelEmitter::store_rows(const std::vector<ValueId>& outputs, const ir::RowClass& rc,
                                 const std::function<Index(const std::string&)>& full_index) {
  if (row_lanes_ > 1) {
    open("if (rows_aligned)");
    KILN_RETURN_IF_ERROR(row_vector_loop([&](const std::string& j0) -> Status {
      for (ValueId o : outputs)
        line(fmt::format("kiln_vec{}<{}> out{};", row_lanes_, storage_type(type(o).dtype), slot_[o]));
      line("#pragma unroll");
      open(fmt::format("for (int e = 0; e < {}; ++e)", row_lanes_));
      line(fmt::format("const long long j = {} + e;", j0));
      auto saved = memo_;
      item_ = fmt::format("g * {} + e", row_lanes_);
      item_index_ = full_index("j");
      for (ValueId o : outputs) {  // an error ends the kernel's emission: item_ need not be reset
        KILN_ASSIGN_OR_RETURN(std::string v, value_at(o, item_index_));
        line(fmt::format("out{}.v[e] = {};", slot_[o], to_storage(type(o).dtype, v)));
      }
      item_.clear();
      memo_ = std::move(saved);
      close();
      for (ValueId o : outputs)
        line(fmt::format("*reinterpret_cast<kiln_vec{0}<{1}>*>({2} + r * {3}LL + {4}) = out{5};", row_lanes_,
                         storage_type(type(o).dtype), param(o), row_length_, j0, slot_[o]));
      return Status::Ok();
    }));
    close();
    open("else");
  }
  KILN_RETURN_IF_ERROR(row_loop([&](const std::string& j) {
    item_index_ = full_index(j);
    return store_outputs(outputs, item_index_, rc.full);
  }));
  if (row_lanes_ > 1) close();
  return Status::Ok();
}

Status KernelEmitter::reduction_kernel(Launch& launch) {
  auto cls = ir::row_class(g_, step_);
  if (!cls) return make_error(fmt::format("cuda codegen: step {} has no row structure", step_.name));
  const ir::RowClass& rc = *cls;
  // A split step's rows are its parts, already summed (split_sums.cc).
  row_length_ = split_ ? split_->parts : rc.row_length();
  const int64_t rows = rc.rows();
  std::vector<ValueId> full_inputs, full_outputs;  // full outputs: a split step's partial kernel wrote them
  for (ValueId v : step_.inputs)
    if (type(v).shape == rc.full) full_inputs.push_back(v);
  for (ValueId o : step_.outputs)
    if (type(o).shape == rc.full && !split_) full_outputs.push_back(o);
  int rows_per_block, items_limit = kWarpItems;
  if (row_length_ <= kWarpRowMax) {
    row_threads_ = 32;
    launch.block_threads = 256;
    rows_per_block = 8;
    items_ = static_cast<int>(row_items(1));
  } else {
    items_limit = full_inputs.size() <= 1 ? kBlockItemsOneInput : kBlockItems;
    // A block's row is loaded once, at its start, so the bytes an SM has in flight are its
    // resident rows' bytes: fewer threads with more elements each keep more rows resident.
    int element_bytes = full_inputs.empty() ? 4 : 8;
    for (ValueId v : full_inputs) element_bytes = std::min(element_bytes, ir::dtype_size(type(v).dtype));
    const int64_t per_thread = std::min<int64_t>(items_limit, kBlockRowBytesPerThread / element_bytes);
    const int64_t needed = (row_length_ + per_thread - 1) / per_thread;  // so no thread needs more
    int64_t threads = std::clamp<int64_t>((needed + 31) / 32 * 32, 128, 1024);
    row_threads_ = static_cast<int>(threads);
    launch.block_threads = row_threads_;
    rows_per_block = 1;
    const int64_t items = row_items(1);
    items_ = items <= items_limit ? static_cast<int>(items) : 0;
  }
  if (items_ > kWarpItems || split_) items_ = 0;
  launch.grid_blocks = (rows + rows_per_block - 1) / rows_per_block;
  const std::vector<ValueId> loaded = items_ > 0 ? full_inputs : std::vector<ValueId>{};
  std::vector<ValueId> vectors = loaded;
  vectors.insert(vectors.end(), full_outputs.begin(), full_outputs.end());
  row_lanes_ = row_vector_lanes(rc, vectors, items_limit);
  if (row_lanes_ > 1) items_ = static_cast<int>(row_items(row_lanes_));
  line("__shared__ kiln_u64 scratch[64];");
  line("(void)scratch;");
  if (row_lanes_ > 1) {
    std::string aligned = "true";
    for (ValueId v : vectors)
      aligned += fmt::format(" && ((kiln_u64){} % {}) == 0", param(v), row_lanes_ * ir::dtype_size(type(v).dtype));
    line(fmt::format("const bool rows_aligned = {};", aligned));
  }
  KILN_RETURN_IF_ERROR(hoist_scalars());
  line(fmt::format("const int lane = threadIdx.x % {};", row_threads_));
  open(fmt::format(
      "for (long long r = (long long)blockIdx.x * {0} + threadIdx.x / {1}; r < {2}LL; r += (long long)gridDim.x * {0})",
      rows_per_block, row_threads_, rows));
  Index kept = unflatten("r", rc.kept_shape);
  const Shape keepdims = rc.keepdims_shape();
  Index row_idx = kept, keep_idx{"", rc.keepdims_index(kept.dims, std::string("0"))};
  auto row_index = [&](const Shape& s) { return s == keepdims && s != rc.kept_shape ? keep_idx : row_idx; };
  auto full_index = [&](const std::string& j) {
    return Index{"", rc.full_index(kept.dims, unflatten(j, rc.reduced_shape).dims)};
  };
  // Rows kept in registers: each input of the full shape is loaded once per row.
  if (!loaded.empty()) {
    for (ValueId v : loaded) line(fmt::format("{} row{}[{}];", compute_type(type(v).dtype), slot_[v], items_));
    KILN_RETURN_IF_ERROR(load_rows(loaded, full_index));
    for (ValueId v : loaded) row_cache_[v] = fmt::format("row{}", slot_[v]);
  }
  // Rows not kept in registers are read once per pass; softmax's max and sum share one.
  std::set<int> computed_online;
  for (int i : step_.nodes) {
    const Node& node = g_.nodes[i];
    const ir::TensorType& t = type(node.result);
    if (ir::op_kind(node.op) == OpKind::Reduction) {
      if (computed_online.count(i)) continue;
      if (split_) {
        KILN_RETURN_IF_ERROR(sum_parts(node, rc, row_index(t.shape)));
        continue;
      }
      int sum = items_ == 0 ? online_sum_of(node, rc) : -1;
      if (sum >= 0) {
        const Node& sum_node = g_.nodes[static_cast<size_t>(sum)];
        KILN_RETURN_IF_ERROR(
            online_softmax(node, sum_node, full_index, row_index(t.shape), row_index(type(sum_node.result).shape)));
        computed_online.insert(sum);
      } else {
        KILN_RETURN_IF_ERROR(reduce(node, rc, full_index, row_index(t.shape)));
      }
    } else if (t.shape != rc.full) {
      KILN_RETURN_IF_ERROR(value_at(node.result, row_index(t.shape)));  // a row value: once per row
    }
  }
  if (!full_outputs.empty()) KILN_RETURN_IF_ERROR(store_rows(full_outputs, rc, full_index));
  std::vector<ValueId> row_outputs;
  for (ValueId o : step_.outputs)
    if (type(o).shape != rc.full) row_outputs.push_back(o);
  if (!row_outputs.empty()) {
    open("if (lane == 0)");
    for (ValueId o : row_outputs) KILN_RETURN_IF_ERROR(store_outputs({o}, row_index(type(o).shape), type(o).shape));
    close();
  }
  close();
  return Status::Ok();
}

std::vector<ValueId> KernelEmitter::costly_shared_values(ValueId x, const ir::RowClass& rc) const {
  std::vector<ValueId> found, stack;
  if (!computed_here(x)) return found;
  std::vector<char> seen(g_.values.size(), 0);
  for (ValueId v : g_.nodes[producer_[x]].operands) stack.push_back(v);
  while (!stack.empty()) {
    const ValueId v = stack.back();
    stack.pop_back();
    if (seen[v] || !computed_here(v) || type(v).shape != rc.full || row_cache_.count(v)) continue;
    seen[v] = 1;
    const Node& p = g_.nodes[producer_[v]];
    const bool costly = p.op == Op::Exp || p.op == Op::Log || p.op == Op::Div || p.op == Op::Tanh || p.op == Op::Erf ||
                        p.op == Op::Sigmoid || p.op == Op::Pow;
    if (costly && ir::uses_in_step(g_, step_, v) > 1) {
      found.push_back(v);
      continue;  // what it is computed from is read through it
    }
    for (ValueId o : p.operands) stack.push_back(o);
  }
  return found;
}

Status KernelEmitter::reduce(const Node& n, const ir::RowClass& rc,
                             const std::function<Index(const std::string&)>& full_index, const Index& at) {
  ValueId x = n.operands[0];
  DType dt = type(x).dtype;
  const bool fp = ir::is_float(dt);
  const bool block = row_threads_ > 32;
  const std::string acc_type = fp ? std::string(compute_type(dt)) : "long long";
  const std::string acc = fmt::format("acc{}", next_++);
  std::string init, op;
  switch (n.op) {
    case Op::ReduceSum:
      init = fp ? constant(dt, 0, 0) : "0LL", op = fp ? "kiln_sum_op()" : "kiln_wrapping_sum_op()";
      break;
    case Op::ReduceMax:
      init = fp ? constant(dt, -INFINITY, 0) : "(-9223372036854775807LL - 1)", op = "kiln_max_op()";
      break;
    case Op::ReduceMin: init = fp ? constant(dt, INFINITY, 0) : "9223372036854775807LL", op = "kiln_min_op()"; break;
    default: init = fp ? constant(dt, -INFINITY, 0) : "(-9223372036854775807LL - 1)";  // argmax
  }
  line(fmt::format("{} {} = {};", acc_type, acc, init));
  if (n.op == Op::Argmax) line(fmt::format("long long {}_at = -1;", acc));
  // A value computed here that other nodes of the step also read is kept in registers, so
  // later loops over the row read it instead of computing it again (softmax's exp).
  std::string keep;
  if (items_ > 0 && computed_here(x) && type(x).shape == rc.full && !row_cache_.count(x)) {
    if (ir::uses_in_step(g_, step_, x) > 1) {
      keep = fmt::format("kept{}", next_++);
      line(fmt::format("{} {}[{}];", compute_type(dt), keep, items_));
    }
  }
  // So are the costly values under x that later loops read too (softmax's gradient
  // computes P = exp(s - max) / sum to sum P·dP, then reads P again for each element).
  std::vector<std::pair<ValueId, std::string>> also_kept;
  if (items_ > 0)
    for (ValueId c : costly_shared_values(x, rc)) {
      also_kept.emplace_back(c, fmt::format("kept{}", next_++));
      line(fmt::format("{} {}[{}];", compute_type(type(c).dtype), also_kept.back().second, items_));
    }
  KILN_RETURN_IF_ERROR(row_loop([&](const std::string& j) -> Status {
    item_index_ = full_index(j);
    KILN_ASSIGN_OR_RETURN(std::string v, value_at(x, item_index_));
    if (!keep.empty()) line(fmt::format("{}[k] = {};", keep, v));
    for (const auto& [c, array] : also_kept) {
      KILN_ASSIGN_OR_RETURN(std::string cv, value_at(c, item_index_));  // computed for x already
      line(fmt::format("{}[k] = {};", array, cv));
    }
    std::string value = fp ? v : fmt::format("(long long){}", v);
    if (n.op == Op::Argmax) {
      open(fmt::format("if ({}_at < 0 || kiln_argmax_better({}, {}, {}, {}_at))", acc, value, j, acc, acc));
      line(fmt::format("{} = {};", acc, value));
      line(fmt::format("{}_at = {};", acc, j));
      close();
    } else {
      line(fmt::format("{0} = {1}({0}, {2});", acc, op, value));
    }
    return Status::Ok();
  }));
  if (!keep.empty()) row_cache_[x] = keep;
  for (const auto& [c, array] : also_kept) row_cache_[c] = array;
  if (n.op == Op::Argmax) {
    // Lanes that saw no element hold index -1 and lose to any lane that did.
    open(fmt::format("if ({}_at < 0)", acc));
    line(fmt::format("{}_at = 9223372036854775807LL;", acc));
    close();
    if (block)
      line(
          fmt::format("kiln_block_argmax({0}, {0}_at, reinterpret_cast<{1}*>(scratch), reinterpret_cast<long "
                      "long*>(scratch + 32));",
                      acc, acc_type));
    else line(fmt::format("kiln_warp_argmax({0}, {0}_at);", acc));
  } else if (block) {
    line(fmt::format("{0} = kiln_block_reduce({0}, {1}, reinterpret_cast<{2}*>(scratch));", acc, op, acc_type));
  } else {
    line(fmt::format("{0} = kiln_warp_reduce({0}, {1});", acc, op));
  }
  const ir::TensorType& rt = type(n.result);
  std::string result;
  if (n.op == Op::Argmax) {
    result = let(compute_type(rt.dtype), fmt::format("({}){}_at", compute_type(rt.dtype), acc));
  } else if (fp) {
    KILN_ASSIGN_OR_RETURN(std::string rounded,
                          cuda::elementwise(Op::Cast, attrs_to(rt.dtype), {&acc, 1}, {std::array{dt}}, rt.dtype));
    result = let(compute_type(rt.dtype), rounded);
  } else {  // the long long total, wrapped to the result's integer type
    KILN_ASSIGN_OR_RETURN(std::string wrapped, cuda::elementwise(Op::Cast, attrs_to(rt.dtype), {&acc, 1},
                                                                 {std::array{DType::I64}}, rt.dtype));
    result = let(compute_type(rt.dtype), wrapped);
  }
  remember_row_value(n, result, at);
  return Status::Ok();
}

void KernelEmitter::remember_row_value(const Node& n, const std::string& result, const Index& at) {
  Index key = at;
  const Shape& rshape = type(n.result).shape;
  for (size_t d = 0; d < key.dims.size() && d < rshape.size(); ++d)
    if (rshape[d] == 1) key.dims[d] = "0";
  if (rshape.empty()) key = Index{};
  memo_[{n.result, key_of(key)}] = result;
}

// The reduce_sum, over the same rows, of exp(a - broadcast(max)) when `max` is
// reduce_max(a) of f32 or f64: softmax's two reductions, which online_softmax computes in
// one pass over the row. -1 when the step has none.
int KernelEmitter::online_sum_of(const Node& max, const ir::RowClass& rc) const {
  ValueId a = max.operands[0];
  DType dt = type(a).dtype;
  if (max.op != Op::ReduceMax || (dt != DType::F32 && dt != DType::F64) || type(a).shape != rc.full ||
      ir::reduction_axes(g_, max) != rc.reduced)
    return -1;
  auto made_here = [&](ValueId v, Op op) {
    return computed_here(v) && g_.nodes[producer_[v]].op == op ? &g_.nodes[producer_[v]] : nullptr;
  };
  // The broadcast must give each element its own row's maximum.
  auto spreads_over_rows = [&](const Node& b) {
    const Shape& from = type(b.operands[0]).shape;
    const auto& dims = b.attrs.get_ints("dims");
    std::vector<int64_t> identity(rc.full.size());
    for (size_t d = 0; d < identity.size(); ++d) identity[d] = static_cast<int64_t>(d);
    return type(b.result).shape == rc.full &&
           ((from == rc.kept_shape && dims == rc.kept) || (from == rc.keepdims_shape() && dims == identity));
  };
  for (int i : step_.nodes) {
    const Node& sum = g_.nodes[i];
    if (sum.op != Op::ReduceSum || ir::reduction_axes(g_, sum) != rc.reduced) continue;
    const Node* e = made_here(sum.operands[0], Op::Exp);
    const Node* d = e ? made_here(e->operands[0], Op::Sub) : nullptr;
    const Node* b = d && d->operands[0] == a ? made_here(d->operands[1], Op::Broadcast) : nullptr;
    if (b && b->operands[0] == max.result && spreads_over_rows(*b)) return i;
  }
  return -1;
}

Status KernelEmitter::online_softmax(const Node& max, const Node& sum,
                                     const std::function<Index(const std::string&)>& full_index, const Index& max_at,
                                     const Index& sum_at) {
  ValueId a = max.operands[0];
  DType dt = type(a).dtype;
  const std::string t(compute_type(dt)), m = fmt::format("acc{}", next_++), s = fmt::format("acc{}", next_++);
  line(fmt::format("{} {} = {}, {} = {};", t, m, constant(dt, -INFINITY, 0), s, constant(dt, 0, 0)));
  if (items_ > 0) {
    KILN_RETURN_IF_ERROR(row_loop([&](const std::string& j) -> Status {
      item_index_ = full_index(j);
      KILN_ASSIGN_OR_RETURN(std::string x, value_at(a, item_index_));
      line(fmt::format("kiln_online_merge({}, {}, {}, {});", m, s, x, constant(dt, 1, 1)));
      return Status::Ok();
    }));
  } else {
    // A long row, kOnlineChunk elements a thread at a time: their loads in flight
    // together, their maximum and their sum of exps (independent of each other) merged
    // once. Merging each element (two exps on the running pair's chain) held rows of
    // 32768 to 0.31 of copy (docs/benchmarks.md). A chunk of only -inf counts its
    // elements, as merging them one by one does; padding past the row is -inf, which a
    // finite maximum scales to nothing and an all -inf row's NaN sum ignores.
    const std::string x = fmt::format("chunk{}", next_++), cm = fmt::format("acc{}", next_++),
                      cs = fmt::format("acc{}", next_++);
    auto saved = memo_;
    open(fmt::format("for (long long j0 = lane; j0 < {}LL; j0 += {}LL)", row_length_,
                     int64_t{row_threads_} * kOnlineChunk));
    line(fmt::format("{} {}[{}];", t, x, kOnlineChunk));
    line("#pragma unroll");
    open(fmt::format("for (int c = 0; c < {}; ++c)", kOnlineChunk));
    line(fmt::format("const long long j = j0 + c * {}LL;", row_threads_));
    line(fmt::format("{}[c] = {};", x, constant(dt, -INFINITY, 0)));
    open(fmt::format("if (j < {}LL)", row_length_));
    item_index_ = full_index("j");
    KILN_ASSIGN_OR_RETURN(std::string v, value_at(a, item_index_));
    line(fmt::format("{}[c] = {};", x, v));
    close();
    close();
    memo_ = saved;
    line(fmt::format("{} {} = {}[0];", t, cm, x));
    line("#pragma unroll");
    line(fmt::format("for (int c = 1; c < {}; ++c) {} = kiln_max({}, {}[c]);", kOnlineChunk, cm, cm, x));
    line(fmt::format("{} {} = {};", t, cs, constant(dt, 0, 0)));
    line("#pragma unroll");
    line(fmt::format("for (int c = 0; c < {}; ++c) {} += kiln_is_neg_inf({}) ? {} : kiln_exp({}[c] - {});",
                     kOnlineChunk, cs, cm, constant(dt, 1, 1), x, cm));
    line(fmt::format("kiln_online_merge({}, {}, {}, {});", m, s, cm, cs));
    close();
  }
  if (row_threads_ > 32)
    line(fmt::format(
        "kiln_block_online({0}, {1}, reinterpret_cast<{2}*>(scratch), reinterpret_cast<{2}*>(scratch + 32));", m, s,
        t));
  else line(fmt::format("kiln_warp_online({}, {});", m, s));
  remember_row_value(max, let(t, m), max_at);
  remember_row_value(sum, let(t, fmt::format("kiln_online_sum({}, {})", m, s)), sum_at);
  return Status::Ok();
}

}  // namespace kiln::codegen::cuda::detail
