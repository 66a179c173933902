#include "passes/canonicalize.h"

#include <algorithm>
#include <numeric>

#include "ir/interpreter.h"
#include "ir/shape_inference.h"
#include "passes/dce.h"

namespace kiln::passes {
namespace {

using ir::Node;
using ir::Op;
using ir::ValueId;

bool is_identity_perm(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// Whether every value of float type `from` is exactly a value of float type `to`.
bool widens_exactly(ir::DType from, ir::DType to) {
  using ir::DType;
  const bool half = from == DType::BF16 || from == DType::F16;
  return (half && (to == DType::F32 || to == DType::F64)) || (from == DType::F32 && to == DType::F64);
}

class Canonicalizer {
 public:
  explicit Canonicalizer(ir::Graph& g) : g_(g), producer_(g.producers()), uses_(g.use_counts()) {}

  // One sweep over the nodes; returns whether anything changed.
  Result<bool> sweep() {
    std::vector<ValueId> replacement(g_.values.size(), ir::kNoValue);
    bool changed = false;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      Node& n = g_.nodes[i];
      for (ValueId& v : n.operands)
        while (replacement[v] != ir::kNoValue) v = replacement[v];
      KILN_ASSIGN_OR_RETURN(bool folded, fold(n));
      if (folded) {
        changed = true;
        continue;
      }
      ValueId same = forward(n);
      if (same != ir::kNoValue) {
        replacement[n.result] = same;
        uses_[same] += uses_[n.result];  // its users will read `same` (counts only ever err high)
        changed = true;
      } else if (combine(n) || unflatten_matmul(n) || merge_disjoint_concats(n)) {
        changed = true;
      }
    }
    g_.replace_uses(replacement);
    return changed;
  }

 private:
  const Node* producer(ValueId v) const {
    int p = producer_[v];
    return p < 0 ? nullptr : &g_.nodes[p];
  }

  // Whether v is a constant, or a broadcast of one, whose elements all equal `x`.
  bool is_splat(ValueId v, double x) const {
    const Node* p = producer(v);
    if (p && p->op == Op::Broadcast) return is_splat(p->operands[0], x);
    if (!p || p->op != Op::Constant) return false;
    const ir::Literal& lit = p->attrs.get_literal("value");
    bool fp = ir::is_float(g_.type(v).dtype);
    for (size_t k = 0; k < lit.floats.size(); ++k)
      if (fp ? lit.floats[k] != x : lit.ints[k] != static_cast<int64_t>(x)) return false;
    return g_.type(v).dtype != ir::DType::Bool;
  }

  // A value equal to n's result when n does nothing, else kNoValue.
  ValueId forward(const Node& n) const {
    const ir::TensorType& rt = g_.type(n.result);
    auto same_type = [&](ValueId v) { return g_.type(v) == rt ? v : ir::kNoValue; };
    const auto& ops = n.operands;
    switch (n.op) {
      case Op::Add:
        if (is_splat(ops[1], 0)) return same_type(ops[0]);
        if (is_splat(ops[0], 0)) return same_type(ops[1]);
        break;
      case Op::Sub:
        if (is_splat(ops[1], 0)) return same_type(ops[0]);
        break;
      case Op::Mul:
        if (is_splat(ops[1], 1)) return same_type(ops[0]);
        if (is_splat(ops[0], 1)) return same_type(ops[1]);
        break;
      case Op::Div:
        if (is_splat(ops[1], 1)) return same_type(ops[0]);
        break;
      case Op::Neg: {
        const Node* p = producer(ops[0]);
        if (p && p->op == Op::Neg) return p->operands[0];
        break;
      }
      case Op::Transpose:
        if (is_identity_perm(n.attrs.get_ints("perm"))) return ops[0];
        break;
      case Op::Reshape: return same_type(ops[0]);
      case Op::Cast: {
        if (same_type(ops[0]) != ir::kNoValue) return ops[0];
        // A float cast back after a widening one (bf16 -> f32 -> bf16): the value itself,
        // since the wider type holds each of its values exactly.
        const Node* p = producer(ops[0]);
        if (p && p->op == Op::Cast && widens_exactly(g_.type(p->operands[0]).dtype, g_.type(ops[0]).dtype))
          return same_type(p->operands[0]);
        break;
      }
      case Op::Broadcast:
        if (is_identity_perm(n.attrs.get_ints("dims"))) return same_type(ops[0]);
        break;
      case Op::Slice: {
        const auto& starts = n.attrs.get_ints("starts");
        bool zero = std::all_of(starts.begin(), starts.end(), [](int64_t s) { return s == 0; });
        if (zero) return same_type(ops[0]);  // same shape with start 0 means stride 1 over all of it
        break;
      }
      default: break;
    }
    return ir::kNoValue;
  }

  // Merges n with its producer in place (transpose∘transpose, reshape∘reshape,
  // slice∘slice).
  bool combine(Node& n) {
    if (n.operands.size() != 1) return false;
    const Node* p = producer(n.operands[0]);
    if (!p || p->op != n.op) return false;
    if (n.op == Op::Slice) {
      // A window's tap of a cropped input reads the input itself: one index computation,
      // and the crop is no value of its own for fusion to place.
      const size_t rank = g_.type(n.result).shape.size();
      auto strides_of = [&](const Node& s) {
        return s.attrs.has("strides") ? s.attrs.get_ints("strides") : std::vector<int64_t>(rank, 1);
      };
      const auto &inner_starts = p->attrs.get_ints("starts"), &outer_starts = n.attrs.get_ints("starts");
      const std::vector<int64_t> inner_strides = strides_of(*p), outer_strides = strides_of(n);
      std::vector<int64_t> starts(rank), ends(rank), strides(rank);
      for (size_t d = 0; d < rank; ++d) {
        const int64_t count = g_.type(n.result).shape[d];
        starts[d] = inner_starts[d] + outer_starts[d] * inner_strides[d];
        strides[d] = count > 1 ? inner_strides[d] * outer_strides[d] : 1;
        ends[d] = count > 0 ? starts[d] + (count - 1) * strides[d] + 1 : starts[d];
      }
      n.attrs.set("starts", std::move(starts));
      n.attrs.set("ends", std::move(ends));
      n.attrs.set("strides", std::move(strides));
      n.operands[0] = p->operands[0];
      uses_[n.operands[0]]++;
      return true;
    }
    if (n.op == Op::Reshape) {
      n.operands[0] = p->operands[0];
      uses_[n.operands[0]]++;
      return true;
    }
    if (n.op == Op::Transpose) {
      const auto &inner = p->attrs.get_ints("perm"), &outer = n.attrs.get_ints("perm");
      std::vector<int64_t> composed(outer.size());
      for (size_t d = 0; d < outer.size(); ++d) composed[d] = inner[outer[d]];
      n.attrs.set("perm", std::move(composed));
      n.operands[0] = p->operands[0];
      uses_[n.operands[0]]++;
      return true;
    }
    return false;
  }

  // reshape(matmul(reshape(x), w)) with a matrix w, where the outer reshape splits the
  // rows back into leading dims and the inner one flattens them: matmul(x', w) with x'
  // of the outer's leading dims (x itself when it has them). An exporter flattens a
  // linear layer's input to call a 2-D GEMM; the matmul step folds leading dims into M
  // anyway, and the two reshapes would otherwise be copies of their own between steps.
  bool unflatten_matmul(Node& n) {
    if (n.op != Op::Reshape) return false;
    const int mi = producer_[n.operands[0]];
    if (mi < 0 || g_.nodes[mi].op != Op::Matmul || uses_[n.operands[0]] != 1) return false;
    const Node& mm = g_.nodes[static_cast<size_t>(mi)];
    const int ri = producer_[mm.operands[0]];
    if (ri < 0 || g_.nodes[ri].op != Op::Reshape || uses_[mm.operands[0]] != 1) return false;
    Node& flatten = g_.nodes[static_cast<size_t>(ri)];
    const ir::Shape& a = g_.type(mm.operands[0]).shape;
    const ir::Shape& w = g_.type(mm.operands[1]).shape;
    const ir::Shape& out = g_.type(n.result).shape;
    if (a.size() != 2 || w.size() != 2 || out.size() < 2 || out.back() != w[1]) return false;
    const int64_t rows = std::accumulate(out.begin(), out.end() - 1, int64_t{1}, std::multiplies<>());
    if (rows != a[0]) return false;
    ir::Shape unflat(out.begin(), out.end() - 1);
    unflat.push_back(a[1]);
    const ValueId x = flatten.operands[0];
    ValueId operand = mm.operands[0];
    if (g_.type(x).shape == unflat) {
      operand = x;
    } else {
      // The flattening reshape has no other user: it reshapes to the unflattened shape.
      flatten.attrs.set("shape", unflat);
      g_.values[static_cast<size_t>(operand)].type.shape = unflat;
    }
    const ValueId weights = mm.operands[1];
    n.op = Op::Matmul;
    n.operands = {operand, weights};
    n.attrs = mm.attrs;
    uses_[operand]++;
    return true;
  }

  // add(concat(a, 0), concat(0, b)) along one axis, where every piece of one side lies
  // where the other has zeros: concat(a, b). A slice's gradient is its gradient padded
  // with zeros, so a training graph sums one such pad per slice of a value (GPT-2's q, k
  // and v out of one projection), which a kernel would walk element by element. Each
  // piece of the result is a piece of either side as it is: where the zeros of one side
  // are cut differently from the other's pieces, nothing changes.
  bool merge_disjoint_concats(Node& n) {
    if (n.op != Op::Add) return false;
    struct Piece {
      int64_t start, end;
      ValueId value;
      bool zero;
    };
    std::vector<Piece> sides[2];
    int64_t axis = -1;
    for (int k = 0; k < 2; ++k) {
      const Node* c = producer(n.operands[k]);
      if (!c || c->op != Op::Concat) return false;
      const auto a = ir::normalize_axis(c->attrs.get_int("axis", 0), g_.type(n.result).rank());
      if (!a || (axis >= 0 && *a != axis)) return false;
      axis = *a;
      int64_t at = 0;
      for (ValueId v : c->operands) {
        const int64_t length = g_.type(v).shape[static_cast<size_t>(axis)];
        sides[k].push_back({at, at + length, v, is_splat(v, 0)});
        at += length;
      }
    }
    // Every piece of one side that is not zero must lie over zeros of the other.
    auto over_zeros = [](const Piece& p, const std::vector<Piece>& other) {
      for (const Piece& q : other)
        if (q.start < p.end && p.start < q.end && !q.zero) return false;
      return true;
    };
    std::vector<Piece> kept;
    for (int k = 0; k < 2; ++k)
      for (const Piece& p : sides[k])
        if (!p.zero) {
          if (!over_zeros(p, sides[1 - k])) return false;
          kept.push_back(p);
        }
    // The stretches between them: zero pieces of either side that fit them exactly.
    std::sort(kept.begin(), kept.end(), [](const Piece& x, const Piece& y) { return x.start < y.start; });
    const int64_t length = g_.type(n.result).shape[static_cast<size_t>(axis)];
    std::vector<ValueId> pieces;
    int64_t at = 0;
    size_t next = 0;  // the first kept piece not yet placed
    while (at < length) {
      if (next < kept.size() && kept[next].start == at) {
        pieces.push_back(kept[next].value);
        at = kept[next++].end;
        continue;
      }
      const int64_t gap_end = next < kept.size() ? kept[next].start : length;
      const Piece* fill = nullptr;
      for (const auto& side : sides)
        for (const Piece& q : side)
          if (q.zero && q.start == at && q.end == gap_end) fill = &q;
      if (!fill) return false;
      pieces.push_back(fill->value);
      at = gap_end;
    }
    n.op = Op::Concat;
    n.operands = pieces;
    n.attrs = ir::Attrs();
    n.attrs.set("axis", axis);
    for (ValueId v : pieces) uses_[v]++;
    return true;
  }

  // Replaces n by a constant when all its operands are constants and the result is small.
  Result<bool> fold(Node& n) {
    ir::OpKind kind = ir::op_kind(n.op);
    if (kind == ir::OpKind::Composite || n.op == Op::Constant) return false;
    const ir::TensorType& rt = g_.type(n.result);
    if (rt.num_elements() > CanonicalizePass::kMaxFoldElements) return false;
    // A scalar broadcast (a fill) stays one: kernels compute it as an immediate, where a
    // folded literal would be an array in memory.
    if (n.op == Op::Broadcast && g_.type(n.operands[0]).rank() == 0) return false;
    std::vector<ir::Tensor> inputs;
    for (ValueId v : n.operands) {
      const Node* p = producer(v);
      if (!p || p->op != Op::Constant) return false;
      KILN_ASSIGN_OR_RETURN(ir::Tensor t, ir::evaluate_op(Op::Constant, {}, p->attrs, g_.type(v)));
      inputs.push_back(std::move(t));
    }
    std::vector<const ir::Tensor*> ptrs;
    for (const ir::Tensor& t : inputs) ptrs.push_back(&t);
    auto value = ir::evaluate_op(n.op, ptrs, n.attrs, rt);
    if (!value.ok()) return false;  // e.g. an out-of-range gather: leave it for run time
    ir::Literal lit;
    lit.shape = rt.shape;
    for (int64_t k = 0; k < value->size(); ++k) {
      lit.floats.push_back(value->get(k));
      lit.ints.push_back(value->holds_floats() ? 0 : value->ints[k]);
    }
    lit.integral = !value->holds_floats();
    n.op = Op::Constant;
    n.operands.clear();
    n.attrs = ir::Attrs();
    n.attrs.set("value", std::move(lit));
    return true;
  }

  ir::Graph& g_;
  std::vector<int> producer_;
  std::vector<int> uses_;
};

// Ops with no elements to compute (a batch of 0 rows), and matmuls that sum nothing (a
// contracted dim of 0), become a broadcast of a zero: a library called on such shapes
// fails (oneDNN divided by zero packing a [0, K] product's weights at load).
bool zeros_for_empty_ops(ir::Graph& g) {
  bool changed = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (ir::op_kind(n.op) == ir::OpKind::Source || ir::op_kind(n.op) == ir::OpKind::Composite ||
        (n.op == Op::Broadcast && g.type(n.operands[0]).rank() == 0))
      continue;
    const ir::TensorType type = g.type(n.result);
    const bool sums_nothing = n.op == Op::Matmul && g.type(n.operands[0]).shape.back() == 0;
    if (type.num_elements() != 0 && !sums_nothing) continue;
    Node zero{Op::Constant, {}, {}, g.add_value({type.dtype, {}}), n.loc};
    zero.attrs.set("value", ir::is_float(type.dtype) ? ir::Literal::scalar(0) : ir::Literal::scalar_int(0));
    Node spread{Op::Broadcast, {zero.result}, {}, n.result, n.loc};
    spread.attrs.set("shape", type.shape);
    spread.attrs.set("dims", std::vector<int64_t>{});
    g.nodes[i] = std::move(spread);
    g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(i), std::move(zero));
    ++i;
    changed = true;
  }
  return changed;
}

// transpose(matmul(a, b)) of matrices, the matmul read by nothing else: matmul(bᵀ, aᵀ).
// Autodiff gives a [out, in] weight (PyTorch's nn.Linear layout, y = x·wᵀ) the gradient
// (xᵀ·dy)ᵀ: as written, the product is stored [in, out] and every reader of the gradient
// (the optimizer's update) walks it transposed, and xᵀ, read by each weight's product, is
// copied once as a step of its own. As dyᵀ·x the product is stored as the weight is, and
// the transposes fold into the library call (aᵀ of a transpose is the value itself, by the
// sweep's transpose(transpose) rule). Matrices only: batched products are attention's,
// whose matchers read the graph as autodiff writes it.
bool swap_one_transposed_product(ir::Graph& g) {
  const std::vector<int> producer = g.producers();
  const std::vector<int> uses = g.use_counts();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.op != Op::Transpose || g.type(n.result).rank() != 2 || n.attrs.get_ints("perm") != std::vector<int64_t>{1, 0})
      continue;
    // Casts between (autocast's product in bf16, widened to f32) commute with the transpose.
    std::vector<int> casts;
    int mi = producer[n.operands[0]];
    for (ValueId v = n.operands[0]; mi >= 0 && uses[v] == 1 && g.nodes[mi].op == Op::Cast; mi = producer[v]) {
      casts.push_back(mi);
      v = g.nodes[mi].operands[0];
    }
    const ValueId product = casts.empty() ? n.operands[0] : g.nodes[casts.back()].operands[0];
    if (mi < 0 || g.nodes[mi].op != Op::Matmul || uses[product] != 1) continue;
    const Node mm = g.nodes[static_cast<size_t>(mi)];
    if (g.type(mm.operands[0]).rank() != 2 || g.type(mm.operands[1]).rank() != 2) continue;
    auto flipped = [&](ValueId v, ir::DType dtype) {
      const ir::Shape& shape = g.type(v).shape;
      return g.add_value({dtype, {shape[1], shape[0]}});
    };
    std::vector<Node> nodes;
    for (ValueId operand : {mm.operands[1], mm.operands[0]}) {
      Node flip{Op::Transpose, {operand}, {}, flipped(operand, g.type(operand).dtype), n.loc};
      flip.attrs.set("perm", std::vector<int64_t>{1, 0});
      nodes.push_back(std::move(flip));
    }
    // The product, then the casts from the innermost out, each of the transposed shape; the
    // last writes the transpose's result.
    const std::vector<int> widening(casts.rbegin(), casts.rend());
    auto result = [&](ValueId old) { return old == n.operands[0] ? n.result : flipped(old, g.type(old).dtype); };
    nodes.push_back(Node{Op::Matmul, {nodes[0].result, nodes[1].result}, mm.attrs, result(product), n.loc});
    for (int c : widening)
      nodes.push_back(Node{Op::Cast, {nodes.back().result}, g.nodes[c].attrs, result(g.nodes[c].result), n.loc});
    g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(i));
    g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(i), std::make_move_iterator(nodes.begin()),
                   std::make_move_iterator(nodes.end()));
    return true;
  }
  return false;
}

}  // namespace

Result<bool> CanonicalizePass::run(ir::Graph& g) {
  bool changed = zeros_for_empty_ops(g);
  while (swap_one_transposed_product(g)) changed = true;
  for (int round = 0; round < 16; ++round) {
    KILN_ASSIGN_OR_RETURN(bool swept, Canonicalizer(g).sweep());
    if (!swept) break;
    changed = true;
  }
  KILN_ASSIGN_OR_RETURN(bool removed, DcePass().run(g));
  return changed || removed;
}

}  // namespace kiln::passes
