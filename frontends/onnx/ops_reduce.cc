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

// TopK with k known at import, as k rounds that each take one element not taken yet: the
// values and their indices, largest first (smallest: as the largest of the negation);
// among equals the lower index first, as ONNX sorts them; a NaN counts as larger than any
// number, so first when largest and last when smallest, as onnxruntime and PyTorch order
// it (ONNX leaves it open). A round ranks what is left in three classes (NaN above or below
// the numbers, then the numbers), takes the best class's largest value, and the first
// element that holds it: taken elements are out by the mask, never by a value, so a row
// of infinities gives each of its indices once.
Status convert_top_k(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axis", "largest", "sorted"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType t = ctx.type_of(x);
  if (!ir::is_float(t.dtype))
    return node_error(node, fmt::format("TopK of {} is not supported (only floats)", t.to_string()));
  KILN_ASSIGN_OR_RETURN(auto ks, constant_ints(ctx, node, 1, "K"));
  KILN_ASSIGN_OR_RETURN(int64_t axis, int_attribute(node, "axis", -1));
  KILN_ASSIGN_OR_RETURN(axis, normalize_axis(node, axis, t.rank()));
  KILN_ASSIGN_OR_RETURN(int64_t largest, int_attribute(node, "largest", 1));
  const int64_t n = t.shape[static_cast<size_t>(axis)];
  if (ks.size() != 1 || ks[0] < 0 || ks[0] > n)
    return node_error(node, fmt::format("K must be one count from 0 to {}", n));
  if (ks[0] > 64) return node_error(node, fmt::format("TopK of {} elements is not supported (at most 64)", ks[0]));
  Value v = x;
  if (!largest) {
    KILN_ASSIGN_OR_RETURN(v, ctx.apply(node, Op::Neg, {x}));
  }
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
  KILN_ASSIGN_OR_RETURN(Value nan, ctx.apply(node, Op::Ne, {v, v}));
  // Classes as f32: 1 for numbers, 2 (largest) or 0 (smallest) for NaN, -1 once taken.
  KILN_ASSIGN_OR_RETURN(Value number_class, full(1, ir::DType::F32));
  KILN_ASSIGN_OR_RETURN(Value nan_class, full(largest ? 2 : 0, ir::DType::F32));
  KILN_ASSIGN_OR_RETURN(Value taken_class, full(-1, ir::DType::F32));
  KILN_ASSIGN_OR_RETURN(Value classes, ctx.apply(node, Op::Select, {nan, nan_class, number_class}));
  KILN_ASSIGN_OR_RETURN(Value lowest, full(-std::numeric_limits<double>::infinity(), t.dtype));
  KILN_ASSIGN_OR_RETURN(Value one, full(1, ir::DType::F32));
  KILN_ASSIGN_OR_RETURN(Value zero, full(0, ir::DType::F32));
  ir::Shape one_along = t.shape;
  one_along[static_cast<size_t>(axis)] = 1;
  std::vector<Value> values, indices;
  for (int64_t i = 0; i < ks[0]; ++i) {
    KILN_ASSIGN_OR_RETURN(Value best_class, along_axis(Op::ReduceMax, classes));
    KILN_ASSIGN_OR_RETURN(Value in_class, ctx.apply(node, Op::Eq, {classes, best_class}));
    KILN_ASSIGN_OR_RETURN(Value numbers, ctx.apply(node, Op::Select, {in_class, v, lowest}));
    KILN_ASSIGN_OR_RETURN(Value numbers_only, ctx.apply(node, Op::Select, {nan, lowest, numbers}));
    KILN_ASSIGN_OR_RETURN(Value best, along_axis(Op::ReduceMax, numbers_only));
    KILN_ASSIGN_OR_RETURN(Value equal, ctx.apply(node, Op::Eq, {v, best}));
    // In a NaN class every element is NaN and a candidate; in the numbers' those equal to
    // the best.
    KILN_ASSIGN_OR_RETURN(Value matches, ctx.apply(node, Op::Select, {equal, one, zero}));
    KILN_ASSIGN_OR_RETURN(Value matches_or_nan, ctx.apply(node, Op::Select, {nan, one, matches}));
    KILN_ASSIGN_OR_RETURN(Value candidates, ctx.apply(node, Op::Select, {in_class, matches_or_nan, zero}));
    KILN_ASSIGN_OR_RETURN(Value first, ctx.apply(node, Op::Argmax, {candidates}, over));
    KILN_ASSIGN_OR_RETURN(Value first_along, reshaped(ctx, node, first, one_along));
    KILN_ASSIGN_OR_RETURN(Value first_wide, ctx.broadcast_to(node, first_along, t.shape));
    KILN_ASSIGN_OR_RETURN(Value hit, ctx.apply(node, Op::Eq, {positions, first_wide}));
    // The one element hit, the rest -inf: its maximum is that element (NaN and -0 too).
    KILN_ASSIGN_OR_RETURN(Value picked, ctx.apply(node, Op::Select, {hit, x, lowest}));
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
  if (values.empty()) return node_error(node, "K is 0: kiln takes the top 1 or more (empty outputs are not supported)");
  KILN_ASSIGN_OR_RETURN(Value all_values,
                        values.size() == 1 ? Result<Value>(values[0]) : ctx.apply(node, Op::Concat, values, cat));
  KILN_ASSIGN_OR_RETURN(Value all_indices,
                        indices.size() == 1 ? Result<Value>(indices[0]) : ctx.apply(node, Op::Concat, indices, cat));
  KILN_RETURN_IF_ERROR(define_output(ctx, node, 0, all_values));
  return define_output(ctx, node, 1, all_indices);
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
