// Builds a small classifier with kiln's model-definition API and writes it, compiled, to
// the artifact named on the command line. Links kiln::compiler.
#include <cstdio>
#include <fstream>

#include "compiler/compile.h"
#include "compiler/model.h"
#include "compiler/nn.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_model OUT.kiln\n");
    return 2;
  }
  kiln::Model model("classifier", /*seed=*/1);
  kiln::Tensor x = model.input("x", {2, 4});
  kiln::nn::Sequential mlp = kiln::nn::mlp(model, "mlp", {4, 8, 3});
  model.output(kiln::softmax(mlp(x)), "probs");
  auto graph = model.build();
  if (!graph.ok()) {
    std::fprintf(stderr, "make_model: %s\n", graph.error().message.c_str());
    return 1;
  }
  kiln::CompileOptions options;
  options.weights = model.initial_values();
  auto artifact = kiln::compile_to_artifact(*graph, options);
  if (!artifact.ok()) {
    std::fprintf(stderr, "make_model: %s\n", artifact.error().message.c_str());
    return 1;
  }
  std::ofstream(argv[1], std::ios::binary)
      .write(reinterpret_cast<const char*>(artifact->data()), static_cast<std::streamsize>(artifact->size()));
  std::printf("wrote %s (%zu bytes)\n", argv[1], artifact->size());
  return 0;
}
