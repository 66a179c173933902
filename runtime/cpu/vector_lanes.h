// Vectors of floats for the runtime's own vectorized loops (score_rows.h, activation_rows.h):
// W lanes as GCC's vector extension, compiled once per instruction set by the functions that
// inline them, and e^x over them; which instance the calling thread runs.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>

// The vector helpers are always inlined, so no call passes a vector across the ABI that
// GCC warns about.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace kiln::runtime::cpu {

/// Whether the calling thread runs the AVX2 and FMA instances of the vector loops, or the
/// AVX-512 ones (this CPU has them and use_row_instance did not ask for fewer); F16C with AVX2.
bool use_avx2();
bool use_f16c();
bool use_avx512();

// W floats: eight in two SSE registers on a plain x86-64 and in one AVX register in the
// functions compiled for AVX2; sixteen in one AVX-512 register in those compiled for it.
template <int W>
struct Lanes {
  typedef float F __attribute__((vector_size(4 * W)));
  typedef int32_t I __attribute__((vector_size(4 * W)));
};

template <int W>
[[gnu::always_inline]] inline typename Lanes<W>::F splat(float f) {
  return typename Lanes<W>::F{} + f;
}

template <int W>
[[gnu::always_inline]] inline typename Lanes<W>::F load(const float* p) {
  typename Lanes<W>::F v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class F>
[[gnu::always_inline]] inline void store(float* p, F v) {
  std::memcpy(p, &v, sizeof v);
}

// e^x: x = n·ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two parts, so r is exact), e^r by
// Cephes's expf polynomial, 2^n through the exponent bits (2^127 twice for n = 128). Past
// the range of normal results: 0 below, +inf above; NaN stays NaN (it fails every
// comparison).
template <int W>
[[gnu::always_inline]] inline typename Lanes<W>::F exp_lanes(typename Lanes<W>::F x) {
  using F = typename Lanes<W>::F;
  using I = typename Lanes<W>::I;
  const F lo = splat<W>(-87.33654f), hi = splat<W>(88.72283f);
  const I under = x<lo, over = x> hi;
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  const F magic = splat<W>(12582912.0f);  // 1.5·2^23: adding it rounds to an integer in the low bits
  const F t = x * splat<W>(1.44269504088896341f) + magic;
  const I n = std::bit_cast<I>(t) - std::bit_cast<I>(magic);
  const F nf = t - magic;
  const F r = x - nf * splat<W>(0.693359375f) - nf * splat<W>(-2.12194440e-4f);
  F p = splat<W>(1.9875691500e-4f);
  p = p * r + splat<W>(1.3981999507e-3f);
  p = p * r + splat<W>(8.3334519073e-3f);
  p = p * r + splat<W>(4.1665795894e-2f);
  p = p * r + splat<W>(1.6666665459e-1f);
  p = p * r + splat<W>(5.0000001201e-1f);
  p = p * r * r + r + splat<W>(1.0f);
  const I top = n > (I{} + 127);  // -1 where n is 128
  const I bits = (n + top + 127) << 23;
  F y = p * std::bit_cast<F>(bits);
  y = top ? y * splat<W>(2.0f) : y;
  y = under ? splat<W>(0.0f) : y;
  return over ? splat<W>(std::numeric_limits<float>::infinity()) : y;
}

}  // namespace kiln::runtime::cpu
