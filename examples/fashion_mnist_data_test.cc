// The Fashion-MNIST reader on small IDX files written here (gzip and plain), on each
// way a file can be wrong (every one an error that names the file, never an abort), and
// on Debian's t10k files when dataset-fashion-mnist is installed.
#define CATCH_CONFIG_MAIN
#include <zlib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "examples/fashion_mnist_data.h"

using namespace kiln;
using namespace kiln::examples;

namespace {

// A fresh directory under the test's temporary directory.
std::string temp_dir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::filesystem::path dir = std::filesystem::path(base ? base : "/tmp") / ("fashion_mnist_test_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

void put_u32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

std::string idx_images(uint32_t count, uint32_t rows, uint32_t cols, const std::vector<uint8_t>& pixels) {
  std::string out;
  put_u32(out, 0x00000803);
  put_u32(out, count);
  put_u32(out, rows);
  put_u32(out, cols);
  out.append(pixels.begin(), pixels.end());
  return out;
}

std::string idx_labels(uint32_t count, const std::vector<uint8_t>& labels) {
  std::string out;
  put_u32(out, 0x00000801);
  put_u32(out, count);
  out.append(labels.begin(), labels.end());
  return out;
}

void write_plain(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

void write_gz(const std::string& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  if (!bytes.empty()) REQUIRE(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())) == int(bytes.size()));
  REQUIRE(gzclose(file) == Z_OK);
}

std::string read_plain(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Three 2x3 images and their labels.
const std::vector<uint8_t> kPixels = {0,  255, 51, 102, 153, 204,  //
                                      1,  2,   3,  4,   5,   6,    //
                                      10, 20,  30, 40,  50,  60};
const std::vector<uint8_t> kLabels = {0, 9, 4};

// The message of a read that must fail.
std::string error_of(const Result<Dataset>& result) {
  REQUIRE_FALSE(result.ok());
  return result.error().message;
}

}  // namespace

TEST_CASE("gzip IDX files are read and scaled to [0, 1]") {
  const std::string dir = temp_dir("gzip");
  write_gz(dir + "/img.gz", idx_images(3, 2, 3, kPixels));
  write_gz(dir + "/lbl.gz", idx_labels(3, kLabels));
  auto result = read_idx_pair(dir + "/img.gz", dir + "/lbl.gz");
  if (!result.ok()) FAIL(result.error().message);
  const Dataset& data = *result;
  CHECK(data.count == 3);
  CHECK(data.rows == 2);
  CHECK(data.cols == 3);
  REQUIRE(data.images.size() == 18);
  for (size_t i = 0; i < kPixels.size(); ++i) CHECK(data.images[i] == Approx(kPixels[i] / 255.0f));
  CHECK(data.images[0] == 0.0f);
  CHECK(data.images[1] == 1.0f);
  CHECK(data.images[2] == Approx(0.2f));
  CHECK(data.labels == std::vector<int32_t>{0, 9, 4});
}

TEST_CASE("uncompressed IDX files are read too") {
  const std::string dir = temp_dir("plain");
  write_plain(dir + "/img", idx_images(3, 2, 3, kPixels));
  write_gz(dir + "/lbl.gz", idx_labels(3, kLabels));
  auto result = read_idx_pair(dir + "/img", dir + "/lbl.gz");
  if (!result.ok()) FAIL(result.error().message);
  CHECK(result->count == 3);
  REQUIRE(result->images.size() == 18);
  CHECK(result->images[4] == Approx(153 / 255.0f));
  CHECK(result->labels == std::vector<int32_t>{0, 9, 4});
}

TEST_CASE("limit keeps the first examples") {
  const std::string dir = temp_dir("limit");
  write_gz(dir + "/img.gz", idx_images(3, 2, 3, kPixels));
  write_gz(dir + "/lbl.gz", idx_labels(3, kLabels));
  auto two = read_idx_pair(dir + "/img.gz", dir + "/lbl.gz", 2);
  if (!two.ok()) FAIL(two.error().message);
  CHECK(two->count == 2);
  CHECK(two->images.size() == 12);
  CHECK(two->images[11] == Approx(6 / 255.0f));
  CHECK(two->labels == std::vector<int32_t>{0, 9});

  auto none = read_idx_pair(dir + "/img.gz", dir + "/lbl.gz", 0);
  if (!none.ok()) FAIL(none.error().message);
  CHECK(none->count == 0);
  CHECK(none->rows == 2);
  CHECK(none->images.empty());
  CHECK(none->labels.empty());

  auto more = read_idx_pair(dir + "/img.gz", dir + "/lbl.gz", 100);
  if (!more.ok()) FAIL(more.error().message);
  CHECK(more->count == 3);
  CHECK(more->labels.size() == 3);

  // What lies past the limit is not read: a bad third label goes unseen.
  write_gz(dir + "/bad_third.gz", idx_labels(3, {0, 9, 200}));
  auto first_two = read_idx_pair(dir + "/img.gz", dir + "/bad_third.gz", 2);
  if (!first_two.ok()) FAIL(first_two.error().message);
  CHECK(first_two->labels == std::vector<int32_t>{0, 9});
}

TEST_CASE("read_fashion_mnist uses the standard file names") {
  const std::string dir = temp_dir("names");
  write_gz(dir + "/train-images-idx3-ubyte.gz", idx_images(3, 2, 3, kPixels));
  write_gz(dir + "/train-labels-idx1-ubyte.gz", idx_labels(3, kLabels));
  write_gz(dir + "/t10k-images-idx3-ubyte.gz", idx_images(1, 2, 3, {1, 2, 3, 4, 5, 6}));
  write_gz(dir + "/t10k-labels-idx1-ubyte.gz", idx_labels(1, {7}));
  auto train = read_fashion_mnist(dir, /*train=*/true);
  if (!train.ok()) FAIL(train.error().message);
  CHECK(train->count == 3);
  auto test = read_fashion_mnist(dir, /*train=*/false);
  if (!test.ok()) FAIL(test.error().message);
  CHECK(test->count == 1);
  CHECK(test->labels == std::vector<int32_t>{7});

  CHECK(error_of(read_fashion_mnist(dir + "/nowhere", true)) ==
        "cannot open " + dir + "/nowhere/train-images-idx3-ubyte.gz: No such file or directory");
}

TEST_CASE("a missing file or a directory is an error naming it") {
  const std::string dir = temp_dir("missing");
  write_gz(dir + "/img.gz", idx_images(3, 2, 3, kPixels));
  write_gz(dir + "/lbl.gz", idx_labels(3, kLabels));
  CHECK(error_of(read_idx_pair(dir + "/absent.gz", dir + "/lbl.gz")) ==
        "cannot open " + dir + "/absent.gz: No such file or directory");
  CHECK(error_of(read_idx_pair(dir + "/img.gz", dir + "/absent.gz")) ==
        "cannot open " + dir + "/absent.gz: No such file or directory");
  CHECK(error_of(read_idx_pair(dir, dir + "/lbl.gz")) == "cannot open " + dir + ": Is a directory");
}

TEST_CASE("a bad magic number says which was expected and which was found") {
  const std::string dir = temp_dir("magic");
  write_gz(dir + "/img.gz", idx_images(3, 2, 3, kPixels));
  write_gz(dir + "/lbl.gz", idx_labels(3, kLabels));
  // The two files swapped.
  CHECK(error_of(read_idx_pair(dir + "/lbl.gz", dir + "/img.gz")) ==
        dir + "/lbl.gz: bad magic number 0x00000801, expected 0x00000803 (an IDX images file: unsigned bytes, 3 " +
            "dimensions)");
  CHECK(error_of(read_idx_pair(dir + "/img.gz", dir + "/img.gz")) ==
        dir + "/img.gz: bad magic number 0x00000803, expected 0x00000801 (an IDX labels file: unsigned bytes, 1 " +
            "dimension)");
  // A text file.
  write_plain(dir + "/text", "hello, world\n");
  CHECK(error_of(read_idx_pair(dir + "/text", dir + "/lbl.gz")) ==
        dir + "/text: bad magic number 0x68656c6c, expected 0x00000803 (an IDX images file: unsigned bytes, 3 " +
            "dimensions)");
}

TEST_CASE("truncated images say how many bytes were expected and read") {
  const std::string dir = temp_dir("truncated_images");
  write_gz(dir + "/lbl.gz", idx_labels(3, kLabels));
  // 16 + 18 bytes promised, 16 + 10 written.
  write_gz(dir + "/img.gz", idx_images(3, 2, 3, std::vector<uint8_t>(kPixels.begin(), kPixels.begin() + 10)));
  CHECK(error_of(read_idx_pair(dir + "/img.gz", dir + "/lbl.gz")) ==
        dir + "/img.gz is truncated: expected 34 bytes (a 16-byte header and 3 images of 2x3), read 26");
  // Within the header, and an empty file.
  write_plain(dir + "/short", std::string("\0\0\x08\x03\0\0", 6));
  CHECK(error_of(read_idx_pair(dir + "/short", dir + "/lbl.gz")) ==
        dir + "/short is truncated: expected 16 bytes (the header of an IDX images file), read 6");
  write_plain(dir + "/empty", "");
  CHECK(error_of(read_idx_pair(dir + "/empty", dir + "/lbl.gz")) ==
        dir + "/empty is truncated: expected 16 bytes (the header of an IDX images file), read 0");
  // A gzip stream cut in the middle: zlib gives what it could decompress, and the
  // message says the stream ends early.
  std::vector<uint8_t> noise(100 * 28 * 28);
  uint32_t x = 12345;
  for (auto& b : noise) b = static_cast<uint8_t>((x = x * 1664525u + 1013904223u) >> 24);
  write_gz(dir + "/full.gz", idx_images(100, 28, 28, noise));
  const std::string gz = read_plain(dir + "/full.gz");
  write_plain(dir + "/cut.gz", gz.substr(0, gz.size() / 2));
  std::vector<uint8_t> labels(100, 1);
  write_gz(dir + "/lbl100.gz", idx_labels(100, labels));
  const std::string message = error_of(read_idx_pair(dir + "/cut.gz", dir + "/lbl100.gz"));
  CHECK_THAT(message, Catch::StartsWith(dir + "/cut.gz is truncated: expected 78416 bytes (a 16-byte header and " +
                                        "100 images of 28x28), read "));
  CHECK_THAT(message, Catch::EndsWith(" (the gzip stream ends early)"));
}

TEST_CASE("truncated labels say how many bytes were expected and read") {
  const std::string dir = temp_dir("truncated_labels");
  write_gz(dir + "/img.gz", idx_images(3, 2, 3, kPixels));
  write_gz(dir + "/lbl.gz", idx_labels(3, {0, 9}));
  CHECK(error_of(read_idx_pair(dir + "/img.gz", dir + "/lbl.gz")) ==
        dir + "/lbl.gz is truncated: expected 11 bytes (an 8-byte header and 3 labels), read 10");
  write_plain(dir + "/short", std::string("\0\0\x08\x01\0", 5));
  CHECK(error_of(read_idx_pair(dir + "/img.gz", dir + "/short")) ==
        dir + "/short is truncated: expected 8 bytes (the header of an IDX labels file), read 5");
}

TEST_CASE("image and label counts must match") {
  const std::string dir = temp_dir("count");
  write_gz(dir + "/img.gz", idx_images(3, 2, 3, kPixels));
  write_gz(dir + "/lbl.gz", idx_labels(2, {0, 9}));
  CHECK(error_of(read_idx_pair(dir + "/img.gz", dir + "/lbl.gz")) ==
        dir + "/img.gz holds 3 images but " + dir + "/lbl.gz holds 2 labels");
  // Also with a limit both files satisfy.
  CHECK(error_of(read_idx_pair(dir + "/img.gz", dir + "/lbl.gz", 1)) ==
        dir + "/img.gz holds 3 images but " + dir + "/lbl.gz holds 2 labels");
}

TEST_CASE("a label outside 0..9 is an error") {
  const std::string dir = temp_dir("label");
  write_gz(dir + "/img.gz", idx_images(3, 2, 3, kPixels));
  write_gz(dir + "/lbl.gz", idx_labels(3, {0, 10, 4}));
  CHECK(error_of(read_idx_pair(dir + "/img.gz", dir + "/lbl.gz")) ==
        dir + "/lbl.gz: label 10 of example 1 is out of range 0..9");
  write_gz(dir + "/lbl255.gz", idx_labels(3, {0, 1, 255}));
  CHECK(error_of(read_idx_pair(dir + "/img.gz", dir + "/lbl255.gz")) ==
        dir + "/lbl255.gz: label 255 of example 2 is out of range 0..9");
}

TEST_CASE("absurd image sizes are refused before anything is allocated") {
  const std::string dir = temp_dir("absurd");
  write_gz(dir + "/lbl.gz", idx_labels(3, kLabels));
  write_gz(dir + "/huge.gz", idx_images(0xffffffffu, 0xffffffffu, 0xffffffffu, {}));
  CHECK(error_of(read_idx_pair(dir + "/huge.gz", dir + "/lbl.gz")) ==
        dir + "/huge.gz: 4294967295 images of 4294967295x4294967295 is too large (more than 1099511627776 pixels)");
  write_gz(dir + "/zero.gz", idx_images(3, 0, 28, {}));
  CHECK(error_of(read_idx_pair(dir + "/zero.gz", dir + "/lbl.gz")) ==
        dir + "/zero.gz: bad image size 0x28 (rows and columns must be at least 1)");
  // Large but below the limit: the file's end is found long before memory runs out.
  write_gz(dir + "/big.gz", idx_images(1000000, 1000, 1000, {1, 2, 3}));
  write_gz(dir + "/lbl_big.gz", idx_labels(1000000, {}));
  const std::string message = error_of(read_idx_pair(dir + "/big.gz", dir + "/lbl_big.gz"));
  // Either the memory check (on a small machine) or the truncation, never an abort.
  CHECK_THAT(message, Catch::Contains(dir + "/big.gz"));
}

TEST_CASE("corrupt gzip data is an error naming the file") {
  const std::string dir = temp_dir("corrupt");
  write_gz(dir + "/lbl.gz", idx_labels(3, kLabels));
  // A gzip header followed by bytes that are not a deflate stream.
  write_plain(dir + "/bad.gz", std::string("\x1f\x8b\x08\x00\0\0\0\0\0\x03\xff\xff\xff\xff\xff\xff\xff\xff", 18));
  CHECK_THAT(error_of(read_idx_pair(dir + "/bad.gz", dir + "/lbl.gz")),
             Catch::Equals("cannot read " + dir + "/bad.gz: invalid block type"));
}

TEST_CASE("shuffle_order is a deterministic permutation") {
  std::vector<int64_t> a(1000), b(1000), c(1000);
  std::iota(a.begin(), a.end(), 0);
  std::iota(b.begin(), b.end(), 0);
  std::iota(c.begin(), c.end(), 0);
  shuffle_order(a, 42);
  shuffle_order(b, 42);
  shuffle_order(c, 43);
  CHECK(a == b);
  CHECK(a != c);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0);
  CHECK(sorted == identity);
  CHECK(a != identity);

  // The same order on every standard library: pinned values for seed 1.
  std::vector<int64_t> small(10);
  std::iota(small.begin(), small.end(), 0);
  shuffle_order(small, 1);
  CHECK(small == std::vector<int64_t>{4, 2, 8, 1, 9, 3, 0, 6, 7, 5});

  std::vector<int64_t> empty;
  shuffle_order(empty, 7);
  CHECK(empty.empty());
  std::vector<int64_t> one = {5};
  shuffle_order(one, 7);
  CHECK(one == std::vector<int64_t>{5});
}

TEST_CASE("default_fashion_mnist_dir reads KILN_FASHION_MNIST") {
  const char* saved = std::getenv("KILN_FASHION_MNIST");
  const std::string saved_value = saved ? saved : "";
  setenv("KILN_FASHION_MNIST", "/data/fmnist", 1);
  CHECK(default_fashion_mnist_dir() == "/data/fmnist");
  unsetenv("KILN_FASHION_MNIST");
  CHECK(default_fashion_mnist_dir() == "/usr/share/datasets/fashion-mnist");
  setenv("KILN_FASHION_MNIST", "", 1);
  CHECK(default_fashion_mnist_dir() == "/usr/share/datasets/fashion-mnist");
  if (saved) {
    setenv("KILN_FASHION_MNIST", saved_value.c_str(), 1);
  } else {
    unsetenv("KILN_FASHION_MNIST");
  }
}

TEST_CASE("Debian's Fashion-MNIST test set, when installed") {
  const std::string dir = default_fashion_mnist_dir();
  if (!std::filesystem::is_directory(dir)) {
    WARN("skipped: " << dir << " is missing (install dataset-fashion-mnist, or set KILN_FASHION_MNIST)");
    return;
  }
  auto result = read_fashion_mnist(dir, /*train=*/false);
  if (!result.ok()) FAIL(result.error().message);
  const Dataset& data = *result;
  CHECK(data.count == 10000);
  CHECK(data.rows == 28);
  CHECK(data.cols == 28);
  CHECK(data.images.size() == size_t{10000} * 28 * 28);
  REQUIRE(data.labels.size() == 10000);
  std::vector<int64_t> per_class(10, 0);
  for (int32_t label : data.labels) {
    REQUIRE(label >= 0);
    REQUIRE(label <= 9);
    ++per_class[label];
  }
  // The test set is balanced: 1000 of each class.
  for (int64_t n : per_class) CHECK(n == 1000);
  const auto [lo, hi] = std::minmax_element(data.images.begin(), data.images.end());
  CHECK(*lo == 0.0f);
  CHECK(*hi == 1.0f);
  // The first label of the t10k file is 9 (an ankle boot).
  CHECK(data.labels[0] == 9);
}
