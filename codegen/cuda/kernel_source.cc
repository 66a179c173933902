#include "codegen/cuda/kernel_source.h"

#include <algorithm>
#include <bit>
#include <fmt/format.h>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "codegen/cuda/scalar_source.h"
#include "ir/element_walker.h"
#include "ir/row_class.h"
#include "ir/shape_inference.h"

namespace kiln::codegen::cuda {
namespace {

using ir::DType;
using ir::Node;
using ir::Op;
using ir::OpKind;
using ir::Shape;
using ir::ValueId;

class KernelWriter;
using ElementWalker = ir::ElementWalker<KernelWriter, std::string>;
// An index into a value, as C++ expressions (ir/element_walker.h).
using Index = ir::ElementIndex<std::string>;

std::string mul(const std::string& a, int64_t c) { return c == 1 ? a : a == "0" ? "0" : fmt::format("{} * {}LL", a, c); }
std::string add(const std::string& a, const std::string& b) { return a == "0" ? b : b == "0" ? a : a + " + " + b; }

constexpr int kLoopThreads = 256;
constexpr int kWarpRowMax = 1024;   // rows up to this long get one warp each
constexpr int kWarpItems = 32;      // elements per lane kept in registers, warp rows
constexpr int kBlockItems = 16;     // elements per thread kept in registers, block rows

// Writes one kernel step as CUDA C++. Its values element by element come from the element
// walker it derives from, over C++ expressions.
class KernelWriter : public ElementWalker {
 public:
  KernelWriter(const ir::Graph& g, const ir::Step& step, std::string symbol) : ElementWalker(g, step), symbol_(std::move(symbol)) {}

  // Appends the kernel (and any constant arrays it reads) to `out`.
  Result<Launch> write(std::string& out) {
    Launch launch;
    Status body = step_.kind == ir::StepKind::Loop        ? loop_kernel(launch)
                  : step_.kind == ir::StepKind::Reduction ? reduction_kernel(launch)
                                                          : scatter_kernel(launch);
    KILN_RETURN_IF_ERROR(body);
    out += globals_;
    out += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n", launch.block_threads, symbol_, parameters());
    out += code_;
    out += "}\n\n";
    launch.grid_blocks = std::max<int64_t>(1, launch.grid_blocks);
    return launch;
  }

 private:
  friend ElementWalker;
  std::string param(ValueId v) const { return fmt::format("a{}", slot_[v]); }

  std::string parameters() const {
    // An output written over an input (in place) aliases it: neither gets __restrict__.
    std::set<ValueId> aliased;
    if (g_.memory)
      for (ValueId o : step_.outputs)
        if (const ir::Buffer* b = g_.memory->find(o); b && b->in_place_of >= 0) {
          aliased.insert(o);
          aliased.insert(b->in_place_of);
        }
    std::string s;
    auto one = [&](ValueId v, bool is_const) {
      s += fmt::format("{}{}{}* {}{}", s.empty() ? "" : ", ", is_const ? "const " : "", storage_type(type(v).dtype),
                       aliased.count(v) ? "" : "__restrict__ ", param(v));
    };
    for (ValueId v : step_.inputs) one(v, true);
    for (ValueId v : step_.outputs) one(v, false);
    return s;
  }

  void line(const std::string& s) { code_ += std::string(static_cast<size_t>(2 * depth_), ' ') + s + "\n"; }
  void open(const std::string& s) {
    line(s + " {");
    ++depth_;
  }
  void close() {
    --depth_;
    line("}");
  }
  // A named constant for a non-trivial expression.
  std::string let(std::string_view type, const std::string& expr) {
    bool simple = !expr.empty() && std::all_of(expr.begin(), expr.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
    if (simple) return expr;
    std::string name = fmt::format("v{}", next_++);
    line(fmt::format("const {} {} = {};", type, name, expr));
    return name;
  }
  std::string index_let(const std::string& expr) { return let("long long", expr); }

  // ---- the element walker's arithmetic, over C++ expressions

  std::string index_constant(int64_t c) const { return std::to_string(c); }
  std::string index_add(const std::string& a, const std::string& b) const { return add(a, b); }
  std::string index_mul(const std::string& a, int64_t c) const { return mul(a, c); }
  std::string index_finish(const std::string& flat) { return index_let(flat); }
  std::string unflatten_dim(const std::string& flat, int64_t stride, int64_t extent, bool outermost) {
    if (extent == 1) return "0";
    std::string q = stride == 1 ? flat : fmt::format("{} / {}LL", flat, stride);
    return index_let(outermost ? q : fmt::format("({}) % {}LL", q, extent));
  }
  std::string affine(const std::string& i, int64_t start, int64_t step) {
    return index_let(add(start ? fmt::format("{}LL", start) : "0", mul(i, step)));
  }
  std::string clamp_index(const std::string& j, int64_t extent) {
    std::string raw = index_let(fmt::format("(long long){}", j));
    std::string wrapped = index_let(fmt::format("{0} < 0 ? {0} + {1}LL : {0}", raw, extent));
    return index_let(fmt::format("{0} < 0 ? 0LL : {0} >= {1}LL ? {2}LL : {0}", wrapped, extent, extent - 1));
  }
  // Row kernels keep some values in per-thread arrays; vector loop kernels load each input
  // of the iteration shape as one vector per lane group.
  std::optional<std::string> special_value(ValueId v, const ElementWalker::Key& key) {
    if (auto cached = row_cache_.find(v); cached != row_cache_.end() && !item_.empty() && key == key_of(canonical(v, item_index_)))
      return fmt::format("{}[{}]", cached->second, item_);
    if (auto lane = lane_loads_.find(v); lane != lane_loads_.end() && key == lane_key_)
      return let(compute_type(type(v).dtype), from_storage(type(v).dtype, fmt::format("{}.v[{}]", lane->second, lane_)));
    return std::nullopt;
  }
  std::string load(ValueId v, const std::string& flat) {
    return let(compute_type(type(v).dtype), from_storage(type(v).dtype, fmt::format("{}[{}]", param(v), flat)));
  }
  Result<std::string> elementwise(const Node& n, std::span<const std::string> operands, std::span<const DType> dtypes) {
    DType result = type(n.result).dtype;
    KILN_ASSIGN_OR_RETURN(std::string e, cuda::elementwise(n.op, n.attrs, operands, dtypes, result));
    return let(compute_type(result), e);
  }
  Result<std::string> iota(const std::string& index, DType dtype) {
    KILN_ASSIGN_OR_RETURN(std::string e, cuda::elementwise(Op::Cast, attrs_to(dtype), {&index, 1}, {std::array{DType::I64}}, dtype));
    return let(compute_type(dtype), e);
  }
  std::string scalar_constant(DType dtype, double value, int64_t int_value) const { return constant(dtype, value, int_value); }
  std::string dense_constant(const ir::Literal& literal, DType dtype, const std::string& flat) {
    // A dense constant: an array in device memory. Floats are kept as their bits, since a
    // __device__ array's initializers must be constants and inf or NaN have no literal.
    std::string name = fmt::format("{}_c{}", symbol_, constants_++);
    std::string elements, element_type(compute_type(dtype)), read = "{}[{}]";
    for (size_t k = 0; k < literal.floats.size(); ++k) {
      std::string e;
      double v = ir::round_to_dtype(dtype, literal.floats[k]);
      if (dtype == DType::F64) e = fmt::format("{:#x}ull", std::bit_cast<uint64_t>(v));
      else if (ir::is_float(dtype)) e = fmt::format("{:#x}u", std::bit_cast<uint32_t>(static_cast<float>(v)));
      else e = constant(dtype, literal.floats[k], literal.ints[k]);
      elements += (k ? ", " : "") + e;
    }
    if (dtype == DType::F64) element_type = "kiln_u64", read = "__longlong_as_double((long long){}[{}])";
    else if (ir::is_float(dtype)) element_type = "unsigned", read = "__uint_as_float({}[{}])";
    globals_ += fmt::format("__device__ const {} {}[{}] = {{{}}};\n", element_type, name, literal.floats.size(), elements);
    return let(compute_type(dtype), fmt::format(fmt::runtime(read), name, flat));
  }
  std::string_view codegen_name() const { return "cuda codegen"; }

  static ir::Attrs attrs_to(DType to) {
    ir::Attrs a;
    a.set("to", to);
    return a;
  }

  // Picks the operand whose range along the axis holds the index; no other operand is read.
  Result<std::string> concat(const Node& n, const Index& out) {
    int64_t axis = *ir::normalize_axis(n.attrs.get_int("axis"), type(n.result).rank());
    const std::string& at = out.dims[static_cast<size_t>(axis)];
    std::string result = fmt::format("v{}", next_++);
    line(fmt::format("{} {};", compute_type(type(n.result).dtype), result));
    int64_t offset = 0;
    for (size_t k = 0; k < n.operands.size(); ++k) {
      ValueId x = n.operands[k];
      int64_t extent = type(x).shape[static_cast<size_t>(axis)];
      bool last = k + 1 == n.operands.size();
      open(k == 0 ? fmt::format("if ({} < {}LL)", at, offset + extent) : last ? "else" : fmt::format("else if ({} < {}LL)", at, offset + extent));
      Index src = out;
      src.dims[static_cast<size_t>(axis)] = index_let(fmt::format("{} - {}LL", at, offset));
      auto saved = memo_;  // values computed in this branch are not defined outside it
      KILN_ASSIGN_OR_RETURN(std::string v, value_at(x, src));
      memo_ = std::move(saved);
      line(fmt::format("{} = {};", result, v));
      close();
      offset += extent;
    }
    return result;
  }

  // Scalars that depend on no loop (rank-0 inputs, and rank-0 ops on them that no
  // reduction feeds) are computed once, at the top of the kernel.
  Status hoist_scalars() {
    for (ValueId x : ir::invariant_scalars(g_, step_)) KILN_RETURN_IF_ERROR(value_at(x, Index{}));
    invariant_ = memo_;
    return Status::Ok();
  }

  Status store_outputs(const std::vector<ValueId>& outs, const Index& idx, const Shape& shape) {
    std::vector<std::string> values;
    for (ValueId o : outs) {
      KILN_ASSIGN_OR_RETURN(std::string v, value_at(o, idx));
      values.push_back(v);
    }
    for (size_t k = 0; k < outs.size(); ++k)
      line(fmt::format("{}[{}] = {};", param(outs[k]), flat_of(shape, idx), to_storage(type(outs[k]).dtype, values[k])));
    return Status::Ok();
  }

  Status loop_kernel(Launch& launch);
  Status reduction_kernel(Launch& launch);
  Status reduce(const Node& n, const ir::RowClass& rc, const std::function<Index(const std::string&)>& full_index, const Index& at);
  int online_sum_of(const Node& max, const ir::RowClass& rc) const;
  Status online_softmax(const Node& max, const Node& sum, const std::function<Index(const std::string&)>& full_index, const Index& max_at,
                        const Index& sum_at);
  // Records a row reduction's result (an expression of its result type) for the row at `at`.
  void remember_row_value(const Node& n, const std::string& result, const Index& at);
  // Emits a loop over a row's elements (`body` gets the element's position j).
  Status row_loop(const std::function<Status(const std::string&)>& body);
  Status scatter_kernel(Launch& launch);

  const std::string symbol_;
  std::string code_, globals_;
  int depth_ = 1, next_ = 0, constants_ = 0;
  Memo invariant_;
  // Vector loop kernels: the loaded vector of each input of the iteration shape, and the
  // lane being computed (its number and its index's key).
  std::map<ValueId, std::string> lane_loads_;
  std::string lane_;
  std::vector<std::string> lane_key_;
  // Row kernels: values kept in per-thread arrays (the row's elements this thread
  // handles), the unrolled element loop's counter, and that element's full index.
  std::map<ValueId, std::string> row_cache_;
  std::string item_;
  Index item_index_;
  // Row kernels: threads per row, elements per thread in registers (0: not kept), row length.
  int row_threads_ = 0, items_ = 0;
  int64_t row_length_ = 0;
};

// ---- loop kernels -----------------------------------------------------------------

Status KernelWriter::loop_kernel(Launch& launch) {
  const Shape& shape = type(step_.outputs[0]).shape;
  const int64_t n = ir::num_elements(shape);
  // Each thread computes 4 consecutive elements, loading and storing whole vectors of the
  // values of the iteration shape. When indexing is not flat, the innermost extent must
  // be a multiple of 4, so the 4 elements share every index but the innermost; other
  // values (a broadcast bias, a transposed operand) are read an element at a time.
  const bool flat = ir::flat_iteration(g_, step_);
  const bool vector = n >= 4 && (flat || shape.back() % 4 == 0);
  launch.block_threads = kLoopThreads;
  launch.grid_blocks = (n / (vector ? 4 : 1) + kLoopThreads - 1) / kLoopThreads;
  KILN_RETURN_IF_ERROR(hoist_scalars());
  line(fmt::format("const long long stride = (long long)gridDim.x * {};", kLoopThreads));
  line(fmt::format("const long long first = (long long)blockIdx.x * {} + threadIdx.x;", kLoopThreads));
  std::string scalar_start = "0";
  if (vector) {
    std::vector<ValueId> loaded;
    for (ValueId v : step_.inputs)
      if (type(v).rank() > 0 && type(v).shape == shape) loaded.push_back(v);
    std::vector<ValueId> vectors = loaded;
    vectors.insert(vectors.end(), step_.outputs.begin(), step_.outputs.end());
    std::string aligned = "true";
    for (ValueId v : vectors) aligned += fmt::format(" && ((kiln_u64){} % {}) == 0", param(v), 4 * ir::dtype_size(type(v).dtype));
    line(fmt::format("const long long vector_end = {}LL;", n / 4 * 4));
    line(fmt::format("const bool aligned = {};", aligned));
    open(fmt::format("if (aligned) for (long long q = first; q < {}LL; q += stride)", n / 4));
    for (ValueId v : loaded) {
      std::string name = fmt::format("in{}", slot_[v]);
      line(fmt::format("const kiln_vec4<{0}> {1} = *reinterpret_cast<const kiln_vec4<{0}>*>({2} + q * 4);", storage_type(type(v).dtype), name, param(v)));
      lane_loads_[v] = name;
    }
    for (ValueId o : step_.outputs) line(fmt::format("kiln_vec4<{}> out{};", storage_type(type(o).dtype), slot_[o]));
    Index first_lane = flat ? Index{} : unflatten(index_let("q * 4"), shape);
    for (int e = 0; e < 4; ++e) {
      lane_ = std::to_string(e);
      Index at = first_lane;
      if (flat) at.flat = index_let(fmt::format("q * 4 + {}", e));
      else if (e > 0) at.dims.back() = index_let(fmt::format("{} + {}", first_lane.dims.back(), e));
      lane_key_ = key_of(at);
      for (ValueId o : step_.outputs) {
        KILN_ASSIGN_OR_RETURN(std::string v, value_at(o, at));
        line(fmt::format("out{}.v[{}] = {};", slot_[o], e, to_storage(type(o).dtype, v)));
      }
    }
    for (ValueId o : step_.outputs)
      line(fmt::format("*reinterpret_cast<kiln_vec4<{0}>*>({1} + q * 4) = out{2};", storage_type(type(o).dtype), param(o), slot_[o]));
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

// ---- reduction kernels: rows ----------------------------------------------------------

Status KernelWriter::row_loop(const std::function<Status(const std::string&)>& body) {
  auto saved = memo_;
  if (items_ > 0) {
    line("#pragma unroll");
    open(fmt::format("for (int k = 0; k < {}; ++k)", items_));
    line(fmt::format("const long long j = lane + k * {}LL;", row_threads_));
    bool guard = row_length_ % row_threads_ != 0;
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

Status KernelWriter::reduction_kernel(Launch& launch) {
  auto cls = ir::row_class(g_, step_);
  if (!cls) return make_error(fmt::format("cuda codegen: step {} has no row structure", step_.name));
  const ir::RowClass& rc = *cls;
  row_length_ = rc.row_length();
  const int64_t rows = rc.rows();
  int rows_per_block;
  if (row_length_ <= kWarpRowMax) {
    row_threads_ = 32;
    launch.block_threads = 256;
    rows_per_block = 8;
    items_ = static_cast<int>((row_length_ + 31) / 32);
  } else {
    int64_t threads = std::clamp<int64_t>((row_length_ / 8 + 31) / 32 * 32, 128, 1024);
    row_threads_ = static_cast<int>(threads);
    launch.block_threads = row_threads_;
    rows_per_block = 1;
    int64_t items = (row_length_ + threads - 1) / threads;
    items_ = items <= kBlockItems ? static_cast<int>(items) : 0;
  }
  if (items_ > kWarpItems) items_ = 0;
  launch.grid_blocks = (rows + rows_per_block - 1) / rows_per_block;
  line("__shared__ kiln_u64 scratch[64];");
  line("(void)scratch;");
  KILN_RETURN_IF_ERROR(hoist_scalars());
  line(fmt::format("const int lane = threadIdx.x % {};", row_threads_));
  open(fmt::format("for (long long r = (long long)blockIdx.x * {0} + threadIdx.x / {1}; r < {2}LL; r += (long long)gridDim.x * {0})",
                   rows_per_block, row_threads_, rows));
  Index kept = unflatten("r", rc.kept_shape);
  const Shape keepdims = rc.keepdims_shape();
  Index row_idx = kept, keep_idx{"", rc.keepdims_index(kept.dims, std::string("0"))};
  auto row_index = [&](const Shape& s) { return s == keepdims && s != rc.kept_shape ? keep_idx : row_idx; };
  auto full_index = [&](const std::string& j) { return Index{"", rc.full_index(kept.dims, unflatten(j, rc.reduced_shape).dims)}; };
  // Rows kept in registers: each input of the full shape is loaded once per row.
  if (items_ > 0) {
    std::vector<ValueId> loaded;
    for (ValueId v : step_.inputs)
      if (type(v).shape == rc.full) loaded.push_back(v);
    for (ValueId v : loaded) line(fmt::format("{} row{}[{}];", compute_type(type(v).dtype), slot_[v], items_));
    if (!loaded.empty()) {
      KILN_RETURN_IF_ERROR(row_loop([&](const std::string& j) -> Status {
        Index full = full_index(j);
        for (ValueId v : loaded) {
          KILN_ASSIGN_OR_RETURN(std::string x, value_at(v, full));
          line(fmt::format("row{}[k] = {};", slot_[v], x));
        }
        return Status::Ok();
      }));
      for (ValueId v : loaded) row_cache_[v] = fmt::format("row{}", slot_[v]);
    }
  }
  // Rows not kept in registers are read once per pass; softmax's max and sum share one.
  std::set<int> computed_online;
  for (int i : step_.nodes) {
    const Node& node = g_.nodes[i];
    const ir::TensorType& t = type(node.result);
    if (ir::op_kind(node.op) == OpKind::Reduction) {
      if (computed_online.count(i)) continue;
      int sum = items_ == 0 ? online_sum_of(node, rc) : -1;
      if (sum >= 0) {
        const Node& sum_node = g_.nodes[static_cast<size_t>(sum)];
        KILN_RETURN_IF_ERROR(online_softmax(node, sum_node, full_index, row_index(t.shape), row_index(type(sum_node.result).shape)));
        computed_online.insert(sum);
      } else {
        KILN_RETURN_IF_ERROR(reduce(node, rc, full_index, row_index(t.shape)));
      }
    } else if (t.shape != rc.full) {
      KILN_RETURN_IF_ERROR(value_at(node.result, row_index(t.shape)));  // a row value: once per row
    }
  }
  std::vector<ValueId> full_outputs;
  for (ValueId o : step_.outputs)
    if (type(o).shape == rc.full) full_outputs.push_back(o);
  if (!full_outputs.empty()) {
    KILN_RETURN_IF_ERROR(row_loop([&](const std::string& j) {
      item_index_ = full_index(j);
      return store_outputs(full_outputs, item_index_, rc.full);
    }));
  }
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

Status KernelWriter::reduce(const Node& n, const ir::RowClass& rc, const std::function<Index(const std::string&)>& full_index, const Index& at) {
  ValueId x = n.operands[0];
  DType dt = type(x).dtype;
  const bool fp = ir::is_float(dt);
  const bool block = row_threads_ > 32;
  const std::string acc_type = fp ? std::string(compute_type(dt)) : "long long";
  const std::string acc = fmt::format("acc{}", next_++);
  std::string init, op;
  switch (n.op) {
    case Op::ReduceSum: init = fp ? constant(dt, 0, 0) : "0LL", op = fp ? "kiln_sum_op()" : "kiln_wrapping_sum_op()"; break;
    case Op::ReduceMax: init = fp ? constant(dt, -INFINITY, 0) : "(-9223372036854775807LL - 1)", op = "kiln_max_op()"; break;
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
  KILN_RETURN_IF_ERROR(row_loop([&](const std::string& j) -> Status {
    item_index_ = full_index(j);
    KILN_ASSIGN_OR_RETURN(std::string v, value_at(x, item_index_));
    if (!keep.empty()) line(fmt::format("{}[k] = {};", keep, v));
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
  if (n.op == Op::Argmax) {
    // Lanes that saw no element hold index -1 and lose to any lane that did.
    open(fmt::format("if ({}_at < 0)", acc));
    line(fmt::format("{}_at = 9223372036854775807LL;", acc));
    close();
    if (block)
      line(fmt::format("kiln_block_argmax({0}, {0}_at, reinterpret_cast<{1}*>(scratch), reinterpret_cast<long long*>(scratch + 32));", acc, acc_type));
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
    KILN_ASSIGN_OR_RETURN(std::string rounded, cuda::elementwise(Op::Cast, attrs_to(rt.dtype), {&acc, 1}, {std::array{dt}}, rt.dtype));
    result = let(compute_type(rt.dtype), rounded);
  } else {
    result = let(compute_type(rt.dtype), fmt::format("({}){}", compute_type(rt.dtype), acc));
  }
  remember_row_value(n, result, at);
  return Status::Ok();
}

void KernelWriter::remember_row_value(const Node& n, const std::string& result, const Index& at) {
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
int KernelWriter::online_sum_of(const Node& max, const ir::RowClass& rc) const {
  ValueId a = max.operands[0];
  DType dt = type(a).dtype;
  if (max.op != Op::ReduceMax || (dt != DType::F32 && dt != DType::F64) || type(a).shape != rc.full || ir::reduction_axes(g_, max) != rc.reduced)
    return -1;
  auto made_here = [&](ValueId v, Op op) { return computed_here(v) && g_.nodes[producer_[v]].op == op ? &g_.nodes[producer_[v]] : nullptr; };
  // The broadcast must give each element its own row's maximum.
  auto spreads_over_rows = [&](const Node& b) {
    const Shape& from = type(b.operands[0]).shape;
    const auto& dims = b.attrs.get_ints("dims");
    std::vector<int64_t> identity(rc.full.size());
    for (size_t d = 0; d < identity.size(); ++d) identity[d] = static_cast<int64_t>(d);
    return type(b.result).shape == rc.full && ((from == rc.kept_shape && dims == rc.kept) || (from == rc.keepdims_shape() && dims == identity));
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

Status KernelWriter::online_softmax(const Node& max, const Node& sum, const std::function<Index(const std::string&)>& full_index,
                                    const Index& max_at, const Index& sum_at) {
  ValueId a = max.operands[0];
  DType dt = type(a).dtype;
  const std::string t(compute_type(dt)), m = fmt::format("acc{}", next_++), s = fmt::format("acc{}", next_++);
  line(fmt::format("{} {} = {}, {} = {};", t, m, constant(dt, -INFINITY, 0), s, constant(dt, 0, 0)));
  KILN_RETURN_IF_ERROR(row_loop([&](const std::string& j) -> Status {
    item_index_ = full_index(j);
    KILN_ASSIGN_OR_RETURN(std::string x, value_at(a, item_index_));
    line(fmt::format("kiln_online_merge({}, {}, {}, {});", m, s, x, constant(dt, 1, 1)));
    return Status::Ok();
  }));
  if (row_threads_ > 32) line(fmt::format("kiln_block_online({0}, {1}, reinterpret_cast<{2}*>(scratch), reinterpret_cast<{2}*>(scratch + 32));", m, s, t));
  else line(fmt::format("kiln_warp_online({}, {});", m, s));
  remember_row_value(max, let(t, m), max_at);
  remember_row_value(sum, let(t, fmt::format("kiln_online_sum({}, {})", m, s)), sum_at);
  return Status::Ok();
}

// ---- scatter_add: the base copied, then the updates added in order ------------------------

Status KernelWriter::scatter_kernel(Launch& launch) {
  const Node* scatter = nullptr;
  for (int i : step_.nodes)
    if (g_.nodes[i].op == Op::ScatterAdd) scatter = &g_.nodes[i];
  if (!scatter) return make_error(fmt::format("cuda codegen: step {} has no scatter_add", step_.name));
  ValueId out = scatter->result, base = scatter->operands[0], indices = scatter->operands[1], updates = scatter->operands[2];
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

}  // namespace

Result<ProgramSource> emit_kernels(const ir::Graph& g, std::string_view symbol_prefix) {
  if (!g.program) return make_error("cuda codegen: the graph has no program; run fusion first");
  ProgramSource program;
  for (const ir::Step& step : g.program->steps) {
    if (step.kind == ir::StepKind::Library) {
      program.launches.push_back({});
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Launch launch, KernelWriter(g, step, std::string(symbol_prefix) + step.name).write(program.kernels));
    program.launches.push_back(launch);
  }
  return program;
}

Result<ProgramSource> emit_program(const ir::Graph& g) {
  KILN_ASSIGN_OR_RETURN(ProgramSource program, emit_kernels(g));
  program.kernels = std::string(prelude()) + "\n" + program.kernels;
  return program;
}

}  // namespace kiln::codegen::cuda
