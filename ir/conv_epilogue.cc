#include "ir/conv_epilogue.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace kiln::ir {
namespace {

class EpilogueMatcher {
 public:
  explicit EpilogueMatcher(const Graph& g)
      : g_(g), producer_(g.producers()), users_(g.values.size()), result_(g.values.size(), 0) {
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (ValueId v : g.nodes[i].operands) users_[v].push_back(static_cast<int>(i));
    for (ValueId v : g.results) result_[v] = 1;
    taken_.assign(g.nodes.size(), 0);
  }

  std::optional<ConvEpilogue> match(int conv) {
    const Node& c = g_.nodes[conv];
    if (c.op != Op::Conv || g_.type(c.result).dtype != DType::F32 || g_.type(c.result).rank() < 3) return std::nullopt;
    ConvEpilogue e;
    e.conv = conv;
    ValueId x = c.result;
    bool added = false;
    while (true) {
      if (silu_or_hard_swish(x, e)) {
        x = e.result;
        continue;
      }
      const Node* u = only_user(x);
      if (!u) break;
      const ValueId other = u->operands.size() == 2 ? u->operands[u->operands[0] == x ? 1 : 0] : kNoValue;
      const bool x_first = !u->operands.empty() && u->operands[0] == x;
      if (u->op == Op::Add &&
          per_channel(other, e.post_ops.empty() ? ConvPostOp::Kind::Bias : ConvPostOp::Kind::ChannelAdd, e)) {
        // per_channel appended the post-op
      } else if (((u->op == Op::Sub && x_first) || u->op == Op::Mul) &&
                 per_channel(other, u->op == Op::Sub ? ConvPostOp::Kind::ChannelSub : ConvPostOp::Kind::ChannelMul,
                             e)) {
      } else if (u->op == Op::Relu) {
        e.post_ops.push_back({ConvPostOp::Kind::Relu});
      } else if (u->op == Op::Sigmoid) {
        e.post_ops.push_back({ConvPostOp::Kind::Sigmoid});
      } else if (u->op == Op::Tanh) {
        e.post_ops.push_back({ConvPostOp::Kind::Tanh});
      } else if (u->op == Op::Maximum && clip_of(*u, other, e)) {
        e.nodes.push_back(index_of(*u));
        u = only_user(u->result);  // the clip's minimum
      } else if (u->op == Op::Add && !added && other != x && g_.type(other) == g_.type(x) && !spread(other)) {
        added = true;
        e.post_ops.push_back({ConvPostOp::Kind::Add, other});
      } else {
        break;
      }
      e.nodes.push_back(index_of(*u));
      e.result = x = u->result;
    }
    if (e.post_ops.empty()) return std::nullopt;
    std::sort(e.nodes.begin(), e.nodes.end());
    for (int n : e.nodes) taken_[n] = 1;  // a node is in one epilogue: a residual add follows two convolutions
    return e;
  }

 private:
  // Whether v is a broadcast's result: as the call's operand it would be written to memory
  // whole, where a kernel computes it from the smaller operand.
  bool spread(ValueId v) const { return producer_[v] >= 0 && g_.nodes[producer_[v]].op == Op::Broadcast; }

  int index_of(const Node& n) const { return static_cast<int>(&n - g_.nodes.data()); }

  // The one node reading v, where v is not a result and that node is in no other
  // convolution's epilogue; else null.
  const Node* only_user(ValueId v) const {
    if (result_[v] || users_[v].size() != 1 || taken_[users_[v][0]]) return nullptr;
    return &g_.nodes[users_[v][0]];
  }

  // Whether v is a per-channel value spread over the convolution's result: a single-use
  // broadcast whose operand's only extents above one land on dim 1. Appends the post-op
  // of `kind` and claims the broadcast and the single-use reshapes before it.
  bool per_channel(ValueId v, ConvPostOp::Kind kind, ConvEpilogue& e) {
    if (v == kNoValue) return false;
    const int b = producer_[v];
    if (b < 0 || g_.nodes[b].op != Op::Broadcast || !only_user(v)) return false;
    const Node& broadcast = g_.nodes[b];
    const Shape& from = g_.type(broadcast.operands[0]).shape;
    const std::vector<int64_t>& dims = broadcast.attrs.get_ints("dims");
    const int64_t channels = g_.type(v).shape[1];
    bool on_channels = false;
    for (size_t i = 0; i < from.size(); ++i) {
      if (from[i] == 1) continue;
      if (dims[i] != 1 || from[i] != channels) return false;
      on_channels = true;
    }
    if (!on_channels && channels != 1) return false;
    e.nodes.push_back(b);
    ValueId bias = broadcast.operands[0];
    for (int p = producer_[bias]; p >= 0 && g_.nodes[p].op == Op::Reshape && only_user(bias); p = producer_[bias]) {
      e.nodes.push_back(p);
      bias = g_.nodes[p].operands[0];
    }
    e.post_ops.push_back({kind, bias});
    return true;
  }

  // The value of v when it is a constant scalar spread over a shape (the broadcast and
  // the constant claimed into `nodes`).
  std::optional<double> splat(ValueId v, std::vector<int>& nodes) const {
    int p = producer_[v];
    std::vector<int> claimed;
    if (p >= 0 && g_.nodes[p].op == Op::Broadcast && only_user(v)) {
      claimed.push_back(p);
      v = g_.nodes[p].operands[0];
      p = producer_[v];
    }
    if (p < 0 || g_.nodes[p].op != Op::Constant || g_.type(v).rank() != 0) return std::nullopt;
    if (only_user(v)) claimed.push_back(p);
    nodes.insert(nodes.end(), claimed.begin(), claimed.end());
    return g_.nodes[p].attrs.get_literal("value").floats[0];
  }

  // x·sigmoid(x), or x·clip(x/6 + 1/2, 0, 1) (the clip as a minimum and a maximum with
  // constants, in either order), where those are x's only two users: appends the post-op,
  // claims its nodes and sets e.result to the product.
  bool silu_or_hard_swish(ValueId x, ConvEpilogue& e) {
    if (result_[x] || users_[x].size() != 2 || taken_[users_[x][0]] || taken_[users_[x][1]]) return false;
    for (int first = 0; first < 2; ++first) {
      const Node& a = g_.nodes[users_[x][first]];
      const Node& product = g_.nodes[users_[x][1 - first]];
      if (product.op != Op::Mul || product.operands.size() != 2) continue;
      const ValueId factor = product.operands[product.operands[0] == x ? 1 : 0];
      if (factor == x || (product.operands[0] != x && product.operands[1] != x)) continue;
      std::vector<int> nodes = {users_[x][first], users_[x][1 - first]};
      ConvPostOp::Kind kind;
      if (a.op == Op::Sigmoid && a.result == factor && only_user(a.result) == &product) {
        kind = ConvPostOp::Kind::Silu;
      } else if (!hard_sigmoid_of(x, a, factor, product, nodes)) {
        continue;
      } else {
        kind = ConvPostOp::Kind::HardSwish;
      }
      e.nodes.insert(e.nodes.end(), nodes.begin(), nodes.end());
      e.post_ops.push_back({kind});
      e.result = product.result;
      return true;
    }
    return false;
  }

  // Whether `scaled` = x·(1/6), then + 1/2, then clipped to [0, 1], gives `factor`, read
  // only by `product`. Claims the chain's nodes and constants into `nodes`.
  bool hard_sigmoid_of(ValueId x, const Node& scaled, ValueId factor, const Node& product, std::vector<int>& nodes) {
    auto other = [&](const Node& n, ValueId v) { return n.operands[n.operands[0] == v ? 1 : 0]; };
    auto near = [](std::optional<double> c, double want) { return c && std::abs(*c - want) <= 1e-6 * want; };
    if (scaled.op != Op::Mul || !near(splat(other(scaled, x), nodes), 1.0 / 6.0)) return false;
    const Node* shifted = only_user(scaled.result);
    if (!shifted || shifted->op != Op::Add || !near(splat(other(*shifted, scaled.result), nodes), 0.5)) return false;
    const Node* first = only_user(shifted->result);
    const Node* second = first ? only_user(first->result) : nullptr;
    if (!second || second->result != factor || only_user(factor) != &product) return false;
    for (const Node* bound : {first, second}) {
      const ValueId input = bound == first ? shifted->result : first->result;
      const std::optional<double> c = splat(other(*bound, input), nodes);
      if (!c || !((bound->op == Op::Maximum && *c == 0.0) || (bound->op == Op::Minimum && *c == 1.0))) return false;
    }
    if (first->op == second->op) return false;
    for (const Node* n : {shifted, first, second}) nodes.push_back(index_of(*n));
    return true;
  }

  // maximum(x, lo) then minimum(., hi) with constant bounds: a clip.
  bool clip_of(const Node& maximum, ValueId lo_value, ConvEpilogue& e) {
    const Node* minimum = only_user(maximum.result);
    if (!minimum || minimum->op != Op::Minimum) return false;
    const ValueId hi_value = minimum->operands[minimum->operands[0] == maximum.result ? 1 : 0];
    std::vector<int> claimed;
    std::optional<double> lo = splat(lo_value, claimed), hi = splat(hi_value, claimed);
    if (!lo || !hi || !(*lo <= *hi)) return false;
    e.nodes.insert(e.nodes.end(), claimed.begin(), claimed.end());
    e.post_ops.push_back({ConvPostOp::Kind::Clip, kNoValue, *lo, *hi});
    return true;
  }

  const Graph& g_;
  std::vector<int> producer_;
  std::vector<std::vector<int>> users_;
  std::vector<char> result_;
  std::vector<char> taken_;  // per node: in an epilogue matched already
};

}  // namespace

std::vector<ConvEpilogue> conv_epilogues(const Graph& g) {
  EpilogueMatcher matcher(g);
  std::vector<ConvEpilogue> found;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (auto e = matcher.match(static_cast<int>(i))) found.push_back(std::move(*e));
  return found;
}

}  // namespace kiln::ir
