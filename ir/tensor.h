// Host tensors for the reference interpreter, and exact element-type rounding.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/types.h"

namespace kiln::ir {

/// A host tensor. Floating-point elements are held as doubles already rounded to the
/// dtype's precision; integer and bool elements as int64 already wrapped to the dtype.
/// Exactly one of `floats` / `ints` is used, according to is_float(type.dtype).
struct Tensor {
  TensorType type;
  std::vector<double> floats;
  std::vector<int64_t> ints;

  /// A zero-filled tensor.
  static Tensor zeros(TensorType type);
  /// A tensor from values, each rounded (or wrapped) to the dtype.
  static Tensor from_doubles(TensorType type, const std::vector<double>& values);
  static Tensor from_ints(TensorType type, const std::vector<int64_t>& values);

  int64_t size() const { return type.num_elements(); }
  bool holds_floats() const { return is_float(type.dtype); }
  /// Element k as a double (ints converted).
  double get(int64_t k) const { return holds_floats() ? floats[k] : static_cast<double>(ints[k]); }
};

/// IEEE half-precision and bfloat16 bit patterns.
uint16_t f16_bits(double value);
double f16_value(uint16_t bits);
uint16_t bf16_bits(double value);
double bf16_value(uint16_t bits);

/// Reads element data from little-endian bytes of the dtype (size checked by caller).
Tensor tensor_from_bytes(TensorType type, const uint8_t* data);
/// Writes the tensor as little-endian bytes of its dtype.
std::vector<uint8_t> tensor_to_bytes(const Tensor& tensor);

}  // namespace kiln::ir
