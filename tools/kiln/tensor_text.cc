#include "tools/kiln/tensor_text.h"

#include <fmt/format.h>
#include <bit>
#include <cmath>
#include <cstring>

namespace kiln::cli {
namespace {

// numpy's defaults: abbreviate past 1,000 elements, keeping 3 at each end of a dim.
constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

float half_value(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f, mantissa = bits & 0x3ff;
  float v = exponent == 0    ? std::ldexp(static_cast<float>(mantissa), -24)
            : exponent == 31 ? (mantissa ? NAN : INFINITY)
                             : std::ldexp(static_cast<float>(1024 + mantissa), exponent - 25);
  return (bits & 0x8000) ? -v : v;
}

// Floats in the shortest form that reads back exactly, always with a '.' or exponent.
std::string float_text(double value, bool single) {
  std::string s = single ? fmt::format("{}", static_cast<float>(value)) : fmt::format("{}", value);
  return std::isfinite(value) && s.find_first_of(".e") == std::string::npos ? s + ".0" : s;
}

class Writer {
 public:
  Writer(std::string_view dtype, const std::vector<int64_t>& shape, std::span<const uint8_t> bytes, size_t indent)
      : dtype_(dtype), shape_(shape), bytes_(bytes), indent_(indent) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    summarize_ = n > kThreshold;
    size_ = n == 0 ? 0 : static_cast<int64_t>(bytes.size()) / n;
  }

  std::string text() {
    if (shape_.empty()) return element(0);
    dim(0, 0);
    return out_;
  }

 private:
  std::string element(int64_t k) const {
    const uint8_t* p = bytes_.data() + k * size_;
    if (dtype_ == "f32") return float_text(load<float>(p), true);
    if (dtype_ == "f64") return float_text(load<double>(p), false);
    if (dtype_ == "f16") return float_text(half_value(load<uint16_t>(p)), true);
    if (dtype_ == "bf16") return float_text(std::bit_cast<float>(uint32_t{load<uint16_t>(p)} << 16), true);
    if (dtype_ == "i32") return std::to_string(load<int32_t>(p));
    if (dtype_ == "i64") return std::to_string(load<int64_t>(p));
    if (dtype_ == "i8") return std::to_string(load<int8_t>(p));
    if (dtype_ == "u8") return std::to_string(load<uint8_t>(p));
    if (dtype_ == "bool") return *p ? "true" : "false";
    return fmt::format("<no text for {} elements>", dtype_);
  }

  // Writes dim `d` of the sub-tensor starting at element `base`.
  void dim(size_t d, int64_t base) {
    int64_t stride = 1;
    for (size_t i = d + 1; i < shape_.size(); ++i) stride *= shape_[i];
    const int64_t n = shape_[d];
    out_ += '[';
    for (int64_t i = 0; i < n; ++i) {
      if (summarize_ && n > 2 * kEdgeItems && i == kEdgeItems) {
        out_ += "..." + separator(d);
        i = n - kEdgeItems;
      }
      if (d + 1 == shape_.size()) out_ += element(base + i);
      else dim(d + 1, base + i * stride);
      if (i + 1 < n) out_ += separator(d);
    }
    out_ += ']';
  }

  // Between items of dim d: ", " in the last dim; else a newline per dim below it, and
  // the indent of the next item's brackets.
  std::string separator(size_t d) const {
    if (d + 1 == shape_.size()) return ", ";
    return "," + std::string(shape_.size() - d - 1, '\n') + std::string(indent_ + d + 1, ' ');
  }

  std::string_view dtype_;
  const std::vector<int64_t>& shape_;
  std::span<const uint8_t> bytes_;
  size_t indent_;
  bool summarize_ = false;
  int64_t size_ = 0;
  std::string out_;
};

}  // namespace

std::string format_tensor(std::string_view dtype, const std::vector<int64_t>& shape, std::span<const uint8_t> bytes,
                          size_t indent) {
  return Writer(dtype, shape, bytes, indent).text();
}

}  // namespace kiln::cli
