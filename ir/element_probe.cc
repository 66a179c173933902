#include "ir/element_probe.h"

#include <algorithm>
#include <compare>
#include <initializer_list>
#include <string_view>

#include "ir/element_walker.h"

namespace kiln::ir {

namespace {

// An index or element as the probe knows it: absent (the walker's "none"), unknown (an
// element's value, or an index computed from one), or a known integer. As in the CPU code
// generator, whose constants are uniqued and whose other index arithmetic is a new
// instruction each time, a constant is known by its value (serial 0) and every other
// index computed has a serial of its own. So the walker's memo joins two reads only where
// the code generator's does, never where two paths reach the same index at the probed
// element only (an input read transposed, and again through a slice of its first batch
// index: one load at batch 0, two elsewhere).
struct Probed {
  bool present = false;
  bool known = false;
  int64_t value = 0;
  int64_t serial = 0;

  bool empty() const { return !present; }
  auto operator<=>(const Probed&) const = default;
};

class Probe : public ElementWalker<Probe, Probed> {
 public:
  Probe(const Graph& g, const Step& step) : ElementWalker(g, step) {}

  std::optional<std::vector<std::pair<ValueId, int64_t>>> reads(const std::vector<int64_t>& at) {
    Index idx;
    for (int64_t i : at) idx.dims.push_back(of(i));
    for (ValueId o : step_.outputs)
      if (!value_at(o, idx).ok()) return std::nullopt;
    if (unknown_load_) return std::nullopt;
    return reads_;
  }

 private:
  friend ElementWalker;

  // A known index computed from `from`: a constant where all of them are.
  Probed of(int64_t v, std::initializer_list<Probed> from = {}) {
    const bool constant = from.size() > 0 && std::all_of(from.begin(), from.end(),
                                                         [](const Probed& p) { return p.known && p.serial == 0; });
    return {true, true, v, constant ? 0 : ++serial_};
  }
  Probed unknown() { return {true, false, 0, ++serial_}; }

  Probed index_constant(int64_t c) { return {true, true, c, 0}; }
  Probed index_add(Probed a, Probed b) { return a.known && b.known ? of(a.value + b.value, {a, b}) : unknown(); }
  Probed index_mul(Probed a, int64_t c) { return a.known ? of(a.value * c, {a}) : unknown(); }
  Probed index_finish(Probed flat) { return flat; }
  Probed unflatten_dim(Probed flat, int64_t stride, int64_t extent, bool outermost) {
    if (!flat.known) return unknown();
    const int64_t q = flat.value / stride;
    return of(outermost ? q : q % extent, {flat});
  }
  Probed affine(Probed i, int64_t start, int64_t step) { return i.known ? of(start + i.value * step, {i}) : unknown(); }
  Probed clamp_index(Probed, int64_t) { return unknown(); }
  std::optional<Probed> special_value(ValueId, const Key&) { return std::nullopt; }
  Probed load(ValueId v, Probed flat) {
    if (!flat.known) unknown_load_ = true;
    else reads_.emplace_back(v, flat.value);
    return unknown();
  }
  Result<Probed> elementwise(const Node&, std::span<const Probed>, std::span<const DType>) { return unknown(); }
  Result<Probed> iota(Probed, DType) { return unknown(); }
  Probed scalar_constant(DType, double, int64_t) { return unknown(); }
  Probed dense_constant(const Literal&, DType, Probed) { return unknown(); }
  // A concat's operands are read where its index falls: not followed, so not known.
  Result<Probed> concat(const Node&, const Index&) {
    unknown_load_ = true;
    return unknown();
  }
  std::string_view codegen_name() const { return "element probe"; }

  std::vector<std::pair<ValueId, int64_t>> reads_;
  bool unknown_load_ = false;
  int64_t serial_ = 0;
};

}  // namespace

std::optional<std::vector<std::pair<ValueId, int64_t>>> element_reads(const Graph& graph, const Step& step,
                                                                      const std::vector<int64_t>& index) {
  if (step.kind != StepKind::Loop || step.outputs.empty()) return std::nullopt;
  return Probe(graph, step).reads(index);
}

namespace {

using Reads = std::vector<std::pair<ValueId, int64_t>>;

// The inputs whose index moves by one per step along `dim` for a tile's rows from the
// origin, and by more than one along the last dim (`base`: the reads at the origin,
// `column`: one step along the last dim); nullopt where the walk is not known.
std::optional<std::vector<ValueId>> read_down(const Graph& graph, const Step& step, size_t dim, const Reads& base,
                                              const Reads& column) {
  const Shape& shape = graph.type(step.outputs[0]).shape;
  // A tile's rows: one vector of f32 down (16 with AVX-512). An input counts where its
  // index moves by one per row for all of them: MaxViT's windows of 7 moved by one for 7
  // rows, then jumped, and their tiles loaded as slowly as the rows had.
  constexpr int64_t kTileRows = 16;
  const int64_t rows = std::min(shape[dim], kTileRows);
  std::vector<int64_t> at(shape.size(), 0);
  std::vector<Reads> down;
  for (int64_t r = 1; r < rows; ++r) {
    at[dim] = r;
    auto reads = element_reads(graph, step, at);
    if (!reads || reads->size() != base.size()) return std::nullopt;
    down.push_back(std::move(*reads));
  }
  std::vector<ValueId> across;
  for (size_t k = 0; k < base.size(); ++k) {
    const auto [input, flat] = base[k];
    const int64_t along_columns = column[k].second - flat;
    bool one_per_row = true;
    for (size_t r = 0; r < down.size(); ++r) {
      if (down[r][k].first != input) return std::nullopt;
      one_per_row = one_per_row && down[r][k].second - flat == static_cast<int64_t>(r) + 1;
    }
    if (one_per_row && along_columns != 0 && along_columns != 1) across.push_back(input);
  }
  // A tile of an input read more than once could not stand for each of its reads.
  for (ValueId x : across)
    if (std::count_if(base.begin(), base.end(), [&](const auto& read) { return read.first == x; }) != 1)
      return std::nullopt;
  return across;
}

}  // namespace

std::optional<ReadAcrossRows> inputs_read_across_rows(const Graph& graph, const Step& step) {
  if (step.kind != StepKind::Loop || step.outputs.empty()) return std::nullopt;
  const Shape& shape = graph.type(step.outputs[0]).shape;
  const size_t rank = shape.size();
  if (rank < 2) return std::nullopt;
  std::vector<int64_t> at(rank, 0);
  const auto base = element_reads(graph, step, at);
  at[rank - 1] = 1;
  const auto column = element_reads(graph, step, at);
  if (!base || !column || column->size() != base->size()) return std::nullopt;
  for (size_t k = 0; k < base->size(); ++k)
    if ((*column)[k].first != (*base)[k].first) return std::nullopt;
  int64_t columns = shape[rank - 1];  // the dims after `dim` taken together
  for (size_t dim = rank - 1; dim-- > 0; columns *= shape[dim]) {
    if (shape[dim] < 8 || columns < 8) continue;  // narrower than any tile
    auto across = read_down(graph, step, dim, *base, *column);
    if (!across) return std::nullopt;
    if (!across->empty()) return ReadAcrossRows{static_cast<int64_t>(dim), std::move(*across)};
  }
  return std::nullopt;
}

}  // namespace kiln::ir
