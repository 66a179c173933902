// The matcher behind ir/attention_match.h: the forward's rules (attention_match.cc) and
// the backward's (attention_gradient.cc) over one graph's producers and readers.
#pragma once

#include <algorithm>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "ir/attention_match.h"
#include "ir/types.h"

namespace kiln::ir::detail {

inline bool is_half(DType t) { return t == DType::BF16 || t == DType::F16; }

// A view with its last two dims swapped: a matrix's transpose.
inline StridedView swapped(StridedView view) {
  const size_t r = view.shape.size();
  std::swap(view.shape[r - 1], view.shape[r - 2]);
  std::swap(view.strides[r - 1], view.strides[r - 2]);
  return view;
}

class AttentionMatcher {
 public:
  explicit AttentionMatcher(const Graph& g)
      : g_(g), producer_(g.producers()), users_(g.values.size()), result_(g.values.size(), 0) {
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (ValueId v : g.nodes[i].operands) users_[v].push_back(static_cast<int>(i));
    for (ValueId v : g.results) result_[v] = 1;
  }

  /// The forward attention whose softmax ends in node `div` (e / broadcast(reduce_sum(e))).
  std::optional<AttentionMatch> match(int div);
  /// The backward whose recomputed softmax ends in node `div` (attention_gradient.cc).
  std::optional<AttentionGradientMatch> match_gradient(int div);
  /// attention_scores_nodes (attention_gradient.cc).
  std::optional<std::vector<int>> scores_nodes(int div) const;

 private:
  // Where a backward writes dq, d(kᵀ) and dv (m.written, m.written_views; attention_gradient.cc).
  void gradient_writes(AttentionGradientMatch& m, std::vector<int>& nodes) const;

 public:
 private:
  // The softmax's operand x where `div` ends one over x's last axis (e / sum(e), e =
  // exp(x - max(x)), each value read only inside it), its nodes claimed into `nodes`.
  std::optional<ValueId> softmax_input(int div, std::vector<int>& nodes) const;
  // f, back from x to q·kᵀ: m's transforms, scores_call, q, k and their views (k's as
  // [.., S, D]); false where x is not such a chain. m.precision is the products' type.
  bool scores_chain(ValueId x, AttentionMatch& m) const;
  // The furthest value v is a view of through movement ops, however many read them, and
  // that view (nothing claimed): what two operands are compared by.
  std::pair<ValueId, StridedView> view_of_value(ValueId v) const {
    std::vector<int> ignored;
    return walk_back(
        v, ignored, [](const StridedView&) { return true; }, true, DType::F32, /*shared=*/true);
  }

  // Whether a and b hold the same elements for certain: one value, or values the same op
  // with the same attributes computes from such values, among the ops a step recomputes
  // as it reads (movement ops, constants, iota, compares, casts: the copies each reader of
  // them has, passes/attention_split.h).
  bool same_value(ValueId a, ValueId b, int depth = 8) const {
    if (a == b) return true;
    const Node *pa = producer(a), *pb = producer(b);
    if (!pa || !pb || depth == 0 || pa->op != pb->op || pa->operands.size() != pb->operands.size() ||
        !(pa->attrs == pb->attrs) || !(g_.type(a) == g_.type(b)))
      return false;
    switch (pa->op) {
      case Op::Transpose:
      case Op::Slice:
      case Op::Reshape:
      case Op::Broadcast:
      case Op::Constant:
      case Op::Iota:
      case Op::Cast:
      case Op::Le:
      case Op::Lt:
      case Op::Ge:
      case Op::Gt:
      case Op::Eq:
      case Op::Ne: break;
      default: return false;
    }
    for (size_t i = 0; i < pa->operands.size(); ++i)
      if (!same_value(pa->operands[i], pb->operands[i], depth - 1)) return false;
    return true;
  }
  // Whether two reads (a stored value and a view of it) read the same elements.
  bool same_read(const std::pair<ValueId, StridedView>& a, const std::pair<ValueId, StridedView>& b) const {
    return same_value(a.first, b.first) && a.second.offset == b.second.offset && a.second.shape == b.second.shape &&
           a.second.strides == b.second.strides;
  }

  const Node* producer(ValueId v) const { return producer_[v] < 0 ? nullptr : &g_.nodes[producer_[v]]; }
  int index_of(const Node& n) const { return static_cast<int>(&n - g_.nodes.data()); }
  bool single_use(ValueId v) const { return !result_[v] && users_[v].size() == 1; }

  // Whether v is no result and read by exactly the nodes `readers` (none of them -1).
  bool used_by_only(ValueId v, std::vector<int> readers) const {
    if (result_[v] || std::find(readers.begin(), readers.end(), -1) != readers.end()) return false;
    std::vector<int> users = users_[v];
    std::sort(users.begin(), users.end());
    std::sort(readers.begin(), readers.end());
    return users == readers;
  }

  // The matmul whose result v is: in f32 v itself, in half precision (autocast's form) v
  // its single-use result cast to f32; else null.
  const Node* product_of(ValueId v, DType precision) const {
    const Node* p = producer(v);
    if (p && precision != DType::F32) {
      if (p->op != Op::Cast || g_.type(v).dtype != DType::F32 || g_.type(p->operands[0]).dtype != precision ||
          !single_use(p->operands[0]))
        return nullptr;
      p = producer(p->operands[0]);
    }
    return p && p->op == Op::Matmul ? p : nullptr;
  }

  // Whether v is a scalar constant, spread or not.
  bool scalar(ValueId v) const {
    std::vector<int> ignored;
    return splat(v, ignored).has_value();
  }

  // Whether a matmul's result reaches v through at most `depth` scalings, adds and
  // selects (of their second operand): whether v is on a chain of f.
  bool leads_to_scores(ValueId v, int depth) const {
    const Node* p = producer(v);
    if (!p || depth == 0) return false;
    switch (p->op) {
      case Op::Matmul: return true;
      case Op::Mul:
      case Op::Div:
      case Op::Add: return leads_to_scores(p->operands[0], depth - 1) || leads_to_scores(p->operands[1], depth - 1);
      case Op::Select: return leads_to_scores(p->operands[1], depth - 1);
      case Op::Cast: return leads_to_scores(p->operands[0], depth - 1);
      default: return false;
    }
  }

  // Where b = broadcast(reduce(x) over x's last axis) back over x's rows, read once: the
  // reduction node (both claimed into `nodes`); else -1.
  int reducer_of(ValueId b, Op reduce, ValueId x, std::vector<int>& nodes) const {
    const Node* broadcast = producer(b);
    if (!broadcast || broadcast->op != Op::Broadcast || !single_use(b)) return -1;
    const Node* r = producer(broadcast->operands[0]);
    if (!r || r->op != reduce || r->operands[0] != x || !single_use(r->result)) return -1;
    const int64_t rank = g_.type(x).rank();
    const std::vector<int64_t>& axes = r->attrs.get_ints("axes");
    if (axes.size() != 1 || (axes[0] != rank - 1 && axes[0] != -1)) return -1;
    const bool keepdims = r->attrs.get_bool("keepdims", false);
    std::vector<int64_t> dims(static_cast<size_t>(keepdims ? rank : rank - 1));
    for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<int64_t>(i);
    if (g_.type(b).shape != g_.type(x).shape || broadcast->attrs.get_ints("dims") != dims) return -1;
    nodes.push_back(index_of(*broadcast));
    nodes.push_back(index_of(*r));
    return index_of(*r);
  }

  // The value of v when it is a scalar constant, spread or not (the single-use broadcast
  // and constant claimed into `nodes`).
  std::optional<double> splat(ValueId v, std::vector<int>& nodes) const {
    std::vector<int> claimed;
    bool claiming = true;  // a constant only where its broadcast is claimed too
    const Node* p = producer(v);
    if (p && p->op == Op::Broadcast) {
      claiming = single_use(v);
      if (claiming) claimed.push_back(index_of(*p));
      v = p->operands[0];
      p = producer(v);
    }
    if (!p || p->op != Op::Constant || g_.type(v).rank() != 0) return std::nullopt;
    const Literal& value = p->attrs.get_literal("value");
    if (value.floats.size() != 1) return std::nullopt;
    if (claiming && single_use(v)) claimed.push_back(index_of(*p));
    nodes.insert(nodes.end(), claimed.begin(), claimed.end());
    return value.floats[0];
  }

  // v read through the longest chain of single-use movement ops (transpose, slice,
  // reshape, broadcast) back from it that view_through follows: the stored value and its
  // view, the chain claimed into `nodes`.
  std::pair<ValueId, StridedView> read_through(ValueId v, std::vector<int>& nodes) const {
    return walk_back(
        v, nodes, [](const StridedView&) { return true; }, true);
  }

  // A matmul operand as a matrix (matrix_view) of a stored value, its batch dims aligned
  // to `batch` (stride 0 where it has extent 1 or lacks the dim).
  bool operand_view(ValueId operand, const Shape& batch, DType precision, ValueId& base, StridedView& view,
                    std::vector<int>& nodes) const {
    std::tie(base, view) = walk_back(
        operand, nodes, [](const StridedView& w) { return matrix_view(w).has_value(); }, false, precision);
    if (!matrix_view(view)) return false;
    const size_t rank = view.shape.size();
    if (rank - 2 > batch.size()) return false;
    StridedView aligned{view.offset, batch, std::vector<int64_t>(batch.size(), 0)};
    for (size_t i = 0; i < rank - 2; ++i) {
      const size_t to = batch.size() - (rank - 2) + i;
      if (view.shape[i] == batch[to]) aligned.strides[to] = view.strides[i];
      else if (view.shape[i] != 1) return false;
    }
    aligned.shape.insert(aligned.shape.end(), view.shape.end() - 2, view.shape.end());
    aligned.strides.insert(aligned.strides.end(), view.strides.end() - 2, view.strides.end());
    view = std::move(aligned);
    return true;
  }

  // P·v's result o [B.., T, Dv] written into the value that the longest chain of
  // single-use transposes and reshapes after it gives (each moves elements one to one;
  // in half precision also casts between it and f32, exact on its values), where o's
  // rows stay rows of adjacent elements: that value and o's view of it (the chain claimed
  // into `nodes`).
  std::pair<ValueId, StridedView> written_through(ValueId o, DType precision, std::vector<int>& nodes) const {
    const size_t r = g_.type(o).shape.size();
    const Shape& shape = g_.type(o).shape;
    return written_through(o, precision, nodes, [&](const StridedView& view) {
      return (shape[r - 1] == 1 || view.strides[r - 1] == 1) &&
             (shape[r - 2] == 1 || view.strides[r - 2] >= shape[r - 1]);
    });
  }
  // The same, with `usable` saying which views of o the step can write; the chain itself
  // (every op of it, usable or not) into `chain` where given.
  template <class Usable>
  std::pair<ValueId, StridedView> written_through(ValueId o, DType precision, std::vector<int>& nodes,
                                                  const Usable& usable, std::vector<int>* whole = nullptr) const {
    const Shape& shape = g_.type(o).shape;
    std::pair<ValueId, StridedView> best{o, StridedView{0, shape, row_major_strides(shape)}};
    std::vector<int> chain, best_chain;
    for (ValueId v = o; single_use(v);) {
      const Node& n = g_.nodes[users_[v][0]];
      const bool exact_cast = n.op == Op::Cast && precision != DType::F32 &&
                              (g_.type(n.result).dtype == DType::F32 || g_.type(n.result).dtype == precision);
      if (n.op != Op::Transpose && n.op != Op::Reshape && !exact_cast) break;
      chain.push_back(index_of(n));
      v = n.result;
      // Back from the chain's result, stored packed, to o.
      std::optional<StridedView> view =
          view_back(chain, StridedView{0, g_.type(v).shape, row_major_strides(g_.type(v).shape)});
      if (!view || !usable(*view)) continue;
      best_chain = chain;
      best = {v, std::move(*view)};
    }
    if (whole) *whole = chain;
    nodes.insert(nodes.end(), best_chain.begin(), best_chain.end());
    return best;
  }
  // `view` of the last value of `chain` (transposes, reshapes and casts, each reading the
  // one before) as a view of the first one's operand; none where a reshape does not fit.
  std::optional<StridedView> view_back(const std::vector<int>& chain, StridedView view) const {
    for (size_t i = chain.size(); i-- > 0;) {
      const Node& c = g_.nodes[chain[i]];
      const Shape& from = g_.type(c.operands[0]).shape;
      if (c.op == Op::Cast) continue;
      if (c.op == Op::Reshape) {
        std::optional<StridedView> r = reshaped(view, from);
        if (!r) return std::nullopt;
        view = std::move(*r);
      } else {  // result dim d is operand dim perm[d]
        const std::vector<int64_t>& perm = c.attrs.get_ints("perm");
        StridedView t{view.offset, from, std::vector<int64_t>(from.size(), 0)};
        for (size_t d = 0; d < perm.size(); ++d) t.strides[static_cast<size_t>(perm[d])] = view.strides[d];
        view = std::move(t);
      }
    }
    return view;
  }

  // Back from v through single-use movement ops (and, where `half` is a half precision,
  // one cast from f32 to it, which the step then applies as it reads) to the furthest
  // stored value whose view `usable` takes: that value and its view, the ops claimed.
  // With `shared`, through movement ops read elsewhere too, claiming none.
  template <class Usable>
  std::pair<ValueId, StridedView> walk_back(ValueId v, std::vector<int>& nodes, const Usable& usable, bool broadcasts,
                                            DType half = DType::F32, bool shared = false) const {
    std::vector<int> chain, best;  // movement ops, in graph order
    int cast = -1, best_cast = -1;
    ValueId base = v, best_base = v;
    StridedView best_view{0, g_.type(v).shape, row_major_strides(g_.type(v).shape)};
    while (shared ? !result_[base] : single_use(base)) {
      const Node* p = producer(base);
      if (p && p->op == Op::Cast && half != DType::F32 && cast < 0 && g_.type(p->result).dtype == half &&
          g_.type(p->operands[0]).dtype == DType::F32) {
        cast = index_of(*p);
      } else if (p && (p->op == Op::Transpose || p->op == Op::Slice || p->op == Op::Reshape ||
                       (broadcasts && p->op == Op::Broadcast))) {
        chain.insert(chain.begin(), index_of(*p));
      } else {
        break;
      }
      base = p->operands[0];
      std::optional<StridedView> view = view_through(g_, g_.type(base).shape, chain);
      if (!view) continue;
      if (!usable(*view)) continue;
      best = chain;
      best_cast = cast;
      best_base = base;
      best_view = std::move(*view);
    }
    if (!shared) {
      nodes.insert(nodes.end(), best.begin(), best.end());
      if (best_cast >= 0) nodes.push_back(best_cast);
    }
    return {best_base, best_view};
  }

  // Whether `keep` (of the scores' shape) is j <= i for key j and query i: le(iota over
  // the last axis, iota over the one before) or ge the other way round, of shape [.., T, S]
  // and spread over the scores' batch dims. Claims what only it reads.
  bool causal_condition(ValueId keep, const Shape& scores, std::vector<int>& nodes) const {
    std::vector<int> claimed;
    bool claiming = single_use(keep);
    ValueId c = keep;
    const Node* p = producer(c);
    if (p && p->op == Op::Broadcast) {
      const int64_t from = g_.type(p->operands[0]).rank(), to = static_cast<int64_t>(scores.size());
      const std::vector<int64_t>& dims = p->attrs.get_ints("dims");
      if (from < 2 || dims[from - 1] != to - 1 || dims[from - 2] != to - 2) return false;
      if (claiming) claimed.push_back(index_of(*p));
      c = p->operands[0];
      claiming = claiming && single_use(c);
      p = producer(c);
    }
    const Shape& shape = g_.type(c).shape;
    const int64_t rank = static_cast<int64_t>(shape.size());
    if (!p || rank < 2 || shape[rank - 1] != scores.back() || shape[rank - 2] != scores[scores.size() - 2])
      return false;
    if (p->op == Op::Constant) {  // canonicalize folds small iotas and their comparison
      if (!lower_triangle(p->attrs.get_literal("value"), shape)) return false;
      if (claiming) claimed.push_back(index_of(*p));
      nodes.insert(nodes.end(), claimed.begin(), claimed.end());
      return true;
    }
    if (p->op != Op::Le && p->op != Op::Ge) return false;
    // le(j, i) or ge(i, j).
    const ValueId j = p->operands[p->op == Op::Le ? 0 : 1], i = p->operands[p->op == Op::Le ? 1 : 0];
    const Node* ij[2] = {producer(i), producer(j)};
    for (int which = 0; which < 2; ++which) {
      const Node* iota = ij[which];
      if (!iota || iota->op != Op::Iota || g_.type(iota->result).shape != shape ||
          iota->attrs.get_int("axis") != rank - 2 + which)
        return false;
    }
    if (claiming) {
      claimed.push_back(index_of(*p));
      for (const Node* iota : ij)
        if (single_use(iota->result)) claimed.push_back(index_of(*iota));
    }
    nodes.insert(nodes.end(), claimed.begin(), claimed.end());
    return true;
  }

  // Whether a bool literal of `shape` [.., T, S] holds j <= i at every [.., i, j].
  static bool lower_triangle(const Literal& value, const Shape& shape) {
    const int64_t cols = shape.back(), rows = shape[shape.size() - 2];
    const size_t count = value.ints.empty() ? value.floats.size() : value.ints.size();
    if (count != static_cast<size_t>(num_elements(shape))) return false;
    for (size_t e = 0; e < count; ++e) {
      const bool keep = value.ints.empty() ? value.floats[e] != 0 : value.ints[e] != 0;
      const int64_t j = static_cast<int64_t>(e) % cols, i = static_cast<int64_t>(e) / cols % rows;
      if (keep != (j <= i)) return false;
    }
    return true;
  }

  const Graph& g_;
  std::vector<int> producer_;
  std::vector<std::vector<int>> users_;
  std::vector<char> result_;
};

}  // namespace kiln::ir::detail
