#include "ir/epilogue.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <vector>

namespace kiln::ir {
namespace {

class EpilogueMatcher {
 public:
  EpilogueMatcher(const Graph& g, MatmulEpilogues matmuls, const std::vector<int>& folds)
      : g_(g),
        matmuls_(matmuls),
        folds_(folds),
        producer_(g.producers()),
        users_(g.values.size()),
        result_(g.values.size(), 0) {
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (ValueId v : g.nodes[i].operands) users_[v].push_back(static_cast<int>(i));
    for (ValueId v : g.results) result_[v] = 1;
    taken_.assign(g.nodes.size(), 0);
  }

  std::optional<Epilogue> match(int call) {
    const Node& c = g_.nodes[call];
    const TensorType& type = g_.type(c.result);
    // A bf16 or f16 matmul or convolution (autocast's) whose product is cast to f32 for the
    // ops after it: on the CPU its post-ops apply to the f32 sums (as PyTorch's autocast
    // linear adds its bias in the GEMM), the cast and the cast back after them, if any,
    // joining the call. (Convolutions are library calls on the CPU only.)
    const bool half = (c.op == Op::Conv || (c.op == Op::Matmul && matmuls_ == MatmulEpilogues::kOneDnn)) &&
                      (type.dtype == DType::BF16 || type.dtype == DType::F16);
    if (type.dtype != DType::F32 && !half) return std::nullopt;
    if (c.op == Op::Conv && type.rank() >= 3) {
      channel_axis_ = 1;
    } else if (c.op == Op::Matmul && matmuls_ != MatmulEpilogues::kNone && type.rank() >= 2) {
      channel_axis_ = type.rank() - 1;
    } else {
      return std::nullopt;
    }
    // oneDNN's matmul takes per-column binary operands too, but a bias and activations
    // are what linear layers have.
    const bool convolution = c.op == Op::Conv;
    Epilogue e;
    e.call = call;
    ValueId x = c.result;
    if (half) {
      const Node* widen = only_user(x);
      if (!widen || widen->op != Op::Cast || g_.type(widen->result).dtype != DType::F32) return std::nullopt;
      e.nodes.push_back(index_of(*widen));
      x = widen->result;
    }
    bool added = !convolution;
    // A chain the matmul's library does not apply ends before the op that left it.
    const MatmulEpilogues library = convolution ? MatmulEpilogues::kOneDnn : matmuls_;
    while (true) {
      const Epilogue before = e;
      if (silu_or_hard_swish(x, e) || gelu(x, e)) {
        if (!applies_post_ops(library, e.post_ops)) {
          e = before;
          break;
        }
        x = e.result;
        continue;
      }
      const Node* u = only_user(x);
      if (!u) break;
      const ValueId other = u->operands.size() == 2 ? u->operands[u->operands[0] == x ? 1 : 0] : kNoValue;
      const bool x_first = !u->operands.empty() && u->operands[0] == x;
      if (u->op == Op::Add && (convolution || e.post_ops.empty()) &&
          per_channel(other, e.post_ops.empty() ? PostOp::Kind::Bias : PostOp::Kind::ChannelAdd, e)) {
        // per_channel appended the post-op
      } else if (convolution && ((u->op == Op::Sub && x_first) || u->op == Op::Mul) &&
                 per_channel(other, u->op == Op::Sub ? PostOp::Kind::ChannelSub : PostOp::Kind::ChannelMul, e)) {
      } else if (u->op == Op::Relu) {
        e.post_ops.push_back({PostOp::Kind::Relu});
      } else if (u->op == Op::Sigmoid) {
        e.post_ops.push_back({PostOp::Kind::Sigmoid});
      } else if (u->op == Op::Tanh) {
        e.post_ops.push_back({PostOp::Kind::Tanh});
      } else if (u->op == Op::Maximum && clip_of(*u, other, e)) {
        e.nodes.push_back(index_of(*u));
        u = only_user(u->result);  // the clip's minimum
      } else if (u->op == Op::Add && !added && other != x && g_.type(other) == g_.type(x) && !spread(other)) {
        added = true;
        e.post_ops.push_back({PostOp::Kind::Add, other});
      } else {
        break;
      }
      if (!applies_post_ops(library, e.post_ops)) {
        e = before;
        break;
      }
      e.nodes.push_back(index_of(*u));
      e.result = x = u->result;
    }
    if (e.post_ops.empty()) return std::nullopt;
    // The result rounded back for the next call joins too; not after a residual add, which
    // oneDNN reads from the result's buffer, in the result's type.
    const bool residual =
        std::any_of(e.post_ops.begin(), e.post_ops.end(), [](const PostOp& p) { return p.kind == PostOp::Kind::Add; });
    if (half && !residual) {
      if (const Node* narrow = only_user(x); narrow && narrow->op == Op::Cast && g_.type(narrow->result) == type) {
        e.nodes.push_back(index_of(*narrow));
        e.result = x = narrow->result;
      }
    }
    // A matmul's bias alone saves a pass over C where a library call reads the sum (directly
    // or in place through a view) or it is a result; where only kernels read it, they add
    // the bias on the way for free (oneDNN's bias cost up to 2% of the GEMM). In half
    // precision also where the sum reaches a library call through movement ops and casts
    // (attention's heads, cast back to the precision, which the attention step reads in
    // place): GPT-2's qkv bias ran as a kernel of 2.4 ms over the bf16 product otherwise.
    if (!convolution && e.post_ops.size() == 1 && e.post_ops[0].kind == PostOp::Kind::Bias && !result_[x] &&
        std::none_of(
            users_[x].begin(), users_[x].end(),
            [&](int u) { return op_kind(g_.nodes[u].op) == OpKind::Library || (!folds_.empty() && folds_[u] >= 0); }) &&
        !(half && reaches_library(x, 6)))
      return std::nullopt;
    std::sort(e.nodes.begin(), e.nodes.end());
    for (int n : e.nodes) taken_[n] = 1;  // a node is in one epilogue: a residual add follows two convolutions
    return e;
  }

 private:
  // Whether v is a broadcast's result: as the call's operand it would be written to memory
  // whole, where a kernel computes it from the smaller operand.
  bool spread(ValueId v) const { return producer_[v] >= 0 && g_.nodes[producer_[v]].op == Op::Broadcast; }

  int index_of(const Node& n) const { return static_cast<int>(&n - g_.nodes.data()); }

  // Whether a library call reads v through at most `depth` slices, reshapes, transposes
  // and casts.
  bool reaches_library(ValueId v, int depth) const {
    for (int u : users_[v]) {
      const Node& n = g_.nodes[u];
      if (op_kind(n.op) == OpKind::Library) return true;
      const bool passes = n.op == Op::Slice || n.op == Op::Reshape || n.op == Op::Transpose || n.op == Op::Cast;
      if (passes && depth > 0 && reaches_library(n.result, depth - 1)) return true;
    }
    return false;
  }

  // The one node reading v, where v is not a result and that node is in no other
  // convolution's epilogue; else null.
  const Node* only_user(ValueId v) const {
    if (result_[v] || users_[v].size() != 1 || taken_[users_[v][0]]) return nullptr;
    return &g_.nodes[users_[v][0]];
  }

  // Whether v is a per-channel value spread over the call's result: a single-use broadcast
  // whose operand's only extents above one land on the channel axis. Appends the post-op
  // of `kind` and claims the broadcast and the single-use reshapes before it.
  bool per_channel(ValueId v, PostOp::Kind kind, Epilogue& e) {
    if (v == kNoValue) return false;
    const int b = producer_[v];
    if (b < 0 || g_.nodes[b].op != Op::Broadcast || !only_user(v)) return false;
    const Node& broadcast = g_.nodes[b];
    const Shape& from = g_.type(broadcast.operands[0]).shape;
    const std::vector<int64_t>& dims = broadcast.attrs.get_ints("dims");
    const int64_t channels = g_.type(v).shape[static_cast<size_t>(channel_axis_)];
    bool on_channels = false;
    for (size_t i = 0; i < from.size(); ++i) {
      if (from[i] == 1) continue;
      if (dims[i] != channel_axis_ || from[i] != channels) return false;
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
    const Literal& value = g_.nodes[p].attrs.get_literal("value");
    if (value.floats.size() != 1) return std::nullopt;  // an integer constant
    if (only_user(v)) claimed.push_back(p);
    nodes.insert(nodes.end(), claimed.begin(), claimed.end());
    return value.floats[0];
  }

  // x·sigmoid(x), or x·clip(x/6 + 1/2, 0, 1) (the clip as a minimum and a maximum with
  // constants, in either order), where those are x's only two users: appends the post-op,
  // claims its nodes and sets e.result to the product.
  bool silu_or_hard_swish(ValueId x, Epilogue& e) {
    if (result_[x] || users_[x].size() != 2 || taken_[users_[x][0]] || taken_[users_[x][1]]) return false;
    for (int first = 0; first < 2; ++first) {
      const Node& a = g_.nodes[users_[x][first]];
      const Node& product = g_.nodes[users_[x][1 - first]];
      if (product.op != Op::Mul || product.operands.size() != 2) continue;
      const ValueId factor = product.operands[product.operands[0] == x ? 1 : 0];
      if (factor == x || (product.operands[0] != x && product.operands[1] != x)) continue;
      std::vector<int> nodes = {users_[x][first], users_[x][1 - first]};
      PostOp::Kind kind;
      if (a.op == Op::Sigmoid && a.result == factor && only_user(a.result) == &product) {
        kind = PostOp::Kind::Silu;
      } else if (!hard_sigmoid_of(x, a, factor, product, nodes)) {
        continue;
      } else {
        kind = PostOp::Kind::HardSwish;
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

  // GELU of x in either form: the shortest run of nodes after x, each an add, sub, mul,
  // div, neg, pow, erf or tanh of x, of each other and of scalar constants, that all of x's
  // uses and all but the last one's lie in, and that gelu_function recognizes. Appends
  // the post-op, claims the nodes and splats and sets e.result to the last one's result.
  bool gelu(ValueId x, Epilogue& e) {
    static constexpr size_t kMaxNodes = 24;  // GELU is 6-9 ops however a model writes it
    static constexpr int kMaxGap = 32;       // nodes between two of the run (other branches)
    if (result_[x] || users_[x].empty()) return false;
    std::vector<int> run, claimed;
    std::vector<ValueId> inside;  // the run's results
    auto in_run = [&](ValueId v) { return std::find(inside.begin(), inside.end(), v) != inside.end(); };
    int transcendental = 0;
    const int first = *std::min_element(users_[x].begin(), users_[x].end());
    for (int i = first, last = first; i < static_cast<int>(g_.nodes.size()) && i - last <= kMaxGap; ++i) {
      const Node& n = g_.nodes[i];
      if (taken_[i] || !(n.op == Op::Add || n.op == Op::Sub || n.op == Op::Mul || n.op == Op::Div || n.op == Op::Neg ||
                         n.op == Op::Pow || n.op == Op::Erf || n.op == Op::Tanh))
        continue;
      bool reads_run = false, fits = true;
      std::vector<int> splats;
      for (ValueId v : n.operands) {
        if (v == x || in_run(v)) reads_run = true;
        else fits = fits && splat(v, splats).has_value();
      }
      if (!reads_run || !fits) continue;
      run.push_back(i);
      claimed.insert(claimed.end(), splats.begin(), splats.end());
      inside.push_back(n.result);
      last = i;
      transcendental += n.op == Op::Erf || n.op == Op::Tanh;
      if (run.size() > kMaxNodes || transcendental > 1) return false;
      if (transcendental == 1 && closed(x, run, in_run))
        if (std::optional<PostOp::Kind> kind = gelu_function(g_, producer_, x, run)) {
          e.nodes.insert(e.nodes.end(), run.begin(), run.end());
          e.nodes.insert(e.nodes.end(), claimed.begin(), claimed.end());
          e.post_ops.push_back({*kind});
          e.result = n.result;
          return true;
        }
    }
    return false;
  }

  // Whether every use of x and of each run node's result but the last lies in the run.
  template <class InRun>
  bool closed(ValueId x, const std::vector<int>& run, const InRun& in_run) const {
    auto used_inside = [&](ValueId v) {
      if (result_[v]) return false;
      for (int u : users_[v])
        if (!in_run(g_.nodes[u].result)) return false;
      return true;
    };
    if (!used_inside(x)) return false;
    for (size_t i = 0; i + 1 < run.size(); ++i)
      if (!used_inside(g_.nodes[run[i]].result)) return false;
    return true;
  }

  // maximum(x, lo) then minimum(., hi) with constant bounds: a clip.
  bool clip_of(const Node& maximum, ValueId lo_value, Epilogue& e) {
    const Node* minimum = only_user(maximum.result);
    if (!minimum || minimum->op != Op::Minimum) return false;
    const ValueId hi_value = minimum->operands[minimum->operands[0] == maximum.result ? 1 : 0];
    std::vector<int> claimed;
    std::optional<double> lo = splat(lo_value, claimed), hi = splat(hi_value, claimed);
    if (!lo || !hi || !(*lo <= *hi)) return false;
    e.nodes.insert(e.nodes.end(), claimed.begin(), claimed.end());
    e.post_ops.push_back({PostOp::Kind::Clip, kNoValue, *lo, *hi});
    return true;
  }

  const Graph& g_;
  MatmulEpilogues matmuls_;
  const std::vector<int>& folds_;
  int64_t channel_axis_ = 1;  // of the call being matched
  std::vector<int> producer_;
  std::vector<std::vector<int>> users_;
  std::vector<char> result_;
  std::vector<char> taken_;  // per node: in an epilogue matched already
};

}  // namespace

bool applies_post_ops(MatmulEpilogues matmuls, const std::vector<PostOp>& post_ops) {
  using Kind = PostOp::Kind;
  switch (matmuls) {
    case MatmulEpilogues::kNone: return post_ops.empty();
    case MatmulEpilogues::kOneDnn: return true;
    case MatmulEpilogues::kCublasLt: {
      size_t i = 0;
      if (i < post_ops.size() && post_ops[i].kind == Kind::Bias) ++i;
      if (i < post_ops.size() && (post_ops[i].kind == Kind::Relu || post_ops[i].kind == Kind::GeluTanh)) ++i;
      return i == post_ops.size();
    }
  }
  return false;
}

std::vector<Epilogue> library_epilogues(const Graph& g, MatmulEpilogues matmuls, const std::vector<int>& folds) {
  EpilogueMatcher matcher(g, matmuls, folds);
  std::vector<Epilogue> found;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (auto e = matcher.match(static_cast<int>(i))) found.push_back(std::move(*e));
  return found;
}

std::optional<PostOp::Kind> gelu_function(const Graph& g, const std::vector<int>& producer, ValueId x,
                                          const std::vector<int>& nodes) {
  if (nodes.empty()) return std::nullopt;
  std::vector<double> points;
  for (int i = -160; i <= 160; ++i) points.push_back(i / 16.0);
  for (double far : {30.0, 1000.0}) points.insert(points.end(), {far, -far});
  std::map<ValueId, std::vector<double>> values = {{x, points}};
  // An operand's values at the points: computed before, or a scalar constant spread.
  auto operand = [&](ValueId v) -> std::optional<std::vector<double>> {
    if (auto it = values.find(v); it != values.end()) return it->second;
    int p = producer[v];
    if (p >= 0 && g.nodes[p].op == Op::Broadcast) p = producer[g.nodes[p].operands[0]];
    if (p < 0 || g.nodes[p].op != Op::Constant) return std::nullopt;
    const Literal& value = g.nodes[p].attrs.get_literal("value");
    if (value.floats.size() != 1) return std::nullopt;
    return std::vector<double>(points.size(), value.floats[0]);
  };
  for (int index : nodes) {
    const Node& n = g.nodes[index];
    std::vector<std::vector<double>> in;
    for (ValueId v : n.operands) {
      std::optional<std::vector<double>> o = operand(v);
      if (!o) return std::nullopt;
      in.push_back(std::move(*o));
    }
    const size_t arity = n.op == Op::Neg || n.op == Op::Erf || n.op == Op::Tanh ? 1 : 2;
    if (in.size() != arity) return std::nullopt;
    std::vector<double> out(points.size());
    for (size_t i = 0; i < points.size(); ++i) {
      const double a = in[0][i], b = arity == 2 ? in[1][i] : 0.0;
      switch (n.op) {
        case Op::Add: out[i] = a + b; break;
        case Op::Sub: out[i] = a - b; break;
        case Op::Mul: out[i] = a * b; break;
        case Op::Div: out[i] = a / b; break;
        case Op::Neg: out[i] = -a; break;
        case Op::Pow: out[i] = std::pow(a, b); break;
        case Op::Erf: out[i] = std::erf(a); break;
        case Op::Tanh: out[i] = std::tanh(a); break;
        default: return std::nullopt;
      }
    }
    values[n.result] = std::move(out);
  }
  const std::vector<double>& f = values[g.nodes[nodes.back()].result];
  auto agrees = [&](double (*form)(double)) {
    for (size_t i = 0; i < points.size(); ++i)
      if (!(std::abs(f[i] - form(points[i])) <= 1e-6 * (1 + std::abs(points[i])))) return false;
    return true;
  };
  if (agrees([](double t) { return 0.5 * t * (1 + std::erf(t * M_SQRT1_2)); })) return PostOp::Kind::GeluErf;
  if (agrees([](double t) { return 0.5 * t * (1 + std::tanh(std::sqrt(2 / M_PI) * (t + 0.044715 * t * t * t))); }))
    return PostOp::Kind::GeluTanh;
  return std::nullopt;
}

}  // namespace kiln::ir
