// The backward of an attention as one step (ir/attention_match.h, AttentionGradientMatch).
#include <algorithm>
#include <optional>
#include <utility>

#include "ir/attention_match.h"
#include "ir/attention_matcher.h"
#include "ir/shape_inference.h"

namespace kiln::ir {
namespace detail {
namespace {

bool swaps_last_two(const Node& transpose) {
  const std::vector<int64_t>& perm = transpose.attrs.get_ints("perm");
  const size_t r = perm.size();
  if (r < 2 || perm[r - 1] != static_cast<int64_t>(r) - 2 || perm[r - 2] != static_cast<int64_t>(r) - 1) return false;
  for (size_t d = 0; d + 2 < r; ++d)
    if (perm[d] != static_cast<int64_t>(d)) return false;
  return true;
}

}  // namespace

void AttentionMatcher::gradient_writes(AttentionGradientMatch& m, std::vector<int>& nodes) const {
  const ValueId results[3] = {m.d_query, m.d_key, m.d_value};
  auto matrix = [](const StridedView& view) { return matrix_view(view).has_value(); };
  std::vector<int> chains[3], claimed[3];
  ValueId ends[3];
  for (int i = 0; i < 3; ++i) {
    std::tie(m.written[i], m.written_views[i]) =
        written_through(results[i], m.scores.precision, claimed[i], matrix, &chains[i]);
    ends[i] = chains[i].empty() ? results[i] : g_.nodes[chains[i].back()].result;
  }
  // The three whole chains' ends joined by one concat that alone reads them: each written
  // into its part of the concat's result.
  const Node* concat = single_use(ends[0]) ? &g_.nodes[users_[ends[0]][0]] : nullptr;
  bool joined = concat && concat->op == Op::Concat && concat->operands.size() == 3;
  for (int i = 0; i < 3 && joined; ++i) joined = single_use(ends[i]) && users_[ends[i]][0] == index_of(*concat);
  if (joined) {
    const Shape& shape = g_.type(concat->result).shape;
    const std::vector<int64_t> strides = row_major_strides(shape);
    const int64_t axis = *normalize_axis(concat->attrs.get_int("axis"), static_cast<int64_t>(shape.size()));
    std::array<StridedView, 3> views;
    int64_t at = 0;
    for (ValueId operand : concat->operands) {
      const int i = operand == ends[0] ? 0 : operand == ends[1] ? 1 : 2;
      std::optional<StridedView> view =
          view_back(chains[i], StridedView{at * strides[static_cast<size_t>(axis)], g_.type(operand).shape, strides});
      joined = joined && view && matrix(*view);
      if (view) views[i] = std::move(*view);
      at += g_.type(operand).shape[static_cast<size_t>(axis)];
    }
    joined = joined && ends[0] != ends[1] && ends[1] != ends[2] && ends[0] != ends[2];
    if (joined) {
      for (int i = 0; i < 3; ++i) {
        m.written[i] = concat->result;
        m.written_views[i] = std::move(views[i]);
        nodes.insert(nodes.end(), chains[i].begin(), chains[i].end());
      }
      nodes.push_back(index_of(*concat));
      return;
    }
  }
  for (const std::vector<int>& c : claimed) nodes.insert(nodes.end(), c.begin(), c.end());
}

std::optional<std::vector<int>> AttentionMatcher::scores_nodes(int div) const {
  AttentionMatch m;
  // In half precision (autocast's form) P is read cast to it: q·kᵀ is of that type.
  for (int u : users_[g_.nodes[div].result])
    if (g_.nodes[u].op == Op::Cast && is_half(g_.type(g_.nodes[u].result).dtype))
      m.precision = g_.type(g_.nodes[u].result).dtype;
  const std::optional<ValueId> x = softmax_input(div, m.nodes);
  if (!x || !scores_chain(*x, m)) return std::nullopt;
  return m.nodes;
}

std::optional<AttentionGradientMatch> AttentionMatcher::match_gradient(int div) {
  AttentionGradientMatch m;
  std::vector<int>& nodes = m.scores.nodes;
  const ValueId p = g_.nodes[div].result;
  // P's readers: transpose(P) for dv = Pᵀ·dO (in half precision, of P cast to it), and the
  // softmax's gradient P ∘ (dP − Σ dP ∘ P).
  if (result_[p] || users_[p].size() != 3) return std::nullopt;
  const Node *transpose = nullptr, *dp_times_p = nullptr, *p_times_difference = nullptr;
  std::vector<const Node*> muls;
  for (int u : users_[p]) {
    const Node& n = g_.nodes[u];
    if (n.op == Op::Cast && is_half(g_.type(n.result).dtype) && !transpose && single_use(n.result)) {
      m.scores.precision = g_.type(n.result).dtype;
      nodes.push_back(u);
      transpose = &g_.nodes[users_[n.result][0]];
      if (transpose->op != Op::Transpose) return std::nullopt;
    } else if (n.op == Op::Transpose && !transpose) {
      transpose = &n;
    } else if (n.op == Op::Mul && n.operands[0] != n.operands[1]) {
      muls.push_back(&n);
    } else {
      return std::nullopt;
    }
  }
  const DType precision = m.scores.precision;
  const std::optional<ValueId> x = softmax_input(div, nodes);
  if (!x || !scores_chain(*x, m.scores)) return std::nullopt;
  const TensorType& scores = g_.type(p);
  const Shape batch(scores.shape.begin(), scores.shape.end() - 2);
  for (const Node* n : muls) {
    const ValueId other = n->operands[n->operands[0] == p ? 1 : 0];
    const Node* q = producer(other);
    if (product_of(other, precision) && !dp_times_p) dp_times_p = n;
    else if (q && q->op == Op::Sub && !p_times_difference) p_times_difference = n;
    else return std::nullopt;
  }
  if (!transpose || !dp_times_p || !p_times_difference || !swaps_last_two(*transpose) || !single_use(transpose->result))
    return std::nullopt;
  const Node& dv = g_.nodes[users_[transpose->result][0]];
  if (dv.op != Op::Matmul || dv.operands[0] != transpose->result || dv.operands[1] == transpose->result)
    return std::nullopt;
  const ValueId dp = dp_times_p->operands[dp_times_p->operands[0] == p ? 1 : 0];
  const ValueId difference = p_times_difference->operands[p_times_difference->operands[0] == p ? 1 : 0];
  const Node& sub = *producer(difference);
  if (sub.operands[0] != dp || !single_use(difference) || !single_use(dp_times_p->result)) return std::nullopt;
  if (!used_by_only(dp, {index_of(*dp_times_p), index_of(sub)})) return std::nullopt;
  if (reducer_of(sub.operands[1], Op::ReduceSum, dp_times_p->result, nodes) < 0) return std::nullopt;
  const Node& dp_call = *product_of(dp, precision);
  if (g_.type(dp).dtype != DType::F32 || g_.type(dp).shape != scores.shape) return std::nullopt;
  for (const Node* n : {transpose, &dv, dp_times_p, p_times_difference, &sub, &dp_call, producer(dp)})
    nodes.push_back(index_of(*n));
  // f's gradient, its transforms in reverse: a scaling's product, a mask's select of 0.
  ValueId ds = p_times_difference->result;
  for (size_t i = m.scores.transforms.size(); i-- > 0;) {
    const ScoreTransform& t = m.scores.transforms[i];
    if (t.kind == ScoreTransform::Kind::Add) continue;
    if (!single_use(ds)) return std::nullopt;
    const int ui = users_[ds][0];
    const Node& n = g_.nodes[ui];
    if (t.kind == ScoreTransform::Kind::Scale) {
      if ((n.op != Op::Mul && n.op != Op::Div) || n.operands.size() != 2 || n.operands[0] == n.operands[1] ||
          (n.op == Op::Div && n.operands[0] != ds))
        return std::nullopt;
      const std::optional<double> c = splat(n.operands[n.operands[0] == ds ? 1 : 0], nodes);
      if (!c || (n.op == Op::Mul ? *c : 1.0 / *c) != t.value) return std::nullopt;
    } else {
      if (n.op != Op::Select || n.operands[1] != ds || n.operands[2] == ds) return std::nullopt;
      const std::optional<double> fill = splat(n.operands[2], nodes);
      if (!fill || *fill != 0) return std::nullopt;
      if (t.kind == ScoreTransform::Kind::Causal) {
        if (!causal_condition(n.operands[0], scores.shape, nodes)) return std::nullopt;
      } else if (same_read(view_of_value(n.operands[0]), view_of_value(t.read))) {
        read_through(n.operands[0], nodes);
      } else {
        return std::nullopt;
      }
    }
    nodes.push_back(ui);
    ds = n.result;
  }
  // In half precision, dS cast to it for the products.
  if (precision != DType::F32) {
    if (!single_use(ds) || g_.nodes[users_[ds][0]].op != Op::Cast) return std::nullopt;
    const Node& cast = g_.nodes[users_[ds][0]];
    if (g_.type(cast.result).dtype != precision) return std::nullopt;
    nodes.push_back(index_of(cast));
    ds = cast.result;
  }
  // dS read by dq = dS·kᵀᵀ and d(kᵀ) = qᵀ·dS only, their other operands q's and kᵀ's
  // transposes (however each is read through movement ops).
  if (result_[ds] || users_[ds].size() != 2) return std::nullopt;
  const Node& qk = g_.nodes[m.scores.scores_call];
  const Node *dq = nullptr, *dk = nullptr;
  for (int u : users_[ds]) {
    const Node& n = g_.nodes[u];
    if (n.op != Op::Matmul || n.operands[0] == n.operands[1]) return std::nullopt;
    if (n.operands[0] == ds && !dq) dq = &n;
    else if (n.operands[1] == ds && !dk) dk = &n;
    else return std::nullopt;
  }
  if (!dq || !dk) return std::nullopt;
  auto transposed_view = [&](ValueId v) {
    auto [base, view] = view_of_value(v);
    return std::pair{base, swapped(view)};
  };
  if (!same_read(view_of_value(dq->operands[1]), transposed_view(qk.operands[1])) ||
      !same_read(view_of_value(dk->operands[0]), transposed_view(qk.operands[0])))
    return std::nullopt;
  // dP = dO·vᵀ and dv = Pᵀ·dO read the same dO.
  if (!same_read(view_of_value(dp_call.operands[0]), view_of_value(dv.operands[1]))) return std::nullopt;
  StridedView ignored_view;
  ValueId ignored_base;
  for (ValueId read : {dq->operands[1], dk->operands[0]})
    if (!operand_view(read, batch, precision, ignored_base, ignored_view, nodes)) return std::nullopt;
  if (!operand_view(dp_call.operands[0], batch, precision, m.d_out, m.d_out_view, nodes) ||
      !operand_view(dv.operands[1], batch, precision, ignored_base, ignored_view, nodes) ||
      !operand_view(dp_call.operands[1], batch, precision, m.scores.v, m.scores.v_view, nodes))
    return std::nullopt;
  m.scores.v_view = swapped(m.scores.v_view);  // vᵀ [.., Dv, S] as v [.., S, Dv]
  const int64_t t = scores.shape[scores.shape.size() - 2], s = scores.shape.back();
  const int64_t d = m.scores.q_view.shape.back(), dv_dim = m.scores.v_view.shape.back();
  auto has_shape = [&](ValueId v, int64_t rows, int64_t cols) {
    Shape want = batch;
    want.push_back(rows);
    want.push_back(cols);
    return g_.type(v).dtype == precision && g_.type(v).shape == want;
  };
  if (!has_shape(dq->result, t, d) || !has_shape(dk->result, d, s) || !has_shape(dv.result, s, dv_dim) ||
      m.d_out_view.shape.back() != dv_dim)
    return std::nullopt;
  m.probabilities_call = index_of(dp_call);
  m.values_call = index_of(dv);
  m.queries_call = index_of(*dq);
  m.keys_call = index_of(*dk);
  m.d_query = dq->result;
  m.d_key = dk->result;
  m.d_value = dv.result;
  gradient_writes(m, nodes);
  // Each a step output: read by something or returned (a pipeline without dce may leave one
  // unread), in f32 (in half precision after autocast's cast back, or in the precision
  // where q, k and v are stored in it and their gradients are too).
  for (ValueId written : m.written)
    if ((users_[written].empty() && !result_[written]) ||
        (g_.type(written).dtype != DType::F32 && g_.type(written).dtype != precision))
      return std::nullopt;
  nodes.push_back(m.queries_call);
  nodes.push_back(m.keys_call);
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  m.nodes = nodes;
  return m;
}

}  // namespace detail

std::optional<std::vector<int>> attention_scores_nodes(const Graph& g, int div) {
  detail::AttentionMatcher matcher(g);
  return matcher.scores_nodes(div);
}

std::vector<AttentionGradientMatch> attention_gradient_matches(const Graph& g) {
  detail::AttentionMatcher matcher(g);
  std::vector<AttentionGradientMatch> found;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (auto m = matcher.match_gradient(static_cast<int>(i))) found.push_back(std::move(*m));
  return found;
}

std::vector<AttentionGradientMatch> attention_gradient_matches(const Graph& g, AttentionRunner runner) {
  if (runner == AttentionRunner::kNone) return {};
  std::vector<AttentionGradientMatch> found = attention_gradient_matches(g);
  if (runner == AttentionRunner::kCuda)
    std::erase_if(found, [](const AttentionGradientMatch& m) { return !cuda_runs_attention_gradient(m); });
  return found;
}

bool cuda_runs_attention_gradient(const AttentionGradientMatch& m) {
  const int64_t d = m.scores.q_view.shape.back(), dv = m.scores.v_view.shape.back();
  if (m.scores.precision == DType::F32) return d <= kCudaF32AttentionMaxHeadDim && dv <= kCudaF32AttentionMaxHeadDim;
  return detail::is_half(m.scores.precision) && d <= kCudaAttentionMaxHeadDim && dv <= kCudaAttentionMaxHeadDim;
}

int64_t cuda_attention_gradient_scratch_bytes(const AttentionGradientMatch& m) {
  const Shape& q = m.scores.q_view.shape;
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < q.size(); ++d) rows *= q[d];
  return rows * kCudaAttentionGradientRowValues * static_cast<int64_t>(sizeof(float));
}

const AttentionGradientMatch* attention_gradient_of(const std::vector<AttentionGradientMatch>& matches,
                                                    const Step& step) {
  auto has = [&](int node) { return std::find(step.nodes.begin(), step.nodes.end(), node) != step.nodes.end(); };
  for (const AttentionGradientMatch& m : matches)
    if (has(m.scores.scores_call) && has(m.queries_call)) return &m;
  return nullptr;
}

}  // namespace kiln::ir
