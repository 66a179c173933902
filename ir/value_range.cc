#include "ir/value_range.h"

#include <algorithm>
#include <cmath>

#include "ir/shape_inference.h"

namespace kiln::ir {
namespace {

// Beyond this magnitude a product or sum could overflow int64_t: no range.
constexpr int64_t kLimit = int64_t{1} << 40;

std::optional<IntegerRange> checked(__int128 lo, __int128 hi) {
  if (lo < -kLimit || hi > kLimit) return std::nullopt;
  return IntegerRange{static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}

std::optional<IntegerRange> range_of(const Graph& g, const std::vector<int>& producers, ValueId v, int depth) {
  const TensorType& t = g.type(v);
  if (is_float(t.dtype) || t.dtype == DType::Bool || depth > 32 || producers[v] < 0) return std::nullopt;
  const Node& n = g.nodes[static_cast<size_t>(producers[v])];
  auto operand = [&](size_t k) { return range_of(g, producers, n.operands[k], depth + 1); };
  switch (n.op) {
    case Op::Iota: {
      const int64_t axis = *normalize_axis(n.attrs.get_int("axis"), t.rank());
      return IntegerRange{0, std::max<int64_t>(t.shape[static_cast<size_t>(axis)] - 1, 0)};
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
      return IntegerRange{lo, hi};
    }
    case Op::Add:
    case Op::Sub:
    case Op::Mul: {
      auto a = operand(0), b = operand(1);
      if (!a || !b) return std::nullopt;
      using Wide = __int128;
      if (n.op == Op::Add) return checked(Wide{a->min} + b->min, Wide{a->max} + b->max);
      if (n.op == Op::Sub) return checked(Wide{a->min} - b->max, Wide{a->max} - b->min);
      const Wide p[] = {Wide{a->min} * b->min, Wide{a->min} * b->max, Wide{a->max} * b->min, Wide{a->max} * b->max};
      return checked(*std::min_element(std::begin(p), std::end(p)), *std::max_element(std::begin(p), std::end(p)));
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
  return range_of(g, producers, v, 0);
}

}  // namespace kiln::ir
