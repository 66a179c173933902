#include "tests/cuda_emulator/emulator.h"

namespace kiln::cuda_emulator {

// What a kiln CUDA program needs of CUDA C++ on the host: the qualifiers as nothing (or
// their GNU equivalents), the built-in indices and the barriers through the emulator's
// scheduler (kiln_emu, bound at load), the device intrinsics kiln emits, and host
// versions of the helpers the programs write as inline PTX (their guard macros are
// defined, so the program's own definitions are skipped). Every function is what the
// PTX ISA says of its instruction; a warp-wide instruction gathers the warp's operands
// with one exchange.
std::string_view device_header() {
  return R"(// kiln CUDA emulator: device header
#include <cmath>
#include <cstdint>
#include <cstring>
#include <climits>
#include <utility>
#include <vector>

struct kiln_emu_dim3 { unsigned x, y, z; };
struct kiln_emu_thread { kiln_emu_dim3 thread, block, block_dim, grid_dim; };
struct kiln_emu_api {
  kiln_emu_thread* const* current;
  void (*sync)();
  int (*sync_or)(int);
  void (*exchange)(const void* mine, void* all, unsigned bytes);
  void (*shuffle)(const void* mine, void* theirs, unsigned bytes, unsigned lane);
  void (*fault)(const char* what);
  void* (*dynamic_shared)();
};
static const kiln_emu_api* kiln_emu;
extern "C" void kiln_emu_bind(const kiln_emu_api* api) { kiln_emu = api; }

#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static
// The launch's dynamic shared memory: one buffer the blocks (run one at a time) share.
#define KILN_DYNAMIC_SHARED(type, name) type* name = static_cast<type*>(kiln_emu->dynamic_shared())
#define threadIdx ((*kiln_emu->current)->thread)
#define blockIdx ((*kiln_emu->current)->block)
#define blockDim ((*kiln_emu->current)->block_dim)
#define gridDim ((*kiln_emu->current)->grid_dim)

inline void __syncthreads() { kiln_emu->sync(); }
inline int __syncthreads_or(int p) { return kiln_emu->sync_or(p); }
template <class T> inline T __shfl_xor_sync(unsigned, T v, int lane_mask) {
  T theirs;
  kiln_emu->shuffle(&v, &theirs, sizeof(T), ((threadIdx.x & 31) ^ (unsigned)lane_mask) & 31);
  return theirs;
}
template <class T> inline T __shfl_sync(unsigned, T v, int source) {
  T theirs;
  kiln_emu->shuffle(&v, &theirs, sizeof(T), (unsigned)source & 31);
  return theirs;
}

template <class To, class From> inline To kiln_emu_bits(From f) { To t; std::memcpy(&t, &f, sizeof t); return t; }
inline float __int_as_float(int x) { return kiln_emu_bits<float>(x); }
inline float __uint_as_float(unsigned x) { return kiln_emu_bits<float>(x); }
inline unsigned __float_as_uint(float x) { return kiln_emu_bits<unsigned>(x); }
inline int __float_as_int(float x) { return kiln_emu_bits<int>(x); }
inline double __longlong_as_double(long long x) { return kiln_emu_bits<double>(x); }
inline long long __double_as_longlong(double x) { return kiln_emu_bits<long long>(x); }

// cvt.rzi: toward zero, saturating, NaN to 0.
template <class I, class F> inline I kiln_emu_to_int(F x) {
  constexpr I lo = sizeof(I) == 8 ? (I)INT64_MIN : (I)INT_MIN, hi = sizeof(I) == 8 ? (I)INT64_MAX : (I)INT_MAX;
  if (x != x) return 0;
  if (x >= -(F)lo) return hi;
  if (x <= (F)lo) return lo;
  return (I)x;
}
inline int __float2int_rz(float x) { return kiln_emu_to_int<int>(x); }
inline long long __float2ll_rz(float x) { return kiln_emu_to_int<long long>(x); }
inline int __double2int_rz(double x) { return kiln_emu_to_int<int>(x); }
inline long long __double2ll_rz(double x) { return kiln_emu_to_int<long long>(x); }

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }

// cvt.f32.f16 and cvt.rn.f16.f32 (the prelude's, in PTX there).
#define KILN_HALF_CONVERSIONS
inline float kiln_f16_to_f32(unsigned short h) { return (float)kiln_emu_bits<_Float16>(h); }
inline unsigned short kiln_f32_to_f16(float f) {
  if (f != f) return 0x7fff;
  return kiln_emu_bits<unsigned short>((_Float16)f);
}

// The attention kernel's PTX helpers.
#define KILN_ATTENTION
#define KILN_ATTENTION_bf16
#define KILN_ATTENTION_f16
inline float kiln_att_exp2(float x) { return exp2f(x); }
// ldmatrix .x4: lanes 8j..8j+7 give the row addresses of 8x8 matrix j; lane l gets row
// l/4's elements 2(l%4) and 2(l%4)+1 of each (.trans: column l/4's, of rows 2(l%4), +1).
inline void kiln_emu_ldsm(unsigned* r, const void* p, bool trans) {
  const void* rows[32];
  kiln_emu->exchange(&p, rows, sizeof p);
  const unsigned lane = threadIdx.x & 31, g = lane / 4, t = lane % 4;
  for (int j = 0; j < 4; ++j) {
    unsigned short lo, hi;
    if (trans) {
      lo = static_cast<const unsigned short*>(rows[j * 8 + 2 * t])[g];
      hi = static_cast<const unsigned short*>(rows[j * 8 + 2 * t + 1])[g];
    } else {
      lo = static_cast<const unsigned short*>(rows[j * 8 + g])[2 * t];
      hi = static_cast<const unsigned short*>(rows[j * 8 + g])[2 * t + 1];
    }
    r[j] = (unsigned)lo | ((unsigned)hi << 16);
  }
}
// cp.async: each thread's copies land at its wait (cp.async.wait_all), not before, so a
// kernel that reads a tile before waiting for it reads what was there.
struct kiln_emu_copy { void* shared; const void* global; };
static std::vector<std::pair<const void*, kiln_emu_copy>> kiln_emu_copies;
inline void kiln_att_copy16(void* shared, const void* global, bool valid) {
  // Both addresses of a 16-byte cp.async must be 16-byte aligned (a GPU faults).
  if ((reinterpret_cast<unsigned long long>(shared) | reinterpret_cast<unsigned long long>(global)) & 15) {
    kiln_emu->fault("misaligned address: a 16-byte cp.async at a global or shared address not 16-byte aligned");
    return;
  }
  kiln_emu_copies.push_back({*kiln_emu->current, {shared, valid ? global : nullptr}});
}
inline void kiln_att_copy_commit() {}
inline void kiln_att_copy_wait() {
  const void* me = *kiln_emu->current;
  size_t kept = 0;
  for (const auto& [thread, copy] : kiln_emu_copies) {
    if (thread != me) {
      kiln_emu_copies[kept++] = {thread, copy};
      continue;
    }
    if (copy.global) std::memcpy(copy.shared, copy.global, 16);
    else std::memset(copy.shared, 0, 16);
  }
  kiln_emu_copies.resize(kept);
}
inline void kiln_att_ldsm(unsigned* r, const void* p) { kiln_emu_ldsm(r, p, false); }
inline void kiln_att_ldsm_trans(unsigned* r, const void* p) { kiln_emu_ldsm(r, p, true); }

inline unsigned short kiln_emu_f32_to_bf16(float f) {
  const unsigned bits = __float_as_uint(f);
  if (f != f) return 0x7fff;
  return (unsigned short)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}
inline float kiln_emu_bf16_to_f32(unsigned short b) { return __uint_as_float((unsigned)b << 16); }
// cvt.rn.{bf16x2,f16x2}.f32 d, hi, lo: hi in the upper half.
inline unsigned kiln_att_pack_bf16(float lo, float hi) {
  return (unsigned)kiln_emu_f32_to_bf16(lo) | ((unsigned)kiln_emu_f32_to_bf16(hi) << 16);
}
inline unsigned kiln_att_pack_f16(float lo, float hi) {
  return (unsigned)kiln_f32_to_f16(lo) | ((unsigned)kiln_f32_to_f16(hi) << 16);
}
inline void kiln_att_round_bf16(float& lo, float& hi) {
  lo = kiln_emu_bf16_to_f32(kiln_emu_f32_to_bf16(lo));
  hi = kiln_emu_bf16_to_f32(kiln_emu_f32_to_bf16(hi));
}
inline void kiln_att_round_f16(float& lo, float& hi) {
  lo = kiln_f16_to_f32(kiln_f32_to_f16(lo));
  hi = kiln_f16_to_f32(kiln_f32_to_f16(hi));
}
// mma.sync.aligned.m16n8k16.row.col.f32: lane l (g = l/4, t = l%4) holds A's rows g and
// g+8 at columns 2t, 2t+1 (registers 0, 1) and 2t+8, 2t+9 (2, 3); B's column g at rows
// 2t, 2t+1 (b0) and 2t+8, 2t+9 (b1); C's rows g and g+8 at columns 2t and 2t+1.
template <bool kBf16> inline void kiln_emu_mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {
  struct Fragments { unsigned a[4], b[2]; } mine = {{a[0], a[1], a[2], a[3]}, {b0, b1}}, all[32];
  kiln_emu->exchange(&mine, all, sizeof mine);
  auto half = [](unsigned reg, int k) {
    const unsigned short h = (unsigned short)(k % 2 ? reg >> 16 : reg & 0xffffu);
    return kBf16 ? kiln_emu_bf16_to_f32(h) : kiln_f16_to_f32(h);
  };
  auto a_at = [&](int i, int k) { return half(all[(i % 8) * 4 + (k % 8) / 2].a[(i >= 8) + 2 * (k >= 8)], k); };
  auto b_at = [&](int k, int n) { return half(all[n * 4 + (k % 8) / 2].b[k >= 8], k); };
  const int lane = threadIdx.x & 31, g = lane / 4, t = lane % 4;
  for (int e = 0; e < 4; ++e) {
    const int i = g + 8 * (e / 2), n = 2 * t + e % 2;
    float sum = c[e];
    for (int k = 0; k < 16; ++k) sum += a_at(i, k) * b_at(k, n);
    c[e] = sum;
  }
}
inline void kiln_att_mma_bf16(float* c, const unsigned* a, unsigned b0, unsigned b1) { kiln_emu_mma<true>(c, a, b0, b1); }
inline void kiln_att_mma_f16(float* c, const unsigned* a, unsigned b0, unsigned b1) { kiln_emu_mma<false>(c, a, b0, b1); }

// The entry points the emulator calls: kiln_emu_entry_NAME(params), params as
// cuLaunchKernel's (each points to its argument), and kiln_emu_sizes_NAME, their sizes.
template <class... A, unsigned long... I>
inline void kiln_emu_call(void (*f)(A...), void** params, std::integer_sequence<unsigned long, I...>) {
  f(*static_cast<A*>(params[I])...);
}
template <class... A> inline void kiln_emu_call(void (*f)(A...), void** params) {
  kiln_emu_call(f, params, std::make_integer_sequence<unsigned long, sizeof...(A)>());
}
template <class... A> inline unsigned kiln_emu_sizes_of(void (*)(A...), unsigned* s) {
  unsigned n = 0;
  ((s[n++] = sizeof(A)), ...);
  return n;
}
// --- the program ---
)";
}

}  // namespace kiln::cuda_emulator
