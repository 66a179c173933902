// Rows of attention scores in place, vectorized (sixteen lanes with AVX-512, eight with
// AVX2 and FMA, where the CPU has them; compiled at -O3: runtime/cpu/BUILD), for the
// attention step (runtime/cpu/attention.h), whose scores never leave the cache: f's masks
// and scalings, then a softmax; and the conversions between f32 and bf16 or f16 of its
// half-precision form (F16C's for f16 where the CPU has it, checked apart from AVX2).
#pragma once

#include <cstdint>

#include "runtime/cpu/thread_pool.h"

namespace kiln::runtime::cpu {

/// Which compiled instance of these functions the calling thread runs: the fastest this
/// CPU has (the default), or, for tests of the others on a CPU with AVX-512, the AVX2 one
/// (where the CPU has AVX2) or the plain x86-64 one.
enum class RowInstance { Fastest, Avx2, Generic };
void use_row_instance(RowInstance instance);

/// row[j] *= factor.
void scale_row(float* row, int64_t n, float factor);
/// row[j] += mask[j·stride].
void add_to_row(float* row, int64_t n, const float* mask, int64_t stride);
/// row[j] = keep[j·stride] ? row[j] : fill (keep: bools, one byte each).
void keep_in_row(float* row, int64_t n, const uint8_t* keep, int64_t stride, float fill);

/// The largest of the n elements (-inf for none; a NaN loses every comparison).
float row_max(const float* x, int64_t n);

/// x[i] = exp(x[i] - max) / Σ exp(x[j] - max) over the n elements, `max` their row_max:
/// exp within 2 units in the last place (a Cephes-style polynomial; below e^-87.3 it
/// gives 0, where f32 has only subnormals); a row of -inf only, or with a NaN or +inf,
/// gives NaN as the decomposed softmax does (the NaN's exp spreads through the sum).
void softmax_row(float* x, int64_t n, float max);

/// The softmax's gradient over a row of n probabilities p, given the gradient of its
/// result in dp: dp[j] = scale·p[j]·(dp[j] − Σ_k dp[k]·p[k]) (the sum in float).
void softmax_gradient_row(const float* p, float* dp, int64_t n, float scale);

/// The same exp, on n values in place (for tests: checked against std::exp).
void exp_in_place(float* x, int64_t n);

/// The 16-bit floats the attention step computes in (format 1.14).
enum class Half { BF16, F16 };

/// x[i] rounded to the nearest value of `type` (ties to even, as the interpreter rounds;
/// f16 overflows to ±inf), kept as f32.
void round_to_half(float* x, int64_t n, Half type);
/// to[i] = x[i] rounded to `type`, as its bits.
void narrow_to_half(const float* x, uint16_t* to, int64_t n, Half type);
/// to[i] = the value of half[i] (exact).
void widen_half(const uint16_t* half, float* to, int64_t n, Half type);
/// widen_half and narrow_to_half split across `pool`'s threads (on the calling one alone
/// without a pool or with one thread): the widened library calls convert whole operands.
void widen_half(const uint16_t* half, float* to, int64_t n, Half type, ThreadPool* pool, int threads);
void narrow_to_half(const float* x, uint16_t* to, int64_t n, Half type, ThreadPool* pool, int threads);

/// softmax_row, its result also rounded to `type` into `to` (as narrow_to_half).
void softmax_row_to_half(float* x, int64_t n, float max, uint16_t* to, Half type);

}  // namespace kiln::runtime::cpu
