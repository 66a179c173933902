// A PyTorch model's trained weights in kiln: the same MLP written with kiln's API in
// PyTorch's weight layout, its params named as the state_dict names them, so a
// state_dict saved with safetensors loads as it is (docs/weights.md).
//
//   python3 -c '...save_file(model.state_dict(), "mlp.safetensors")'   (docs/weights.md)
//   bazel run //examples:pytorch_weights -- mlp.safetensors
#include <cstdio>

#include "compiler/compile.h"
#include "compiler/model.h"
#include "compiler/nn.h"
#include "compiler/safetensors.h"
#include "runtime/model.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: pytorch_weights MLP.safetensors\n");
    return 2;
  }
  // class MLP(torch.nn.Module): fc1 = Linear(4, 8), fc2 = Linear(8, 3); fc2(relu(fc1(x)))
  kiln::Model model("mlp");
  kiln::Tensor x = model.input("x", {2, 4});
  const kiln::nn::LinearOptions torch_layout{.layout = kiln::nn::WeightLayout::OutIn};
  kiln::nn::Linear fc1(model, "fc1", 4, 8, torch_layout), fc2(model, "fc2", 8, 3, torch_layout);
  model.output(fc2(kiln::relu(fc1(x))), "y");
  auto graph = model.build();
  auto weights = kiln::read_safetensors(argv[1]);
  if (!graph.ok() || !weights.ok()) {
    std::fprintf(stderr, "pytorch_weights: %s\n", (graph.ok() ? weights.error() : graph.error()).message.c_str());
    return 1;
  }
  kiln::CompileOptions options;
  options.weights = std::move(*weights);
  options.convert_weight_dtypes = true;  // a state_dict saved in f16, bf16 or f64 rounds to f32
  auto artifact = kiln::compile_to_artifact(*graph, options);
  if (!artifact.ok()) {
    std::fprintf(stderr, "pytorch_weights: %s\n", artifact.error().message.c_str());
    return 1;
  }
  auto loaded = kiln::runtime::Model::load_bytes(std::move(*artifact));
  if (!loaded.ok()) {
    std::fprintf(stderr, "pytorch_weights: %s\n", loaded.error().message.c_str());
    return 1;
  }
  // x = torch.arange(8.0).reshape(2, 4) / 8
  float input[8];
  for (int i = 0; i < 8; ++i) input[i] = static_cast<float>(i) / 8;
  float y[6];
  kiln::Status ran =
      (*loaded)->run({{"x", std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(input), sizeof input)}},
                     {{"y", std::span<uint8_t>(reinterpret_cast<uint8_t*>(y), sizeof y)}});
  if (!ran.ok()) {
    std::fprintf(stderr, "pytorch_weights: %s\n", ran.error().message.c_str());
    return 1;
  }
  for (int r = 0; r < 2; ++r) std::printf("%.6f %.6f %.6f\n", y[r * 3], y[r * 3 + 1], y[r * 3 + 2]);
  return 0;
}
