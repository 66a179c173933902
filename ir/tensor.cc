#include "ir/tensor.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace kiln::ir {
namespace {

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <class T>
void store(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

}  // namespace

Tensor Tensor::zeros(TensorType type) {
  Tensor t;
  int64_t n = type.num_elements();
  if (is_float(type.dtype)) t.floats.assign(n, 0.0);
  else t.ints.assign(n, 0);
  t.type = std::move(type);
  return t;
}

Tensor Tensor::from_doubles(TensorType type, const std::vector<double>& values) {
  Tensor t = zeros(std::move(type));
  for (size_t k = 0; k < values.size() && static_cast<int64_t>(k) < t.size(); ++k) {
    if (t.holds_floats()) t.floats[k] = round_to_dtype(t.type.dtype, values[k]);
    else t.ints[k] = wrap_to_dtype(t.type.dtype, static_cast<int64_t>(values[k]));
  }
  return t;
}

Tensor Tensor::from_ints(TensorType type, const std::vector<int64_t>& values) {
  Tensor t = zeros(std::move(type));
  for (size_t k = 0; k < values.size() && static_cast<int64_t>(k) < t.size(); ++k) {
    if (t.holds_floats()) t.floats[k] = round_to_dtype(t.type.dtype, static_cast<double>(values[k]));
    else t.ints[k] = wrap_to_dtype(t.type.dtype, values[k]);
  }
  return t;
}

uint16_t f16_bits(double value) {
  double r = round_to_dtype(DType::F16, value);
  uint16_t sign = std::signbit(r) ? 0x8000 : 0;
  if (std::isnan(r)) return 0x7e00;
  if (std::isinf(r)) return sign | 0x7c00;
  r = std::fabs(r);
  if (r < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(std::ldexp(r, 24));  // subnormal
  int e;
  double m = std::frexp(r, &e);  // r = m * 2^e, m in [0.5, 1)
  uint16_t exponent = static_cast<uint16_t>(e - 1 + 15);
  uint16_t mantissa = static_cast<uint16_t>(std::ldexp(m * 2 - 1, 10));
  return sign | static_cast<uint16_t>(exponent << 10) | mantissa;
}

double f16_value(uint16_t bits) {
  int exponent = (bits >> 10) & 0x1f;
  int mantissa = bits & 0x3ff;
  double v;
  if (exponent == 0) v = std::ldexp(mantissa, -24);
  else if (exponent == 31) v = mantissa ? NAN : INFINITY;
  else v = std::ldexp(1024 + mantissa, exponent - 25);
  return (bits & 0x8000) ? -v : v;
}

uint16_t bf16_bits(double value) {
  double r = round_to_dtype(DType::BF16, value);
  if (std::isnan(r)) return 0x7fc0;
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(r)) >> 16);
}

double bf16_value(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

Tensor tensor_from_bytes(TensorType type, const uint8_t* p) {
  Tensor t = Tensor::zeros(std::move(type));
  int64_t n = t.size();
  for (int64_t k = 0; k < n; ++k) {
    switch (t.type.dtype) {
      case DType::F32: t.floats[k] = load<float>(p + 4 * k); break;
      case DType::F64: t.floats[k] = load<double>(p + 8 * k); break;
      case DType::F16: t.floats[k] = f16_value(load<uint16_t>(p + 2 * k)); break;
      case DType::BF16: t.floats[k] = bf16_value(load<uint16_t>(p + 2 * k)); break;
      case DType::I32: t.ints[k] = load<int32_t>(p + 4 * k); break;
      case DType::I64: t.ints[k] = load<int64_t>(p + 8 * k); break;
      case DType::Bool: t.ints[k] = p[k] != 0; break;
      case DType::I8: t.ints[k] = static_cast<int8_t>(p[k]); break;
      case DType::U8: t.ints[k] = p[k]; break;
    }
  }
  return t;
}

std::vector<uint8_t> tensor_to_bytes(const Tensor& t) {
  int64_t n = t.size();
  std::vector<uint8_t> out(static_cast<size_t>(n * dtype_size(t.type.dtype)));
  uint8_t* p = out.data();
  for (int64_t k = 0; k < n; ++k) {
    switch (t.type.dtype) {
      case DType::F32: store<float>(p + 4 * k, static_cast<float>(t.floats[k])); break;
      case DType::F64: store<double>(p + 8 * k, t.floats[k]); break;
      case DType::F16: store<uint16_t>(p + 2 * k, f16_bits(t.floats[k])); break;
      case DType::BF16: store<uint16_t>(p + 2 * k, bf16_bits(t.floats[k])); break;
      case DType::I32: store<int32_t>(p + 4 * k, static_cast<int32_t>(t.ints[k])); break;
      case DType::I64: store<int64_t>(p + 8 * k, t.ints[k]); break;
      case DType::Bool: p[k] = t.ints[k] != 0; break;
      case DType::I8:
      case DType::U8: p[k] = static_cast<uint8_t>(t.ints[k]); break;
    }
  }
  return out;
}

}  // namespace kiln::ir
