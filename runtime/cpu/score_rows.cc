#include "runtime/cpu/score_rows.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/half_float.h"
#include "runtime/cpu/host_cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// The vector helpers below are always inlined, so no call passes a vector across the ABI
// that GCC warns about.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace kiln::runtime::cpu {
namespace {

// Eight floats, in two SSE registers on a plain x86-64 and one AVX register in the
// functions compiled for AVX2.
typedef float F8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));

[[gnu::always_inline]] inline F8 splat(float f) { return F8{f, f, f, f, f, f, f, f}; }

[[gnu::always_inline]] inline F8 load(const float* p) {
  F8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

[[gnu::always_inline]] inline void store(float* p, F8 v) { std::memcpy(p, &v, sizeof v); }

// e^x: x = n·ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two parts, so r is exact), e^r by
// Cephes's expf polynomial, 2^n through the exponent bits (2^127 twice for n = 128). Past
// the range of normal results: 0 below, +inf above; NaN stays NaN (it fails every
// comparison).
[[gnu::always_inline]] inline F8 exp8(F8 x) {
  const F8 lo = splat(-87.33654f), hi = splat(88.72283f);
  const I8 under = x<lo, over = x> hi;
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  const F8 magic = splat(12582912.0f);  // 1.5·2^23: adding it rounds to an integer in the low bits
  const F8 t = x * splat(1.44269504088896341f) + magic;
  const I8 n = std::bit_cast<I8>(t) - std::bit_cast<I8>(magic);
  const F8 nf = t - magic;
  const F8 r = x - nf * splat(0.693359375f) - nf * splat(-2.12194440e-4f);
  F8 p = splat(1.9875691500e-4f);
  p = p * r + splat(1.3981999507e-3f);
  p = p * r + splat(8.3334519073e-3f);
  p = p * r + splat(4.1665795894e-2f);
  p = p * r + splat(1.6666665459e-1f);
  p = p * r + splat(5.0000001201e-1f);
  p = p * r * r + r + splat(1.0f);
  const I8 top = n > I8{127, 127, 127, 127, 127, 127, 127, 127};  // -1 where n is 128
  const I8 bits = (n + top + I8{127, 127, 127, 127, 127, 127, 127, 127}) << 23;
  F8 y = p * std::bit_cast<F8>(bits);
  y = top ? y * splat(2.0f) : y;
  y = under ? splat(0.0f) : y;
  return over ? splat(std::numeric_limits<float>::infinity()) : y;
}

[[gnu::always_inline]] inline void exp_body(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store(x + i, exp8(load(x + i)));
  if (i == n) return;
  float tail[8] = {};
  std::memcpy(tail, x + i, static_cast<size_t>(n - i) * sizeof(float));
  store(tail, exp8(load(tail)));
  std::memcpy(x + i, tail, static_cast<size_t>(n - i) * sizeof(float));
}

[[gnu::always_inline]] inline float max_body(const float* x, int64_t n) {
  const float inf = std::numeric_limits<float>::infinity();
  const int64_t whole = n / 8 * 8;
  float tail[8];
  for (int j = 0; j < 8; ++j) tail[j] = whole + j < n ? x[whole + j] : -inf;
  F8 m = splat(-inf);
  for (int64_t i = 0; i < whole; i += 8) {
    const F8 v = load(x + i);
    m = v > m ? v : m;
  }
  m = load(tail) > m ? load(tail) : m;
  float max = m[0];
  for (int j = 1; j < 8; ++j) max = m[j] > max ? m[j] : max;
  return max;
}

// The first pass of a softmax: x[i] = exp(x[i] - max), returning their sum.
[[gnu::always_inline]] inline float exp_sum_body(float* x, int64_t n, float max) {
  const float inf = std::numeric_limits<float>::infinity();
  // The row padded to whole vectors with -inf, whose exp adds 0.
  const int64_t whole = n / 8 * 8;
  float tail[8];
  for (int j = 0; j < 8; ++j) tail[j] = whole + j < n ? x[whole + j] : -inf;
  const F8 mv = splat(max);
  F8 sum = splat(0.0f);
  for (int64_t i = 0; i < whole; i += 8) {
    const F8 e = exp8(load(x + i) - mv);
    store(x + i, e);
    sum += e;
  }
  const F8 e = exp8(load(tail) - mv);
  store(tail, e);
  // Padding past n gives exp(-inf - max): 0, or NaN where max is -inf or NaN (so is the row).
  for (int j = 0; whole + j < n; ++j) x[whole + j] = tail[j];
  float total = 0;
  for (int j = 0; j < 8; ++j) total += sum[j] + (whole + j < n ? tail[j] : 0.0f);
  return total;
}

[[gnu::always_inline]] inline void scale_range(float* x, int64_t n, float factor) {
  const F8 scale = splat(factor);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store(x + i, load(x + i) * scale);
  for (; i < n; ++i) x[i] *= factor;
}

[[gnu::always_inline]] inline void softmax_body(float* x, int64_t n, float max) {
  if (n <= 0) return;
  scale_range(x, n, 1.0f / exp_sum_body(x, n, max));
}

// The softmax's normalizing pass a piece at a time, each piece narrowed while in cache.
template <class Narrow>
[[gnu::always_inline]] inline void softmax_half_body(float* x, int64_t n, float max, uint16_t* to,
                                                     const Narrow& narrow) {
  if (n <= 0) return;
  const float factor = 1.0f / exp_sum_body(x, n, max);
  constexpr int64_t kPiece = 256;
  for (int64_t c = 0; c < n; c += kPiece) {
    const int64_t len = std::min(kPiece, n - c);
    scale_range(x + c, len, factor);
    narrow(x + c, to + c, len);
  }
}

// The masks: a stride of 1 (a mask per key) or 0 (one value for the row) as loops the
// compiler vectorizes; others element by element.
[[gnu::always_inline]] inline void add_body(float* row, int64_t n, const float* mask, int64_t stride) {
  if (stride == 1) {
    for (int64_t j = 0; j < n; ++j) row[j] += mask[j];
  } else if (stride == 0) {
    const float m = mask[0];
    for (int64_t j = 0; j < n; ++j) row[j] += m;
  } else {
    for (int64_t j = 0; j < n; ++j) row[j] += mask[j * stride];
  }
}

[[gnu::always_inline]] inline void keep_body(float* row, int64_t n, const uint8_t* keep, int64_t stride, float fill) {
  if (stride == 1) {
    for (int64_t j = 0; j < n; ++j) row[j] = keep[j] ? row[j] : fill;
  } else {
    for (int64_t j = 0; j < n; ++j) row[j] = keep[j * stride] ? row[j] : fill;
  }
}

[[gnu::always_inline]] inline void scale_body(float* row, int64_t n, float factor) {
  for (int64_t j = 0; j < n; ++j) row[j] *= factor;
}

// bf16 is f32's top half: round to nearest even on the bits; a NaN stays a (quiet) NaN.
[[gnu::always_inline]] inline uint32_t bf16_rounded_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1)) & 0xffff0000u;
  return (x & 0x7fffffffu) > 0x7f800000u ? (x | 0x00400000u) & 0xffff0000u : rounded;
}

[[gnu::always_inline]] inline void round_bf16_body(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::bit_cast<float>(bf16_rounded_bits(x[i]));
}
[[gnu::always_inline]] inline void narrow_bf16_body(const float* x, uint16_t* to, int64_t n) {
  for (int64_t i = 0; i < n; ++i) to[i] = static_cast<uint16_t>(bf16_rounded_bits(x[i]) >> 16);
}
[[gnu::always_inline]] inline void widen_bf16_body(const uint16_t* h, float* to, int64_t n) {
  for (int64_t i = 0; i < n; ++i) to[i] = std::bit_cast<float>(static_cast<uint32_t>(h[i]) << 16);
}

#if defined(__x86_64__)
// F16C rounds to nearest even (the immediate 0), with f16's subnormals and overflow to inf.
__attribute__((target("avx2,fma,f16c"))) void round_f16_f16c(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
  for (; i < n; ++i) x[i] = _cvtsh_ss(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("avx2,fma,f16c"))) void narrow_f16_f16c(const float* x, uint16_t* to, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(to + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) to[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}
__attribute__((target("avx2,fma,f16c"))) void widen_f16_f16c(const uint16_t* h, float* to, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(to + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
  for (; i < n; ++i) to[i] = _cvtsh_ss(h[i]);
}
__attribute__((target("avx2,fma"))) void round_bf16_avx2(float* x, int64_t n) { round_bf16_body(x, n); }
__attribute__((target("avx2,fma"))) void narrow_bf16_avx2(const float* x, uint16_t* to, int64_t n) {
  narrow_bf16_body(x, to, n);
}
__attribute__((target("avx2,fma"))) void widen_bf16_avx2(const uint16_t* h, float* to, int64_t n) {
  widen_bf16_body(h, to, n);
}
#endif

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void add_avx2(float* row, int64_t n, const float* mask, int64_t stride) {
  add_body(row, n, mask, stride);
}
__attribute__((target("avx2,fma"))) void keep_avx2(float* row, int64_t n, const uint8_t* keep, int64_t stride,
                                                   float fill) {
  keep_body(row, n, keep, stride, fill);
}
__attribute__((target("avx2,fma"))) void scale_avx2(float* row, int64_t n, float factor) { scale_body(row, n, factor); }
__attribute__((target("avx2,fma"))) float max_avx2(const float* x, int64_t n) { return max_body(x, n); }
__attribute__((target("avx2,fma"))) void softmax_avx2(float* x, int64_t n, float max) { softmax_body(x, n, max); }
__attribute__((target("avx2,fma"))) void softmax_half_avx2(float* x, int64_t n, float max, uint16_t* to, Half type) {
  softmax_half_body(x, n, max, to, [&](const float* from, uint16_t* into, int64_t len) {
    if (type == Half::BF16) narrow_bf16_body(from, into, len);
    else narrow_f16_f16c(from, into, len);
  });
}
__attribute__((target("avx2,fma"))) void exp_avx2(float* x, int64_t n) { exp_body(x, n); }
#endif
void add_generic(float* row, int64_t n, const float* mask, int64_t stride) { add_body(row, n, mask, stride); }
void keep_generic(float* row, int64_t n, const uint8_t* keep, int64_t stride, float fill) {
  keep_body(row, n, keep, stride, fill);
}
void scale_generic(float* row, int64_t n, float factor) { scale_body(row, n, factor); }
float max_generic(const float* x, int64_t n) { return max_body(x, n); }
void softmax_generic(float* x, int64_t n, float max) { softmax_body(x, n, max); }
void softmax_half_generic(float* x, int64_t n, float max, uint16_t* to, Half type) {
  softmax_half_body(x, n, max, to, [&](const float* from, uint16_t* into, int64_t len) {
    if (type == Half::BF16) narrow_bf16_body(from, into, len);
    else
      for (int64_t i = 0; i < len; ++i) into[i] = float_to_f16(from[i]);
  });
}
void exp_generic(float* x, int64_t n) { exp_body(x, n); }

bool use_avx2() {
#if defined(__x86_64__)
  static const bool avx2 = host_has_cpu_feature("avx2") && host_has_cpu_feature("fma");
  return avx2;
#else
  return false;
#endif
}

bool use_f16c() {
#if defined(__x86_64__)
  static const bool f16c = use_avx2() && host_has_cpu_feature("f16c");
  return f16c;
#else
  return false;
#endif
}

}  // namespace

void scale_row(float* row, int64_t n, float factor) {
#if defined(__x86_64__)
  if (use_avx2()) return scale_avx2(row, n, factor);
#endif
  scale_generic(row, n, factor);
}

void add_to_row(float* row, int64_t n, const float* mask, int64_t stride) {
#if defined(__x86_64__)
  if (use_avx2()) return add_avx2(row, n, mask, stride);
#endif
  add_generic(row, n, mask, stride);
}

void keep_in_row(float* row, int64_t n, const uint8_t* keep, int64_t stride, float fill) {
#if defined(__x86_64__)
  if (use_avx2()) return keep_avx2(row, n, keep, stride, fill);
#endif
  keep_generic(row, n, keep, stride, fill);
}

float row_max(const float* x, int64_t n) {
#if defined(__x86_64__)
  if (use_avx2()) return max_avx2(x, n);
#endif
  return max_generic(x, n);
}

void softmax_row(float* x, int64_t n, float max) {
#if defined(__x86_64__)
  if (use_avx2()) return softmax_avx2(x, n, max);
#endif
  softmax_generic(x, n, max);
}

void softmax_row_to_half(float* x, int64_t n, float max, uint16_t* to, Half type) {
#if defined(__x86_64__)
  if (use_f16c()) return softmax_half_avx2(x, n, max, to, type);
#endif
  softmax_half_generic(x, n, max, to, type);
}

void exp_in_place(float* x, int64_t n) {
#if defined(__x86_64__)
  if (use_avx2()) return exp_avx2(x, n);
#endif
  exp_generic(x, n);
}

void round_to_half(float* x, int64_t n, Half type) {
  if (type == Half::BF16) {
#if defined(__x86_64__)
    if (use_avx2()) return round_bf16_avx2(x, n);
#endif
    return round_bf16_body(x, n);
  }
#if defined(__x86_64__)
  if (use_f16c()) return round_f16_f16c(x, n);
#endif
  for (int64_t i = 0; i < n; ++i) x[i] = f16_to_float(float_to_f16(x[i]));
}

void narrow_to_half(const float* x, uint16_t* to, int64_t n, Half type) {
  if (type == Half::BF16) {
#if defined(__x86_64__)
    if (use_avx2()) return narrow_bf16_avx2(x, to, n);
#endif
    return narrow_bf16_body(x, to, n);
  }
#if defined(__x86_64__)
  if (use_f16c()) return narrow_f16_f16c(x, to, n);
#endif
  for (int64_t i = 0; i < n; ++i) to[i] = float_to_f16(x[i]);
}

void widen_half(const uint16_t* half, float* to, int64_t n, Half type) {
  if (type == Half::BF16) {
#if defined(__x86_64__)
    if (use_avx2()) return widen_bf16_avx2(half, to, n);
#endif
    return widen_bf16_body(half, to, n);
  }
#if defined(__x86_64__)
  if (use_f16c()) return widen_f16_f16c(half, to, n);
#endif
  for (int64_t i = 0; i < n; ++i) to[i] = f16_to_float(half[i]);
}

}  // namespace kiln::runtime::cpu
