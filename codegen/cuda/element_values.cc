#include <fmt/format.h>
#include <algorithm>
#include <bit>

#include "codegen/cuda/kernel_emitter_class.h"
#include "ir/shape_inference.h"

namespace kiln::codegen::cuda::detail {

std::string KernelEmitter::unflatten_dim(const std::string& flat, int64_t stride, int64_t extent, bool outermost) {
  if (extent == 1) {
    outer_quotient_ = {};
    return "0";
  }
  const std::string q = index_let(stride == 1 ? flat : fmt::format("{} / {}LL", flat, stride));
  std::string index = q;
  // A dim inside another takes the outer dim's quotient, just computed in the same block:
  // a product and a difference where a remainder was a second 64-bit division. NVRTC 13.0
  // crashed on a remainder beside the same quotient (a [2, 6, 48] sum over its first two
  // axes: tests/lit/cli/cuda_index_remainders.test).
  if (!outermost && outer_quotient_.flat == flat && outer_quotient_.stride == stride * extent)
    index = index_let(fmt::format("{} - {} * {}LL", q, outer_quotient_.name, extent));
  else if (!outermost) index = index_let(fmt::format("({}) % {}LL", q, extent));
  outer_quotient_ = {flat, stride, q};
  unflattened_[index] = {flat, stride, extent, outermost};
  return index;
}

std::string KernelEmitter::affine(const std::string& i, int64_t start, int64_t step) {
  return index_let(add(start ? fmt::format("{}LL", start) : "0", mul(i, step)));
}

std::string KernelEmitter::clamp_index(const std::string& j, int64_t extent) {
  std::string raw = index_let(fmt::format("(long long){}", j));
  std::string wrapped = index_let(fmt::format("{0} < 0 ? {0} + {1}LL : {0}", raw, extent));
  return index_let(fmt::format("{0} < 0 ? 0LL : {0} >= {1}LL ? {2}LL : {0}", wrapped, extent, extent - 1));
}

std::optional<std::string> KernelEmitter::special_value(ValueId v, const ElementWalker::Key& key) {
  if (auto cached = row_cache_.find(v);
      cached != row_cache_.end() && !item_.empty() && key == key_of(canonical(v, item_index_)))
    return fmt::format("{}[{}]", cached->second, item_);
  if (auto lane = lane_loads_.find(v); lane != lane_loads_.end() && key == lane_key_)
    return let(compute_type(type(v).dtype), from_storage(type(v).dtype, fmt::format("{}.v[{}]", lane->second, lane_)));
  return std::nullopt;
}

std::string KernelEmitter::load(ValueId v, const std::string& flat) {
  return let(compute_type(type(v).dtype), from_storage(type(v).dtype, fmt::format("{}[{}]", param(v), flat)));
}

Result<std::string> KernelEmitter::elementwise(const Node& n, std::span<const std::string> operands,
                                               std::span<const DType> dtypes) {
  DType result = type(n.result).dtype;
  KILN_ASSIGN_OR_RETURN(std::string e, cuda::elementwise(n.op, n.attrs, operands, dtypes, result));
  return let(compute_type(result), e);
}

Result<std::string> KernelEmitter::iota(const std::string& index, DType dtype) {
  KILN_ASSIGN_OR_RETURN(std::string e,
                        cuda::elementwise(Op::Cast, attrs_to(dtype), {&index, 1}, {std::array{DType::I64}}, dtype));
  return let(compute_type(dtype), e);
}

std::string KernelEmitter::scalar_constant(DType dtype, double value, int64_t int_value) const {
  return constant(dtype, value, int_value);
}

std::string KernelEmitter::dense_constant(const ir::Literal& literal, DType dtype, const std::string& flat) {
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
  // An empty constant (a shape with a 0) is never read, but C++ has no arrays of none.
  const size_t size = std::max<size_t>(1, literal.floats.size());
  if (literal.floats.empty()) elements = "0";
  globals_ += fmt::format("__device__ const {} {}[{}] = {{{}}};\n", element_type, name, size, elements);
  return let(compute_type(dtype), fmt::format(fmt::runtime(read), name, flat));
}

Result<std::string> KernelEmitter::concat(const Node& n, const Index& out) {
  int64_t axis = *ir::normalize_axis(n.attrs.get_int("axis"), type(n.result).rank());
  const std::string& at = out.dims[static_cast<size_t>(axis)];
  std::string result = fmt::format("v{}", next_++);
  line(fmt::format("{} {};", compute_type(type(n.result).dtype), result));
  int64_t offset = 0;
  for (size_t k = 0; k < n.operands.size(); ++k) {
    ValueId x = n.operands[k];
    int64_t extent = type(x).shape[static_cast<size_t>(axis)];
    bool last = k + 1 == n.operands.size();
    open(k == 0 ? fmt::format("if ({} < {}LL)", at, offset + extent)
         : last ? "else"
                : fmt::format("else if ({} < {}LL)", at, offset + extent));
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

}  // namespace kiln::codegen::cuda::detail
