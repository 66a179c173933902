#include "examples/fashion_mnist_eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <vector>

namespace kiln::examples {

Result<int64_t> count_correct(const runtime::Model& model, const Dataset& images) {
  const auto& inputs = model.inputs();
  const auto& outputs = model.outputs();
  if (inputs.size() != 1 || outputs.size() != 1 || inputs[0].shape.size() != 4 || outputs[0].shape.size() != 2 ||
      inputs[0].elements() != inputs[0].shape[0] * images.rows * images.cols)
    return make_error(
        fmt::format("the model takes {} and gives {} outputs; expected x: [B, 1, {}, {}] and logits "
                    "[B, classes]",
                    inputs.empty() ? "no input" : inputs[0].type_string(), outputs.size(), images.rows, images.cols));
  const int64_t batch = inputs[0].shape[0], classes = outputs[0].shape[1], pixels = images.rows * images.cols;
  std::vector<float> x(static_cast<size_t>(batch * pixels)), logits(static_cast<size_t>(batch * classes));
  const std::span<const uint8_t> in{reinterpret_cast<const uint8_t*>(x.data()), x.size() * sizeof(float)};
  const std::span<uint8_t> out{reinterpret_cast<uint8_t*>(logits.data()), logits.size() * sizeof(float)};
  int64_t correct = 0;
  for (int64_t first = 0; first < images.count; first += batch) {
    const int64_t rows = std::min(batch, images.count - first);
    std::fill(x.begin(), x.end(), 0.0f);
    std::copy_n(images.images.begin() + first * pixels, rows * pixels, x.begin());
    KILN_RETURN_IF_ERROR(model.run({{inputs[0].name, in}}, {{outputs[0].name, out}}));
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = &logits[static_cast<size_t>(r * classes)];
      correct += (std::max_element(row, row + classes) - row) == images.labels[static_cast<size_t>(first + r)];
    }
  }
  return correct;
}

}  // namespace kiln::examples
