#include "ir/attention_match.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <utility>

#include "ir/attention_matcher.h"
#include "ir/types.h"

namespace kiln::ir {
namespace detail {

std::optional<ValueId> AttentionMatcher::softmax_input(int div, std::vector<int>& nodes) const {
  const Node& d = g_.nodes[div];
  if (d.op != Op::Div || g_.type(d.result).dtype != DType::F32 || g_.type(d.result).rank() < 2) return std::nullopt;
  nodes.push_back(div);
  // softmax(x) = e / sum(e) over the last axis, e = exp(x - max(x)).
  const ValueId e = d.operands[0];
  const Node* exp = producer(e);
  if (!exp || exp->op != Op::Exp || !used_by_only(e, {div, reducer_of(d.operands[1], Op::ReduceSum, e, nodes)}))
    return std::nullopt;
  nodes.push_back(index_of(*exp));
  const Node* sub = producer(exp->operands[0]);
  if (!sub || sub->op != Op::Sub || !single_use(exp->operands[0])) return std::nullopt;
  nodes.push_back(index_of(*sub));
  const ValueId x = sub->operands[0];
  if (!used_by_only(x, {index_of(*sub), reducer_of(sub->operands[1], Op::ReduceMax, x, nodes)})) return std::nullopt;
  return x;
}

bool AttentionMatcher::scores_chain(ValueId x, AttentionMatch& m) const {
  std::vector<int>& nodes = m.nodes;
  // f, back from x to q·kᵀ.
  const Shape& scores_shape = g_.type(x).shape;
  ValueId s = x;
  for (bool first = true;; first = false) {
    if (!first && !single_use(s)) return false;
    const Node* p = producer(s);
    if (!p) return false;
    const int pi = index_of(*p);
    if (p->op == Op::Matmul) {
      m.scores_call = pi;
      break;
    }
    // In half precision, the scores' cast to f32 right after q·kᵀ.
    if (p->op == Op::Cast && m.precision != DType::F32 && g_.type(p->operands[0]).dtype == m.precision &&
        single_use(p->operands[0]) && producer(p->operands[0]) && producer(p->operands[0])->op == Op::Matmul) {
      nodes.push_back(pi);
      m.scores_call = index_of(*producer(p->operands[0]));
      break;
    }
    nodes.push_back(pi);
    ScoreTransform t;
    if ((p->op == Op::Mul || p->op == Op::Div) && p->operands.size() == 2) {
      const int chain = p->op == Op::Div ? 0 : scalar(p->operands[1]) ? 0 : 1;
      const std::optional<double> c = splat(p->operands[1 - chain], nodes);
      if (!c || (p->op == Op::Div && *c == 0)) return false;
      t.value = p->op == Op::Mul ? *c : 1.0 / *c;
      s = p->operands[chain];
    } else if (p->op == Op::Add && p->operands.size() == 2) {
      const bool first = leads_to_scores(p->operands[0], 8), second = leads_to_scores(p->operands[1], 8);
      if (first == second) return false;
      const int chain = first ? 0 : 1;
      const ValueId mask = p->operands[1 - chain];
      if (g_.type(mask).dtype != DType::F32 || g_.type(mask).shape != scores_shape) return false;
      t.kind = ScoreTransform::Kind::Add;
      t.read = mask;
      std::tie(t.operand, t.view) = read_through(mask, nodes);
      s = p->operands[chain];
    } else if (p->op == Op::Select) {
      const std::optional<double> fill = splat(p->operands[2], nodes);
      if (!fill) return false;
      t.value = *fill;
      if (causal_condition(p->operands[0], scores_shape, nodes)) {
        t.kind = ScoreTransform::Kind::Causal;
      } else {
        t.kind = ScoreTransform::Kind::Keep;
        t.read = p->operands[0];
        std::tie(t.operand, t.view) = read_through(p->operands[0], nodes);
      }
      s = p->operands[1];
    } else {
      return false;
    }
    m.transforms.insert(m.transforms.begin(), std::move(t));
  }
  // Masks of each kind in any number (a padding mask beside keys strictly before the
  // query, both bool), but one causal select: the kernels leave out the tiles past its
  // diagonal where it is the last transform.
  if (std::count_if(m.transforms.begin(), m.transforms.end(),
                    [&](const auto& t) { return t.kind == ScoreTransform::Kind::Causal; }) > 1)
    return false;
  const Node& qk = g_.nodes[m.scores_call];
  const TensorType& scores = g_.type(qk.result);
  if (scores.dtype != m.precision || scores.shape != scores_shape || qk.operands[0] == qk.operands[1]) return false;
  nodes.push_back(m.scores_call);
  const Shape batch(scores_shape.begin(), scores_shape.end() - 2);
  if (!(operand_view(qk.operands[0], batch, m.precision, m.q, m.q_view, nodes) &&
        operand_view(qk.operands[1], batch, m.precision, m.k, m.k_view, nodes)))
    return false;
  m.k_view = swapped(m.k_view);  // kᵀ's view [.., D, S] as k's [.., S, D]
  return true;
}

std::optional<AttentionMatch> AttentionMatcher::match(int div) {
  AttentionMatch m;
  std::vector<int>& nodes = m.nodes;
  const std::optional<ValueId> x = softmax_input(div, nodes);
  if (!x) return std::nullopt;
  const Node& d = g_.nodes[div];
  // P·v, P read by that matmul only; in half precision (autocast's form) through one
  // cast of P to it.
  if (!single_use(d.result)) return std::nullopt;
  ValueId p_value = d.result;
  if (const Node& cast = g_.nodes[users_[p_value][0]]; cast.op == Op::Cast && is_half(g_.type(cast.result).dtype)) {
    m.precision = g_.type(cast.result).dtype;
    nodes.push_back(users_[p_value][0]);
    p_value = cast.result;
    if (!single_use(p_value)) return std::nullopt;
  }
  const int values_call = users_[p_value][0];
  const Node& pv = g_.nodes[values_call];
  if (pv.op != Op::Matmul || pv.operands[0] != p_value || pv.operands[1] == p_value) return std::nullopt;
  m.values_call = values_call;
  nodes.push_back(values_call);
  if (!scores_chain(*x, m) || g_.type(pv.result).dtype != m.precision) return std::nullopt;
  const Shape& scores_shape = g_.type(*x).shape;
  const Shape batch(scores_shape.begin(), scores_shape.end() - 2);
  if (!operand_view(pv.operands[1], batch, m.precision, m.v, m.v_view, nodes)) return std::nullopt;
  std::tie(m.result, m.out_view) = written_through(pv.result, m.precision, nodes);
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return m;
}

}  // namespace detail

std::vector<AttentionMatch> attention_matches(const Graph& g) {
  detail::AttentionMatcher matcher(g);
  std::vector<AttentionMatch> found;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (auto m = matcher.match(static_cast<int>(i))) found.push_back(std::move(*m));
  return found;
}

bool cuda_runs_attention(const AttentionMatch& m) {
  const bool f32 = m.precision == DType::F32;
  if (!f32 && !detail::is_half(m.precision)) return false;
  const int64_t d = m.q_view.shape.back(), dv = m.v_view.shape.back();
  auto fits = [&](int64_t dim) {
    return f32 ? dim % 4 == 0 && dim <= kCudaF32AttentionMaxHeadDim : dim % 8 == 0 && dim <= kCudaAttentionMaxHeadDim;
  };
  auto rows_contiguous = [](const StridedView& view) { return view.strides.back() == 1; };
  return fits(d) && fits(dv) && rows_contiguous(m.q_view) && rows_contiguous(m.k_view) && rows_contiguous(m.v_view) &&
         rows_contiguous(m.out_view);
}

const AttentionMatch* attention_of(const std::vector<AttentionMatch>& matches, const Step& step) {
  auto has = [&](int node) { return std::find(step.nodes.begin(), step.nodes.end(), node) != step.nodes.end(); };
  for (const AttentionMatch& m : matches)
    if (has(m.scores_call) && has(m.values_call)) return &m;
  return nullptr;
}

std::vector<AttentionMatch> attention_matches(const Graph& g, AttentionRunner runner) {
  if (runner == AttentionRunner::kNone) return {};
  std::vector<AttentionMatch> found = attention_matches(g);
  if (runner == AttentionRunner::kCuda)
    std::erase_if(found, [&](const AttentionMatch& m) { return !cuda_runs_attention(m); });
  return found;
}

}  // namespace kiln::ir
