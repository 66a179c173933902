// Einsum over letters (no letter twice in one operand); an ellipsis stands for letters the
// equation does not use, one per dim it covers, aligned from the right as numpy broadcasts
// them (a dim of 1 against a longer one is dropped from its operand). Two float operands
// whose every letter is a batch letter (in both and the output), a kept one (in one and
// the output) or a contracted one (in both, not the output) are one batched matmul, as
// attention's einsums are; otherwise every operand is laid out over all the equation's
// letters (transposed, then broadcast along the letters it lacks), multiplied, and summed
// over the letters the output lacks.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "frontends/onnx/ops.h"

namespace kiln::onnx_import {

namespace {

using ir::Op;

// x (over the letters of `term`) transposed to the letters of `order`.
Result<Value> reordered(Context& ctx, const onnx::NodeProto& node, const Value& x, const std::string& term,
                        const std::string& order) {
  std::vector<int64_t> perm;
  for (char c : order) perm.push_back(static_cast<int64_t>(term.find(c)));
  if (std::is_sorted(perm.begin(), perm.end())) return x;
  return transposed(ctx, node, x, std::move(perm));
}

// The product of the extents of `letters`.
int64_t extent_of(const std::string& letters, std::map<char, int64_t>& extent) {
  int64_t n = 1;
  for (char c : letters) n *= extent[c];
  return n;
}

// The einsum of two operands as one batched matmul [batch.., m, k] x [batch.., k, n], or
// nullopt where it is not one (see the top of the file).
Result<std::optional<Value>> as_matmul(Context& ctx, const onnx::NodeProto& node, const std::vector<std::string>& terms,
                                       const std::vector<Value>& operands, const std::string& output,
                                       std::map<char, int64_t>& extent) {
  if (terms.size() != 2 || !ir::is_float(ctx.type_of(operands[0]).dtype) ||
      ctx.type_of(operands[0]).dtype != ctx.type_of(operands[1]).dtype)
    return std::optional<Value>{};
  const std::string &a = terms[0], &b = terms[1];
  std::string batch, left, right, inner;
  for (char c : output) {
    const bool in_a = a.find(c) != std::string::npos, in_b = b.find(c) != std::string::npos;
    (in_a && in_b ? batch : in_a ? left : right) += c;
  }
  for (char c : a) {
    if (output.find(c) != std::string::npos) continue;
    if (b.find(c) == std::string::npos) return std::optional<Value>{};  // summed in one operand alone
    inner += c;
  }
  for (char c : b)
    if (output.find(c) == std::string::npos && a.find(c) == std::string::npos) return std::optional<Value>{};
  ir::Shape batch_shape;
  for (char c : batch) batch_shape.push_back(extent[c]);
  auto matrix = [&](ir::Shape shape, int64_t rows, int64_t cols) {
    shape.push_back(rows), shape.push_back(cols);
    return shape;
  };
  KILN_ASSIGN_OR_RETURN(Value x, reordered(ctx, node, operands[0], a, batch + left + inner));
  KILN_ASSIGN_OR_RETURN(x,
                        reshaped(ctx, node, x, matrix(batch_shape, extent_of(left, extent), extent_of(inner, extent))));
  KILN_ASSIGN_OR_RETURN(Value y, reordered(ctx, node, operands[1], b, batch + inner + right));
  KILN_ASSIGN_OR_RETURN(
      y, reshaped(ctx, node, y, matrix(batch_shape, extent_of(inner, extent), extent_of(right, extent))));
  KILN_ASSIGN_OR_RETURN(Value product, ctx.apply(node, Op::Matmul, {x, y}));
  ir::Shape unfolded = batch_shape;
  for (char c : left + right) unfolded.push_back(extent[c]);
  KILN_ASSIGN_OR_RETURN(product, reshaped(ctx, node, product, unfolded));
  KILN_ASSIGN_OR_RETURN(product, reordered(ctx, node, product, batch + left + right, output));
  return std::optional<Value>{product};
}

// Replaces each '...' (in the terms and the output) by letters the equation does not use,
// one per dim it covers, the last dims of all operands sharing the last letters; an
// operand's dim of 1 where another has more is reshaped away (numpy's broadcasting).
// Returns the ellipsis's letters ("" without one).
Result<std::string> expand_ellipsis(Context& ctx, const onnx::NodeProto& node, std::vector<std::string>& terms,
                                    std::vector<Value>& operands, std::optional<std::string>& output) {
  const auto has = [](const std::string& t) { return t.find("...") != std::string::npos; };
  if (std::none_of(terms.begin(), terms.end(), has) && !(output && has(*output))) return std::string();
  std::string unused;
  for (char c = 'A'; c <= 'z'; ++c) {
    if (!std::isalpha(static_cast<unsigned char>(c))) continue;
    bool used = output && output->find(c) != std::string::npos;
    for (const std::string& t : terms) used = used || t.find(c) != std::string::npos;
    if (!used) unused += c;
  }
  std::vector<int64_t> covers(terms.size(), 0);
  int64_t most = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const size_t at = terms[i].find("...");
    if (at == std::string::npos) continue;
    if (terms[i].find("...", at + 3) != std::string::npos)
      return node_error(node, fmt::format("'{}' has more than one '...'", terms[i]));
    covers[i] = ctx.type_of(operands[i]).rank() - static_cast<int64_t>(terms[i].size() - 3);
    if (covers[i] < 0)
      return node_error(node, fmt::format("operand {} has rank {}, fewer than '{}' names", i,
                                          ctx.type_of(operands[i]).rank(), terms[i]));
    most = std::max(most, covers[i]);
  }
  if (most > static_cast<int64_t>(unused.size()))
    return node_error(node, "the '...' covers more dims than letters left");
  const std::string letters = unused.substr(0, static_cast<size_t>(most));
  // Each letter's extent: the longest any operand gives it.
  std::map<char, int64_t> longest;
  for (size_t i = 0; i < terms.size(); ++i)
    for (int64_t k = 0; k < covers[i]; ++k) {
      const size_t d = terms[i].find("...") + static_cast<size_t>(k);
      const char c = letters[static_cast<size_t>(most - covers[i] + k)];
      longest[c] = std::max(longest[c], ctx.type_of(operands[i]).shape[d]);
    }
  for (size_t i = 0; i < terms.size(); ++i) {
    const size_t at = terms[i].find("...");
    if (at == std::string::npos) continue;
    const ir::Shape shape = ctx.type_of(operands[i]).shape;
    std::string covered;
    ir::Shape kept;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (d >= at && d < at + static_cast<size_t>(covers[i])) {
        const char c = letters[static_cast<size_t>(most - covers[i]) + (d - at)];
        if (shape[d] == 1 && longest[c] > 1) continue;  // broadcast: the operand lacks the letter
        covered += c;
      }
      kept.push_back(shape[d]);
    }
    if (kept.size() != shape.size()) {
      KILN_ASSIGN_OR_RETURN(operands[i], reshaped(ctx, node, operands[i], kept));
    }
    terms[i].replace(at, 3, covered);
  }
  if (output && has(*output)) output->replace(output->find("..."), 3, letters);
  return letters;
}

Status convert_einsum(Context& ctx, const onnx::NodeProto& node) {
  KILN_RETURN_IF_ERROR(check_attributes(node, {"equation"}));
  KILN_ASSIGN_OR_RETURN(std::string equation, string_attribute(node, "equation", std::nullopt));
  std::string eq;
  for (char c : equation)
    if (c != ' ') eq += c;
  const size_t arrow = eq.find("->");
  std::vector<std::string> terms;
  for (size_t start = 0, end = std::min(arrow, eq.size());;) {
    const size_t comma = std::min(eq.find(',', start), end);
    terms.push_back(eq.substr(start, comma - start));
    if (comma >= end) break;
    start = comma + 1;
  }
  if (static_cast<int>(terms.size()) != node.input_size())
    return node_error(
        node, fmt::format("the equation '{}' has {} operands, the node {}", equation, terms.size(), node.input_size()));
  std::vector<Value> operands;
  for (size_t i = 0; i < terms.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(Value v, ctx.input(node, static_cast<int>(i)));
    operands.push_back(v);
  }
  std::optional<std::string> given_output;
  if (arrow != std::string::npos) given_output = eq.substr(arrow + 2);
  KILN_ASSIGN_OR_RETURN(std::string ellipsis, expand_ellipsis(ctx, node, terms, operands, given_output));
  // Every letter in first-seen order, its extent, and how often it appears.
  std::string letters;
  std::map<char, int64_t> extent;
  std::map<char, int> uses;
  for (size_t i = 0; i < terms.size(); ++i) {
    const Value& v = operands[i];
    const ir::Shape shape = ctx.type_of(v).shape;
    if (terms[i].size() != shape.size())
      return node_error(node, fmt::format("operand {} has rank {}, but '{}' names {} dims", i, shape.size(), terms[i],
                                          terms[i].size()));
    for (size_t d = 0; d < terms[i].size(); ++d) {
      const char c = terms[i][d];
      if (!std::isalpha(static_cast<unsigned char>(c))) return node_error(node, fmt::format("'{}' is not a letter", c));
      if (terms[i].find(c) != d)
        return node_error(node,
                          fmt::format("a letter twice in one operand ('{}': a diagonal) is not supported", terms[i]));
      if (extent.count(c) && extent[c] != shape[d])
        return node_error(node, fmt::format("letter '{}' has extents {} and {}", c, extent[c], shape[d]));
      if (!extent.count(c)) letters += c;
      extent[c] = shape[d];
      ++uses[c];
    }
  }
  std::string output;
  if (given_output) {
    output = *given_output;
    for (char c : output)
      if (!extent.count(c)) return node_error(node, fmt::format("output letter '{}' names no operand dim", c));
  } else {
    output = ellipsis;  // numpy's implicit output: the ellipsis, then the letters used once, alphabetically
    for (const auto& [c, n] : uses)
      if (n == 1 && ellipsis.find(c) == std::string::npos) output += c;
  }
  KILN_ASSIGN_OR_RETURN(std::optional<Value> matmul, as_matmul(ctx, node, terms, operands, output, extent));
  if (matmul) return define_output(ctx, node, 0, *matmul);
  // The full layout: the output's letters first, then the summed ones.
  std::string full = output;
  for (char c : letters)
    if (output.find(c) == std::string::npos) full += c;
  ir::Shape shape;
  for (char c : full) shape.push_back(extent[c]);
  Value product;
  for (size_t i = 0; i < operands.size(); ++i) {
    const std::string& term = terms[i];
    std::vector<int64_t> perm, dims;
    for (size_t f = 0; f < full.size(); ++f)
      if (const size_t d = term.find(full[f]); d != std::string::npos)
        perm.push_back(static_cast<int64_t>(d)), dims.push_back(static_cast<int64_t>(f));
    Value v = operands[i];
    if (!std::is_sorted(perm.begin(), perm.end())) {
      KILN_ASSIGN_OR_RETURN(v, transposed(ctx, node, v, perm));
    }
    ir::Attrs spread;
    spread.set("shape", shape);
    spread.set("dims", dims);
    KILN_ASSIGN_OR_RETURN(v, ctx.apply(node, Op::Broadcast, {v}, std::move(spread)));
    if (i == 0) {
      product = v;
    } else {
      KILN_ASSIGN_OR_RETURN(product, ctx.apply(node, Op::Mul, {product, v}));
    }
  }
  if (full.size() > output.size()) {
    std::vector<int64_t> summed;
    for (size_t f = output.size(); f < full.size(); ++f) summed.push_back(static_cast<int64_t>(f));
    ir::Attrs attrs;
    attrs.set("axes", summed);
    attrs.set("keepdims", false);
    KILN_ASSIGN_OR_RETURN(product, ctx.apply(node, Op::ReduceSum, {product}, std::move(attrs)));
  }
  return define_output(ctx, node, 0, product);
}

constexpr OpConverter kConverters[] = {
    {"Einsum", convert_einsum},
};

}  // namespace

std::span<const OpConverter> einsum_converters() { return kConverters; }

}  // namespace kiln::onnx_import
