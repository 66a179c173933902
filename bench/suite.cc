#include "bench/suite.h"

#include <fmt/format.h>

#include "bench/models.h"
#include "ir/parser.h"

namespace kiln::bench {
namespace {

Result<SuiteRow> from_text(std::string name, std::string description, const std::string& text) {
  KILN_ASSIGN_OR_RETURN(ir::Graph g, ir::parse(text, name + ".kir"));
  return SuiteRow{std::move(name), std::move(description), std::move(g), {}, {}};
}

// N cheap elementwise ops in a row; canonicalize folds none of them. In bf16 the input
// and result are bf16 and the ops f32 between casts, as torch.compile computes a bf16
// chain (one rounding at the end).
Result<SuiteRow> chain(int n, int64_t elements, bool bf16 = false) {
  const std::string name = fmt::format("chain{}{}", n, bf16 ? "_bf16" : "");
  std::string text = fmt::format("graph @{}(%x: {}[{}]) {{\n", name, bf16 ? "bf16" : "f32", elements);
  if (bf16) text += fmt::format("  %xf: f32[{}] = cast(%x) {{to=f32}}\n", elements);
  constexpr const char* ops[] = {"add", "mul", "sub", "mul"};
  constexpr const char* constants[] = {"0.5", "1.5", "0.25", "0.75"};
  for (int k = 0; k < 4; ++k) text += fmt::format("  %c{}: f32[] = constant {{value={}}}\n", k, constants[k]);
  std::string prev = bf16 ? "xf" : "x";
  for (int k = 0; k < n; ++k) {
    std::string next = k + 1 == n ? (bf16 ? "yf" : "y") : fmt::format("v{}", k);
    text += fmt::format("  %{}: f32[{}] = {}(%{}, %c{})\n", next, elements, ops[k % 4], prev, k % 4);
    prev = next;
  }
  if (bf16) text += fmt::format("  %y: bf16[{}] = cast(%yf) {{to=bf16}}\n", elements);
  text += "  return %y\n}\n";
  return from_text(name,
                   fmt::format("{} elementwise ops (add, mul, sub, mul, ...){}, x: {}[{}]", n,
                               bf16 ? " in f32 between casts" : "", bf16 ? "bf16" : "f32", elements),
                   text);
}

// In bf16: x and y bf16, the softmax in f32 between casts (as autocast computes it).
Result<SuiteRow> softmax(int64_t row, int64_t elements, bool bf16 = false) {
  int64_t rows = std::max<int64_t>(1, elements / row);
  if (bf16)
    return from_text(fmt::format("softmax_{}_bf16", row),
                     fmt::format("softmax over rows in f32 between casts, x: bf16[{},{}]", rows, row),
                     fmt::format("graph @softmax(%x: bf16[{0},{1}]) {{\n  %xf: f32[{0},{1}] = cast(%x) {{to=f32}}\n"
                                 "  %yf: f32[{0},{1}] = softmax(%xf) {{axis=-1}}\n  %y: bf16[{0},{1}] = cast(%yf) "
                                 "{{to=bf16}}\n  return %y\n}}\n",
                                 rows, row));
  return from_text(
      fmt::format("softmax_{}", row), fmt::format("softmax over rows, x: f32[{},{}]", rows, row),
      fmt::format(
          "graph @softmax(%x: f32[{0},{1}]) {{\n  %y: f32[{0},{1}] = softmax(%x) {{axis=-1}}\n  return %y\n}}\n", rows,
          row));
}

Result<std::vector<SuiteRow>> fusion_rows(bool quick) {
  // Full size: 64M f32 (256 MiB) per tensor, well beyond the last-level cache.
  const int64_t elements = quick ? int64_t{1} << 16 : int64_t{1} << 26;
  const int64_t rows_4096 = elements / 4096;
  std::vector<Result<SuiteRow>> rows;
  rows.push_back(from_text(
      "coscos", fmt::format("cos(cos(x)), x: f32[{}]", elements),
      fmt::format(
          "graph @coscos(%x: f32[{0}]) {{\n  %a: f32[{0}] = cos(%x)\n  %y: f32[{0}] = cos(%a)\n  return %y\n}}\n",
          elements)));
  for (int n : {2, 4, 8, 16}) rows.push_back(chain(n, elements));
  rows.push_back(chain(8, elements, /*bf16=*/true));
  rows.push_back(
      from_text("bias_gelu", fmt::format("gelu(x + b) (erf form), x: f32[{},4096], b: f32[4096]", rows_4096),
                fmt::format("graph @bias_gelu(%x: f32[{0},4096], %b: f32[4096]) {{\n  %bb: f32[{0},4096] = "
                            "broadcast(%b) {{shape=[{0},4096], dims=[1]}}\n"
                            "  %h: f32[{0},4096] = add(%x, %bb)\n  %y: f32[{0},4096] = gelu(%h)\n  return %y\n}}\n",
                            rows_4096)));
  for (int64_t row : {256, 4096, 32768}) rows.push_back(softmax(row, elements));
  rows.push_back(softmax(4096, elements, /*bf16=*/true));
  rows.push_back(
      from_text("layernorm", fmt::format("layer_norm over rows, x: f32[{},4096], scale and bias: f32[4096]", rows_4096),
                fmt::format("graph @layernorm(%x: f32[{0},4096], %s: f32[4096], %b: f32[4096]) {{\n"
                            "  %y: f32[{0},4096] = layer_norm(%x, %s, %b) {{axis=-1, eps=1e-5}}\n  return %y\n}}\n",
                            rows_4096)));
  rows.push_back(from_text(
      "residual_layernorm", fmt::format("h = x + r; layer_norm(h), returning both, x, r: f32[{},4096]", rows_4096),
      fmt::format("graph @residual_layernorm(%x: f32[{0},4096], %r: f32[{0},4096], %s: f32[4096], %b: f32[4096]) {{\n"
                  "  %h: f32[{0},4096] = add(%x, %r)\n  %y: f32[{0},4096] = layer_norm(%h, %s, %b) {{axis=-1, "
                  "eps=1e-5}}\n  return %h, %y\n}}\n",
                  rows_4096)));
  const int64_t batch = quick ? 32 : 256;
  rows.push_back(mlp_row("mlp_forward", batch, false));
  rows.push_back(mlp_row("mlp_train_step", batch, true));
  std::vector<SuiteRow> out;
  for (auto& r : rows) {
    if (!r.ok()) return make_error("bench: cannot build the fusion suite: " + r.error().message);
    out.push_back(std::move(*r));
  }
  return out;
}

}  // namespace

std::vector<std::string> suite_names() { return {"fusion", "models"}; }

Result<std::vector<SuiteRow>> suite_rows(const std::string& suite, bool quick) {
  if (suite == "fusion") return fusion_rows(quick);
  if (suite == "models") return model_rows(quick);
  std::string names;
  for (const std::string& n : suite_names()) names += (names.empty() ? "" : ", ") + n;
  return make_error(fmt::format("bench: no suite '{}' (suites: {})", suite, names));
}

}  // namespace kiln::bench
