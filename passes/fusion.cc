#include "passes/fusion.h"

#include <fmt/format.h>
#include <algorithm>
#include <optional>
#include <set>

#include "ir/attention_match.h"
#include "ir/epilogue.h"
#include "ir/matmul_views.h"
#include "ir/shape_inference.h"
#include "ir/window.h"
#include "passes/attention_split.h"
#include "passes/recompute.h"
#include "passes/shared_reads.h"
#include "passes/step_order.h"

namespace kiln::passes {
namespace {

using ir::Node;
using ir::Op;
using ir::OpKind;
using ir::Shape;
using ir::StepKind;
using ir::ValueId;

struct Group {
  StepKind kind = StepKind::Loop;
  Shape full;                       // Reduction: the reduced shape S
  std::vector<int64_t> reduced;     // Reduction: the axes R, sorted
  std::vector<int> members;         // node indices (sources added at the end); members[0] is the root
  int ops = 0;                      // members that are not sources
  bool convolution = false;         // Library: a convolution (with its epilogue), not a matmul
  bool attention = false;           // Library: an attention (ir/attention_match.h), not a matmul
  bool attention_gradient = false;  // an attention's backward
  int outputs = 1;                  // the root, and extra outputs
};

bool is_source(Op op) { return ir::op_kind(op) == OpKind::Source; }
bool is_reduction(Op op) { return ir::op_kind(op) == OpKind::Reduction; }
// An op that computes elements, rather than moving its operand's or making constants.
bool computes(Op op) { return ir::op_kind(op) != OpKind::Movement && ir::op_kind(op) != OpKind::Source; }
bool is_loop_op(Op op) {
  OpKind k = ir::op_kind(op);
  return (k == OpKind::Elementwise || k == OpKind::Movement) && op != Op::ScatterAdd;
}

class Partitioner {
 public:
  Partitioner(const ir::Graph& g, bool fuse, ir::MatmulEpilogues matmul_epilogues, bool matmul_views,
              ir::AttentionRunner attention, ir::AttentionRunner attention_gradient, bool single_batch_views,
              bool exact_reach)
      : g_(g),
        fuse_(fuse),
        exact_reach_(exact_reach),
        group_of_(g.nodes.size(), -1),
        users_(g.values.size()),
        is_result_(g.values.size(), 0) {
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (ValueId v : g.nodes[i].operands) users_[v].push_back(static_cast<int>(i));
    for (ValueId v : g.results) is_result_[v] = 1;
    producer_ = g.producers();
    seen_.assign(g.nodes.size(), 0);
    group_seen_.assign(g.nodes.size(), 0);
    claim_.assign(g.nodes.size(), -1);
    folds_ =
        fuse && matmul_views ? ir::matmul_operand_folds(g, single_batch_views) : std::vector<int>(g.nodes.size(), -1);
    if (fuse) epilogues_ = ir::library_epilogues(g, matmul_epilogues, folds_);
    attention_claim_.assign(g.nodes.size(), -1);
    if (fuse) {
      for (const ir::AttentionMatch& m : ir::attention_matches(g, attention))
        attentions_.push_back({m.nodes, reads_of(m), false});
      for (const ir::AttentionGradientMatch& m : ir::attention_gradient_matches(g, attention_gradient)) {
        attentions_.push_back({m.nodes, reads_of(m.scores), true});
        attentions_.back().reads.push_back(m.d_out);
      }
    }
    for (size_t a = 0; a < attentions_.size(); ++a)
      for (int m : attentions_[a].nodes) attention_claim_[m] = static_cast<int>(a);
    attention_group_.assign(attentions_.size(), -1);
    // An attention step computes its matmuls and reads its operands itself: no epilogue
    // or folded view of another call takes its nodes.
    std::erase_if(epilogues_, [&](const ir::Epilogue& e) {
      return attention_claim_[e.call] >= 0 ||
             std::any_of(e.nodes.begin(), e.nodes.end(), [&](int n) { return attention_claim_[n] >= 0; });
    });
    for (size_t i = 0; i < folds_.size(); ++i)
      if (folds_[i] >= 0 && (attention_claim_[i] >= 0 || attention_claim_[folds_[i]] >= 0)) folds_[i] = -1;
    for (size_t e = 0; e < epilogues_.size(); ++e) {
      claim_[epilogues_[e].call] = static_cast<int>(e);
      for (int m : epilogues_[e].nodes) claim_[m] = static_cast<int>(e);
    }
    epilogue_group_.assign(epilogues_.size(), -1);
  }

  std::vector<Group> run() {
    for (size_t i = g_.nodes.size(); i-- > 0;) {
      const Node& n = g_.nodes[i];
      if (attention_claim_[i] >= 0) {  // an attention is one step
        int& group = attention_group_[attention_claim_[i]];
        if (group < 0) {
          groups_.emplace_back();
          groups_.back().kind = StepKind::Library;
          groups_.back().attention = true;
          groups_.back().attention_gradient = attentions_[attention_claim_[i]].gradient;
          group = static_cast<int>(groups_.size()) - 1;
        }
        add(group, static_cast<int>(i));
        continue;
      }
      if (claim_[i] >= 0) {  // a library call's epilogue is one step with it
        int& group = epilogue_group_[claim_[i]];
        if (group < 0) {
          groups_.emplace_back();
          groups_.back().kind = StepKind::Library;
          groups_.back().convolution = g_.nodes[epilogues_[claim_[i]].call].op == Op::Conv;
          group = static_cast<int>(groups_.size()) - 1;
        }
        add(group, static_cast<int>(i));
        continue;
      }
      if (folds_[i] >= 0) {  // read in place by a matmul's call (visited before it)
        add(group_of_[folds_[i]], static_cast<int>(i));
        continue;
      }
      if (is_source(n.op)) continue;
      int target = fuse_ ? joinable_group(static_cast<int>(i)) : -1;
      if (target >= 0) {
        add(target, static_cast<int>(i));
      } else {
        start_group(static_cast<int>(i));
      }
    }
    place_sources();
    return std::move(groups_);
  }

 private:
  const ir::TensorType& type(ValueId v) const { return g_.type(v); }

  void start_group(int node) {
    const Node& n = g_.nodes[node];
    Group grp;
    if (ir::op_kind(n.op) == OpKind::Library) {
      grp.kind = StepKind::Library;
      grp.convolution = ir::is_convolution(n.op);
    } else if (n.op == Op::ScatterAdd) grp.kind = StepKind::Scatter;
    else if (is_reduction(n.op)) set_row_class(grp, n);
    groups_.push_back(std::move(grp));
    add(static_cast<int>(groups_.size()) - 1, node);
  }

  void add(int group, int node) {
    groups_[group].members.push_back(node);
    if (!is_source(g_.nodes[node].op)) ++groups_[group].ops;
    group_of_[node] = group;
  }

  void set_row_class(Group& grp, const Node& reduction) const {
    grp.kind = StepKind::Reduction;
    grp.full = type(reduction.operands[0]).shape;
    grp.reduced = reduced_axes(reduction);
  }

  std::vector<int64_t> reduced_axes(const Node& reduction) const {
    int64_t rank = type(reduction.operands[0]).rank();
    std::vector<int64_t> axes;
    if (reduction.op == Op::Argmax) axes.push_back(*ir::normalize_axis(reduction.attrs.get_int("axis"), rank));
    else
      for (int64_t a : reduction.attrs.get_ints("axes")) axes.push_back(*ir::normalize_axis(a, rank));
    std::sort(axes.begin(), axes.end());
    return axes;
  }

  // Whether n is a concat of two or more values that are not a padding's constants.
  bool joins_values(const Node& n) const {
    if (n.op != Op::Concat) return false;
    int values = 0;
    for (ValueId x : n.operands) {
      int p = producer_[x];
      while (p >= 0 && g_.nodes[p].op == Op::Broadcast) p = producer_[g_.nodes[p].operands[0]];
      values += p < 0 || !is_source(g_.nodes[p].op);
    }
    return values >= 2;
  }

  // The group the node joins, or -1. Usually all its users are in that group; a node
  // that is a result, or that has users in other groups too, may still join a group of
  // its users as an extra output of its kernel (multi-output fusion) when its shape is
  // the kernel's and no group of its other users can reach that group (no cycle).
  int joinable_group(int node) {
    const Node& n = g_.nodes[node];
    if (ir::op_kind(n.op) == OpKind::Library || n.op == Op::ScatterAdd) return -1;
    const std::vector<int>& users = users_[n.result];
    if (users.empty()) return -1;
    std::vector<int> user_groups;
    for (int u : users)
      if (std::find(user_groups.begin(), user_groups.end(), group_of_[u]) == user_groups.end())
        user_groups.push_back(group_of_[u]);
    // A matrix transpose feeding only a matmul is folded into the library call (BLAS
    // reads the operand transposed), so it is never copied. Only where the matmul reads it
    // directly: below a chain of views (folds_) it would break the chain's strides.
    if (user_groups.size() == 1 && groups_[user_groups[0]].kind == StepKind::Library)
      return !groups_[user_groups[0]].convolution && !groups_[user_groups[0]].attention && !is_result_[n.result] &&
                     swaps_last_two(n) && users.size() == 1 && g_.nodes[users[0]].op == Op::Matmul
                 ? user_groups[0]
                 : -1;
    // A computed value that several windows read (the taps of a convolution or a pool:
    // slices of it, or of its padded copy) is computed once into memory, not again inside
    // the kernel for each tap. So is a concat of values (an Inception block's branches
    // before its pool): inside the pool's kernel, each tap chose among the operands again
    // (GoogLeNet's pools ran at 0.03 of copy).
    if ((computes(n.op) || joins_values(n)) && window_reads(g_, users_, n.result) > 2) return -1;
    for (int target : user_groups) {
      Group& grp = groups_[target];
      if (grp.kind == StepKind::Library || grp.kind == StepKind::Scatter) continue;
      bool extra_output = user_groups.size() > 1 || is_result_[n.result];
      if (grp.ops + 1 > FusionPass::kMaxNodes) continue;
      std::optional<Group> converted;
      if (!fits(n, target, converted)) continue;
      if (extra_output && !extra_output_fits(n, converted ? *converted : grp, target, user_groups, node)) continue;
      if (inputs_after_join(grp, node) > FusionPass::kMaxInputs) continue;
      if (converted) {  // the loop kernel becomes a reduction kernel
        grp.kind = converted->kind;
        grp.full = converted->full;
        grp.reduced = converted->reduced;
      }
      if (extra_output) ++grp.outputs;
      return target;
    }
    return -1;
  }

  // An extra output is written once per element of the kernel's iteration space (or once
  // per row), so its shape must be that space's; and no other group reading it may lead
  // back into the kernel.
  bool extra_output_fits(const Node& n, const Group& grp, int target, const std::vector<int>& user_groups,
                         int node) const {
    if (grp.outputs + 1 > FusionPass::kMaxOutputs) return false;
    const Shape& s = type(n.result).shape;
    if (grp.kind == StepKind::Loop && s != type(g_.nodes[grp.members[0]].result).shape) return false;
    if (grp.kind == StepKind::Reduction && s != grp.full &&
        !(row_valued(grp, s) && (!s.empty() || kept_shape(grp, false).empty())))
      return false;
    for (int h : user_groups)
      if (h != target && reaches(h, target, node)) return false;
    return true;
  }

  // Whether group `from`'s step must run before group `to`'s: a path of values from some
  // member of `from` into `to`, where a path that enters a group may leave it from any of
  // its members, since a step's outputs are all written when it ends. (Walking nodes
  // only, a path through a kernel's other output was missed: its steps then depended on
  // each other in a cycle.) Grouped nodes come after `after`. The walk keeps to the nodes
  // up to `to`'s root, its last node, where every path into `to` enters, unless
  // `exact_reach_`: it then also follows the members of groups past the root, from which
  // a path may lead back into a group that reaches `to` before its root. The windowed
  // walk is linear in the window, the exact one in the graph (too slow on deep training
  // graphs to run for every candidate: docs/benchmarks.md), so fusion partitions exactly
  // only where the windowed partition's steps turn out to depend on each other in a cycle.
  bool reaches(int from, int to, int after) const {
    const int limit = exact_reach_ ? static_cast<int>(g_.nodes.size()) : groups_[to].members[0];
    ++stamp_;
    std::vector<int> stack;
    auto enter = [&](int grp) {
      group_seen_[grp] = stamp_;
      for (int m : groups_[grp].members)
        if (m > after && m <= limit && seen_[m] != stamp_) {
          seen_[m] = stamp_;
          stack.push_back(m);
        }
    };
    enter(from);
    while (!stack.empty()) {
      const int m = stack.back();
      stack.pop_back();
      for (int u : users_[g_.nodes[m].result]) {
        if (u <= after || u > limit || seen_[u] == stamp_) continue;
        const int grp = group_of_[u];
        if (grp == to) return true;
        if (grp >= 0 && group_seen_[grp] != stamp_) enter(grp);
        else if (grp < 0) {
          seen_[u] = stamp_;
          stack.push_back(u);
        }
      }
    }
    return false;
  }

  bool swaps_last_two(const Node& n) const {
    if (n.op != Op::Transpose) return false;
    const auto& perm = n.attrs.get_ints("perm");
    int64_t rank = static_cast<int64_t>(perm.size());
    if (rank < 2) return false;
    for (int64_t d = 0; d < rank - 2; ++d)
      if (perm[d] != d) return false;
    return perm[rank - 2] == rank - 1 && perm[rank - 1] == rank - 2;
  }

  // Whether v and everything it is computed from (a few producers deep) have at most
  // `limit` elements: no reduction of a larger value, no broadcast growing one.
  bool from_small_values(ValueId v, int64_t limit, int depth) const {
    if (type(v).num_elements() > limit) return false;
    const int p = producer_[v];
    if (p < 0) return true;
    if (depth == 8) return false;
    for (ValueId o : g_.nodes[p].operands)
      if (!from_small_values(o, limit, depth + 1)) return false;
    return true;
  }

  // Whether a user of n in group `target` repeats n's elements (a broadcast or gather
  // growing it).
  bool repeated(const Node& n, int target) const {
    int64_t elements = type(n.result).num_elements();
    for (int u : users_[n.result]) {
      if (group_of_[u] != target) continue;
      const Node& user = g_.nodes[u];
      if ((user.op == Op::Broadcast || user.op == Op::Gather) && user.operands[0] == n.result &&
          type(user.result).num_elements() > elements)
        return true;
    }
    return false;
  }

  Shape kept_shape(const Group& grp, bool keepdims) const {
    Shape kept;
    for (int64_t d = 0; d < static_cast<int64_t>(grp.full.size()); ++d) {
      bool r = std::binary_search(grp.reduced.begin(), grp.reduced.end(), d);
      if (!r) kept.push_back(grp.full[d]);
      else if (keepdims) kept.push_back(1);
    }
    return kept;
  }

  bool row_valued(const Group& grp, const Shape& s) const {
    return s.empty() || s == kept_shape(grp, false) || s == kept_shape(grp, true);
  }

  // A broadcast inside a reduction kernel that repeats an in-kernel value must spread a
  // row value over its row.
  bool row_broadcast(const Group& grp, const Node& b) const {
    const Shape& from = type(b.operands[0]).shape;
    if (from.empty()) return true;
    const auto& dims = b.attrs.get_ints("dims");
    if (from == kept_shape(grp, true)) {
      for (size_t i = 0; i < dims.size(); ++i)
        if (dims[i] != static_cast<int64_t>(i)) return false;
      return true;
    }
    std::vector<int64_t> kept;
    for (int64_t d = 0; d < static_cast<int64_t>(grp.full.size()); ++d)
      if (!std::binary_search(grp.reduced.begin(), grp.reduced.end(), d)) kept.push_back(d);
    return from == kept_shape(grp, false) && dims == kept;
  }

  // The row class (S, R) a broadcast spreads row values over: from shape S without the
  // dims R (dims the rest, in order), or from S with 1 at R (dims the identity).
  std::optional<Group> row_class_of(const Node& b) const {
    const Shape &from = type(b.operands[0]).shape, &to = type(b.result).shape;
    const auto& dims = b.attrs.get_ints("dims");
    Group row;
    row.kind = StepKind::Reduction;
    row.full = to;
    if (from.size() == to.size()) {
      for (size_t d = 0; d < to.size(); ++d) {
        if (dims[d] != static_cast<int64_t>(d)) return std::nullopt;
        if (from[d] == 1 && to[d] != 1) row.reduced.push_back(static_cast<int64_t>(d));
      }
    } else {
      if (!std::is_sorted(dims.begin(), dims.end())) return std::nullopt;
      for (int64_t d = 0; d < static_cast<int64_t>(to.size()); ++d)
        if (!std::binary_search(dims.begin(), dims.end(), d)) row.reduced.push_back(d);
    }
    if (row.reduced.empty()) return std::nullopt;
    return row;
  }

  // Whether member m (already in, or about to join, a reduction group of class grp) fits
  // that class. `operand_inside(v)` says whether v is computed inside the group.
  template <class Inside>
  bool fits_row(const Group& grp, const Node& m, Inside operand_inside) const {
    const Shape& s = type(m.result).shape;
    if (is_reduction(m.op)) return type(m.operands[0]).shape == grp.full && reduced_axes(m) == grp.reduced;
    if (m.op == Op::Broadcast) {
      if (s != grp.full) return false;
      return !operand_inside(m.operands[0]) || row_broadcast(grp, m);
    }
    if (ir::op_kind(m.op) == OpKind::Elementwise || is_source(m.op)) return s == grp.full || row_valued(grp, s);
    return false;
  }

  // Whether n fits grp's kernel; `converted` receives the reduction class a loop kernel
  // takes on by absorbing a reduction.
  bool fits(const Node& n, int target, std::optional<Group>& converted) const {
    const Group& grp = groups_[target];
    if (!is_loop_op(n.op) && !is_reduction(n.op)) return false;
    std::set<int> members(grp.members.begin(), grp.members.end());
    members.insert(static_cast<int>(&n - g_.nodes.data()));
    auto inside = [&](ValueId v) {
      int p = producer_[v];
      return p >= 0 && members.count(p) > 0;
    };
    if (grp.kind == StepKind::Loop) {
      if (is_reduction(n.op)) {
        // Absorbing a reduction turns the loop kernel into a reduction kernel, if every
        // member fits the reduction's shape class.
        Group row;
        set_row_class(row, n);
        for (int m : members)
          if (!fits_row(row, g_.nodes[m], inside)) return false;
        converted = std::move(row);
        return true;
      }
      if (!repeated(n, target) || type(n.result).rank() == 0) return true;
      // A value computed from values no larger than itself only (a batch norm's
      // per-channel scale from its params) is a small step of its own: the kernel that
      // spreads it stays a loop kernel, which also runs in oneDNN's layouts beside
      // convolutions, where a row kernel over channels could not.
      if (from_small_values(n.result, type(n.result).num_elements(), 0)) return false;
      // A row value spread over its row by a broadcast: the kernel becomes a reduction
      // kernel of that row class (each row computes the value once), whether or not a
      // reduction joins it later.
      std::optional<Group> row;
      for (int u : users_[n.result]) {
        if (group_of_[u] != target) continue;
        const Node& user = g_.nodes[u];
        if (user.op == Op::Gather) return false;
        if (user.op != Op::Broadcast || type(user.result).num_elements() <= type(n.result).num_elements()) continue;
        std::optional<Group> cls = row_class_of(user);
        if (!cls || (row && (cls->full != row->full || cls->reduced != row->reduced))) return false;
        row = cls;
      }
      for (int m : members)
        if (!fits_row(*row, g_.nodes[m], inside)) return false;
      converted = std::move(row);
      return true;
    }
    // A reduction kernel: n must fit the class, and if a broadcast in the kernel repeats
    // n it must be a row broadcast of a row value.
    if (!fits_row(grp, n, inside)) return false;
    // A reduction kernel cannot hold slices and concats (the gradients of a pool's or a
    // conv's taps). An elementwise op that reads one roots a loop kernel instead, which
    // takes in all of them (their sum, one pass), rather than leaving each of them a
    // kernel that writes a whole tensor for the reduction to read back.
    if (ir::op_kind(n.op) == OpKind::Elementwise)
      for (ValueId v : n.operands)
        if (joined_taps(v)) return false;
    for (int u : users_[n.result]) {
      if (group_of_[u] != target) continue;
      const Node& user = g_.nodes[u];
      if (user.op == Op::Broadcast && !fits_row(grp, user, inside)) return false;
      if (user.op == Op::Gather) return false;
    }
    return true;
  }

  // Whether v is a slice or a concat, or a reshape of one (a pool's gradient puts its taps
  // back in place as a concat reshaped to the input's shape).
  bool joined_taps(ValueId v) const {
    for (int depth = 0; depth < 4; ++depth) {
      const int p = producer_[v];
      if (p < 0) return false;
      const Op op = g_.nodes[p].op;
      if (op == Op::Slice || op == Op::Concat) return true;
      if (op != Op::Reshape) return false;
      v = g_.nodes[p].operands[0];
    }
    return false;
  }

  int inputs_after_join(const Group& grp, int node) const {
    std::set<int> members(grp.members.begin(), grp.members.end());
    members.insert(node);
    std::set<ValueId> inputs;
    for (int m : members)
      for (ValueId v : g_.nodes[m].operands) {
        int p = producer_[v];
        if ((p < 0 || !members.count(p)) && !(p >= 0 && is_source(g_.nodes[p].op))) inputs.insert(v);
      }
    return static_cast<int>(inputs.size());
  }

  // Constants and iota are recomputed by every kernel that reads them; they get a step of
  // their own only where a library call, a scatter or the results need them in memory.
  void place_sources() {
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const Node& n = g_.nodes[i];
      if (!is_source(n.op) || claim_[i] >= 0 || attention_claim_[i] >= 0) continue;
      bool own = !fuse_ || is_result_[n.result];
      std::set<int> user_groups;
      for (int u : users_[n.result]) {
        int grp = group_of_[u];
        StepKind k = groups_[grp].kind;
        // An epilogue's ops read their constants as the library call's post-ops, not
        // from memory.
        const bool in_epilogue =
            (claim_[u] >= 0 && epilogues_[claim_[u]].call != u && !post_op_reads(claim_[u], n.result)) ||
            (attention_claim_[u] >= 0 && !attention_reads(attention_claim_[u], n.result));
        if (!in_epilogue && (k == StepKind::Library || k == StepKind::Scatter)) own = true;
        else user_groups.insert(grp);
      }
      if (fuse_)
        for (int grp : user_groups) groups_[grp].members.push_back(static_cast<int>(i));
      if (own || users_[n.result].empty()) {
        Group grp;
        groups_.push_back(std::move(grp));
        add(static_cast<int>(groups_.size()) - 1, static_cast<int>(i));
      }
    }
  }

  // Whether the epilogue's call reads v from memory as a post-op's operand: a constant
  // bias spread over a convolution's single channel is a bias tensor of one element.
  bool post_op_reads(int e, ValueId v) const {
    const auto& ops = epilogues_[e].post_ops;
    return std::any_of(ops.begin(), ops.end(), [&](const ir::PostOp& op) { return op.operand == v; });
  }

  // An attention step's nodes and what its call reads from memory: q, k, v, the masks
  // and, in a backward, dO.
  struct AttentionClaim {
    std::vector<int> nodes;
    std::vector<ValueId> reads;
    bool gradient = false;
  };
  static std::vector<ValueId> reads_of(const ir::AttentionMatch& m) {
    std::vector<ValueId> reads{m.q, m.k, m.v};
    for (const ir::ScoreTransform& t : m.transforms)
      if (t.operand != ir::kNoValue) reads.push_back(t.operand);
    return reads;
  }

  // Whether the attention's call reads v from memory.
  bool attention_reads(int a, ValueId v) const {
    const std::vector<ValueId>& reads = attentions_[a].reads;
    return std::find(reads.begin(), reads.end(), v) != reads.end();
  }

  const ir::Graph& g_;
  bool fuse_;
  bool exact_reach_;  // reaches() walks the whole graph, not only up to the target's root
  std::vector<int> group_of_;
  std::vector<std::vector<int>> users_;
  std::vector<char> is_result_;
  std::vector<int> producer_;
  std::vector<Group> groups_;
  std::vector<ir::Epilogue> epilogues_;
  std::vector<int> claim_;           // per node: the epilogue it belongs to, or -1
  std::vector<int> folds_;           // per node: the matmul whose call reads it in place, or -1
  std::vector<int> epilogue_group_;  // per epilogue: its group, once started
  std::vector<AttentionClaim> attentions_;
  std::vector<int> attention_claim_;  // per node: the attention it belongs to, or -1
  std::vector<int> attention_group_;  // per attention: its group, once started
  // Visit marks for reaches(): a node or a group is visited in the current search when
  // its mark equals stamp_.
  mutable std::vector<int> seen_, group_seen_;
  mutable int stamp_ = 0;
};

std::string step_name(const ir::Graph& g, const Group& grp, size_t index) {
  if (grp.attention) return fmt::format("{}_{}", grp.attention_gradient ? "attention_grad" : "attention", index);
  if (grp.kind == StepKind::Library)
    for (int m : grp.members)
      if (ir::op_kind(g.nodes[m].op) == OpKind::Library) return fmt::format("{}_{}", ir::op_name(g.nodes[m].op), index);
  int op_nodes = 0;
  const Node* only = nullptr;
  for (int m : grp.members)
    if (!is_source(g.nodes[m].op) || grp.members.size() == 1) {
      ++op_nodes;
      only = &g.nodes[m];
    }
  if (op_nodes == 1) return fmt::format("{}_{}", ir::op_name(only->op), index);
  return fmt::format("fused_{}", index);
}

// Fusion's second look (passes/recompute.h): kernels take copies of what they can
// recompute, and the graph is partitioned again. Where a kernel's copies did not all land
// in its kernel (the partition went another way), the graph goes back and tries once more
// without them; then, failing that, as it was. A round's kernels may recompute more
// (a value whose other reader recomputed it now has only one): rounds go on until none
// copies anything, so that fusing a program's dump again gives the same program.
template <class Partition>
std::optional<std::vector<Group>> recompute_round(ir::Graph& g, const std::vector<Group>& groups,
                                                  const Partition& partition, RecomputeOps ops) {
  std::vector<char> exclude;
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::vector<KernelGroup> kernels;
    for (const Group& grp : groups)
      kernels.push_back({grp.members, grp.kind == StepKind::Loop || grp.kind == StepKind::Reduction, grp.ops});
    RecomputedReads copies =
        recompute_kernel_reads(g, kernels, FusionPass::kMaxNodes, FusionPass::kMaxInputs, ops, exclude);
    if (copies.kernels.empty()) return std::nullopt;
    std::vector<Group> again = partition();
    std::vector<int> group_of(g.nodes.size(), -1);
    for (size_t k = 0; k < again.size(); ++k)
      for (int m : again[k].members)
        if (!is_source(g.nodes[m].op)) group_of[m] = static_cast<int>(k);
    std::vector<std::vector<int>> users(g.values.size());
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (ValueId v : g.nodes[i].operands) users[v].push_back(static_cast<int>(i));
    // Each kernel's copies must land in one kernel with their readers, of the kind and
    // class the kernel had: a loop kernel that a copy turned into a row kernel (a value
    // it spreads over a batch dim computed once a row) is a partition the code generators
    // were never given (a [4, 8] softmax's product spread to [2, 4, 8] crashed them).
    auto same_kernel = [&](const Group& was, const Group& is) {
      return was.kind == is.kind && was.full == is.full && was.reduced == is.reduced &&
             g.type(g.nodes[is.members[0]].result).shape == g.type(copies.nodes_before[was.members[0]].result).shape;
    };
    bool landed = true;
    for (const KernelCopies& c : copies.kernels) {
      bool ok = true;
      for (int node : c.nodes) {
        for (int u : users[g.nodes[node].result]) ok = ok && group_of[u] == group_of[node];
        ok = ok && group_of[node] >= 0 && same_kernel(groups[c.group], again[group_of[node]]);
      }
      if (ok) continue;
      landed = false;
      exclude.resize(copies.values_before, 0);
      for (ValueId v : c.values) exclude[v] = 1;
    }
    if (landed) return again;
    undo_recompute(g, copies);
  }
  return std::nullopt;
}

template <class Partition>
std::vector<Group> recompute_reads(ir::Graph& g, std::vector<Group> groups, const Partition& partition,
                                   RecomputeOps ops) {
  // Each round removes reads between kernels; a graph has only so many.
  for (size_t round = 0; round < g.nodes.size(); ++round) {
    std::optional<std::vector<Group>> again = recompute_round(g, groups, partition, ops);
    if (!again) break;
    groups = std::move(*again);
  }
  return groups;
}

}  // namespace

Result<bool> FusionPass::run(ir::Graph& g) {
  for (const Node& n : g.nodes)
    if (ir::op_kind(n.op) == OpKind::Composite)
      return make_error(fmt::format("fusion: %{} = {} is a composite op; run decompose first",
                                    ir::display_names(g)[n.result], ir::op_name(n.op)));
  g.memory.reset();
  const FusionOptions& o = options_;
  const ir::AttentionRunner gradient_runner = o.attention_gradient ? o.attention : ir::AttentionRunner::kNone;
  if (o.fuse) {
    split_attention_gradients(g, gradient_runner);
    split_shared_broadcasts(g);
    split_shared_taps(g);
    if (o.matmul_views) split_shared_matmul_views(g, o.single_batch_views);
  }
  // A partition by the windowed walk of Partitioner::reaches, or, where its steps depend
  // on each other in a cycle, by the exact walk.
  auto step_nodes = [](const std::vector<Group>& groups) {
    std::vector<StepNodes> steps;
    for (const Group& grp : groups) {
      steps.push_back({grp.members});
      std::sort(steps.back().members.begin(), steps.back().members.end());
    }
    return steps;
  };
  auto partition = [&] {
    auto partitioner = [&](bool exact) {
      return Partitioner(g, o.fuse, o.matmul_epilogues, o.matmul_views, o.attention, gradient_runner,
                         o.single_batch_views, exact);
    };
    std::vector<Group> groups = partitioner(false).run();
    if (!o.fuse || order_steps(g, step_nodes(groups), StepOrder::kGraph).ok()) return groups;
    return partitioner(true).run();
  };
  std::vector<Group> groups = partition();
  if (o.fuse) groups = recompute_reads(g, std::move(groups), partition, o.recompute);
  KILN_ASSIGN_OR_RETURN(std::vector<int> order, order_steps(g, step_nodes(groups), o.order));
  std::vector<Group> ordered;
  for (int s : order) {
    ordered.push_back(std::move(groups[s]));
    std::sort(ordered.back().members.begin(), ordered.back().members.end());
  }
  groups = std::move(ordered);

  std::vector<int> producer = g.producers();
  std::vector<char> is_result(g.values.size(), 0);
  for (ValueId v : g.results) is_result[v] = 1;
  auto contains = [&](size_t i, int node) {
    return std::binary_search(groups[i].members.begin(), groups[i].members.end(), node);
  };

  ir::Program program;
  std::vector<std::vector<int>> readers(g.values.size());  // steps reading each value
  for (size_t s = 0; s < groups.size(); ++s) {
    const Group& grp = groups[s];
    ir::Step step;
    step.kind = grp.kind;
    step.name = step_name(g, grp, s);
    step.nodes = grp.members;
    for (int m : grp.members)
      for (ValueId v : g.nodes[m].operands) {
        int p = producer[v];
        if ((p < 0 || !contains(s, p)) && std::find(step.inputs.begin(), step.inputs.end(), v) == step.inputs.end()) {
          step.inputs.push_back(v);
          readers[v].push_back(static_cast<int>(s));
        }
      }
    program.steps.push_back(std::move(step));
  }
  // Outputs: values computed in a step and read by another step or returned. A shared
  // constant is an output only of the step that materializes it alone.
  for (size_t s = 0; s < groups.size(); ++s) {
    ir::Step& step = program.steps[s];
    for (int m : step.nodes) {
      ValueId v = g.nodes[m].result;
      bool shared_source = is_source(g.nodes[m].op) && step.nodes.size() > 1;
      if (shared_source) continue;
      bool read_elsewhere =
          std::any_of(readers[v].begin(), readers[v].end(), [&](int r) { return r != static_cast<int>(s); });
      if (read_elsewhere || is_result[v]) step.outputs.push_back(v);
    }
  }
  g.program = std::move(program);
  return true;
}

}  // namespace kiln::passes
