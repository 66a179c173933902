// Classifies the Fashion-MNIST test set with the artifact examples/fashion_mnist.cc wrote,
// using the runtime alone (no compiler in this program), and prints the accuracy.
//
//   bazel run -c opt //examples:fashion_mnist_classify -- fashion_mnist_out/fashion_mnist.kiln
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "examples/fashion_mnist_data.h"
#include "examples/fashion_mnist_eval.h"
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
  auto correct = kiln::examples::count_correct(**model, *test);
  if (!correct.ok()) {
    std::fprintf(stderr, "fashion_mnist_classify: %s: %s\n", argv[1], correct.error().message.c_str());
    return 1;
  }
  std::printf("%lld test images, %lld correct\ntest accuracy: %.4f\n", static_cast<long long>(test->count),
              static_cast<long long>(*correct), static_cast<double>(*correct) / static_cast<double>(test->count));
  return 0;
}
