// Conversions between f32 and the 16-bit floats (IEEE binary16 "f16" and bfloat16), with
// round-to-nearest-even as the interpreter rounds (ir/types.cc): for code that stores half
// precision and computes in f32 (the runtime's CPU matmuls).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace kiln {

inline uint32_t float_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}

inline float bits_float(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_bf16(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN stays NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

inline float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  if (exponent == 0) {  // zero or subnormal: mantissa · 2^-24, exact in f32
    const float v = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exponent == 31) return bits_float(sign | 0x7f800000u | (mantissa << 13));
  return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline uint16_t float_to_f16(float f) {
  const uint32_t x = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00;   // NaN
  if (magnitude >= 0x477ff000u) return sign | 0x7c00;  // 65520 and up round to infinity
  if (magnitude < 0x38800000u) {                       // under 2^-14: a subnormal (or zero)
    // |f| · 2^24 is exact, and nearbyint rounds it to even in the default rounding mode.
    return sign | static_cast<uint16_t>(std::nearbyint(bits_float(magnitude) * 16777216.0f));
  }
  const uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1);
  return sign | static_cast<uint16_t>((rounded - (112u << 23)) >> 13);
}

}  // namespace kiln
