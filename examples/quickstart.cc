// kiln quickstart: build a small MLP with the model-definition API, print its IR,
// optimize it, and evaluate it on a deterministic input with the reference interpreter.
#include <cstdio>
#include <fmt/format.h>

#include "compiler/model.h"
#include "compiler/nn.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "passes/pipeline.h"

int main() {
  // 1. Describe the model: a batch of 4 inputs with 8 features, two hidden layers.
  kiln::Model model("quickstart_mlp", /*seed=*/42);
  kiln::Tensor x = model.input("x", {4, 8});
  kiln::nn::Sequential mlp = kiln::nn::mlp(model, "mlp", {8, 16, 16, 3}, kiln::nn::Activation::Gelu);
  model.output(kiln::softmax(mlp(x)), "probs");

  kiln::Result<kiln::ir::Graph> graph = model.build();
  if (!graph.ok()) {
    fmt::print(stderr, "{}\n", graph.error().message);
    return 1;
  }
  fmt::print("== the model as kiln IR ==\n{}\n", kiln::ir::print(*graph));

  // 2. Optimize: composites to primitives, simplification, common subexpressions.
  kiln::ir::Graph optimized = *graph;
  auto pipeline = kiln::passes::pipeline_from_names("decompose,canonicalize,cse,dce");
  if (!pipeline.ok() || !pipeline->run(optimized).ok()) {
    fmt::print(stderr, "optimization failed\n");
    return 1;
  }
  fmt::print("== after decompose, canonicalize, cse, dce: {} nodes (from {}) ==\n\n", optimized.nodes.size(),
             graph->nodes.size());

  // 3. Evaluate with the reference interpreter: weights from the seeded initialisers,
  //    a deterministic input.
  std::map<std::string, kiln::ir::Tensor> inputs = model.initial_values();
  std::vector<double> values;
  for (int i = 0; i < 4 * 8; ++i) values.push_back(((i * 7) % 11 - 5) / 5.0);
  inputs["x"] = kiln::ir::Tensor::from_doubles({kiln::ir::DType::F32, {4, 8}}, values);
  auto results = kiln::ir::evaluate(optimized, inputs);
  if (!results.ok()) {
    fmt::print(stderr, "{}\n", results.error().message);
    return 1;
  }
  const kiln::ir::Tensor& probs = (*results)[0];
  fmt::print("== class probabilities ({}) ==\n", probs.type.to_string());
  for (int row = 0; row < 4; ++row)
    fmt::print("  row {}: {:.4f} {:.4f} {:.4f}\n", row, probs.floats[row * 3], probs.floats[row * 3 + 1],
               probs.floats[row * 3 + 2]);
  return 0;
}
