#include "runtime/cpu/score_rows.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/cpu/host_cpu.h"

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

[[gnu::always_inline]] inline void softmax_body(float* x, int64_t n, float max) {
  if (n <= 0) return;
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
  const F8 scale = splat(1.0f / total);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store(x + i, load(x + i) * scale);
  for (; i < n; ++i) x[i] *= scale[0];
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
__attribute__((target("avx2,fma"))) void exp_avx2(float* x, int64_t n) { exp_body(x, n); }
#endif
void add_generic(float* row, int64_t n, const float* mask, int64_t stride) { add_body(row, n, mask, stride); }
void keep_generic(float* row, int64_t n, const uint8_t* keep, int64_t stride, float fill) {
  keep_body(row, n, keep, stride, fill);
}
void scale_generic(float* row, int64_t n, float factor) { scale_body(row, n, factor); }
float max_generic(const float* x, int64_t n) { return max_body(x, n); }
void softmax_generic(float* x, int64_t n, float max) { softmax_body(x, n, max); }
void exp_generic(float* x, int64_t n) { exp_body(x, n); }

bool use_avx2() {
#if defined(__x86_64__)
  static const bool avx2 = host_has_cpu_feature("avx2") && host_has_cpu_feature("fma");
  return avx2;
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

void exp_in_place(float* x, int64_t n) {
#if defined(__x86_64__)
  if (use_avx2()) return exp_avx2(x, n);
#endif
  exp_generic(x, n);
}

}  // namespace kiln::runtime::cpu
