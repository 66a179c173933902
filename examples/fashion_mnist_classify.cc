// Classifies the Fashion-MNIST test set with the artifact examples/fashion_mnist.cc wrote,
// using the runtime alone (no compiler in this program), and prints the accuracy.
//
//   bazel run -c opt //examples:fashion_mnist_classify -- fashion_mnist_out/fashion_mnist.kiln
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "examples/fashion_mnist_data.h"
#include "runtime/model.h"

int main(int argc, char** argv) {
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY")) {
    std::error_code ec;
    std::filesystem::current_path(dir, ec);
  }
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: fashion_mnist_classify MODEL.kiln [TEST_LIMIT]\n");
    return 2;
  }
  auto model = kiln::runtime::Model::load_file(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "fashion_mnist_classify: %s\n", model.error().message.c_str());
    return 1;
  }
  const int64_t limit = argc == 3 ? std::atoll(argv[2]) : -1;
  auto test = kiln::examples::read_fashion_mnist(kiln::examples::default_fashion_mnist_dir(), false, limit);
  if (!test.ok()) {
    std::fprintf(stderr, "fashion_mnist_classify: %s\n", test.error().message.c_str());
    return 1;
  }
  const auto& inputs = (*model)->inputs();
  const auto& outputs = (*model)->outputs();
  if (inputs.size() != 1 || outputs.size() != 1 || inputs[0].shape.size() != 4 || outputs[0].shape.size() != 2 ||
      inputs[0].elements() != inputs[0].shape[0] * test->rows * test->cols) {
    std::fprintf(stderr,
                 "fashion_mnist_classify: %s takes %s and gives %zu outputs; expected x: [B, 1, %lld, %lld] "
                 "and logits [B, classes]\n",
                 argv[1], inputs.empty() ? "no input" : inputs[0].type_string().c_str(), outputs.size(),
                 static_cast<long long>(test->rows), static_cast<long long>(test->cols));
    return 1;
  }
  const int64_t batch = inputs[0].shape[0], classes = outputs[0].shape[1], pixels = test->rows * test->cols;
  std::vector<float> x(static_cast<size_t>(batch * pixels)), logits(static_cast<size_t>(batch * classes));
  int64_t correct = 0;
  for (int64_t first = 0; first < test->count; first += batch) {
    const int64_t rows = std::min(batch, test->count - first);
    std::fill(x.begin(), x.end(), 0.0f);
    std::copy_n(test->images.begin() + first * pixels, rows * pixels, x.begin());
    std::span<const uint8_t> in{reinterpret_cast<const uint8_t*>(x.data()), x.size() * sizeof(float)};
    std::span<uint8_t> out{reinterpret_cast<uint8_t*>(logits.data()), logits.size() * sizeof(float)};
    kiln::Status ran = (*model)->run({{inputs[0].name, in}}, {{outputs[0].name, out}});
    if (!ran.ok()) {
      std::fprintf(stderr, "fashion_mnist_classify: %s\n", ran.error().message.c_str());
      return 1;
    }
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = &logits[static_cast<size_t>(r * classes)];
      correct += (std::max_element(row, row + classes) - row) == test->labels[static_cast<size_t>(first + r)];
    }
  }
  std::printf("%lld test images, %lld correct\ntest accuracy: %.4f\n", static_cast<long long>(test->count),
              static_cast<long long>(correct), static_cast<double>(correct) / static_cast<double>(test->count));
  return 0;
}
