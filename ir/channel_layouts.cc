#include "ir/channel_layouts.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "ir/program.h"
#include "ir/reduction_split.h"
#include "ir/row_class.h"
#include "ir/shape_inference.h"
#include "ir/verifier.h"

namespace kiln::ir {
namespace {

// A step's activations, [N, C, D1..Dk], are its values of the largest rank among its
// inputs and outputs (activation_rank).
constexpr int64_t kMinRank = 3, kMaxRank = 5;

// Where dim `d` of an activation of `rank` goes in a layout (in blocks, dim 1 counts the
// blocks and the lanes follow the last dim).
int64_t layout_dim(int64_t d, int64_t rank, int64_t block) {
  if (block != kChannelsLast || d == 0) return d;
  return d == 1 ? rank - 1 : d - 1;
}

// Per-dim attributes (a slice's starts) in a layout: channels-last moves the channel's
// entry last; blocks give the channel's entry in blocks and add the lanes' `lanes`.
std::vector<int64_t> layout_list(std::vector<int64_t> v, int64_t block, int64_t channel, int64_t lanes) {
  if (block == kChannelsLast) {
    std::rotate(v.begin() + 1, v.begin() + 2, v.end());
    return v;
  }
  v[1] = channel;
  v.push_back(lanes);
  return v;
}

// The attributes of node `n`, whose result is an activation of `rank`, over its operands in
// the layout; none where it moves data across channels in a way the layout cannot follow.
std::optional<Attrs> layout_attrs(const Graph& g, const Node& n, int64_t rank, int64_t block) {
  const TensorType& to = g.type(n.result);
  switch (op_kind(n.op)) {
    case OpKind::Elementwise: return n.attrs;
    case OpKind::Movement: break;
    case OpKind::Source: {
      // A constant of one channel (folded from a broadcast) keeps its elements' order.
      if (n.op != Op::Constant || to.shape[1] != 1) return std::nullopt;
      Literal value = n.attrs.get_literal("value");
      if (value.shape != to.shape) return std::nullopt;
      value.shape = channel_layout_shape(value.shape, block);
      Attrs attrs = n.attrs;
      attrs.set("value", std::move(value));
      return attrs;
    }
    default: return std::nullopt;
  }
  const TensorType& from = g.type(n.operands[0]);
  Attrs attrs;
  if (n.op == Op::Broadcast) {
    // From a scalar, from an activation (of one channel, or of the same), or from a value
    // of another rank whose dims go where the layout puts theirs.
    std::vector<int64_t> dims = n.attrs.get_ints("dims");
    if (from.rank() == rank) {
      for (int64_t d = 0; d < rank; ++d)
        if (dims[static_cast<size_t>(d)] != d) return std::nullopt;
      dims.resize(static_cast<size_t>(channel_layout_shape(to.shape, block).size()));
      std::iota(dims.begin(), dims.end(), 0);
    } else {
      for (int64_t& d : dims) {
        if (block != kChannelsLast && d == 1) return std::nullopt;  // across the blocks and their lanes
        d = layout_dim(d, rank, block);
      }
    }
    attrs.set("shape", channel_layout_shape(to.shape, block));
    attrs.set("dims", dims);
    return attrs;
  }
  if (n.op == Op::Concat) {
    const auto axis = normalize_axis(n.attrs.get_int("axis"), rank);
    if (!axis) return std::nullopt;
    // In blocks, along the channels only of whole blocks.
    if (block != kChannelsLast && *axis == 1)
      for (ValueId x : n.operands)
        if (g.type(x).shape[1] % block != 0) return std::nullopt;
    attrs.set("axis", layout_dim(*axis, rank, block));
    return attrs;
  }
  if (n.op == Op::Slice) {
    std::vector<int64_t> starts = n.attrs.get_ints("starts"), ends = n.attrs.get_ints("ends");
    std::vector<int64_t> strides =
        n.attrs.has("strides") ? n.attrs.get_ints("strides") : std::vector<int64_t>(static_cast<size_t>(rank), 1);
    if (block != kChannelsLast) {
      // Whole blocks of channels, in order.
      const bool whole = starts[1] % block == 0 && ends[1] % block == 0 && strides[1] == 1;
      const bool all = from.shape[1] == to.shape[1] && starts[1] == 0 && strides[1] == 1;
      if (!whole && !all) return std::nullopt;
      const int64_t lanes = channel_layout_shape(from.shape, block).back();
      starts = layout_list(starts, block, lanes == 1 ? 0 : starts[1] / block, 0);
      ends = layout_list(ends, block, lanes == 1 ? 1 : std::min(ends[1], from.shape[1]) / block, lanes);
      strides = layout_list(strides, block, 1, 1);
    } else {
      starts = layout_list(starts, block, 0, 0);
      ends = layout_list(ends, block, 0, 0);
      strides = layout_list(strides, block, 0, 0);
    }
    attrs.set("starts", starts);
    attrs.set("ends", ends);
    attrs.set("strides", strides);
    return attrs;
  }
  return std::nullopt;  // reshape, transpose, gather, scatter: across channels
}

// The rank of a step's activations: the largest of its inputs' and outputs'.
int64_t activation_rank(const Graph& g, const Step& step) {
  int64_t rank = 0;
  for (const auto* values : {&step.inputs, &step.outputs})
    for (ValueId v : *values) rank = std::max(rank, g.type(v).rank());
  return rank;
}

// Adds reduction `n` over an activation's spatial dims, channels-last, to `laid`: over the
// same dims, and a batch of one, so that they lead (a sum over leading dims is a column
// sum, which runs at memory speed; over dims between, it did not), keeping them (keepdims:
// the result is an activation of one position). False where it cannot be added: one that
// drops them (to [N, C]).
bool add_reduction(const Graph& g, const Node& n, int64_t rank, Graph& laid, std::vector<ValueId>& id, Step& only) {
  const TensorType &from = g.type(n.operands[0]), &to = g.type(n.result);
  if (n.op == Op::Argmax || from.rank() != rank || to.rank() != rank || id[n.operands[0]] == kNoValue) return false;
  std::vector<int64_t> axes;
  for (int64_t a : n.attrs.get_ints("axes")) {
    const auto axis = normalize_axis(a, rank);
    if (!axis || *axis == 1) return false;  // across channels
    axes.push_back(layout_dim(*axis, rank, kChannelsLast));
  }
  if (from.shape[0] == 1 && std::find(axes.begin(), axes.end(), 0) == axes.end()) axes.push_back(0);
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  Attrs attrs = n.attrs;
  attrs.set("axes", axes);
  id[n.result] = laid.add_value({to.dtype, channel_layout_shape(to.shape, kChannelsLast)}, g.value_name(n.result));
  only.nodes.push_back(static_cast<int>(laid.nodes.size()));
  laid.nodes.push_back(Node{n.op, {id[n.operands[0]]}, std::move(attrs), id[n.result], n.loc});
  return true;
}

}  // namespace

Shape channel_layout_shape(const Shape& shape, int64_t block) {
  Shape laid = shape;
  if (block == kChannelsLast) {
    std::rotate(laid.begin() + 1, laid.begin() + 2, laid.end());
    return laid;
  }
  const int64_t channels = shape[1];
  const int64_t lanes = channels == 1 ? 1 : block;
  laid[1] = channels / lanes;
  laid.push_back(lanes);
  return laid;
}

std::string channel_layout_name(const std::string& step, int64_t block) {
  return block == kChannelsLast ? step + "_channels_last" : fmt::format("{}_c{}", step, block);
}

std::optional<Graph> channel_layout_step(const Graph& g, const Step& step, int64_t block) {
  // Reductions (a global average pool) only channels-last, where the spatial dims lead.
  const bool reduction = step.kind == StepKind::Reduction && block == kChannelsLast;
  if ((step.kind != StepKind::Loop && !reduction) || step.outputs.empty()) return std::nullopt;
  const int64_t rank = activation_rank(g, step);
  if (rank < kMinRank || rank > kMaxRank) return std::nullopt;
  // An activation in blocks: whole blocks of channels, or one channel inside the step.
  auto fits = [&](const TensorType& t, bool one_channel) {
    return block == kChannelsLast || t.shape[1] % block == 0 || (one_channel && t.shape[1] == 1);
  };
  for (const auto* values : {&step.inputs, &step.outputs})
    for (ValueId v : *values)
      if (g.type(v).rank() == rank && !fits(g.type(v), false)) return std::nullopt;
  if (!reduction)
    for (ValueId v : step.outputs)
      if (g.type(v).rank() != rank) return std::nullopt;

  Graph laid;
  laid.name = channel_layout_name(step.name, block);
  std::vector<ValueId> id(g.values.size(), kNoValue);
  // A value in the step: an activation in the layout, or a value of another rank as it is.
  auto add = [&](ValueId v) -> bool {
    const TensorType& t = g.type(v);
    TensorType mapped = t;
    if (t.rank() == rank) {
      if (!fits(t, true)) return false;
      mapped.shape = channel_layout_shape(t.shape, block);
    }
    id[v] = laid.add_value(mapped, g.value_name(v));
    return true;
  };
  Step only;
  only.kind = StepKind::Loop;
  only.name = laid.name;
  for (ValueId v : step.inputs) {
    add(v);
    laid.args.push_back({id[v], ArgKind::Input, {}});
    only.inputs.push_back(id[v]);
  }
  for (int k : step.nodes) {
    const Node& n = g.nodes[static_cast<size_t>(k)];
    if (op_kind(n.op) == OpKind::Reduction) {
      if (!add_reduction(g, n, rank, laid, id, only)) return std::nullopt;
      continue;
    }
    std::optional<Attrs> attrs = n.attrs;
    const bool reads_activation =
        std::any_of(n.operands.begin(), n.operands.end(), [&](ValueId x) { return g.type(x).rank() == rank; });
    if (g.type(n.result).rank() == rank) attrs = layout_attrs(g, n, rank, block);
    else if (reads_activation) attrs.reset();  // from an activation to a value of another rank
    if (!attrs || !add(n.result)) return std::nullopt;
    Node mapped{n.op, {}, std::move(*attrs), id[n.result], n.loc};
    for (ValueId x : n.operands) {
      if (id[x] == kNoValue) return std::nullopt;  // read from outside the step, not as an input
      mapped.operands.push_back(id[x]);
    }
    only.nodes.push_back(static_cast<int>(laid.nodes.size()));
    laid.nodes.push_back(std::move(mapped));
  }
  for (ValueId v : step.outputs) {
    if (id[v] == kNoValue) return std::nullopt;
    laid.results.push_back(id[v]);
    only.outputs.push_back(id[v]);
  }
  only.kind = step.kind;
  laid.program = Program{{std::move(only)}};
  // What the rules above let through must be a graph and a program of their own; where it
  // is not, the step keeps its plain kernel only.
  if (!verify(laid).ok() || !verify_program(laid).ok()) return std::nullopt;
  // A reduction runs over the step's own work items (its rows), unsplit: the runtime gives
  // the kernel in a layout the plain kernel's range and no scratch.
  // Only a sum over the leading dims (a column sum) runs at memory speed there: rows
  // over dims between (a batch of more than one), or a step of row values without a
  // reduction (a batch norm's per-channel scale), would walk each row across the channels.
  if (reduction) {
    const Step& laid_step = laid.program->steps[0];
    const bool reduces = std::any_of(step.nodes.begin(), step.nodes.end(), [&](int n) {
      return op_kind(g.nodes[static_cast<size_t>(n)].op) == OpKind::Reduction;
    });
    const std::optional<RowClass> rows = row_class(laid, laid_step);
    bool leading = reduces && rows && !rows->reduced.empty();
    for (size_t d = 0; leading && d < rows->reduced.size(); ++d) leading = rows->reduced[d] == static_cast<int64_t>(d);
    if (!leading || reduction_split(g, step, kCpuSplit) || reduction_split(laid, laid_step, kCpuSplit) ||
        work_items(laid, laid_step) != work_items(g, step))
      return std::nullopt;
  }
  return laid;
}

std::vector<std::vector<int64_t>> channel_layouts_of_steps(const Graph& g) {
  const std::vector<Step>& steps = g.program->steps;
  std::vector<std::vector<int64_t>> layouts(steps.size());
  // The values forward convolutions read (x, or the tensor their epilogue adds) or write.
  std::vector<char> next_to_conv(g.values.size(), 0);
  for (const Step& s : steps) {
    const bool conv = s.kind == StepKind::Library && std::any_of(s.nodes.begin(), s.nodes.end(), [&](int n) {
                        return g.nodes[static_cast<size_t>(n)].op == Op::Conv;
                      });
    if (!conv) continue;
    for (const auto* values : {&s.inputs, &s.outputs})
      for (ValueId v : *values) next_to_conv[static_cast<size_t>(v)] = 1;
  }
  for (size_t k = 0; k < steps.size(); ++k) {
    const Step& s = steps[k];
    if (s.kind != StepKind::Loop && s.kind != StepKind::Reduction) continue;
    const bool near = std::any_of(s.inputs.begin(), s.inputs.end(), [&](ValueId v) { return next_to_conv[v]; }) ||
                      std::any_of(s.outputs.begin(), s.outputs.end(), [&](ValueId v) { return next_to_conv[v]; });
    if (!near) continue;
    std::vector<int64_t> candidates = {kChannelsLast};
    if (s.kind == StepKind::Loop)
      candidates.insert(candidates.end(), std::begin(kOneDnnChannelBlocks), std::end(kOneDnnChannelBlocks));
    for (int64_t b : candidates)
      if (channel_layout_step(g, s, b)) layouts[k].push_back(b);
  }
  return layouts;
}

}  // namespace kiln::ir
