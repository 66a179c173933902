// Classifying the Fashion-MNIST test images with a loaded model, the runtime alone: what
// examples/fashion_mnist.cc reports each epoch and examples/fashion_mnist_classify.cc
// reports of the saved artifact.
#pragma once

#include <cstdint>

#include "base/result.h"
#include "examples/fashion_mnist_data.h"
#include "runtime/model.h"

namespace kiln::examples {

/// How many images `model` (x: [B, 1, rows, cols] -> logits [B, classes]) classifies
/// right, run B images at a time, a last partial batch padded with zeros and its extra rows
/// ignored. Errors: a model of another signature (saying which), a failed run.
Result<int64_t> count_correct(const runtime::Model& model, const Dataset& images);

}  // namespace kiln::examples
