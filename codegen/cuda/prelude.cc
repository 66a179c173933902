#include "codegen/cuda/kernel_emitter.h"

namespace kiln::codegen::cuda {

// Device helpers every program starts with. They give the reference interpreter's
// semantics: wrapping integer arithmetic (through unsigned types, where C++ would have
// signed overflow undefined), integer division by zero giving 0, saturating float-to-int
// casts (cvt.rzi saturates, NaN gives 0), NaN-propagating maximum and minimum, and f16 and
// bf16 stored as bits and computed in float. No headers: NVRTC needs none of the toolkit's.
// The helpers written in PTX sit behind guards (KILN_HALF_CONVERSIONS here,
// KILN_ATTENTION* in attention_kernel.cc), as does a kernel's dynamic shared memory
// (KILN_DYNAMIC_SHARED): tests/cuda_emulator defines its own host ones.
std::string_view prelude() {
  return R"(// kiln CUDA program (generated)
typedef unsigned long long kiln_u64;
template <class T> struct __align__(4 * sizeof(T)) kiln_vec4 { T v[4]; };
template <class T> struct __align__(8 * sizeof(T)) kiln_vec8 { T v[8]; };

#ifndef KILN_DYNAMIC_SHARED
#define KILN_DYNAMIC_SHARED(type, name) extern __shared__ __align__(16) type name[]
#endif
#ifndef KILN_HALF_CONVERSIONS
#define KILN_HALF_CONVERSIONS
__device__ __forceinline__ float kiln_f16_to_f32(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short kiln_f32_to_f16(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
#endif
__device__ __forceinline__ float kiln_bf16_to_f32(unsigned short b) { return __uint_as_float(((unsigned)b) << 16); }
// cvt.rn.bf16.f32 is one instruction from sm_80 on, where the integer rounding takes six.
__device__ __forceinline__ unsigned short kiln_f32_to_bf16(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned short b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f));
  return b;
#else
  unsigned bits = __float_as_uint(f);
  if (f != f) return 0x7fc0;
  return (unsigned short)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
#endif
}
// A bf16 value in registers is already rounded (every op with a bf16 result rounds, and
// loads are exact): its storage is its top half, one shift where rounding takes six ops.
__device__ __forceinline__ unsigned short kiln_bf16_bits(float f) { return (unsigned short)(__float_as_uint(f) >> 16); }
__device__ __forceinline__ float kiln_round_f16(float f) { return kiln_f16_to_f32(kiln_f32_to_f16(f)); }
__device__ __forceinline__ float kiln_round_bf16(float f) { return kiln_bf16_to_f32(kiln_f32_to_bf16(f)); }

__device__ __forceinline__ int kiln_add(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
__device__ __forceinline__ long long kiln_add(long long a, long long b) { return (long long)((kiln_u64)a + (kiln_u64)b); }
__device__ __forceinline__ int kiln_sub(int a, int b) { return (int)((unsigned)a - (unsigned)b); }
__device__ __forceinline__ long long kiln_sub(long long a, long long b) { return (long long)((kiln_u64)a - (kiln_u64)b); }
__device__ __forceinline__ int kiln_mul(int a, int b) { return (int)((unsigned)a * (unsigned)b); }
__device__ __forceinline__ long long kiln_mul(long long a, long long b) { return (long long)((kiln_u64)a * (kiln_u64)b); }
__device__ __forceinline__ int kiln_neg(int a) { return (int)(0u - (unsigned)a); }
__device__ __forceinline__ long long kiln_neg(long long a) { return (long long)(0ull - (kiln_u64)a); }
__device__ __forceinline__ int kiln_abs(int a) { return a < 0 ? kiln_neg(a) : a; }
__device__ __forceinline__ long long kiln_abs(long long a) { return a < 0 ? kiln_neg(a) : a; }
template <class T> __device__ __forceinline__ T kiln_div(T a, T b) { return b == 0 ? T(0) : b == T(-1) ? kiln_neg(a) : a / b; }
// A float quotient as a product with b's reciprocal, rounded once, and one correction
// (Markstein 1990): within an ulp of a / b, and exactly rounded while |a| >= 2^-100 and
// the quotient is normal (below that the correction's residual underflows; none of 50M
// random pairs was off there). Where b is the same for many a (a row's sum, a constant),
// the unrolled loop computes the reciprocal once; and no a takes a slow path, as a zero a
// does in division's (a softmax's masked elements). A b whose reciprocal would not be a
// normal number is scaled by 2^64 or 2^-64 with a: no branch, so a per-row b stays
// hoisted. A result of 0, inf or NaN is the product's, where the correction would be NaN
// or lose zero's sign.
__device__ __forceinline__ float kiln_fdiv(float a, float b) {
  const float mag = fabsf(b);
  const float scale = mag > 0x1p126f ? 0x1p-64f : mag < 0x1p-126f ? 0x1p64f : 1.0f;
  const float bs = b * scale, inv = 1.0f / bs, as = a * scale;
  const float q = as * inv;
  const float corrected = fmaf(fmaf(-q, bs, as), inv, q);
  return corrected != 0.0f && fabsf(corrected) <= 0x1.fffffep+127f ? corrected : q;
}

// max.NaN and min.NaN (sm_80 on) propagate a NaN in one instruction, where the portable
// form takes three.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
__device__ __forceinline__ float kiln_max(float a, float b) { float r; asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r; }
__device__ __forceinline__ float kiln_min(float a, float b) { float r; asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r; }
#else
__device__ __forceinline__ float kiln_max(float a, float b) { return (a != a || b != b) ? a + b : fmaxf(a, b); }
__device__ __forceinline__ float kiln_min(float a, float b) { return (a != a || b != b) ? a + b : fminf(a, b); }
#endif
__device__ __forceinline__ double kiln_max(double a, double b) { return (a != a || b != b) ? a + b : fmax(a, b); }
__device__ __forceinline__ double kiln_min(double a, double b) { return (a != a || b != b) ? a + b : fmin(a, b); }
__device__ __forceinline__ long long kiln_max(long long a, long long b) { return a >= b ? a : b; }
__device__ __forceinline__ long long kiln_min(long long a, long long b) { return a <= b ? a : b; }
__device__ __forceinline__ int kiln_max(int a, int b) { return a >= b ? a : b; }
__device__ __forceinline__ int kiln_min(int a, int b) { return a <= b ? a : b; }

// Accumulators of row reductions, combined in warps and then across a block's warps.
struct kiln_sum_op { template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; } };
struct kiln_wrapping_sum_op { __device__ __forceinline__ long long operator()(long long a, long long b) const { return kiln_add(a, b); } };
struct kiln_max_op { template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return kiln_max(a, b); } };
struct kiln_min_op { template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return kiln_min(a, b); } };

template <class T, class Op> __device__ __forceinline__ T kiln_warp_reduce(T v, Op op) {
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Every thread of the block gets the result; `scratch` holds a slot per warp.
template <class T, class Op> __device__ __forceinline__ T kiln_block_reduce(T v, Op op, T* scratch) {
  v = kiln_warp_reduce(v, op);
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  T r = scratch[0];
  for (int w = 1; w < (int)(blockDim.x >> 5); ++w) r = op(r, scratch[w]);
  __syncthreads();
  return r;
}

// Online softmax (Milakov and Gimelshein 2018, arXiv:1805.02867): a row's maximum m and
// its sum s of exp(x - m) in one pass, s rescaled whenever m grows; an element x merges
// as (x, 1). While m is -inf, s counts the -inf elements, so a later finite maximum scales
// the count to 0; a row of only -inf ends with a NaN sum, as a max pass and a sum pass
// give. The merge is symmetric, so every lane of a butterfly gets the same pair.
__device__ __forceinline__ float kiln_exp(float x) { return expf(x); }
__device__ __forceinline__ double kiln_exp(double x) { return exp(x); }
__device__ __forceinline__ bool kiln_is_neg_inf(float x) { return x == __int_as_float(0xff800000); }
__device__ __forceinline__ bool kiln_is_neg_inf(double x) { return x == __longlong_as_double((long long)0xfff0000000000000ULL); }
template <class T> __device__ __forceinline__ void kiln_online_merge(T& m, T& s, T om, T os) {
  const T mx = kiln_max(m, om);
  if (kiln_is_neg_inf(mx)) { s += os; return; }
  s = (kiln_is_neg_inf(m) ? T(0) : s * kiln_exp(m - mx)) + (kiln_is_neg_inf(om) ? T(0) : os * kiln_exp(om - mx));
  m = mx;
}
template <class T> __device__ __forceinline__ T kiln_online_sum(T m, T s) { return kiln_is_neg_inf(m) ? m - m : s; }
template <class T> __device__ __forceinline__ void kiln_warp_online(T& m, T& s) {
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) kiln_online_merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
}
template <class T> __device__ __forceinline__ void kiln_block_online(T& m, T& s, T* ms, T* ss) {
  kiln_warp_online(m, s);
  if ((threadIdx.x & 31) == 0) { ms[threadIdx.x >> 5] = m; ss[threadIdx.x >> 5] = s; }
  __syncthreads();
  m = ms[0]; s = ss[0];
  for (int w = 1; w < (int)(blockDim.x >> 5); ++w) kiln_online_merge(m, s, ms[w], ss[w]);
  __syncthreads();
}

// argmax: the first maximum, or the first NaN (a NaN beats any number).
template <class T> __device__ __forceinline__ bool kiln_argmax_better(T v, long long i, T best, long long at) {
  bool v_nan = v != v, best_nan = best != best;
  if (v_nan || best_nan) return v_nan && (!best_nan || i < at);
  return v > best || (v == best && i < at);
}
template <class T> __device__ __forceinline__ void kiln_warp_argmax(T& v, long long& i) {
  #pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    T ov = __shfl_xor_sync(0xffffffffu, v, o);
    long long oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (kiln_argmax_better(ov, oi, v, i)) { v = ov; i = oi; }
  }
}
template <class T> __device__ __forceinline__ void kiln_block_argmax(T& v, long long& i, T* values, long long* indices) {
  kiln_warp_argmax(v, i);
  if ((threadIdx.x & 31) == 0) { values[threadIdx.x >> 5] = v; indices[threadIdx.x >> 5] = i; }
  __syncthreads();
  v = values[0]; i = indices[0];
  for (int w = 1; w < (int)(blockDim.x >> 5); ++w)
    if (kiln_argmax_better(values[w], indices[w], v, i)) { v = values[w]; i = indices[w]; }
  __syncthreads();
}
)";
}

}  // namespace kiln::codegen::cuda
