// ScatterElements (and Scatter): at positions known at import a gather from the updates
// and a select, else one-hot comparisons (each update position compared with every index
// it could address); ScatterND, whose index tuples are known at import, as gathers,
// selects and scatter_add; GatherND as one gather of data's first dims flattened.
#include <fmt/format.h>

#include "frontends/onnx/ops.h"

namespace kiln::onnx_import {

namespace {

using ir::Op;

Result<Value> reduce_sum(Context& ctx, const onnx::NodeProto& node, const Value& x, std::vector<int64_t> axes) {
  ir::Attrs attrs;
  attrs.set("axes", std::move(axes));
  attrs.set("keepdims", false);
  return ctx.apply(node, Op::ReduceSum, {x}, std::move(attrs));
}

// Whether any of the bools along `axes` is true.
Result<Value> reduce_any(Context& ctx, const onnx::NodeProto& node, const Value& hit, std::vector<int64_t> axes) {
  KILN_ASSIGN_OR_RETURN(Value counts, cast(ctx, node, hit, ir::DType::I32));
  KILN_ASSIGN_OR_RETURN(Value count, reduce_sum(ctx, node, counts, std::move(axes)));
  return binary(ctx, node, Op::Gt, count, scalar(0, ir::DType::I32));
}

// ScatterElements with indices known at import and no reduction: which update lands on
// each position is known, so the result is one gather from the updates and a select. A
// chain of them into one tensor (an unrolled loop writing a step each, PyTorch's
// select_scatter) gathers from all of the chain's updates at once: its last link reads
// each update once instead of every link passing over the whole tensor.
Status scatter_at_known_positions(Context& ctx, const onnx::NodeProto& node, const Value& data, const Value& indices,
                                  const Value& updates, int64_t axis) {
  const ir::TensorType dt = ctx.type_of(data), it = ctx.type_of(indices);
  const int64_t size = dt.num_elements(), count = it.num_elements();
  const std::string& data_name = node.input(0);
  KnownScatter chain;
  auto known = ctx.known_scatters().find(data_name);
  // A chain holds at most 4 times its tensor in updates; past that it starts anew. Its end
  // moves on: a second scatter into the same link starts a chain of its own.
  if (known != ctx.known_scatters().end() && known->second.total + count <= 4 * size) {
    chain = std::move(known->second);
    ctx.known_scatters().erase(known);
  } else {
    chain.base = data, chain.source.assign(static_cast<size_t>(size), -1);
  }
  std::vector<int64_t> strides(static_cast<size_t>(dt.rank()), 1);
  for (int64_t d = dt.rank() - 2; d >= 0; --d)
    strides[static_cast<size_t>(d)] = strides[static_cast<size_t>(d + 1)] * dt.shape[static_cast<size_t>(d + 1)];
  const int64_t n = dt.shape[static_cast<size_t>(axis)];
  for (int64_t d = 0; d < dt.rank(); ++d)
    if (d != axis && it.shape[static_cast<size_t>(d)] > dt.shape[static_cast<size_t>(d)])
      return node_error(node, fmt::format("indices {} do not fit data {}", it.to_string(), dt.to_string()));
  for (int64_t u = 0; u < count; ++u) {
    int64_t rest = u, position = 0;
    for (int64_t d = dt.rank() - 1; d >= 0; --d) {
      const int64_t extent = it.shape[static_cast<size_t>(d)];
      int64_t coordinate = rest % extent;
      rest /= extent;
      if (d == axis) {
        const int64_t i = indices.constant->ints[static_cast<size_t>(u)];
        coordinate = i < 0 ? i + n : i;
        if (coordinate < 0 || coordinate >= n)
          return node_error(node, fmt::format("index {} is out of range for axis {} of {}", i, axis, dt.to_string()));
      }
      position += coordinate * strides[static_cast<size_t>(d)];
    }
    chain.source[static_cast<size_t>(position)] = chain.total + u;
  }
  chain.total += count;
  KILN_ASSIGN_OR_RETURN(Value flat, reshaped(ctx, node, updates, {count}));
  chain.updates.push_back(flat);
  Value all = chain.updates[0];
  if (chain.updates.size() > 1) {
    ir::Attrs concat;
    concat.set("axis", int64_t{0});
    KILN_ASSIGN_OR_RETURN(all, ctx.apply(node, Op::Concat, chain.updates, std::move(concat)));
  }
  const Value source{std::nullopt, ir::Tensor::from_ints({ir::DType::I64, dt.shape}, chain.source), false, ""};
  KILN_ASSIGN_OR_RETURN(Value mask, binary(ctx, node, Op::Ge, source, scalar(0, ir::DType::I64)));
  KILN_ASSIGN_OR_RETURN(Value from, binary(ctx, node, Op::Maximum, source, scalar(0, ir::DType::I64)));
  ir::Attrs gather;
  gather.set("axis", int64_t{0});
  KILN_ASSIGN_OR_RETURN(Value gathered, ctx.apply(node, Op::Gather, {all, from}, std::move(gather)));
  KILN_ASSIGN_OR_RETURN(Value r, ctx.apply(node, Op::Select, {mask, gathered, chain.base}));
  KILN_RETURN_IF_ERROR(define_output(ctx, node, 0, r));
  if (node.output_size() > 0) ctx.known_scatters()[node.output(0)] = std::move(chain);
  return Status::Ok();
}

// ScatterElements: out = data, except out[p with p[axis] = indices[u]] = updates[u] (or,
// with reduction add, plus it). The indices must cover data's other dims whole.
Status convert_scatter_elements(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axis", "reduction"}));
  KILN_ASSIGN_OR_RETURN(std::string reduction, string_attribute(node, "reduction", "none"));
  if (reduction != "none" && reduction != "add")
    return node_error(node, fmt::format("reduction '{}' is not supported (none and add are)", reduction));
  KILN_ASSIGN_OR_RETURN(Value data, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value indices, ctx.input(node, 1));
  KILN_ASSIGN_OR_RETURN(Value updates, ctx.input(node, 2));
  const ir::TensorType dt = ctx.type_of(data), it = ctx.type_of(indices);
  KILN_ASSIGN_OR_RETURN(int64_t axis, int_attribute(node, "axis", 0));
  KILN_ASSIGN_OR_RETURN(axis, normalize_axis(node, axis, dt.rank()));
  const size_t a = static_cast<size_t>(axis), rank = static_cast<size_t>(dt.rank());
  if (it.rank() != dt.rank() || ctx.type_of(updates).shape != it.shape)
    return node_error(node, fmt::format("expected indices and updates of one shape and data's rank, got {}, {} and {}",
                                        dt.to_string(), it.to_string(), ctx.type_of(updates).to_string()));
  // Each known scatter holds a constant of its tensor's size (the import's memory, and the
  // last link's in the artifact): tensors of at most 2^20 elements, 2^25 positions in all
  // per import; past them the one-hot form, which computes positions at run time.
  constexpr int64_t kMostKnownPositions = int64_t{1} << 20, kKnownPositionsBudget = int64_t{1} << 25;
  if (reduction == "none" && Context::foldable_constant(indices) && !indices.constant->holds_floats() &&
      it.shape == ctx.type_of(updates).shape && dt.num_elements() <= kMostKnownPositions &&
      ctx.known_scatter_positions() + dt.num_elements() <= kKnownPositionsBudget) {
    ctx.known_scatter_positions() += dt.num_elements();
    return scatter_at_known_positions(ctx, node, data, indices, updates, axis);
  }
  for (size_t d = 0; d < rank; ++d)
    if (d != a && it.shape[d] != dt.shape[d])
      return node_error(node, "indices that do not cover data's other dims whole are not supported");
  const int64_t n = dt.shape[a];
  // hit[u..., k] = (indices[u] mod n == k), over the update dims and a trailing k.
  ir::Shape wide(it.shape.begin(), it.shape.end());
  wide.push_back(n);
  KILN_ASSIGN_OR_RETURN(Value k, wrap_negative(ctx, node, indices, n));
  ir::Shape with_one(it.shape.begin(), it.shape.end());
  with_one.push_back(1);
  KILN_ASSIGN_OR_RETURN(Value k1, reshaped(ctx, node, k, with_one));
  KILN_ASSIGN_OR_RETURN(Value kw, ctx.broadcast_to(node, k1, wide));
  KILN_ASSIGN_OR_RETURN(Value pos, iota(ctx, node, wide, static_cast<int64_t>(rank), it.dtype));
  KILN_ASSIGN_OR_RETURN(Value hit, ctx.apply(node, Op::Eq, {pos, kw}));
  KILN_ASSIGN_OR_RETURN(Value u1, reshaped(ctx, node, updates, with_one));
  KILN_ASSIGN_OR_RETURN(Value uw, ctx.broadcast_to(node, u1, wide));
  KILN_ASSIGN_OR_RETURN(Value zeros, ctx.broadcast_to(node, scalar(0.0, dt.dtype), wide));
  KILN_ASSIGN_OR_RETURN(Value placed, ctx.apply(node, Op::Select, {hit, uw, zeros}));
  KILN_ASSIGN_OR_RETURN(Value sum, reduce_sum(ctx, node, placed, {axis}));  // [others..., n]
  KILN_ASSIGN_OR_RETURN(Value any, reduce_any(ctx, node, hit, {axis}));
  const std::vector<int64_t> back = axis_last(dt.rank(), axis).back;  // [others..., n] to data's order
  KILN_ASSIGN_OR_RETURN(Value value, transposed(ctx, node, sum, back));
  KILN_ASSIGN_OR_RETURN(Value mask, transposed(ctx, node, any, back));
  Value r;
  if (reduction == "add") {
    KILN_ASSIGN_OR_RETURN(r, ctx.apply(node, Op::Add, {data, value}));
  } else {
    KILN_ASSIGN_OR_RETURN(r, ctx.apply(node, Op::Select, {mask, value, data}));
  }
  return define_output(ctx, node, 0, r);
}

// The linear index into data's first k dims of each index tuple (the last dim of
// `indices`), known at import; negative entries count from the end.
Result<std::vector<int64_t>> linear_indices(Context& ctx, const onnx::NodeProto& node, const ir::Shape& data,
                                            int index) {
  KILN_ASSIGN_OR_RETURN(auto flat, constant_ints(ctx, node, index, "indices"));
  KILN_ASSIGN_OR_RETURN(Value v, ctx.input(node, index));
  const ir::Shape shape = ctx.type_of(v).shape;
  if (shape.empty() || shape.back() < 1 || shape.back() > static_cast<int64_t>(data.size()))
    return node_error(node, fmt::format("index tuples of {} entries for data of rank {}",
                                        shape.empty() ? 0 : shape.back(), data.size()));
  const size_t k = static_cast<size_t>(shape.back());
  std::vector<int64_t> out;
  for (size_t t = 0; t + k <= flat.size(); t += k) {
    int64_t linear = 0;
    for (size_t j = 0; j < k; ++j) {
      int64_t i = flat[t + j];
      if (i < 0) i += data[j];
      if (i < 0 || i >= data[j])
        return node_error(
            node, fmt::format("index {} is out of range for dim {} of {}", flat[t + j], j, ir::shape_string(data)));
      linear = linear * data[j] + i;
    }
    out.push_back(linear);
  }
  return out;
}

// The linear index into data's first k dims of each index tuple computed at run time
// (CLIP's text pooling at each row's end token): its shape the tuples' (indices' without
// the last dim), each entry wrapped where negative. One out of range reads a clamped row
// in compiled kernels, as gather's indices do (docs/ir.md), and is an error in the
// interpreter.
Result<Value> linear_indices_at_run_time(Context& ctx, const onnx::NodeProto& node, const ir::Shape& data,
                                         const Value& indices) {
  const ir::TensorType it = ctx.type_of(indices);
  const int64_t k = it.shape.back();
  const ir::Shape tuples(it.shape.begin(), it.shape.end() - 1);
  Value linear;
  for (int64_t j = 0; j < k; ++j) {
    KILN_ASSIGN_OR_RETURN(Value entry, slice_axis(ctx, node, indices, it.rank() - 1, j, j + 1));
    KILN_ASSIGN_OR_RETURN(entry, reshaped(ctx, node, entry, tuples));
    KILN_ASSIGN_OR_RETURN(entry, cast(ctx, node, entry, ir::DType::I64));
    KILN_ASSIGN_OR_RETURN(entry, wrap_negative(ctx, node, entry, data[static_cast<size_t>(j)]));
    if (j == 0) {
      linear = entry;
      continue;
    }
    KILN_ASSIGN_OR_RETURN(linear,
                          with_scalar(ctx, node, Op::Mul, linear, static_cast<double>(data[static_cast<size_t>(j)])));
    KILN_ASSIGN_OR_RETURN(linear, ctx.apply(node, Op::Add, {linear, entry}));
  }
  return linear;
}

// GatherND with batch_dims 0: data's first k dims flattened and gathered.
Status convert_gather_nd(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"batch_dims"}));
  KILN_ASSIGN_OR_RETURN(int64_t batch_dims, int_attribute(node, "batch_dims", 0));
  if (batch_dims != 0) return node_error(node, "batch_dims other than 0 are not supported");
  KILN_ASSIGN_OR_RETURN(Value data, ctx.input(node, 0));
  const ir::Shape ds = ctx.type_of(data).shape;
  KILN_ASSIGN_OR_RETURN(Value indices, ctx.input(node, 1));
  const ir::Shape is = ctx.type_of(indices).shape;
  Value where;
  if (Context::foldable_constant(indices)) {
    KILN_ASSIGN_OR_RETURN(auto linear, linear_indices(ctx, node, ds, 1));
    where = Value{std::nullopt, ir::Tensor::from_ints({ir::DType::I64, {static_cast<int64_t>(linear.size())}}, linear),
                  false, ""};
  } else {
    if (is.empty() || is.back() < 1 || is.back() > static_cast<int64_t>(ds.size()) ||
        ir::is_float(ctx.type_of(indices).dtype))
      return node_error(node, fmt::format("expected integer index tuples of 1 to {} entries, got {}", ds.size(),
                                          ctx.type_of(indices).to_string()));
    KILN_ASSIGN_OR_RETURN(where, linear_indices_at_run_time(ctx, node, ds, indices));
  }
  const size_t k = static_cast<size_t>(is.back());
  int64_t p = 1;
  for (size_t j = 0; j < k; ++j) p *= ds[j];
  ir::Shape flat = {p};
  flat.insert(flat.end(), ds.begin() + static_cast<std::ptrdiff_t>(k), ds.end());
  KILN_ASSIGN_OR_RETURN(Value table, reshaped(ctx, node, data, flat));
  ir::Attrs attrs;
  attrs.set("axis", int64_t{0});
  KILN_ASSIGN_OR_RETURN(Value rows, ctx.apply(node, Op::Gather, {table, where}, std::move(attrs)));
  ir::Shape out(is.begin(), is.end() - 1);
  out.insert(out.end(), ds.begin() + static_cast<std::ptrdiff_t>(k), ds.end());
  KILN_ASSIGN_OR_RETURN(Value r, reshaped(ctx, node, rows, out));
  return define_output(ctx, node, 0, r);
}

// ScatterND, reduction none or add: data's first k dims flattened, each update row placed
// at (or added to) the row its tuple indexes. The tuples are known at import, so each row
// knows which update lands on it: work in data's size, where a comparison of every update
// with every row took Swin-T's attention-mask scatter 9 ms.
Status convert_scatter_nd(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"reduction"}));
  KILN_ASSIGN_OR_RETURN(std::string reduction, string_attribute(node, "reduction", "none"));
  if (reduction != "none" && reduction != "add")
    return node_error(node, fmt::format("reduction '{}' is not supported (none and add are)", reduction));
  KILN_ASSIGN_OR_RETURN(Value data, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(Value updates, ctx.input(node, 2));
  const ir::TensorType dt = ctx.type_of(data);
  KILN_ASSIGN_OR_RETURN(auto linear, linear_indices(ctx, node, dt.shape, 1));
  KILN_ASSIGN_OR_RETURN(Value indices, ctx.input(node, 1));
  const size_t k = static_cast<size_t>(ctx.type_of(indices).shape.back());
  int64_t p = 1;
  for (size_t j = 0; j < k; ++j) p *= dt.shape[j];
  const ir::Shape rest(dt.shape.begin() + static_cast<std::ptrdiff_t>(k), dt.shape.end());
  const int64_t m = static_cast<int64_t>(linear.size());
  if (p > (int64_t{1} << 26))  // each row's update is a table built here
    return node_error(node, fmt::format("scattering into {} rows is not supported", p));
  ir::Shape flat_data = {p}, flat_updates = {m};
  flat_data.insert(flat_data.end(), rest.begin(), rest.end());
  flat_updates.insert(flat_updates.end(), rest.begin(), rest.end());
  if (m == 0) return define_output(ctx, node, 0, data);
  KILN_ASSIGN_OR_RETURN(Value table, reshaped(ctx, node, data, flat_data));
  KILN_ASSIGN_OR_RETURN(Value rows, reshaped(ctx, node, updates, flat_updates));
  Value r;
  if (reduction == "add") {  // every update row added at its row: scatter_add
    ir::Attrs attrs;
    attrs.set("axis", int64_t{0});
    KILN_ASSIGN_OR_RETURN(
        r,
        ctx.apply(node, Op::ScatterAdd,
                  {table, Value{std::nullopt, ir::Tensor::from_ints({ir::DType::I64, {m}}, linear), false, ""}, rows},
                  std::move(attrs)));
  } else {  // each row hit takes the last update row that hits it: a gather and a select
    std::vector<int64_t> source(static_cast<size_t>(p), 0), hit(static_cast<size_t>(p), 0);
    for (int64_t i = 0; i < m; ++i) {
      source[static_cast<size_t>(linear[static_cast<size_t>(i)])] = i;
      hit[static_cast<size_t>(linear[static_cast<size_t>(i)])] = 1;
    }
    ir::Attrs attrs;
    attrs.set("axis", int64_t{0});
    KILN_ASSIGN_OR_RETURN(
        Value placed,
        ctx.apply(node, Op::Gather,
                  {rows, Value{std::nullopt, ir::Tensor::from_ints({ir::DType::I64, {p}}, source), false, ""}},
                  std::move(attrs)));
    ir::Shape hit_shape = {p};
    hit_shape.insert(hit_shape.end(), rest.size(), 1);
    KILN_ASSIGN_OR_RETURN(
        Value mask,
        reshaped(ctx, node, Value{std::nullopt, ir::Tensor::from_ints({ir::DType::Bool, {p}}, hit), false, ""},
                 hit_shape));
    KILN_ASSIGN_OR_RETURN(mask, ctx.broadcast_to(node, mask, flat_data));
    KILN_ASSIGN_OR_RETURN(r, ctx.apply(node, Op::Select, {mask, placed, table}));
  }
  KILN_ASSIGN_OR_RETURN(r, reshaped(ctx, node, r, dt.shape));
  return define_output(ctx, node, 0, r);
}

constexpr OpConverter kConverters[] = {
    {"GatherND", convert_gather_nd},
    {"Scatter", convert_scatter_elements},
    {"ScatterElements", convert_scatter_elements},
    {"ScatterND", convert_scatter_nd},
};

}  // namespace

std::span<const OpConverter> scatter_converters() { return kConverters; }

}  // namespace kiln::onnx_import
