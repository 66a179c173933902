#include "runtime/cpu/activation_rows.h"

#include <cmath>

#include "runtime/cpu/vector_lanes.h"

namespace kiln::runtime::cpu {
namespace {

template <int W>
using F = typename Lanes<W>::F;
template <int W>
using I = typename Lanes<W>::I;

template <int W>
[[gnu::always_inline]] inline F<W> magnitude(F<W> x) {
  return std::bit_cast<F<W>>(std::bit_cast<I<W>>(x) & (I<W>{} + 0x7fffffff));
}

// |m| with the sign of x.
template <int W>
[[gnu::always_inline]] inline F<W> with_sign_of(F<W> m, F<W> x) {
  const I<W> sign = std::bit_cast<I<W>>(x) & (I<W>{} + static_cast<int32_t>(0x80000000u));
  return std::bit_cast<F<W>>((std::bit_cast<I<W>>(m) & (I<W>{} + 0x7fffffff)) | sign);
}

// c[0] + x·(c[1] + x·(c[2] + ...)).
template <int W, size_t N>
[[gnu::always_inline]] inline F<W> horner(F<W> x, const float (&c)[N]) {
  F<W> acc = splat<W>(c[N - 1]);
  for (size_t i = N - 1; i-- > 0;) acc = acc * x + c[i];
  return acc;
}

// The same approximations as the CPU code generator's (codegen/cpu/float_math.cc), so a
// post-op and a kernel agree: below 0.8 an odd polynomial, above 1 - 2/(e^2|x| + 1).
template <int W>
[[gnu::always_inline]] inline F<W> tanh_lanes(F<W> x) {
  const F<W> ax = magnitude<W>(x), u = ax * ax;
  static constexpr float kSmall[] = {-0.33333295583724976f, 0.1333221197128296f,    -0.05385156348347664f,
                                     0.021300332620739937f, -0.007405411917716265f, 0.0015823690919205546f};
  const F<W> small = ax * u * horner<W>(u, kSmall) + ax;
  const F<W> large = 1.0f - 2.0f / (exp_lanes<W>(ax + ax) + 1.0f);
  return with_sign_of<W>(ax < 0.8f ? small : large, x);
}

// Below 1, erf's Maclaurin series to x^23; above, Abramowitz and Stegun 7.1.26.
template <int W>
[[gnu::always_inline]] inline F<W> erf_lanes(F<W> x) {
  static constexpr float kSeries[] = {1.1283791670955126f,      -0.37612638903183754f,    0.11283791670955126f,
                                      -0.026866170645131252f,   0.0052239776254421878f,   -0.00085483270234508528f,
                                      0.00012055332981789664f,  -1.4925650358406251e-05f, 1.6462114365889247e-06f,
                                      -1.6365844691234924e-07f, 1.4807192815879217e-08f,  -1.2290555301717927e-09f};
  static constexpr float kTail[] = {0.254829592f, -0.284496736f, 1.421413741f, -1.453152027f, 1.061405429f};
  const F<W> ax = magnitude<W>(x), x2 = x * x;
  const F<W> small = x * horner<W>(x2, kSeries);
  const F<W> t = 1.0f / (ax * 0.3275911f + 1.0f);
  const F<W> large = with_sign_of<W>(1.0f - t * horner<W>(t, kTail) * exp_lanes<W>(-x2), x);
  return ax < 1.0f ? small : large;  // NaN fails the comparison and propagates through `large`
}

template <int W>
[[gnu::always_inline]] inline F<W> activation_lanes(F<W> x, Activation a) {
  switch (a) {
    case Activation::Sigmoid: return 1.0f / (1.0f + exp_lanes<W>(-x));
    case Activation::Tanh: return tanh_lanes<W>(x);
    case Activation::Silu: return x / (1.0f + exp_lanes<W>(-x));
    case Activation::GeluErf: return 0.5f * x * (1.0f + erf_lanes<W>(x * 0.70710678118654752f));
    case Activation::GeluTanh: return 0.5f * x * (1.0f + tanh_lanes<W>(0.7978845608f * (x + 0.044715f * x * x * x)));
  }
  return x;
}

template <int W>
[[gnu::always_inline]] inline void activation_body(float* x, int64_t n, Activation a) {
  int64_t i = 0;
  for (; i + W <= n; i += W) store(x + i, activation_lanes<W>(load<W>(x + i), a));
  if (i == n) return;
  float tail[W] = {};
  std::memcpy(tail, x + i, static_cast<size_t>(n - i) * sizeof(float));
  store(tail, activation_lanes<W>(load<W>(tail), a));
  std::memcpy(x + i, tail, static_cast<size_t>(n - i) * sizeof(float));
}

// One instance per activation and instruction set, so the switch is outside the loop.
template <int W, Activation A>
[[gnu::always_inline]] inline void apply(float* x, int64_t n) {
  activation_body<W>(x, n, A);
}

#define KILN_ACTIVATION_FUNCTIONS(SUFFIX, W, TARGET)                          \
  TARGET void activation_##SUFFIX(float* x, int64_t n, Activation a) {        \
    switch (a) {                                                              \
      case Activation::Sigmoid: return apply<W, Activation::Sigmoid>(x, n);   \
      case Activation::Tanh: return apply<W, Activation::Tanh>(x, n);         \
      case Activation::Silu: return apply<W, Activation::Silu>(x, n);         \
      case Activation::GeluErf: return apply<W, Activation::GeluErf>(x, n);   \
      case Activation::GeluTanh: return apply<W, Activation::GeluTanh>(x, n); \
    }                                                                         \
  }

#if defined(__x86_64__)
KILN_ACTIVATION_FUNCTIONS(avx512, 16, __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c"))))
KILN_ACTIVATION_FUNCTIONS(avx2, 8, __attribute__((target("avx2,fma"))))
#endif
KILN_ACTIVATION_FUNCTIONS(generic, 8, )
#undef KILN_ACTIVATION_FUNCTIONS

template <ChannelOp Op>
void channel_op(float* __restrict y, const float* __restrict per_channel, int64_t outer, int64_t channels,
                int64_t inner) {
  auto apply_one = [](float& v, float w) { v = Op == ChannelOp::Add ? v + w : Op == ChannelOp::Sub ? v - w : v * w; };
  if (inner == 1) {  // along each row of channels, which vectorizes
    for (int64_t o = 0; o < outer; ++o, y += channels)
      for (int64_t c = 0; c < channels; ++c) apply_one(y[c], per_channel[c]);
    return;
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c, y += inner)
      for (int64_t j = 0; j < inner; ++j) apply_one(y[j], per_channel[c]);
}

}  // namespace

void channel_op_in_place(float* y, const float* per_channel, int64_t outer, int64_t channels, int64_t inner,
                         ChannelOp op) {
  switch (op) {
    case ChannelOp::Add: return channel_op<ChannelOp::Add>(y, per_channel, outer, channels, inner);
    case ChannelOp::Sub: return channel_op<ChannelOp::Sub>(y, per_channel, outer, channels, inner);
    case ChannelOp::Mul: return channel_op<ChannelOp::Mul>(y, per_channel, outer, channels, inner);
  }
}

void activation_in_place(float* x, int64_t n, Activation activation) {
#if defined(__x86_64__)
  if (use_avx512()) return activation_avx512(x, n, activation);
  if (use_avx2()) return activation_avx2(x, n, activation);
#endif
  return activation_generic(x, n, activation);
}

}  // namespace kiln::runtime::cpu
