// Tensors printed numpy-style by kiln eval, kiln run and kiln-run.
#include <catch2/catch.hpp>
#include <cstring>

#include "tools/kiln/tensor_text.h"

using kiln::cli::format_tensor;

namespace {

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<float> counting(int n) {
  std::vector<float> v;
  for (int i = 0; i < n; ++i) v.push_back(static_cast<float>(i));
  return v;
}

}  // namespace

TEST_CASE("scalars, vectors and every element type", "[tensor_text]") {
  CHECK(format_tensor("f32", {}, bytes_of<float>({1.5f})) == "1.5");
  CHECK(format_tensor("f32", {3}, bytes_of<float>({1, -0.1f, 3e-20f})) == "[1.0, -0.1, 3e-20]");
  CHECK(format_tensor("f64", {2}, bytes_of<double>({0.1, 2})) == "[0.1, 2.0]");
  CHECK(format_tensor("i64", {2}, bytes_of<int64_t>({-7, 9000000000})) == "[-7, 9000000000]");
  CHECK(format_tensor("i32", {1}, bytes_of<int32_t>({42})) == "[42]");
  CHECK(format_tensor("bool", {2}, std::vector<uint8_t>{1, 0}) == "[true, false]");
  CHECK(format_tensor("i8", {2}, bytes_of<int8_t>({-128, 5})) == "[-128, 5]");
  CHECK(format_tensor("u8", {2}, bytes_of<uint8_t>({255, 0})) == "[255, 0]");
  CHECK(format_tensor("f16", {2}, bytes_of<uint16_t>({0x3c00, 0xc000})) == "[1.0, -2.0]");
  CHECK(format_tensor("bf16", {2}, bytes_of<uint16_t>({0x3f80, 0x7fc0})) == "[1.0, nan]");
  CHECK(format_tensor("f32", {0}, {}) == "[]");
}

TEST_CASE("a row per line, aligned under the prefix; a blank line between matrices", "[tensor_text]") {
  CHECK(format_tensor("f32", {2, 2}, bytes_of(counting(4)), 4) == "[[0.0, 1.0],\n     [2.0, 3.0]]");
  CHECK(format_tensor("f32", {2, 1, 2}, bytes_of(counting(4))) == "[[[0.0, 1.0]],\n\n [[2.0, 3.0]]]");
}

TEST_CASE("more than 1,000 elements: the first and last 3 of each dim", "[tensor_text]") {
  CHECK(format_tensor("f32", {1000}, bytes_of(counting(1000))).size() > 5000);  // 1,000 elements print whole
  CHECK(format_tensor("f32", {1001}, bytes_of(counting(1001))) == "[0.0, 1.0, 2.0, ..., 998.0, 999.0, 1000.0]");
  CHECK(format_tensor("f32", {100, 20}, bytes_of(counting(2000))) ==
        "[[0.0, 1.0, 2.0, ..., 17.0, 18.0, 19.0],\n [20.0, 21.0, 22.0, ..., 37.0, 38.0, 39.0],\n [40.0, 41.0, 42.0, "
        "..., 57.0, 58.0, 59.0],\n ...,\n"
        " [1940.0, 1941.0, 1942.0, ..., 1957.0, 1958.0, 1959.0],\n [1960.0, 1961.0, 1962.0, ..., 1977.0, 1978.0, "
        "1979.0],\n"
        " [1980.0, 1981.0, 1982.0, ..., 1997.0, 1998.0, 1999.0]]");
}
