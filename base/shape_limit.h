// The one size limit of every shape kiln reads or builds: its non-zero dims multiply to
// at most 2^40, so no element count, stride or byte size overflows, whichever dim is
// zero. The IR, the parser, .npy and safetensors files and the artifact verifier check it.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

/// The most elements a tensor may have.
inline constexpr int64_t kMaxElements = int64_t{1} << 40;

/// Whether the non-zero dims of `dims` (negative ones aside: callers refuse those first)
/// multiply to at most kMaxElements.
template <class Dims>
bool dims_within_limit(const Dims& dims) {
  uint64_t product = 1;
  for (auto d : dims) {
    if (d <= 0) continue;
    const auto extent = static_cast<uint64_t>(d);
    if (product > static_cast<uint64_t>(kMaxElements) / extent) return false;
    product *= extent;
  }
  return true;
}

/// Why dims_within_limit refused a shape: "has more than 2^40 elements", or for a shape
/// with a zero dim (no elements), "has dims that multiply past 2^40 (the zero dims aside)".
template <class Dims>
std::string dims_limit_error(const Dims& dims) {
  for (auto d : dims)
    if (d == 0) return "has dims that multiply past 2^40 (the zero dims aside)";
  return "has more than 2^40 elements";
}

}  // namespace kiln
