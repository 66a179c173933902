// The emitter of one kernel step's CUDA C++. Internal to codegen/cuda: its methods are
// defined in kernel_emitter.cc (loop and scatter kernels), element_values.cc (a value at
// an index), row_kernels.cc (reductions over rows) and split_sums.cc (reductions split
// into parts, ir/reduction_split.h).
#pragma once

#include <fmt/format.h>
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "codegen/cuda/kernel_emitter.h"
#include "codegen/cuda/scalar_ops.h"
#include "ir/element_walker.h"
#include "ir/graph.h"
#include "ir/reduction_split.h"
#include "ir/row_class.h"

namespace kiln::codegen::cuda::detail {

using ir::DType;
using ir::Node;
using ir::Op;
using ir::OpKind;
using ir::Shape;
using ir::ValueId;

class KernelEmitter;
using ElementWalker = ir::ElementWalker<KernelEmitter, std::string>;
// An index into a value, as C++ expressions (ir/element_walker.h).
using Index = ir::ElementIndex<std::string>;

inline std::string mul(const std::string& a, int64_t c) {
  return c == 1 ? a : a == "0" ? "0" : fmt::format("{} * {}LL", a, c);
}
inline std::string add(const std::string& a, const std::string& b) {
  return a == "0" ? b : b == "0" ? a : a + " + " + b;
}

inline constexpr int kLoopThreads = 256;
inline constexpr int kWarpRowMax = 1024;  // rows up to this long get one warp each
inline constexpr int kWarpItems = 32;     // elements per lane kept in registers, warp rows
inline constexpr int kBlockItems = 16;    // elements per thread kept in registers, block rows
// ... where the step reads one input of the row's shape (softmax, layer_norm): a row of
// 32768 then fits a block of 1024 without spills (docs/cuda.md); more inputs would spill.
inline constexpr int kBlockItemsOneInput = 32;
// Bytes of each row a thread of a block row loads, at its narrowest full-shape input (16
// f32 or 32 bf16 elements, within the items limits above): measured against 8 elements and
// against 32 f32 ones on an H200 (docs/benchmarks.md).
inline constexpr int kBlockRowBytesPerThread = 64;
inline constexpr int kOnlineChunk = 8;  // elements per thread per step of a long row's online softmax

// Emits one kernel step (a loop, row or scatter kernel) as CUDA C++. Its values element
// by element come from the element walker it derives from, over C++ expressions.
class KernelEmitter : public ElementWalker {
 public:
  // `partial`: the first kernel of a split reduction step (symbol + "_partial").
  KernelEmitter(const ir::Graph& g, const ir::Step& step, std::string symbol, bool partial = false)
      : ElementWalker(g, step),
        symbol_(partial ? symbol + "_partial" : std::move(symbol)),
        split_(step.kind == ir::StepKind::Reduction ? ir::reduction_split(g, step, ir::kCudaSplit) : std::nullopt),
        partial_(partial) {}

  // Appends the kernel (and any constant arrays it reads) to `out`.
  Result<Launch> write(std::string& out) {
    Launch launch;
    const Node* transpose = tiled_transpose();
    Status body = transpose                          ? transpose_kernel(*transpose, launch)
                  : step_.kind == ir::StepKind::Loop ? loop_kernel(launch)
                  : step_.kind == ir::StepKind::Reduction
                      ? (partial_ ? partial_kernel(launch) : reduction_kernel(launch))
                      : scatter_kernel(launch);
    KILN_RETURN_IF_ERROR(body);
    out += globals_;
    out += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n", launch.block_threads, symbol_,
                       parameters());
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
    if (split_) s += ", double* __restrict__ parts_scratch";
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
    outer_quotient_ = {};  // it may name a quotient declared in the block just closed
  }
  // A named constant for a non-trivial expression.
  std::string let(std::string_view type, const std::string& expr) {
    bool simple = !expr.empty() && std::all_of(expr.begin(), expr.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
    if (simple) return expr;
    std::string name = fmt::format("v{}", next_++);
    line(fmt::format("const {} {} = {};", type, name, expr));
    return name;
  }
  std::string index_let(const std::string& expr) { return let("long long", expr); }

  // ---- the element walker's arithmetic, over C++ expressions (element_values.cc)

  std::string index_constant(int64_t c) const { return std::to_string(c); }
  std::string index_add(const std::string& a, const std::string& b) const { return add(a, b); }
  std::string index_mul(const std::string& a, int64_t c) const { return mul(a, c); }
  std::string index_finish(const std::string& flat) { return index_let(flat); }
  std::string unflatten_dim(const std::string& flat, int64_t stride, int64_t extent, bool outermost);
  // The quotient flat / stride the last unflatten_dim computed (the walker unflattens a
  // shape's dims outermost first, each right after the one outside it).
  struct Quotient {
    std::string flat;
    int64_t stride = 0;
    std::string name;
  };
  Quotient outer_quotient_;
  // How each dim index unflatten_dim named came from its flat index (for flat_of's runs).
  std::map<std::string, ir::Unflattened<std::string>> unflattened_;
  std::optional<ir::Unflattened<std::string>> unflattened(const std::string& dim) const {
    auto it = unflattened_.find(dim);
    return it == unflattened_.end() ? std::nullopt : std::optional(it->second);
  }
  std::string affine(const std::string& i, int64_t start, int64_t step);
  std::string clamp_index(const std::string& j, int64_t extent);
  // Row kernels keep some values in per-thread arrays; vector loop kernels load each input
  // of the iteration shape as one vector per lane group.
  std::optional<std::string> special_value(ValueId v, const ElementWalker::Key& key);
  std::string load(ValueId v, const std::string& flat);
  Result<std::string> elementwise(const Node& n, std::span<const std::string> operands, std::span<const DType> dtypes);
  Result<std::string> iota(const std::string& index, DType dtype);
  std::string scalar_constant(DType dtype, double value, int64_t int_value) const;
  std::string dense_constant(const ir::Literal& literal, DType dtype, const std::string& flat);
  // Picks the operand whose range along the axis holds the index; no other operand is read.
  Result<std::string> concat(const Node& n, const Index& out);
  std::string_view codegen_name() const { return "cuda codegen"; }

  static ir::Attrs attrs_to(DType to) {
    ir::Attrs a;
    a.set("to", to);
    return a;
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
      line(
          fmt::format("{}[{}] = {};", param(outs[k]), flat_of(shape, idx), to_storage(type(outs[k]).dtype, values[k])));
    return Status::Ok();
  }

  Status loop_kernel(Launch& launch);
  // A loop step that is one transpose of an input moving its innermost dim, or null; and
  // its kernel, tiled through shared memory (transpose_kernel.cc).
  const Node* tiled_transpose() const;
  Status transpose_kernel(const Node& n, Launch& launch);
  Status reduction_kernel(Launch& launch);
  Status reduce(const Node& n, const ir::RowClass& rc, const std::function<Index(const std::string&)>& full_index,
                const Index& at);
  int online_sum_of(const Node& max, const ir::RowClass& rc) const;
  // The full-shape values under reduction operand x, computed in this step by a costly op
  // (exp, log, div, tanh, ...), that other nodes of the step read too: kept in registers.
  std::vector<ValueId> costly_shared_values(ValueId x, const ir::RowClass& rc) const;
  Status online_softmax(const Node& max, const Node& sum, const std::function<Index(const std::string&)>& full_index,
                        const Index& max_at, const Index& sum_at);
  // Records a row reduction's result (an expression of its result type) for the row at `at`.
  void remember_row_value(const Node& n, const std::string& result, const Index& at);
  // Emits a loop over a row's elements (`body` gets the element's position j).
  Status row_loop(const std::function<Status(const std::string&)>& body);
  // Rows in registers along contiguous rows: elements per vector a thread loads and stores
  // (1: none; `limit`: the most elements a thread may keep), the elements a thread keeps
  // taking `lanes` at a time, whether the last pass over a row is partial, and the loop
  // over a thread's vectors (`body` gets the first one's position).
  int row_vector_lanes(const ir::RowClass& rc, const std::vector<ValueId>& vectors, int limit) const;
  int64_t row_items(int lanes) const;
  bool row_has_tail() const;
  Status row_vector_loop(const std::function<Status(const std::string&)>& body);
  Status load_rows(const std::vector<ValueId>& loaded, const std::function<Index(const std::string&)>& full_index);
  Status store_rows(const std::vector<ValueId>& outputs, const ir::RowClass& rc,
                    const std::function<Index(const std::string&)>& full_index);
  Status scatter_kernel(Launch& launch);
  // A split step's first kernel: each part's sum into parts_scratch.
  Status partial_kernel(Launch& launch);
  // A split step's kernel: the sum of row `r` (at `at`) added from its parts.
  Status sum_parts(const Node& n, const ir::RowClass& rc, const Index& at);

  const std::string symbol_;
  const std::optional<ir::ReductionSplit> split_;
  const bool partial_;
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
  // Row kernels: threads per row, elements per thread in registers (0: not kept), elements
  // per vector load (1: scalar loads), row length.
  int row_threads_ = 0, items_ = 0, row_lanes_ = 1;
  int64_t row_length_ = 0;
};

}  // namespace kiln::codegen::cuda::detail
