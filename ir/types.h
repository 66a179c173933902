// Element types, static shapes and tensor types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/shape_limit.h"

namespace kiln::ir {

/// Element types kiln supports, in the order the text format lists them.
enum class DType : uint8_t { F32, F64, F16, BF16, I32, I64, Bool, I8, U8 };

/// Every DType, for iteration in tests and tools.
inline constexpr DType kAllDTypes[] = {DType::F32, DType::F64,  DType::F16, DType::BF16, DType::I32,
                                       DType::I64, DType::Bool, DType::I8,  DType::U8};

/// The text name of a dtype ("f32", "bool", ...).
std::string_view dtype_name(DType dtype);
/// Parses a dtype name; nullopt when it is not one.
std::optional<DType> parse_dtype(std::string_view name);
/// Bytes per element.
int dtype_size(DType dtype);
/// f32, f64, f16, bf16.
bool is_float(DType dtype);
/// i8, u8, i32, i64.
bool is_int(DType dtype);
/// i32, i64: the types of indices and labels.
bool is_index(DType dtype);
/// The smallest and largest value of an integer dtype.
int64_t int_min(DType dtype);
int64_t int_max(DType dtype);

/// Rounds a double to the nearest value of a floating-point dtype (ties to even,
/// overflow to infinity, subnormals kept); other dtypes return it unchanged.
double round_to_dtype(DType dtype, double value);
/// Wraps an integer to i8, i32 (two's complement) or u8 (modulo 256), or to 0/1 for
/// bool; i64 unchanged.
int64_t wrap_to_dtype(DType dtype, int64_t value);

/// A static shape: one extent per dimension, rank 0 for scalars.
using Shape = std::vector<int64_t>;

/// Number of elements of a shape (1 for rank 0). Callers verify shapes first.
int64_t num_elements(const Shape& shape);
/// The element stride of each dim of a C-order (row-major) array of this shape.
std::vector<int64_t> row_major_strides(const Shape& shape);
/// "[2,3]".
std::string shape_string(const Shape& shape);

/// A dtype with a shape, printed "f32[2,3]".
struct TensorType {
  DType dtype = DType::F32;
  Shape shape;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t num_elements() const { return ir::num_elements(shape); }
  int64_t bytes() const { return num_elements() * dtype_size(dtype); }
  std::string to_string() const;
  friend bool operator==(const TensorType&, const TensorType&) = default;
};

}  // namespace kiln::ir
