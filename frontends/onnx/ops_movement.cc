// ONNX ops that move or generate data: Split, Tile, Pad, Trilu, Range, Col2Im.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "frontends/onnx/ops.h"

namespace kiln::onnx_import {

namespace {

using ir::Op;

// Split: sizes from the split input (opset 13), the split attribute (before), or equal
// parts (num_outputs from opset 18, else one per output; the last part may be smaller).
Status convert_split(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axis", "split", "num_outputs"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType t = ctx.type_of(x);
  KILN_ASSIGN_OR_RETURN(int64_t axis, int_attribute(node, "axis", 0));
  KILN_ASSIGN_OR_RETURN(axis, normalize_axis(node, axis, t.rank()));
  const int64_t n = t.shape[static_cast<size_t>(axis)], parts = node.output_size();
  std::vector<int64_t> sizes;
  if (ctx.opset() >= 13 && Context::has_input(node, 1)) {
    KILN_ASSIGN_OR_RETURN(sizes, constant_ints(ctx, node, 1, "split"));
  } else if (ctx.opset() < 13 && attribute(node, "split")) {
    KILN_ASSIGN_OR_RETURN(sizes, ints_attribute(node, "split", std::nullopt));
  } else {
    const int64_t each = (n + parts - 1) / parts;
    for (int64_t begin = 0; begin < n; begin += each) sizes.push_back(std::min(each, n - begin));
  }
  if (static_cast<int64_t>(sizes.size()) != parts)
    return node_error(node, fmt::format("{} split sizes for {} outputs", sizes.size(), parts));
  int64_t begin = 0;
  for (int64_t i = 0; i < parts; ++i) {
    KILN_ASSIGN_OR_RETURN(Value part, slice_axis(ctx, node, x, axis, begin, begin + sizes[static_cast<size_t>(i)]));
    KILN_RETURN_IF_ERROR(define_output(ctx, node, static_cast<int>(i), part));
    begin += sizes[static_cast<size_t>(i)];
  }
  if (begin != n) return node_error(node, fmt::format("split sizes add up to {}, not the axis' {}", begin, n));
  return Status::Ok();
}

Status convert_tile(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(auto repeats, constant_ints(ctx, node, 1, "repeats"));
  if (static_cast<int64_t>(repeats.size()) != ctx.type_of(x).rank())
    return node_error(node, fmt::format("{} repeats for rank {}", repeats.size(), ctx.type_of(x).rank()));
  Value r = x;
  for (size_t d = 0; d < repeats.size(); ++d) {
    if (repeats[d] < 0 || repeats[d] > 4096)
      return node_error(node, fmt::format("repeat {} is not from 0 to 4096", repeats[d]));
    if (repeats[d] == 1) continue;
    ir::Attrs attrs;
    attrs.set("axis", static_cast<int64_t>(d));
    KILN_ASSIGN_OR_RETURN(
        r, ctx.apply(node, Op::Concat, std::vector<Value>(static_cast<size_t>(repeats[d]), r), std::move(attrs)));
  }
  return define_output(ctx, node, 0, r);
}

// Pad, constant mode: pads as an attribute before opset 11, as inputs after (with the value
// and, from 18, the axes they apply to).
Status convert_pad(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"mode", "pads", "value"}));
  KILN_ASSIGN_OR_RETURN(std::string mode, string_attribute(node, "mode", "constant"));
  if (mode != "constant" && mode != "edge" && mode != "reflect")
    return node_error(node, fmt::format("mode '{}' is none of constant, edge and reflect", mode));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const int64_t rank = ctx.type_of(x).rank();
  std::vector<int64_t> pads;
  double value = 0;
  if (ctx.opset() < 11) {
    KILN_ASSIGN_OR_RETURN(pads, ints_attribute(node, "pads", std::nullopt));
    KILN_ASSIGN_OR_RETURN(float v, float_attribute(node, "value", 0.0f));
    value = v;
  } else {
    KILN_ASSIGN_OR_RETURN(pads, constant_ints(ctx, node, 1, "pads"));
    if (Context::has_input(node, 2)) {
      KILN_ASSIGN_OR_RETURN(Value v, ctx.input(node, 2));
      if (!v.constant || v.constant->size() != 1)
        return node_error(node,
                          "the constant_value is not one element computed at import; kiln needs it known at import");
      value = v.constant->get(0);
    }
    if (Context::has_input(node, 3)) {
      KILN_ASSIGN_OR_RETURN(auto axes, constant_ints(ctx, node, 3, "axes"));
      if (pads.size() != 2 * axes.size()) return node_error(node, "pads need two entries per axis");
      std::vector<int64_t> all(static_cast<size_t>(2 * rank), 0);
      for (size_t i = 0; i < axes.size(); ++i) {
        KILN_ASSIGN_OR_RETURN(int64_t axis, normalize_axis(node, axes[i], rank));
        all[static_cast<size_t>(axis)] = pads[i];
        all[static_cast<size_t>(rank + axis)] = pads[axes.size() + i];
      }
      pads = all;
    }
  }
  if (static_cast<int64_t>(pads.size()) != 2 * rank)
    return node_error(node, fmt::format("{} pads for rank {}", pads.size(), rank));
  if (mode != "constant") {
    // edge repeats the border element, reflect mirrors around it: a gather per padded
    // axis with the source index of every output index.
    Value r = x;
    for (int64_t d = 0; d < rank; ++d) {
      const int64_t lo = pads[static_cast<size_t>(d)], hi = pads[static_cast<size_t>(rank + d)];
      const int64_t n = ctx.type_of(r).shape[static_cast<size_t>(d)];
      if (lo == 0 && hi == 0) continue;
      if (lo < 0 || hi < 0 || n == 0 || n + lo + hi > (int64_t{1} << 24) || (mode == "reflect" && (lo >= n || hi >= n)))
        return node_error(node, fmt::format("pads {} and {} do not fit {} mode on a dim of {}", lo, hi, mode, n));
      std::vector<int64_t> source;
      for (int64_t j = -lo; j < n + hi; ++j)
        source.push_back(mode == "edge" ? std::clamp<int64_t>(j, 0, n - 1) : j < 0 ? -j : j >= n ? 2 * (n - 1) - j : j);
      ir::Attrs gather;
      gather.set("axis", d);
      const int64_t m = static_cast<int64_t>(source.size());
      KILN_ASSIGN_OR_RETURN(
          r, ctx.apply(node, Op::Gather,
                       {r, Value{std::nullopt, ir::Tensor::from_ints({ir::DType::I64, {m}}, source), false, ""}},
                       std::move(gather)));
    }
    return define_output(ctx, node, 0, r);
  }
  ir::Attrs attrs;
  attrs.set("pads", pads);
  attrs.set("value", value);
  KILN_ASSIGN_OR_RETURN(Value r, ctx.apply(node, Op::Pad, {x}, std::move(attrs)));
  return define_output(ctx, node, 0, r);
}

// Trilu: keeps the elements on or above (upper) or on or below (lower) the k-th diagonal
// of the last two dims: col - row >= k, or <= k.
Status convert_trilu(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"upper"}));
  KILN_ASSIGN_OR_RETURN(int64_t upper, int_attribute(node, "upper", 1));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType t = ctx.type_of(x);
  if (t.rank() < 2) return node_error(node, fmt::format("expected a rank of 2 or more, got {}", t.to_string()));
  int64_t k = 0;
  if (Context::has_input(node, 1)) {
    KILN_ASSIGN_OR_RETURN(auto ks, constant_ints(ctx, node, 1, "k"));
    if (ks.size() != 1) return node_error(node, "k must be one integer");
    k = ks[0];
  }
  KILN_ASSIGN_OR_RETURN(Value rows, iota(ctx, node, t.shape, t.rank() - 2, ir::DType::I64));
  KILN_ASSIGN_OR_RETURN(Value cols, iota(ctx, node, t.shape, t.rank() - 1, ir::DType::I64));
  KILN_ASSIGN_OR_RETURN(Value diagonal, ctx.apply(node, Op::Sub, {cols, rows}));
  KILN_ASSIGN_OR_RETURN(
      Value keep, binary(ctx, node, upper ? Op::Ge : Op::Le, diagonal, scalar(static_cast<double>(k), ir::DType::I64)));
  KILN_ASSIGN_OR_RETURN(Value zeros, ctx.broadcast_to(node, scalar(0.0, t.dtype), t.shape));
  KILN_ASSIGN_OR_RETURN(Value r, ctx.apply(node, Op::Select, {keep, x, zeros}));
  return define_output(ctx, node, 0, r);
}

// Range: start, limit and delta known at import, so the result is a constant.
Status convert_range(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {}));
  double bounds[3];
  ir::DType dtype = ir::DType::F32;
  for (int i = 0; i < 3; ++i) {
    KILN_ASSIGN_OR_RETURN(Value v, ctx.input(node, i));
    if (!v.constant || v.constant->size() != 1)
      return node_error(node,
                        fmt::format("input {} is not a scalar computed at import; kiln needs it known at import", i));
    bounds[i] = v.constant->get(0);
    dtype = v.constant->type.dtype;
  }
  const auto [start, limit, delta] = bounds;
  if (delta == 0) return node_error(node, "delta is 0");
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
  if (n > (int64_t{1} << 24)) return node_error(node, fmt::format("the range has {} elements", n));
  std::vector<double> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = start + static_cast<double>(i) * delta;
  ir::Tensor r = ir::is_float(dtype)
                     ? ir::Tensor::from_doubles({dtype, {n}}, values)
                     : ir::Tensor::from_ints({dtype, {n}}, std::vector<int64_t>(values.begin(), values.end()));
  return define_output(ctx, node, 0, Value{std::nullopt, std::move(r), false, ""});
}

// DepthToSpace and SpaceToDepth: reshapes around a transpose of [N, C, H, W].
template <bool to_space>
Status convert_depth_space(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"blocksize", "mode"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType t = ctx.type_of(x);
  if (t.rank() != 4) return node_error(node, fmt::format("expected [N, C, H, W], got {}", t.to_string()));
  KILN_ASSIGN_OR_RETURN(int64_t b, int_attribute(node, "blocksize", std::nullopt));
  KILN_ASSIGN_OR_RETURN(std::string mode, string_attribute(node, "mode", "DCR"));
  if (mode != "DCR" && mode != "CRD") return node_error(node, fmt::format("mode '{}' is neither DCR nor CRD", mode));
  const int64_t n = t.shape[0], c = t.shape[1], h = t.shape[2], w = t.shape[3];
  if (b < 1 || (to_space ? c % (b * b) != 0 : h % b != 0 || w % b != 0))
    return node_error(node, fmt::format("blocksize {} does not divide {}", b, t.to_string()));
  ir::Shape split, result;
  std::vector<int64_t> perm;
  if (to_space) {
    const int64_t cc = c / (b * b);
    split = mode == "DCR" ? ir::Shape{n, b, b, cc, h, w} : ir::Shape{n, cc, b, b, h, w};
    perm = mode == "DCR" ? std::vector<int64_t>{0, 3, 4, 1, 5, 2} : std::vector<int64_t>{0, 1, 4, 2, 5, 3};
    result = {n, cc, h * b, w * b};
  } else {
    split = {n, c, h / b, b, w / b, b};
    perm = {0, 3, 5, 1, 2, 4};
    result = {n, c * b * b, h / b, w / b};
  }
  KILN_ASSIGN_OR_RETURN(Value s, reshaped(ctx, node, x, split));
  KILN_ASSIGN_OR_RETURN(Value p, transposed(ctx, node, s, perm));
  KILN_ASSIGN_OR_RETURN(Value r, reshaped(ctx, node, p, result));
  return define_output(ctx, node, 0, r);
}

// Col2Im (PyTorch's fold): blocks of columns [N, C·prod(block), L] summed into images
// [N, C, image...]. That sum is the input gradient of the convolution that cuts the blocks
// out (groups C, a one-hot weight per block position); blocks that tile the image exactly
// (stride the block, no padding or dilation) are only a transpose.
Status convert_col2im(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"dilations", "pads", "strides"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  const ir::TensorType t = ctx.type_of(x);
  KILN_ASSIGN_OR_RETURN(auto image, constant_ints(ctx, node, 1, "image_shape"));
  KILN_ASSIGN_OR_RETURN(auto block, constant_ints(ctx, node, 2, "block_shape"));
  const size_t k = image.size();
  if (k == 0 || block.size() != k)
    return node_error(node, fmt::format("image_shape and block_shape need the same count of dims, got {} and {}",
                                        image.size(), block.size()));
  if (k > 3) return node_error(node, fmt::format("Col2Im of {} spatial dims is not supported (1 to 3)", k));
  KILN_ASSIGN_OR_RETURN(auto strides, ints_attribute(node, "strides", std::vector<int64_t>(k, 1)));
  KILN_ASSIGN_OR_RETURN(auto dilations, ints_attribute(node, "dilations", std::vector<int64_t>(k, 1)));
  KILN_ASSIGN_OR_RETURN(auto pads, ints_attribute(node, "pads", std::vector<int64_t>(2 * k, 0)));
  if (strides.size() != k || dilations.size() != k || pads.size() != 2 * k)
    return node_error(node, fmt::format("strides and dilations need {} entries, pads {}", k, 2 * k));
  int64_t positions = 1, count = 1;
  std::vector<int64_t> blocks(k);
  bool tiles = true;
  for (size_t i = 0; i < k; ++i) {
    constexpr int64_t kMost = int64_t{1} << 16;  // so that no product of three dims overflows
    const std::initializer_list<int64_t> given = {image[i], block[i], strides[i], dilations[i], pads[i], pads[k + i]};
    if (image[i] < 1 || block[i] < 1 || strides[i] < 1 || dilations[i] < 1 || pads[i] < 0 || pads[k + i] < 0 ||
        std::any_of(given.begin(), given.end(), [](int64_t v) { return v > kMost; }))
      return node_error(node,
                        "image_shape, block_shape, strides and dilations must be positive, pads not negative "
                        "(and each at most 65536)");
    const int64_t span = dilations[i] * (block[i] - 1) + 1, padded = image[i] + pads[i] + pads[k + i];
    if (padded < span) return node_error(node, fmt::format("a block of {} does not fit an image of {}", span, padded));
    blocks[i] = (padded - span) / strides[i] + 1;
    positions *= block[i], count *= blocks[i];
    tiles = tiles && strides[i] == block[i] && dilations[i] == 1 && pads[i] == 0 && pads[k + i] == 0 &&
            blocks[i] * block[i] == image[i];
  }
  if (t.rank() != 3 || t.shape[1] % positions != 0 || t.shape[2] != count)
    return node_error(node,
                      fmt::format("expected [N, C·{}, {}] for these blocks, got {}", positions, count, t.to_string()));
  const int64_t n = t.shape[0], c = t.shape[1] / positions;
  ir::Shape out = {n, c};
  out.insert(out.end(), image.begin(), image.end());
  if (tiles) {
    // [N, C, block..., blocks...] to [N, C, blocks_1, block_1, blocks_2, block_2, ...].
    ir::Shape split = {n, c};
    split.insert(split.end(), block.begin(), block.end());
    split.insert(split.end(), blocks.begin(), blocks.end());
    std::vector<int64_t> perm = {0, 1};
    for (size_t i = 0; i < k; ++i)
      perm.push_back(static_cast<int64_t>(2 + k + i)), perm.push_back(static_cast<int64_t>(2 + i));
    KILN_ASSIGN_OR_RETURN(Value s, reshaped(ctx, node, x, split));
    KILN_ASSIGN_OR_RETURN(Value p, transposed(ctx, node, s, perm));
    KILN_ASSIGN_OR_RETURN(Value r, reshaped(ctx, node, p, out));
    return define_output(ctx, node, 0, r);
  }
  // The one-hot weight holds C·positions² values.
  constexpr int64_t kMostWeight = int64_t{1} << 26;
  if (positions > kMostWeight / positions || c * positions > kMostWeight / positions)
    return node_error(node, fmt::format("Col2Im of overlapping blocks of {} positions over {} channels is not "
                                        "supported (its one-hot weight would hold more than 2^26 values)",
                                        positions, c));
  ir::Shape columns = {n, c * positions};
  columns.insert(columns.end(), blocks.begin(), blocks.end());
  KILN_ASSIGN_OR_RETURN(Value cols, reshaped(ctx, node, x, columns));
  // Weight [C·positions, 1, block...]: output channel c·positions + p reads block position p.
  ir::Shape weight_shape = {c * positions, 1};
  weight_shape.insert(weight_shape.end(), block.begin(), block.end());
  std::vector<double> one_hot(static_cast<size_t>(c * positions * positions), 0.0);
  for (int64_t o = 0; o < c * positions; ++o) one_hot[static_cast<size_t>(o * positions + o % positions)] = 1.0;
  const Value weight{std::nullopt, ir::Tensor::from_doubles({t.dtype, weight_shape}, one_hot), false, ""};
  ir::Attrs attrs;
  attrs.set("shape", out);
  attrs.set("strides", strides);
  attrs.set("pads", pads);
  attrs.set("dilations", dilations);
  attrs.set("groups", c);
  KILN_ASSIGN_OR_RETURN(Value y, ctx.apply(node, Op::ConvInputGrad, {cols, weight}, std::move(attrs)));
  return define_output(ctx, node, 0, y);
}

// The window functions: a constant of `size` elements (known at import), periodic or
// symmetric, as a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N).
template <int kind>
Status convert_window(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"output_datatype", "periodic"}));
  KILN_ASSIGN_OR_RETURN(auto sizes, constant_ints(ctx, node, 0, "size"));
  if (sizes.size() != 1 || sizes[0] < 0 || sizes[0] > (int64_t{1} << 24))
    return node_error(node, "size must be one count of at most 2^24");
  KILN_ASSIGN_OR_RETURN(int64_t periodic, int_attribute(node, "periodic", 1));
  KILN_ASSIGN_OR_RETURN(int64_t code, int_attribute(node, "output_datatype", onnx::TensorProto::FLOAT));
  KILN_ASSIGN_OR_RETURN(ir::DType dtype,
                        dtype_of(static_cast<int32_t>(code), where(node) + "attribute 'output_datatype'"));
  constexpr double kCoefficients[3][3] = {{0.5, 0.5, 0.0},                  // Hann
                                          {25.0 / 46.0, 21.0 / 46.0, 0.0},  // Hamming
                                          {0.42, 0.5, 0.08}};               // Blackman
  const double* a = kCoefficients[kind];
  const int64_t size = sizes[0];
  const double period = static_cast<double>(periodic ? size : size - 1);
  std::vector<double> values(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) {
    const double x = 2.0 * M_PI * static_cast<double>(i) / period;
    values[static_cast<size_t>(i)] = a[0] - a[1] * std::cos(x) + a[2] * std::cos(2.0 * x);
  }
  ir::Tensor t = ir::is_float(dtype)
                     ? ir::Tensor::from_doubles({dtype, {size}}, values)
                     : ir::Tensor::from_ints({dtype, {size}}, std::vector<int64_t>(values.begin(), values.end()));
  return define_output(ctx, node, 0, Value{std::nullopt, std::move(t), false, ""});
}

// Compress: the slices along an axis (of the flattened input without one) where the
// condition, known at import, is true.
Status convert_compress(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"axis"}));
  KILN_ASSIGN_OR_RETURN(Value x, ctx.input(node, 0));
  KILN_ASSIGN_OR_RETURN(auto condition, constant_ints(ctx, node, 1, "condition"));
  int64_t axis = 0;
  if (attribute(node, "axis")) {
    KILN_ASSIGN_OR_RETURN(axis, int_attribute(node, "axis", std::nullopt));
    KILN_ASSIGN_OR_RETURN(axis, normalize_axis(node, axis, ctx.type_of(x).rank()));
  } else {
    KILN_ASSIGN_OR_RETURN(x, reshaped(ctx, node, x, {ctx.type_of(x).num_elements()}));
  }
  const int64_t n = ctx.type_of(x).shape[static_cast<size_t>(axis)];
  std::vector<int64_t> kept;
  for (size_t i = 0; i < condition.size() && static_cast<int64_t>(i) < n; ++i)
    if (condition[i]) kept.push_back(static_cast<int64_t>(i));
  const int64_t count = static_cast<int64_t>(kept.size());
  ir::Attrs attrs;
  attrs.set("axis", axis);
  KILN_ASSIGN_OR_RETURN(
      Value r, ctx.apply(node, Op::Gather,
                         {x, Value{std::nullopt, ir::Tensor::from_ints({ir::DType::I64, {count}}, kept), false, ""}},
                         std::move(attrs)));
  return define_output(ctx, node, 0, r);
}

constexpr OpConverter kConverters[] = {
    {"BlackmanWindow", convert_window<2>},
    {"Col2Im", convert_col2im},
    {"Compress", convert_compress},
    {"DepthToSpace", convert_depth_space<true>},
    {"HammingWindow", convert_window<1>},
    {"HannWindow", convert_window<0>},
    {"Pad", convert_pad},
    {"Range", convert_range},
    {"SpaceToDepth", convert_depth_space<false>},
    {"Split", convert_split},
    {"Tile", convert_tile},
    {"Trilu", convert_trilu},
};

}  // namespace

std::span<const OpConverter> movement_converters() { return kConverters; }

}  // namespace kiln::onnx_import
