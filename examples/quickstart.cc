// kiln quickstart: build a small MLP with the model-definition API, print its IR,
// compile it to an artifact, load that with the runtime and run it, and check it
// against the reference interpreter.
#include <fmt/format.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "compiler/compile.h"
#include "compiler/model.h"
#include "compiler/nn.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "passes/pipeline.h"
#include "runtime/model.h"

int main() {
  // Under `bazel run`, files go where the command was typed, not into Bazel's runfiles.
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY")) {
    std::error_code ec;
    std::filesystem::current_path(dir, ec);
  }

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
  auto pipeline = kiln::passes::pipeline_from_text("decompose,canonicalize,cse,dce");
  if (!pipeline.ok() || !pipeline->run(optimized).ok()) {
    fmt::print(stderr, "optimization failed\n");
    return 1;
  }
  fmt::print("== after decompose, canonicalize, cse, dce: {} nodes (from {}) ==\n\n", optimized.nodes.size(),
             graph->nodes.size());

  // 3. Compile to an artifact file: the fused program, its CPU kernels, the weights.
  kiln::CompileOptions options;
  options.weights = model.initial_values();
  auto artifact = kiln::compile_to_artifact(*graph, options);
  if (!artifact.ok()) {
    fmt::print(stderr, "{}\n", artifact.error().message);
    return 1;
  }
  const char* path = "quickstart_mlp.kiln";
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(artifact->data()), static_cast<std::streamsize>(artifact->size()));
  fmt::print("== compiled to {} ({} bytes) ==\n\n", path, artifact->size());

  // 4. Load it with the runtime (no compiler needed in a service) and run it on a
  //    deterministic input.
  auto loaded = kiln::runtime::Model::load_file(path);
  if (!loaded.ok()) {
    fmt::print(stderr, "{}\n", loaded.error().message);
    return 1;
  }
  std::vector<double> values;
  for (int i = 0; i < 4 * 8; ++i) values.push_back(((i * 7) % 11 - 5) / 5.0);
  kiln::ir::Tensor x_value = kiln::ir::Tensor::from_doubles({kiln::ir::DType::F32, {4, 8}}, values);
  kiln::runtime::HostTensor input{{"x", kiln::runtime::ElementType::F32, {4, 8}}, kiln::ir::tensor_to_bytes(x_value)};
  auto outputs = (*loaded)->run({{"x", input}});
  if (!outputs.ok()) {
    fmt::print(stderr, "{}\n", outputs.error().message);
    return 1;
  }
  const auto& probs = (*outputs)[0];
  const float* p = reinterpret_cast<const float*>(probs.data.data());
  fmt::print("== class probabilities ({}), from the runtime ==\n", probs.info.type_string());
  for (int row = 0; row < 4; ++row)
    fmt::print("  row {}: {:.4f} {:.4f} {:.4f}\n", row, p[row * 3], p[row * 3 + 1], p[row * 3 + 2]);

  // 5. The reference interpreter agrees.
  std::map<std::string, kiln::ir::Tensor> inputs = model.initial_values();
  inputs["x"] = x_value;
  auto reference = kiln::ir::evaluate(optimized, inputs);
  if (!reference.ok()) {
    fmt::print(stderr, "{}\n", reference.error().message);
    return 1;
  }
  double worst = 0;
  for (int k = 0; k < 12; ++k) worst = std::max(worst, std::fabs(p[k] - (*reference)[0].floats[k]));
  fmt::print("\n== largest difference from the interpreter: {:.2g} ==\n", worst);
  return worst < 1e-5 ? 0 : 1;
}
