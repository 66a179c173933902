#include "runtime/cpu/score_rows.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/half_float.h"
#include "runtime/cpu/host_cpu.h"
#include "runtime/cpu/vector_lanes.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// The vector helpers below are always inlined, so no call passes a vector across the ABI
// that GCC warns about.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace kiln::runtime::cpu {
namespace {

template <int W>
[[gnu::always_inline]] inline void exp_body(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + W <= n; i += W) store(x + i, exp_lanes<W>(load<W>(x + i)));
  if (i == n) return;
  float tail[W] = {};
  std::memcpy(tail, x + i, static_cast<size_t>(n - i) * sizeof(float));
  store(tail, exp_lanes<W>(load<W>(tail)));
  std::memcpy(x + i, tail, static_cast<size_t>(n - i) * sizeof(float));
}

template <int W>
[[gnu::always_inline]] inline float max_body(const float* x, int64_t n) {
  using F = typename Lanes<W>::F;
  const float inf = std::numeric_limits<float>::infinity();
  const int64_t whole = n / W * W;
  float tail[W];
  for (int j = 0; j < W; ++j) tail[j] = whole + j < n ? x[whole + j] : -inf;
  F m = splat<W>(-inf);
  for (int64_t i = 0; i < whole; i += W) {
    const F v = load<W>(x + i);
    m = v > m ? v : m;
  }
  m = load<W>(tail) > m ? load<W>(tail) : m;
  float max = m[0];
  for (int j = 1; j < W; ++j) max = m[j] > max ? m[j] : max;
  return max;
}

// The first pass of a softmax: x[i] = exp(x[i] - max), returning their sum.
template <int W>
[[gnu::always_inline]] inline float exp_sum_body(float* x, int64_t n, float max) {
  using F = typename Lanes<W>::F;
  const float inf = std::numeric_limits<float>::infinity();
  // The row padded to whole vectors with -inf, whose exp adds 0.
  const int64_t whole = n / W * W;
  float tail[W];
  for (int j = 0; j < W; ++j) tail[j] = whole + j < n ? x[whole + j] : -inf;
  const F mv = splat<W>(max);
  F sum = splat<W>(0.0f);
  for (int64_t i = 0; i < whole; i += W) {
    const F e = exp_lanes<W>(load<W>(x + i) - mv);
    store(x + i, e);
    sum += e;
  }
  const F e = exp_lanes<W>(load<W>(tail) - mv);
  store(tail, e);
  // Padding past n gives exp(-inf - max): 0, or NaN where max is -inf or NaN (so is the row).
  for (int j = 0; whole + j < n; ++j) x[whole + j] = tail[j];
  float total = 0;
  for (int j = 0; j < W; ++j) total += sum[j] + (whole + j < n ? tail[j] : 0.0f);
  return total;
}

template <int W>
[[gnu::always_inline]] inline void scale_range(float* x, int64_t n, float factor) {
  const typename Lanes<W>::F scale = splat<W>(factor);
  int64_t i = 0;
  for (; i + W <= n; i += W) store(x + i, load<W>(x + i) * scale);
  for (; i < n; ++i) x[i] *= factor;
}

template <int W>
[[gnu::always_inline]] inline void softmax_body(float* x, int64_t n, float max) {
  if (n <= 0) return;
  scale_range<W>(x, n, 1.0f / exp_sum_body<W>(x, n, max));
}

// The softmax's normalizing pass a piece at a time, each piece narrowed while in cache.
template <int W, class Narrow>
[[gnu::always_inline]] inline void softmax_half_body(float* x, int64_t n, float max, uint16_t* to,
                                                     const Narrow& narrow) {
  if (n <= 0) return;
  const float factor = 1.0f / exp_sum_body<W>(x, n, max);
  constexpr int64_t kPiece = 256;
  for (int64_t c = 0; c < n; c += kPiece) {
    const int64_t len = std::min(kPiece, n - c);
    scale_range<W>(x + c, len, factor);
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
#endif

// The softmax's gradient over a row: dp[j] = scale·p[j]·(dp[j] − Σ_k dp[k]·p[k]), the sum
// in W lanes of float.
template <int W>
[[gnu::always_inline]] inline void softmax_gradient_body(const float* p, float* dp, int64_t n, float scale) {
  typename Lanes<W>::F lanes = splat<W>(0.0f);
  int64_t j = 0;
  for (; j + W <= n; j += W) lanes += load<W>(p + j) * load<W>(dp + j);
  float sum = 0;
  for (int l = 0; l < W; ++l) sum += lanes[l];
  for (; j < n; ++j) sum += p[j] * dp[j];
  for (int64_t i = 0; i < n; ++i) dp[i] = scale * p[i] * (dp[i] - sum);
}

// Each row function compiled three times: for AVX-512 (sixteen lanes), AVX2 and FMA
// (eight), and plain x86-64 (eight in SSE pairs); `ROWS` picks by the CPU.
#define KILN_ROW_FUNCTIONS(SUFFIX, W, TARGET)                                                               \
  TARGET void add_##SUFFIX(float* row, int64_t n, const float* mask, int64_t stride) {                      \
    add_body(row, n, mask, stride);                                                                         \
  }                                                                                                         \
  TARGET void keep_##SUFFIX(float* row, int64_t n, const uint8_t* keep, int64_t stride, float fill) {       \
    keep_body(row, n, keep, stride, fill);                                                                  \
  }                                                                                                         \
  TARGET void scale_##SUFFIX(float* row, int64_t n, float factor) { scale_body(row, n, factor); }           \
  TARGET float max_##SUFFIX(const float* x, int64_t n) { return max_body<W>(x, n); }                        \
  TARGET void softmax_##SUFFIX(float* x, int64_t n, float max) { softmax_body<W>(x, n, max); }              \
  TARGET void exp_##SUFFIX(float* x, int64_t n) { exp_body<W>(x, n); }                                      \
  TARGET void softmax_gradient_##SUFFIX(const float* p, float* dp, int64_t n, float scale) {                \
    softmax_gradient_body<W>(p, dp, n, scale);                                                              \
  }                                                                                                         \
  TARGET void round_bf16_##SUFFIX(float* x, int64_t n) { round_bf16_body(x, n); }                           \
  TARGET void narrow_bf16_##SUFFIX(const float* x, uint16_t* to, int64_t n) { narrow_bf16_body(x, to, n); } \
  TARGET void widen_bf16_##SUFFIX(const uint16_t* h, float* to, int64_t n) { widen_bf16_body(h, to, n); }

#if defined(__x86_64__)
KILN_ROW_FUNCTIONS(avx512, 16, __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c"))))
KILN_ROW_FUNCTIONS(avx2, 8, __attribute__((target("avx2,fma"))))
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c"))) void softmax_half_avx512(
    float* x, int64_t n, float max, uint16_t* to, Half type) {
  softmax_half_body<16>(x, n, max, to, [&](const float* from, uint16_t* into, int64_t len) {
    if (type == Half::BF16) narrow_bf16_body(from, into, len);
    else narrow_f16_f16c(from, into, len);
  });
}
__attribute__((target("avx2,fma"))) void softmax_half_avx2(float* x, int64_t n, float max, uint16_t* to, Half type) {
  softmax_half_body<8>(x, n, max, to, [&](const float* from, uint16_t* into, int64_t len) {
    if (type == Half::BF16) narrow_bf16_body(from, into, len);
    else narrow_f16_f16c(from, into, len);
  });
}
#endif
KILN_ROW_FUNCTIONS(generic, 8, )
#undef KILN_ROW_FUNCTIONS

#if defined(__x86_64__)
// AVX512-BF16's conversion rounds to nearest even and quiets a NaN as bf16_rounded_bits
// does, in one instruction where that takes about twenty, but reads f32 subnormals as 0:
// sixteen floats holding one go the integer way.
// (gcc 12's avx512fintrin.h leaves _mm512_cvtepu16_epi32's masked-off operand undefined
// on purpose, which its maybe-uninitialized warning reports.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define KILN_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,avx512bf16")))
KILN_BF16_TARGET inline bool any_subnormal(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __mmask16 zero_exponent =
      _mm512_cmpeq_epi32_mask(_mm512_and_si512(bits, _mm512_set1_epi32(0x7f800000)), _mm512_setzero_si512());
  return (zero_exponent & _mm512_test_epi32_mask(bits, _mm512_set1_epi32(0x007fffff))) != 0;
}
KILN_BF16_TARGET void narrow_bf16_native(const float* x, uint16_t* to, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    if (any_subnormal(v)) narrow_bf16_body(x + i, to + i, 16);
    else _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + i), reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
  }
  narrow_bf16_body(x + i, to + i, n - i);
}
KILN_BF16_TARGET void round_bf16_native(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    if (any_subnormal(v)) {
      round_bf16_body(x + i, 16);
      continue;
    }
    const __m512i wide = _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
    _mm512_storeu_ps(x + i, _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16)));
  }
  round_bf16_body(x + i, n - i);
}
KILN_BF16_TARGET void softmax_bf16_native(float* x, int64_t n, float max, uint16_t* to) {
  softmax_half_body<16>(x, n, max, to,
                        [&](const float* from, uint16_t* into, int64_t len) { narrow_bf16_native(from, into, len); });
}
#undef KILN_BF16_TARGET
#pragma GCC diagnostic pop
#endif
void softmax_half_generic(float* x, int64_t n, float max, uint16_t* to, Half type) {
  softmax_half_body<8>(x, n, max, to, [&](const float* from, uint16_t* into, int64_t len) {
    if (type == Half::BF16) narrow_bf16_body(from, into, len);
    else
      for (int64_t i = 0; i < len; ++i) into[i] = float_to_f16(from[i]);
  });
}

thread_local RowInstance chosen_instance = RowInstance::Fastest;

}  // namespace

// What this CPU has (read once), then what the calling thread asked for.
bool use_avx2() {
#if defined(__x86_64__)
  static const bool avx2 = host_has_cpu_feature("avx2") && host_has_cpu_feature("fma");
  return avx2 && chosen_instance != RowInstance::Generic;
#else
  return false;
#endif
}

bool use_f16c() {
#if defined(__x86_64__)
  static const bool f16c = host_has_cpu_feature("f16c");
  return f16c && use_avx2();
#else
  return false;
#endif
}

bool use_avx512() {
#if defined(__x86_64__)
  static const bool avx512 = host_has_cpu_feature("avx512f") && host_has_cpu_feature("avx512bw") &&
                             host_has_cpu_feature("avx512dq") && host_has_cpu_feature("avx512vl");
  return avx512 && use_f16c() && chosen_instance == RowInstance::Fastest;
#else
  return false;
#endif
}

static bool use_avx512_bf16() {
#if defined(__x86_64__)
  static const bool bf16 = host_has_cpu_feature("avx512bf16");
  return bf16 && use_avx512();
#else
  return false;
#endif
}

void use_row_instance(RowInstance instance) { chosen_instance = instance; }

// The fastest instance of a row function this CPU runs.
#if defined(__x86_64__)
#define KILN_DISPATCH(NAME, ...)                       \
  if (use_avx512()) return NAME##_avx512(__VA_ARGS__); \
  if (use_avx2()) return NAME##_avx2(__VA_ARGS__);     \
  return NAME##_generic(__VA_ARGS__)
#else
#define KILN_DISPATCH(NAME, ...) return NAME##_generic(__VA_ARGS__)
#endif

void scale_row(float* row, int64_t n, float factor) { KILN_DISPATCH(scale, row, n, factor); }
void add_to_row(float* row, int64_t n, const float* mask, int64_t stride) { KILN_DISPATCH(add, row, n, mask, stride); }
void keep_in_row(float* row, int64_t n, const uint8_t* keep, int64_t stride, float fill) {
  KILN_DISPATCH(keep, row, n, keep, stride, fill);
}
float row_max(const float* x, int64_t n) { KILN_DISPATCH(max, x, n); }
void softmax_row(float* x, int64_t n, float max) { KILN_DISPATCH(softmax, x, n, max); }
void exp_in_place(float* x, int64_t n) { KILN_DISPATCH(exp, x, n); }
void softmax_gradient_row(const float* p, float* dp, int64_t n, float scale) {
  KILN_DISPATCH(softmax_gradient, p, dp, n, scale);
}

void softmax_row_to_half(float* x, int64_t n, float max, uint16_t* to, Half type) {
#if defined(__x86_64__)
  // The vector instances narrow f16 with F16C.
  if (type == Half::BF16 && use_avx512_bf16()) return softmax_bf16_native(x, n, max, to);
  if (use_avx512()) return softmax_half_avx512(x, n, max, to, type);
  if (use_f16c()) return softmax_half_avx2(x, n, max, to, type);
#endif
  softmax_half_generic(x, n, max, to, type);
}

void round_to_half(float* x, int64_t n, Half type) {
  if (type == Half::BF16) {
#if defined(__x86_64__)
    if (use_avx512_bf16()) return round_bf16_native(x, n);
#endif
    KILN_DISPATCH(round_bf16, x, n);
  }
#if defined(__x86_64__)
  if (use_f16c()) return round_f16_f16c(x, n);
#endif
  for (int64_t i = 0; i < n; ++i) x[i] = f16_to_float(float_to_f16(x[i]));
}

void narrow_to_half(const float* x, uint16_t* to, int64_t n, Half type) {
  if (type == Half::BF16) {
#if defined(__x86_64__)
    if (use_avx512_bf16()) return narrow_bf16_native(x, to, n);
#endif
    KILN_DISPATCH(narrow_bf16, x, to, n);
  }
#if defined(__x86_64__)
  if (use_f16c()) return narrow_f16_f16c(x, to, n);
#endif
  for (int64_t i = 0; i < n; ++i) to[i] = float_to_f16(x[i]);
}

void widen_half(const uint16_t* half, float* to, int64_t n, Half type) {
  if (type == Half::BF16) {
    KILN_DISPATCH(widen_bf16, half, to, n);
  }
#if defined(__x86_64__)
  if (use_f16c()) return widen_f16_f16c(half, to, n);
#endif
  for (int64_t i = 0; i < n; ++i) to[i] = f16_to_float(half[i]);
}

#undef KILN_DISPATCH

namespace {

// Chunks of this many elements: a quarter of a MiB of f32 each.
constexpr int64_t kConversionGrain = 1 << 16;

}  // namespace

void widen_half(const uint16_t* half, float* to, int64_t n, Half type, ThreadPool* pool, int threads) {
  if (!pool || threads < 2) return widen_half(half, to, n, type);
  pool->parallel_for(n, kConversionGrain,
                     [&](int64_t begin, int64_t end) { widen_half(half + begin, to + begin, end - begin, type); });
}

void narrow_to_half(const float* x, uint16_t* to, int64_t n, Half type, ThreadPool* pool, int threads) {
  if (!pool || threads < 2) return narrow_to_half(x, to, n, type);
  pool->parallel_for(n, kConversionGrain,
                     [&](int64_t begin, int64_t end) { narrow_to_half(x + begin, to + begin, end - begin, type); });
}

}  // namespace kiln::runtime::cpu
