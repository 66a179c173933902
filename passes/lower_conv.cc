#include "passes/lower_conv.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <string_view>

#include "ir/decompose.h"

namespace kiln::passes {
namespace {

int64_t product(auto begin, auto end) { return std::accumulate(begin, end, int64_t{1}, std::multiplies<>()); }

}  // namespace

bool LowerConvPass::columns_beat_library(const ir::Graph& graph, const ir::Node& n) {
  if (n.op != ir::Op::Conv) return false;
  const ir::Shape& x = graph.type(n.operands[0]).shape;
  const ir::Shape& w = graph.type(n.operands[1]).shape;
  const ir::Shape& y = graph.type(n.result).shape;
  if (pointwise_to_few_channels(graph, n) || strided_long_rows(graph, n)) return true;
  if (x.size() != 3) return false;                          // images: oneDNN's direct kernels
  if (w[1] == 1 && w[0] == x[1] && x[1] > 1) return false;  // depthwise: oneDNN's brdgmm
  const int64_t taps = product(w.begin() + 2, w.end()), positions = product(y.begin() + 2, y.end());
  return taps > kManyTaps && positions <= kFewPositions && x[1] * taps * x[0] * positions <= kMaxColumns;
}

bool LowerConvPass::strided_long_rows(const ir::Graph& graph, const ir::Node& n) {
  if (n.op != ir::Op::Conv) return false;
  const ir::Shape& x = graph.type(n.operands[0]).shape;
  const ir::Shape& w = graph.type(n.operands[1]).shape;
  const ir::Shape& y = graph.type(n.result).shape;
  if (x.size() != 3 || w[1] != x[1]) return false;  // 1-D, one group
  if (!n.attrs.has("strides") || n.attrs.get_ints("strides")[0] < 2) return false;
  const int64_t rows = w[1] * w[2];
  return rows >= kLongRows && rows * x[0] * y[2] <= kMaxWideColumns;
}

bool LowerConvPass::pointwise_to_few_channels(const ir::Graph& graph, const ir::Node& n) {
  if (n.op != ir::Op::Conv) return false;
  const ir::Shape& w = graph.type(n.operands[1]).shape;
  const ir::Shape& x = graph.type(n.operands[0]).shape;
  if (w[0] >= kFewChannels || w[1] != x[1]) return false;  // groups of 1
  if (product(w.begin() + 2, w.end()) != 1) return false;
  // Over few pixels (a squeeze-and-excitation block's, after its pool) oneDNN kept them in
  // its layouts between its convolutions, which lowering broke (EfficientNet-B0 1.3x slower).
  const ir::Shape& y = graph.type(n.result).shape;
  if (product(y.begin() + 2, y.end()) < kFewPositions) return false;
  auto all = [&](std::string_view attr, int64_t value) {
    if (!n.attrs.has(attr)) return true;
    const std::vector<int64_t>& v = n.attrs.get_ints(attr);
    return std::all_of(v.begin(), v.end(), [&](int64_t e) { return e == value; });
  };
  return all("strides", 1) && all("pads", 0) && all("dilations", 1);
}

Result<bool> LowerConvPass::run(ir::Graph& graph) {
  return ir::lower_convolutions(graph, [&](const ir::Node& n) {
    const ir::DType t = graph.type(n.result).dtype;
    return !keep_library_ || !(t == ir::DType::F32 || t == ir::DType::BF16 || t == ir::DType::F16) ||
           columns_beat_library(graph, n);
  });
}

}  // namespace kiln::passes
