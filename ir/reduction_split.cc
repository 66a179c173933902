#include "ir/reduction_split.h"

#include <algorithm>

namespace kiln::ir {

bool single_float_sum(const Graph& g, const Step& step, const RowClass& rc) {
  std::vector<char> member(g.nodes.size(), 0);
  const Node* sum = nullptr;
  int reductions = 0;
  for (int n : step.nodes) {
    member[n] = 1;
    if (op_kind(g.nodes[n].op) != OpKind::Reduction) continue;
    ++reductions;
    sum = &g.nodes[n];
  }
  if (reductions != 1 || sum->op != Op::ReduceSum || !is_float(g.type(sum->operands[0]).dtype)) return false;
  // A full-shape output that needs the sum would need a second walk over the row.
  const std::vector<int> producer = g.producers();
  std::vector<char> seen(g.values.size(), 0);
  for (ValueId o : step.outputs) {
    if (g.type(o).shape != rc.full) continue;
    std::vector<ValueId> todo{o};
    while (!todo.empty()) {
      ValueId v = todo.back();
      todo.pop_back();
      if (producer[v] < 0 || !member[producer[v]] || seen[v]) continue;
      seen[v] = 1;
      if (v == sum->result) return false;
      for (ValueId operand : g.nodes[producer[v]].operands) todo.push_back(operand);
    }
  }
  return true;
}

bool sums_columns(const Graph& g, const Step& step, const RowClass& rc) {
  if (rc.contiguous() || rc.kept.empty() || rc.reduced.empty()) return false;
  const int64_t first = rc.reduced.front();
  for (size_t d = 0; d < rc.reduced.size(); ++d)
    if (rc.reduced[d] != first + static_cast<int64_t>(d)) return false;
  // Reduced dims inside kept ones (a [B, H, G, T, D] gradient summed over G): a batch of
  // column sums, each over a [G, T·D] block, as long as a block's rows are long enough to
  // read a vector at a time.
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(rc.reduced.back()) + 1; d < rc.full.size(); ++d) inner *= rc.full[d];
  if (first > 0 && inner < kMinColumnBlockRow) return false;
  return single_float_sum(g, step, rc);
}

std::optional<ReductionSplit> reduction_split(const Graph& g, const Step& step, const SplitRule& rule) {
  if (step.kind != StepKind::Reduction) return std::nullopt;
  std::optional<RowClass> rc = row_class(g, step);
  if (!rc) return std::nullopt;
  const int64_t rows = rc->rows(), length = rc->row_length();
  if (rows <= 0 || length <= 0 || rows * length < rule.min_elements) return std::nullopt;
  ReductionSplit split;
  if (sums_columns(g, step, *rc)) {
    if (rows >= rule.many_columns) return std::nullopt;  // the columns alone keep every core busy
    // Whole groups of operand rows per part, enough that the scratch (a double per column
    // per part) stays small beside the part's own elements.
    int64_t part = std::max(rule.min_column_rows, (rule.part_elements + rows - 1) / rows);
    part = std::max(part, (length + rule.max_parts - 1) / rule.max_parts);
    part = (part + 7) / 8 * 8;
    split.walk = ReductionSplit::Walk::Columns;
    split.part_length = part;
    split.parts = (length + part - 1) / part;
    split.partial_items = split.parts;
    if (split.parts < rule.min_parts) return std::nullopt;
  } else {
    if (!rc->contiguous() || rows > rule.few_rows || !single_float_sum(g, step, *rc)) return std::nullopt;
    bool full_outputs = false;
    for (ValueId o : step.outputs) full_outputs = full_outputs || g.type(o).shape == rc->full;
    const int64_t part_elements = full_outputs ? rule.output_part_elements : rule.part_elements;
    // Equal parts, so each is a loop of constant length: the most parts up to the aim
    // that divide the row and are not too short.
    const int64_t aim = std::min(rule.max_parts / rows, (length + part_elements - 1) / part_elements);
    int64_t parts = 0;
    for (int64_t p = aim; p >= 2 && parts == 0; --p)
      if (length % p == 0 && length / p >= rule.min_part_length) parts = p;
    if (parts == 0) return std::nullopt;
    split.walk = ReductionSplit::Walk::Rows;
    split.parts = parts;
    split.part_length = length / parts;
    split.partial_items = rows * parts;
  }
  split.scratch_bytes = rows * split.parts * static_cast<int64_t>(sizeof(double));
  return split;
}

}  // namespace kiln::ir
