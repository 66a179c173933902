// The Reduce family, ArgMax and ArgMin.
#include <limits>

#include <fmt/format.h>

#include "frontends/onnx/ops.h"

namespace kiln::onnx_import {

namespace {

using ir::Op;

// What a Reduce op applies before and after its sum (or max, or min).
enum class Pre { None, Square, Abs, ExpShifted };
enum class Post { None, Mean, Sqrt, Log };

struct Reduction {
  Op op;
  int64_t axes_input_from;  // the opset that made axes an input
  Pre pre = Pre::None;
  Post post = Post::None;
};

// Axes as an attribute until `axes_input_from`, an input after; no axes reduce everything,
// unless noop_with_empty_axes.
Status convert_reduce(Context& ctx, const onnx::NodeProto& node, const Reduction& how) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axes", "keepdims", "noop_with_empty_axes"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType t = ctx.type_of(x);
  KILN_ASSIGN_OR_RETURN(int64_t keepdims, int_attribute(node, "keepdims", 1));
  KILN_ASSIGN_OR_RETURN(int64_t noop, int_attribute(node, "noop_with_empty_axes", 0));
  KILN_ASSIGN_OR_RETURN(auto given, axes_of(ctx, node, how.axes_input_from));
  std::vector<int64_t> axes;
  if (given && !given->empty()) {
    for (int64_t a : *given) {
      KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(node, a, t.rank()));
      axes.push_back(axis);
    }
  } else if (noop && how.pre == Pre::None && how.post == Post::None) {
    return define_output(ctx, node, 0, x);
  } else if (!noop) {
    for (int64_t d = 0; d < t.rank(); ++d) axes.push_back(d);
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  auto reduce = [&](Op op, const Value& v, bool keep) {
    ir::Attrs attrs;
    attrs.set("axes", axes);
    attrs.set("keepdims", keep);
    return ctx.apply(node, op, {v}, std::move(attrs));
  };
  Value in = x, shift;
  switch (how.pre) {
    case Pre::None: break;
    case Pre::Square: {
      KILN_ASSIGN_OR_RETURN(in, ctx.apply(node, Op::Mul, {x, x}));
      break;
    }
    case Pre::Abs: {
      KILN_ASSIGN_OR_RETURN(in, ctx.apply(node, Op::Abs, {x}));
      break;
    }
    case Pre::ExpShifted: {  // exp(x - max), so the sum cannot overflow
      KILN_ASSIGN_OR_RETURN(shift, reduce(Op::ReduceMax, x, true));
      KILN_ASSIGN_OR_RETURN(Value wide, ctx.broadcast_to(node, shift, t.shape));
      KILN_ASSIGN_OR_RETURN(Value d, ctx.apply(node, Op::Sub, {x, wide}));
      KILN_ASSIGN_OR_RETURN(in, ctx.apply(node, Op::Exp, {d}));
      break;
    }
  }
  // A mean of f16 or bf16 sums in f32 and rounds once (wide_type): 8 elements of 10^4
  // have a mean in f16's range but not a sum.
  if (how.post == Post::Mean) {
    KILN_ASSIGN_OR_RETURN(in, widened(ctx, node, in));
  }
  KILN_ASSIGN_OR_RETURN(Value r, reduce(how.op, in, keepdims != 0));
  switch (how.post) {
    case Post::None: break;
    case Post::Mean: {
      int64_t count = 1;
      for (int64_t a : axes) count *= t.shape[static_cast<size_t>(a)];
      KILN_ASSIGN_OR_RETURN(r, binary(ctx, node, Op::Div, r, scalar(static_cast<double>(count), ctx.type_of(r).dtype)));
      KILN_ASSIGN_OR_RETURN(r, cast(ctx, node, r, t.dtype));
      break;
    }
    case Post::Sqrt: {
      KILN_ASSIGN_OR_RETURN(r, ctx.apply(node, Op::Sqrt, {r}));
      break;
    }
    case Post::Log: {
      KILN_ASSIGN_OR_RETURN(r, ctx.apply(node, Op::Log, {r}));
      break;
    }
  }
  if (how.pre == Pre::ExpShifted) {
    KILN_ASSIGN_OR_RETURN(Value s, reshaped(ctx, node, shift, ctx.type_of(r).shape));
    KILN_ASSIGN_OR_RETURN(r, ctx.apply(node, Op::Add, {r, s}));
  }
  return define_output(ctx, node, 0, r);
}

// ReduceProd: kiln has no product reduction; each axis's slices are multiplied in turn.
Status convert_reduce_prod(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axes", "keepdims", "noop_with_empty_axes"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType t = ctx.type_of(x);
  KILN_ASSIGN_OR_RETURN(int64_t keepdims, int_attribute(node, "keepdims", 1));
  KILN_ASSIGN_OR_RETURN(int64_t noop, int_attribute(node, "noop_with_empty_axes", 0));
  KILN_ASSIGN_OR_RETURN(auto given, axes_of(ctx, node, 18));
  std::vector<int64_t> axes;
  if (given && !given->empty()) {
    for (int64_t a : *given) {
      KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(node, a, t.rank()));
      axes.push_back(axis);
    }
  } else if (noop) {
    return define_output(ctx, node, 0, x);
  } else {
    for (int64_t d = 0; d < t.rank(); ++d) axes.push_back(d);
  }
  Value r = x;
  ir::Shape kept = t.shape;
  for (int64_t axis : axes) {
    const int64_t n = kept[static_cast<size_t>(axis)];
    if (n > 256) return node_error(node, fmt::format("ReduceProd over {} elements is not supported (at most 256)", n));
    ir::Shape one = kept;
    one[static_cast<size_t>(axis)] = 1;
    Value product;
    if (n == 0) {
      KILN_ASSIGN_OR_RETURN(product, ctx.broadcast_to(node, scalar(1.0, t.dtype), one));
    }
    for (int64_t i = 0; i < n; ++i) {
      KILN_ASSIGN_OR_RETURN(Value part, slice_axis(ctx, node, r, axis, i, i + 1));
      if (i == 0) {
        product = part;
      } else {
        KILN_ASSIGN_OR_RETURN(product, ctx.apply(node, Op::Mul, {product, part}));
      }
    }
    r = product;
    kept = one;
  }
  if (!keepdims) {
    ir::Shape dropped;
    for (size_t d = 0; d < kept.size(); ++d)
      if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) == axes.end()) dropped.push_back(kept[d]);
    KILN_ASSIGN_OR_RETURN(r, reshaped(ctx, node, r, dropped));
  }
  return define_output(ctx, node, 0, r);
}

template <Op op, int64_t from, Pre pre, Post post>
Status convert(Context& ctx, const onnx::NodeProto& node) {
  return convert_reduce(ctx, node, {op, from, pre, post});
}

// ArgMax, and ArgMin as the ArgMax of the negation: the first index among equals, or with
// select_last_index the last (the ArgMax of the input reversed along the axis, counted
// back).
template <bool min>
Status convert_arg(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axis", "keepdims", "select_last_index"}));
  KILN_ASSIGN_OR_RETURN(int64_t last, int_attribute(node, "select_last_index", 0));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType t = ctx.type_of(x);
  KILN_ASSIGN_OR_RETURN(int64_t axis, int_attribute(node, "axis", 0));
  KILN_ASSIGN_OR_RETURN(axis, normalize_axis(node, axis, t.rank()));
  KILN_ASSIGN_OR_RETURN(int64_t keepdims, int_attribute(node, "keepdims", 1));
  const int64_t n = t.shape[static_cast<size_t>(axis)];
  if (min) {
    KILN_ASSIGN_OR_RETURN(x, ctx.apply(node, Op::Neg, {x}));
  }
  if (last) {
    std::vector<int64_t> reversed(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) reversed[static_cast<size_t>(i)] = n - 1 - i;
    ir::Attrs gather;
    gather.set("axis", axis);
    KILN_ASSIGN_OR_RETURN(
        x, ctx.apply(node, Op::Gather,
                     {x, Value{std::nullopt, ir::Tensor::from_ints({ir::DType::I64, {n}}, reversed), false, ""}},
                     std::move(gather)));
  }
  ir::Attrs attrs;
  attrs.set("axis", axis);
  KILN_ASSIGN_OR_RETURN(Value r, ctx.apply(node, Op::Argmax, {x}, std::move(attrs)));  // i64, as ONNX's
  if (last) {
    KILN_ASSIGN_OR_RETURN(r, binary(ctx, node, Op::Sub, scalar(static_cast<double>(n - 1), ir::DType::I64), r));
  }
  if (keepdims) {
    ir::Shape shape = t.shape;
    shape[static_cast<size_t>(axis)] = 1;
    KILN_ASSIGN_OR_RETURN(r, reshaped(ctx, node, r, shape));
  }
  return define_output(ctx, node, 0, r);
}

// TopK orders elements as ONNX sorts them: largest first (smallest: as the largest of the
// negation), among equals the lower index first; a NaN counts as larger than any number, so
// first when largest and last when smallest, as onnxruntime and PyTorch order it (ONNX
// leaves it open). Each element has a class (NaN above or below the numbers), then a value.
struct TopKOperands {
  Value x, v, nan, classes;  // v: x or its negation; classes f32: 1 numbers, 2 or 0 NaN
  ir::TensorType type;
  int64_t axis = 0, k = 0;
};

// k rounds that each take one element not taken yet: a round takes the best class's largest
// value and the first element that holds it. Taken elements are out by the mask, never by
// a value, so a row of infinities gives each of its indices once.
Result<std::pair<Value, Value>> top_k_in_rounds(Context& ctx, const onnx::NodeProto& node, TopKOperands o) {
  const ir::TensorType& t = o.type;
  const int64_t axis = o.axis;
  auto full = [&](double value, ir::DType dtype) { return ctx.broadcast_to(node, scalar(value, dtype), t.shape); };
  auto along_axis = [&](Op op, const Value& of) -> Result<Value> {
    ir::Attrs attrs;
    attrs.set("axes", std::vector<int64_t>{axis});
    attrs.set("keepdims", true);
    KILN_ASSIGN_OR_RETURN(Value r, ctx.apply(node, op, {of}, std::move(attrs)));
    return ctx.broadcast_to(node, r, t.shape);
  };
  ir::Attrs over;
  over.set("axis", axis);
  KILN_ASSIGN_OR_RETURN(Value positions, iota(ctx, node, t.shape, axis, ir::DType::I64));
  KILN_ASSIGN_OR_RETURN(Value taken_class, full(-1, ir::DType::F32));
  KILN_ASSIGN_OR_RETURN(Value lowest, full(-std::numeric_limits<double>::infinity(), t.dtype));
  KILN_ASSIGN_OR_RETURN(Value one, full(1, ir::DType::F32));
  KILN_ASSIGN_OR_RETURN(Value zero, full(0, ir::DType::F32));
  ir::Shape one_along = t.shape;
  one_along[static_cast<size_t>(axis)] = 1;
  std::vector<Value> values, indices;
  Value classes = o.classes;
  for (int64_t i = 0; i < o.k; ++i) {
    KILN_ASSIGN_OR_RETURN(Value best_class, along_axis(Op::ReduceMax, classes));
    KILN_ASSIGN_OR_RETURN(Value in_class, ctx.apply(node, Op::Eq, {classes, best_class}));
    KILN_ASSIGN_OR_RETURN(Value numbers, ctx.apply(node, Op::Select, {in_class, o.v, lowest}));
    KILN_ASSIGN_OR_RETURN(Value numbers_only, ctx.apply(node, Op::Select, {o.nan, lowest, numbers}));
    KILN_ASSIGN_OR_RETURN(Value best, along_axis(Op::ReduceMax, numbers_only));
    KILN_ASSIGN_OR_RETURN(Value equal, ctx.apply(node, Op::Eq, {o.v, best}));
    // In a NaN class every element is NaN and a candidate; in the numbers' those equal to
    // the best.
    KILN_ASSIGN_OR_RETURN(Value matches, ctx.apply(node, Op::Select, {equal, one, zero}));
    KILN_ASSIGN_OR_RETURN(Value matches_or_nan, ctx.apply(node, Op::Select, {o.nan, one, matches}));
    KILN_ASSIGN_OR_RETURN(Value candidates, ctx.apply(node, Op::Select, {in_class, matches_or_nan, zero}));
    KILN_ASSIGN_OR_RETURN(Value first, ctx.apply(node, Op::Argmax, {candidates}, over));
    KILN_ASSIGN_OR_RETURN(Value first_along, reshaped(ctx, node, first, one_along));
    KILN_ASSIGN_OR_RETURN(Value first_wide, ctx.broadcast_to(node, first_along, t.shape));
    KILN_ASSIGN_OR_RETURN(Value hit, ctx.apply(node, Op::Eq, {positions, first_wide}));
    // The one element hit, the rest -inf: its maximum is that element (NaN and -0 too).
    KILN_ASSIGN_OR_RETURN(Value picked, ctx.apply(node, Op::Select, {hit, o.x, lowest}));
    ir::Attrs max;
    max.set("axes", std::vector<int64_t>{axis});
    max.set("keepdims", true);
    KILN_ASSIGN_OR_RETURN(Value value, ctx.apply(node, Op::ReduceMax, {picked}, std::move(max)));
    values.push_back(value);
    indices.push_back(first_along);
    KILN_ASSIGN_OR_RETURN(classes, ctx.apply(node, Op::Select, {hit, taken_class, classes}));
  }
  ir::Attrs cat;
  cat.set("axis", axis);
  KILN_ASSIGN_OR_RETURN(Value all_values,
                        values.size() == 1 ? Result<Value>(values[0]) : ctx.apply(node, Op::Concat, values, cat));
  KILN_ASSIGN_OR_RETURN(Value all_indices,
                        indices.size() == 1 ? Result<Value>(indices[0]) : ctx.apply(node, Op::Concat, indices, cat));
  return std::pair{all_values, all_indices};
}

// By rank, a graph of the same size for any k: element i's rank is how many elements go
// before it (a better class; the same class and a larger value; or equal and a lower
// index), summed over the pairs [.., i, j, ..] in one reduction; output r is the element of
// rank r. The pairs cost n^2 per row, which bounds n.
Result<std::pair<Value, Value>> top_k_by_rank(Context& ctx, const onnx::NodeProto& node, TopKOperands o) {
  const ir::TensorType& t = o.type;
  const int64_t axis = o.axis;
  const auto a = static_cast<size_t>(axis);
  auto with_dim = [&](size_t at, int64_t extent, const ir::Shape& shape) {
    ir::Shape s = shape;
    s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), extent);
    return s;
  };
  const ir::Shape as_i = with_dim(a + 1, 1, t.shape), as_j = with_dim(a, 1, t.shape);
  const ir::Shape pairs = with_dim(a + 1, t.shape[a], t.shape);
  // NaN's value is out of the comparison: its class tells it apart, and equal NaN go by index.
  KILN_ASSIGN_OR_RETURN(Value zeros, ctx.broadcast_to(node, scalar(0, t.dtype), t.shape));
  KILN_ASSIGN_OR_RETURN(Value v, ctx.apply(node, Op::Select, {o.nan, zeros, o.v}));
  KILN_ASSIGN_OR_RETURN(Value vi, reshaped(ctx, node, v, as_i));
  KILN_ASSIGN_OR_RETURN(Value vj, reshaped(ctx, node, v, as_j));
  KILN_ASSIGN_OR_RETURN(Value ci, reshaped(ctx, node, o.classes, as_i));
  KILN_ASSIGN_OR_RETURN(Value cj, reshaped(ctx, node, o.classes, as_j));
  KILN_ASSIGN_OR_RETURN(Value pi, iota(ctx, node, pairs, axis, ir::DType::I64));
  KILN_ASSIGN_OR_RETURN(Value pj, iota(ctx, node, pairs, axis + 1, ir::DType::I64));
  KILN_ASSIGN_OR_RETURN(Value better_class, binary(ctx, node, Op::Gt, cj, ci));
  KILN_ASSIGN_OR_RETURN(Value same_class, binary(ctx, node, Op::Eq, cj, ci));
  KILN_ASSIGN_OR_RETURN(Value larger, binary(ctx, node, Op::Gt, vj, vi));
  KILN_ASSIGN_OR_RETURN(Value equal, binary(ctx, node, Op::Eq, vj, vi));
  KILN_ASSIGN_OR_RETURN(Value lower_index, ctx.apply(node, Op::Lt, {pj, pi}));
  KILN_ASSIGN_OR_RETURN(Value tie_first, binary(ctx, node, Op::And, equal, lower_index));
  KILN_ASSIGN_OR_RETURN(Value by_value, binary(ctx, node, Op::Or, larger, tie_first));
  KILN_ASSIGN_OR_RETURN(Value in_class_first, binary(ctx, node, Op::And, same_class, by_value));
  KILN_ASSIGN_OR_RETURN(Value before, binary(ctx, node, Op::Or, better_class, in_class_first));
  KILN_ASSIGN_OR_RETURN(Value one, ctx.broadcast_to(node, scalar(1, ir::DType::F32), pairs));
  KILN_ASSIGN_OR_RETURN(Value zero, ctx.broadcast_to(node, scalar(0, ir::DType::F32), pairs));
  KILN_ASSIGN_OR_RETURN(Value counted, ctx.apply(node, Op::Select, {before, one, zero}));
  ir::Attrs sum;
  sum.set("axes", std::vector<int64_t>{axis + 1});
  sum.set("keepdims", false);
  KILN_ASSIGN_OR_RETURN(Value rank, ctx.apply(node, Op::ReduceSum, {counted}, std::move(sum)));  // exact in f32
  // [.., r, j, ..]: where element j has rank r.
  ir::Shape out_shape = t.shape;
  out_shape[a] = o.k;
  const ir::Shape ranked = with_dim(a + 1, t.shape[a], out_shape);
  KILN_ASSIGN_OR_RETURN(Value rank_j, reshaped(ctx, node, rank, as_j));
  KILN_ASSIGN_OR_RETURN(Value r, iota(ctx, node, with_dim(a + 1, 1, out_shape), axis, ir::DType::F32));
  KILN_ASSIGN_OR_RETURN(Value hit, binary(ctx, node, Op::Eq, rank_j, r));
  KILN_ASSIGN_OR_RETURN(Value x_j, reshaped(ctx, node, o.x, as_j));
  KILN_ASSIGN_OR_RETURN(Value x_wide, ctx.broadcast_to(node, x_j, ranked));
  KILN_ASSIGN_OR_RETURN(Value lowest,
                        ctx.broadcast_to(node, scalar(-std::numeric_limits<double>::infinity(), t.dtype), ranked));
  // The one element hit, the rest -inf: its maximum is that element (NaN and -0 too).
  KILN_ASSIGN_OR_RETURN(Value picked, ctx.apply(node, Op::Select, {hit, x_wide, lowest}));
  ir::Attrs max;
  max.set("axes", std::vector<int64_t>{axis + 1});
  max.set("keepdims", false);
  KILN_ASSIGN_OR_RETURN(Value values, ctx.apply(node, Op::ReduceMax, {picked}, std::move(max)));
  KILN_ASSIGN_OR_RETURN(Value one_hit, ctx.broadcast_to(node, scalar(1, ir::DType::F32), ranked));
  KILN_ASSIGN_OR_RETURN(Value no_hit, ctx.broadcast_to(node, scalar(0, ir::DType::F32), ranked));
  KILN_ASSIGN_OR_RETURN(Value hits, ctx.apply(node, Op::Select, {hit, one_hit, no_hit}));
  ir::Attrs over;
  over.set("axis", axis + 1);
  KILN_ASSIGN_OR_RETURN(Value indices, ctx.apply(node, Op::Argmax, {hits}, std::move(over)));
  return std::pair{values, indices};
}

// Rounds cost k passes over a row and k times the graph; the ranks n^2 per row in one graph.
constexpr int64_t kMostRounds = 16, kMostRanked = 16384, kMostRoundsOfLongRows = 64;

Status convert_top_k(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axis", "largest", "sorted"}));
  TopKOperands o;
  KILN_ASSIGN_OR_RETURN(o.x, ctx.input(node, 0));
  const ir::TensorType t = o.type = ctx.type_of(o.x);
  if (!ir::is_float(t.dtype))
    return node_error(node, fmt::format("TopK of {} is not supported (only floats)", t.to_string()));
  KILN_ASSIGN_OR_RETURN(auto ks, constant_ints(ctx, node, 1, "K"));
  KILN_ASSIGN_OR_RETURN(int64_t axis, int_attribute(node, "axis", -1));
  KILN_ASSIGN_OR_RETURN(o.axis, normalize_axis(node, axis, t.rank()));
  KILN_ASSIGN_OR_RETURN(int64_t largest, int_attribute(node, "largest", 1));
  const int64_t n = t.shape[static_cast<size_t>(o.axis)];
  if (ks.size() != 1 || ks[0] < 0 || ks[0] > n)
    return node_error(node, fmt::format("K must be one count from 0 to {}", n));
  o.k = ks[0];
  if (o.k == 0) return node_error(node, "K is 0: kiln takes the top 1 or more (empty outputs are not supported)");
  const bool rounds = o.k <= kMostRounds || (n > kMostRanked && o.k <= kMostRoundsOfLongRows);
  if (!rounds && n > kMostRanked)
    return node_error(node, fmt::format("TopK of {} of {} elements is not supported (at most {} of more than {})", o.k,
                                        n, kMostRoundsOfLongRows, kMostRanked));
  o.v = o.x;
  if (!largest) {
    KILN_ASSIGN_OR_RETURN(o.v, ctx.apply(node, Op::Neg, {o.x}));
  }
  KILN_ASSIGN_OR_RETURN(o.nan, ctx.apply(node, Op::Ne, {o.v, o.v}));
  KILN_ASSIGN_OR_RETURN(Value number_class, ctx.broadcast_to(node, scalar(1, ir::DType::F32), t.shape));
  KILN_ASSIGN_OR_RETURN(Value nan_class, ctx.broadcast_to(node, scalar(largest ? 2 : 0, ir::DType::F32), t.shape));
  KILN_ASSIGN_OR_RETURN(o.classes, ctx.apply(node, Op::Select, {o.nan, nan_class, number_class}));
  KILN_ASSIGN_OR_RETURN(auto outputs, rounds ? top_k_in_rounds(ctx, node, o) : top_k_by_rank(ctx, node, o));
  KILN_RETURN_IF_ERROR(define_output(ctx, node, 0, outputs.first));
  return define_output(ctx, node, 1, outputs.second);
}

constexpr OpConverter kConverters[] = {
    {"ArgMax", convert_arg<false>},
    {"ArgMin", convert_arg<true>},
    {"ReduceL1", convert<Op::ReduceSum, 18, Pre::Abs, Post::None>},
    {"ReduceL2", convert<Op::ReduceSum, 18, Pre::Square, Post::Sqrt>},
    {"ReduceLogSum", convert<Op::ReduceSum, 18, Pre::None, Post::Log>},
    {"ReduceLogSumExp", convert<Op::ReduceSum, 18, Pre::ExpShifted, Post::Log>},
    {"ReduceMax", convert<Op::ReduceMax, 18, Pre::None, Post::None>},
    {"ReduceMean", convert<Op::ReduceSum, 18, Pre::None, Post::Mean>},
    {"ReduceMin", convert<Op::ReduceMin, 18, Pre::None, Post::None>},
    {"ReduceProd", convert_reduce_prod},
    {"ReduceSum", convert<Op::ReduceSum, 13, Pre::None, Post::None>},
    {"ReduceSumSquare", convert<Op::ReduceSum, 18, Pre::Square, Post::None>},
    {"TopK", convert_top_k},
};

}  // namespace

std::span<const OpConverter> reduce_converters() { return kConverters; }

}  // namespace kiln::onnx_import
