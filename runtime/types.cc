#include "runtime/types.h"

#include "runtime/format/artifact.h"

namespace kiln::runtime {

// The runtime's element types are the artifact's, in the same order.
#define KILN_SAME_DTYPE(name) \
  static_assert(static_cast<int>(ElementType::name) == static_cast<int>(format::DType::name));
KILN_SAME_DTYPE(F32)
KILN_SAME_DTYPE(F64)
KILN_SAME_DTYPE(F16)
KILN_SAME_DTYPE(BF16)
KILN_SAME_DTYPE(I32)
KILN_SAME_DTYPE(I64)
KILN_SAME_DTYPE(Bool)
KILN_SAME_DTYPE(I8)
KILN_SAME_DTYPE(U8)
#undef KILN_SAME_DTYPE
static_assert(static_cast<int>(format::DType::MAX) == static_cast<int>(ElementType::U8),
              "an element type the runtime lacks");

std::string_view element_type_name(ElementType t) {
  constexpr std::string_view names[] = {"f32", "f64", "f16", "bf16", "i32", "i64", "bool", "i8", "u8"};
  return names[static_cast<int>(t)];
}

std::optional<ElementType> element_type_named(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(ElementType::U8); ++i)
    if (element_type_name(static_cast<ElementType>(i)) == name) return static_cast<ElementType>(i);
  return std::nullopt;
}

int element_bytes(ElementType t) { return format::element_bytes(static_cast<format::DType>(t)); }

int64_t TensorInfo::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorInfo::type_string() const {
  std::string s = std::string(element_type_name(type)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace kiln::runtime
