#include "ir/value_range.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

#include "ir/shape_inference.h"

namespace kiln::ir {
namespace {

// Beyond this magnitude a product or sum could overflow int64_t: no range.
constexpr int64_t kLimit = int64_t{1} << 40;
// Producers visited at most, so that a chain of values each summed with itself cannot
// make the walk exponential.
constexpr int kMaxVisits = 256;

// [lo, hi] where the type holds it; nullopt where its arithmetic could have wrapped.
std::optional<IntegerRange> checked(DType type, __int128 lo, __int128 hi) {
  __int128 least = -kLimit, most = kLimit;
  switch (type) {
    case DType::I64: break;
    case DType::I32: least = INT32_MIN, most = INT32_MAX; break;
    case DType::I8: least = INT8_MIN, most = INT8_MAX; break;
    case DType::U8: least = 0, most = UINT8_MAX; break;
    default: return std::nullopt;
  }
  if (lo < least || hi > most) return std::nullopt;
  return IntegerRange{static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}

std::optional<IntegerRange> range_of(const Graph& g, const std::vector<int>& producers, ValueId v, int& visits) {
  const TensorType& t = g.type(v);
  if (is_float(t.dtype) || t.dtype == DType::Bool || ++visits > kMaxVisits || producers[v] < 0) return std::nullopt;
  const Node& n = g.nodes[static_cast<size_t>(producers[v])];
  auto operand = [&](size_t k) { return range_of(g, producers, n.operands[k], visits); };
  switch (n.op) {
    case Op::Iota: {
      const int64_t axis = *normalize_axis(n.attrs.get_int("axis"), t.rank());
      return checked(t.dtype, 0, std::max<int64_t>(t.shape[static_cast<size_t>(axis)] - 1, 0));
    }
    case Op::Constant: {
      const Literal& lit = n.attrs.get_literal("value");
      if (lit.floats.empty()) return std::nullopt;
      int64_t lo = kLimit, hi = -kLimit;
      for (size_t k = 0; k < lit.floats.size(); ++k) {
        const double x = lit.integral ? static_cast<double>(lit.ints[k]) : lit.floats[k];
        if (!(std::abs(x) <= static_cast<double>(kLimit)) || x != std::floor(x)) return std::nullopt;
        lo = std::min(lo, static_cast<int64_t>(x));
        hi = std::max(hi, static_cast<int64_t>(x));
      }
      return checked(t.dtype, lo, hi);
    }
    case Op::Add:
    case Op::Sub:
    case Op::Mul: {
      auto a = operand(0), b = operand(1);
      if (!a || !b) return std::nullopt;
      using Wide = __int128;
      if (n.op == Op::Add) return checked(t.dtype, Wide{a->min} + b->min, Wide{a->max} + b->max);
      if (n.op == Op::Sub) return checked(t.dtype, Wide{a->min} - b->max, Wide{a->max} - b->min);
      const Wide p[] = {Wide{a->min} * b->min, Wide{a->min} * b->max, Wide{a->max} * b->min, Wide{a->max} * b->max};
      return checked(t.dtype, *std::min_element(std::begin(p), std::end(p)),
                     *std::max_element(std::begin(p), std::end(p)));
    }
    case Op::Reshape:
    case Op::Broadcast:
    case Op::Transpose:
    case Op::Slice: return operand(0);
    case Op::Concat: {
      std::optional<IntegerRange> all;
      for (size_t k = 0; k < n.operands.size(); ++k) {
        auto r = operand(k);
        if (!r) return std::nullopt;
        all = all ? IntegerRange{std::min(all->min, r->min), std::max(all->max, r->max)} : *r;
      }
      return all;
    }
    default: return std::nullopt;
  }
}

}  // namespace

std::optional<IntegerRange> integer_range(const Graph& g, const std::vector<int>& producers, ValueId v) {
  int visits = 0;
  return range_of(g, producers, v, visits);
}

}  // namespace kiln::ir
