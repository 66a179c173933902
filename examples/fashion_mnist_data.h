// Fashion-MNIST as Debian ships it (dataset-fashion-mnist): gzip IDX files in
// /usr/share/datasets/fashion-mnist. Reads an images file and its labels file into
// floats in [0, 1] and int32 labels; every problem with a file (missing, not IDX,
// truncated, labels that do not match) is an Error that names the file, never an abort.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace kiln::examples {

/// `count` images of `rows` x `cols` pixels and their labels.
struct Dataset {
  int64_t count = 0, rows = 0, cols = 0;
  /// count * rows * cols pixels, row-major per image, each byte scaled to [0, 1] by /255.
  std::vector<float> images;
  /// count labels, each in 0..9.
  std::vector<int32_t> labels;
};

/// Reads an IDX images file (magic 0x00000803: unsigned bytes, 3 dimensions) and an IDX
/// labels file (magic 0x00000801), gzip-compressed or not. `limit` >= 0 keeps only the
/// first `limit` examples (and reads no further); -1 keeps all.
Result<Dataset> read_idx_pair(const std::string& images_gz, const std::string& labels_gz, int64_t limit = -1);

/// Reads the training set (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz) or,
/// when `train` is false, the test set (t10k-...) from `dir`.
Result<Dataset> read_fashion_mnist(const std::string& dir, bool train, int64_t limit = -1);

/// $KILN_FASHION_MNIST when set and not empty, else /usr/share/datasets/fashion-mnist.
std::string default_fashion_mnist_dir();

/// Shuffles `order` in place, the same way for the same seed on every standard library
/// and platform: Fisher-Yates driven by splitmix64 (not std::shuffle, whose algorithm
/// the standard leaves open). Fill `order` with 0..n-1 first for a permutation.
void shuffle_order(std::vector<int64_t>& order, uint64_t seed);

}  // namespace kiln::examples
