// Reading and writing NumPy .npy files (C order, little-endian), the tensor format of
// the command line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace kiln::runtime {

/// An array as stored in a .npy file. `dtype` is a kiln element type name: f32, f64,
/// f16, bf16 (stored as the 2-byte void type '|V2', raw bfloat16 bits), i32, i64, bool.
struct NpyArray {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  ///< C-order little-endian elements
};

/// Parses the bytes of a .npy file (format versions 1, 2 and 3). `source` names the
/// file in error messages. Fortran order, big-endian and other dtypes are refused.
Result<NpyArray> parse_npy(std::string_view bytes, std::string_view source);
/// The bytes of a version 1.0 .npy file holding the array.
std::string serialize_npy(const NpyArray& array);
/// Reads and parses a .npy file.
Result<NpyArray> read_npy_file(const std::string& path);
/// Writes a .npy file.
Status write_npy_file(const std::string& path, const NpyArray& array);
/// Bytes per element of a kiln dtype name, 0 when unknown.
int npy_element_size(std::string_view dtype);

}  // namespace kiln::runtime
