#include "ir/types.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::ir {
namespace {

// Rounds to a binary format with `digits` significand bits (implicit bit included) and
// smallest normal exponent `min_exp` (value 2^min_exp); `max_finite` is its largest value.
double round_binary(double x, int digits, int min_exp, double max_finite) {
  if (!std::isfinite(x) || x == 0) return x;
  int e;
  std::frexp(x, &e);  // x = m * 2^e, 0.5 <= |m| < 1
  int ulp_exp = std::max(e - 1, min_exp) - (digits - 1);
  double r = std::ldexp(std::nearbyint(std::ldexp(x, -ulp_exp)), ulp_exp);
  if (std::fabs(r) > max_finite) return std::copysign(INFINITY, x);
  return r;
}

}  // namespace

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::Bool: return "bool";
    case DType::I8: return "i8";
    case DType::U8: return "u8";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (DType d : kAllDTypes)
    if (dtype_name(d) == name) return d;
  return std::nullopt;
}

int dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F64:
    case DType::I64: return 8;
    case DType::F32:
    case DType::I32: return 4;
    case DType::F16:
    case DType::BF16: return 2;
    case DType::Bool:
    case DType::I8:
    case DType::U8: return 1;
  }
  return 0;
}

bool is_float(DType d) { return d == DType::F32 || d == DType::F64 || d == DType::F16 || d == DType::BF16; }

bool is_int(DType d) { return d == DType::I32 || d == DType::I64 || d == DType::I8 || d == DType::U8; }

bool is_index(DType d) { return d == DType::I32 || d == DType::I64; }

int64_t int_min(DType d) {
  switch (d) {
    case DType::I8: return -128;
    case DType::U8: return 0;
    case DType::I32: return std::numeric_limits<int32_t>::min();
    default: return std::numeric_limits<int64_t>::min();
  }
}

int64_t int_max(DType d) {
  switch (d) {
    case DType::I8: return 127;
    case DType::U8: return 255;
    case DType::I32: return std::numeric_limits<int32_t>::max();
    default: return std::numeric_limits<int64_t>::max();
  }
}

int64_t num_elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> row_major_strides(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

std::string shape_string(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ",")); }

double round_to_dtype(DType dtype, double v) {
  switch (dtype) {
    case DType::F64: return v;
    case DType::F32: return static_cast<double>(static_cast<float>(v));
    case DType::F16: return round_binary(v, 11, -14, 65504.0);
    case DType::BF16: return round_binary(v, 8, -126, 3.3895313892515355e38);
    default: return v;
  }
}

int64_t wrap_to_dtype(DType dtype, int64_t v) {
  if (dtype == DType::I32) return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
  if (dtype == DType::I8) return static_cast<int8_t>(static_cast<uint8_t>(static_cast<uint64_t>(v)));
  if (dtype == DType::U8) return static_cast<uint8_t>(static_cast<uint64_t>(v));
  if (dtype == DType::Bool) return v != 0;
  return v;
}

std::string TensorType::to_string() const { return fmt::format("{}{}", dtype_name(dtype), shape_string(shape)); }

}  // namespace kiln::ir
