#include "codegen/cuda/attention_gradient_source.h"

namespace kiln::codegen::cuda {

// Once per precision ($P: bf16 or f16), after attention_helpers(precision): a tile of a
// matrix into shared memory as the precision's bits.
const char* const kAttentionGradientHalfHelpers = R"(#ifndef KILN_ATTENTION_GRADIENT_$P
#define KILN_ATTENTION_GRADIENT_$P
__device__ __forceinline__ unsigned short kiln_attg_bits_$P(unsigned short x) { return x; }
__device__ __forceinline__ unsigned short kiln_attg_bits_$P(float x) { return (unsigned short)(kiln_att_pack_$P(x, 0.f) & 0xffffu); }
// A gradient's element, f32 or of the precision (x is rounded to it already).
__device__ __forceinline__ void kiln_attg_put_$P(float* out, long long i, float x) { out[i] = x; }
__device__ __forceinline__ void kiln_attg_put_$P(unsigned short* out, long long i, float x) { out[i] = kiln_attg_bits_$P(x); }
// A warp's 16 rows of a gradient (acc in the mma's C layout: rows r and r + 8 of a lane
// group), rounded to the precision, at out[o + row * rs + col * cs] for rows below `rows`
// and columns below `cols`.
template <int NJ, class E>
__device__ __forceinline__ void kiln_attg_store_$P(E* out, long long o, long long rs, long long cs,
                                                  float (&acc)[NJ][4], int r, int rows, int cols, int t) {
  #pragma unroll
  for (int j = 0; j < NJ; ++j) {
    kiln_att_round_$P(acc[j][0], acc[j][1]);
    kiln_att_round_$P(acc[j][2], acc[j][3]);
    #pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = e < 2 ? r : r + 8, col = j * 8 + 2 * t + (e & 1);
      if (row < rows && col < cols) kiln_attg_put_$P(out, o + (long long)row * rs + (long long)col * cs, acc[j][e]);
    }
  }
}
// 8 consecutive elements from 16-byte aligned p, as the precision's bits.
__device__ __forceinline__ kiln_vec4<unsigned> kiln_attg_chunk_$P(const unsigned short* p) {
  return *reinterpret_cast<const kiln_vec4<unsigned>*>(p);
}
__device__ __forceinline__ kiln_vec4<unsigned> kiln_attg_chunk_$P(const float* p) {
  const kiln_vec4<float> x0 = *reinterpret_cast<const kiln_vec4<float>*>(p);
  const kiln_vec4<float> x1 = *reinterpret_cast<const kiln_vec4<float>*>(p + 4);
  kiln_vec4<unsigned> bits;
  bits.v[0] = kiln_att_pack_$P(x0.v[0], x0.v[1]);
  bits.v[1] = kiln_att_pack_$P(x0.v[2], x0.v[3]);
  bits.v[2] = kiln_att_pack_$P(x1.v[0], x1.v[1]);
  bits.v[3] = kiln_att_pack_$P(x1.v[2], x1.v[3]);
  return bits;
}
// out[r][c] = m[o + (first + r) * rs + c * cs] rounded to the precision, for r < n and
// c < cols; 0 at rows from `rows` on and columns from `valid` on. 16 bytes of a row at a
// time where its elements are adjacent and every row starts 16-byte aligned (checked on
// the pointer, which a caller's buffer may leave unaligned), else element by element.
template <int P, class E>
__device__ __forceinline__ void kiln_attg_tile_$P(unsigned short (*out)[P], const E* __restrict__ m, long long o,
                                                 long long rs, long long cs, int first, int n, int rows, int cols,
                                                 int valid) {
  constexpr int kRowAlignment = 16 / (int)sizeof(E);  // elements
  if (cs == 1 && valid % 8 == 0 && rs % kRowAlignment == 0 && ((unsigned long long)(m + o) & 15ull) == 0) {
    const int chunks = cols / 8;
    for (int i = threadIdx.x; i < n * chunks; i += blockDim.x) {
      const int r = i / chunks, c = i % chunks * 8, row = first + r;
      kiln_vec4<unsigned> bits;
      bits.v[0] = bits.v[1] = bits.v[2] = bits.v[3] = 0u;
      if (row < rows && c < valid) bits = kiln_attg_chunk_$P(m + o + (long long)row * rs + c);
      *reinterpret_cast<kiln_vec4<unsigned>*>(&out[r][c]) = bits;
    }
    return;
  }
  for (int i = threadIdx.x; i < n * cols; i += blockDim.x) {
    const int r = i / cols, c = i % cols, row = first + r;
    out[r][c] = row < rows && c < valid ? kiln_attg_bits_$P(m[o + (long long)row * rs + (long long)c * cs])
                                        : (unsigned short)0;
  }
}
// acc = a's 16 rows of the warp times b's first 8·NT rows transposed, over `chunks` of 16
// columns, rounded to the precision: tile j of acc is the mma's C of b's rows 8j to 8j + 7.
template <int NT, int AP, int BP>
__device__ __forceinline__ void kiln_attg_products_$P(float (&acc)[NT][4], unsigned short (*a)[AP],
                                                     unsigned short (*b)[BP], int chunks, int warp, int lane) {
  #pragma unroll
  for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
  #pragma unroll
  for (int kd = 0; kd < chunks; ++kd) {
    unsigned af[4];
    kiln_att_ldsm(af, &a[warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8][kd * 16 + (lane >> 4) * 8]);
    // Two of b's row tiles a ldmatrix: (tile j, low columns), (j, high), (j + 1, low), (j + 1, high).
    #pragma unroll
    for (int j = 0; j < NT; j += 2) {
      unsigned bf[4];
      kiln_att_ldsm(bf, &b[j * 8 + (lane >> 4) * 8 + (lane & 7)][kd * 16 + ((lane >> 3) & 1) * 8]);
      kiln_att_mma_$P(acc[j], af, bf[0], bf[1]);
      kiln_att_mma_$P(acc[j + 1], af, bf[2], bf[3]);
    }
  }
  #pragma unroll
  for (int j = 0; j < NT; ++j) {
    kiln_att_round_$P(acc[j][0], acc[j][1]);
    kiln_att_round_$P(acc[j][2], acc[j][3]);
  }
}
// acc += x · b, x (16 rows by 8·NT, in the mma's C layout) rounded to the precision as A
// fragments (a pair of tiles is one, as P·v in the forward kernel), b's first 8·NT rows
// read transposed.
template <int NJ, int NT, int BP>
__device__ __forceinline__ void kiln_attg_accumulate_$P(float (&acc)[NJ][4], const float (&x)[NT][4],
                                                       unsigned short (*b)[BP], int lane) {
  #pragma unroll
  for (int kc = 0; kc < NT / 2; ++kc) {
    const unsigned a[4] = {kiln_att_pack_$P(x[2 * kc][0], x[2 * kc][1]), kiln_att_pack_$P(x[2 * kc][2], x[2 * kc][3]),
                           kiln_att_pack_$P(x[2 * kc + 1][0], x[2 * kc + 1][1]),
                           kiln_att_pack_$P(x[2 * kc + 1][2], x[2 * kc + 1][3])};
    // (rows low, tile j), (rows high, j), (rows low, j + 1), (rows high, j + 1).
    #pragma unroll
    for (int j = 0; j < NJ; j += 2) {
      unsigned bf[4];
      kiln_att_ldsm_trans(bf, &b[kc * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)][j * 8 + (lane >> 4) * 8]);
      kiln_att_mma_$P(acc[j], a, bf[0], bf[1]);
      kiln_att_mma_$P(acc[j + 1], a, bf[2], bf[3]);
    }
  }
}
#endif
)";

// The first kernel: the row values, then dq. Its arrays: q's rows and a tile of k's (as
// they lie, [row][d]), dO's rows and v's tile ([row][dv]), in the precision. (The dynamic
// shared array has a name of its own: NVRTC refuses one name declared with two element
// types in a program, and f32 attention kernels declare it of floats.) A warp takes
// 16 query rows (its mma's rows g and g + 8: row_a and row_b); a product's operands reach
// its fragments by ldmatrix (.trans where the tile's rows are the sum's index).
const char* const kAttentionGradientHalfRowsKernel = R"(
  static_assert(R == 64 && KT == 64, "4 warps of 16 rows, 8 mma tiles of keys");
  static_assert(STATS == 3, "a row's maximum, 1 / sum and sum of P * dP");
  constexpr int QP = D16 + 8, VP = DV16 + 8;
  KILN_DYNAMIC_SHARED(unsigned short, kiln_shared_halves);
  unsigned short (*qs)[QP] = reinterpret_cast<unsigned short (*)[QP]>(kiln_shared_halves);
  unsigned short (*ks)[QP] = reinterpret_cast<unsigned short (*)[QP]>(kiln_shared_halves + R * QP);
  unsigned short (*dos)[VP] = reinterpret_cast<unsigned short (*)[VP]>(kiln_shared_halves + (R + KT) * QP);
  unsigned short (*vs)[VP] = reinterpret_cast<unsigned short (*)[VP]>(kiln_shared_halves + (R + KT) * QP + R * VP);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const float kNegInf = __int_as_float(0xff800000), kLog2e = 1.4426950408889634f;
  constexpr int QBLOCKS = (T + R - 1) / R, TILES = (S + KT - 1) / KT;
  for (long long w = blockIdx.x; w < (long long)BATCH * QBLOCKS; w += gridDim.x) {
    const long long p = w / QBLOCKS;
    const int r0 = (int)(QBLOCKS - 1 - w % QBLOCKS) * R;
$OFFSETS
    __syncthreads();
    kiln_attg_tile(qs, q, qo, QRS, QCS, r0, R, T, D16, D);
    kiln_attg_tile(dos, d_out, go, GRS, GCS, r0, R, T, DV16, DV);
    const int row_a = r0 + warp * 16 + g, row_b = row_a + 8;
    // Over the tiles of keys: each row's maximum and sum (the forward's online softmax)
    // and Σ P∘dP, unnormalized, each thread over its keys.
    float m_a = kNegInf, m_b = kNegInf, l_a = 0.f, l_b = 0.f, w_a = 0.f, w_b = 0.f;
    const int tiles_needed = CAUSAL ? min(TILES, (min(r0 + R, T) - 1) / KT + 1) : TILES;
    for (int kb = 0; kb < TILES; ++kb) {
      if (CAUSAL && kb == tiles_needed) {  // taken where exp(fill - max) is not 0 for some row
        const bool needed = (row_a < T && !(FILL - m_a < -104.f)) || (row_b < T && !(FILL - m_b < -104.f));
        if (!__syncthreads_or(needed)) break;
      }
      __syncthreads();
      kiln_attg_tile(ks, k, ko, KRS, KCS, kb * KT, KT, S, D16, D);
      kiln_attg_tile(vs, v, vo, VRS, VCS, kb * KT, KT, S, DV16, DV);
      __syncthreads();
      float s[KT / 8][4], dp[KT / 8][4];
      kiln_attg_products(s, qs, ks, D16 / 16, warp, lane);
      kiln_attg_products(dp, dos, vs, DV16 / 16, warp, lane);
      float mx_a = kNegInf, mx_b = kNegInf;
      #pragma unroll
      for (int j = 0; j < KT / 8; ++j) {
        #pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = e < 2 ? row_a : row_b, key = kb * KT + j * 8 + 2 * t + (e & 1);
          float x = s[j][e];
          if (row < T && key < S) {
$TRANSFORMS
          } else {
            x = kNegInf;
          }
          s[j][e] = x;
        }
        mx_a = fmaxf(mx_a, fmaxf(s[j][0], s[j][1]));
        mx_b = fmaxf(mx_b, fmaxf(s[j][2], s[j][3]));
      }
      mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 1));
      mx_a = fmaxf(mx_a, __shfl_xor_sync(0xffffffffu, mx_a, 2));
      mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 1));
      mx_b = fmaxf(mx_b, __shfl_xor_sync(0xffffffffu, mx_b, 2));
      const float next_a = fmaxf(m_a, mx_a), next_b = fmaxf(m_b, mx_b);
      const float shift_a = next_a == kNegInf ? 0.f : next_a, shift_b = next_b == kNegInf ? 0.f : next_b;
      const float alpha_a = kiln_att_exp2((m_a - shift_a) * kLog2e), alpha_b = kiln_att_exp2((m_b - shift_b) * kLog2e);
      m_a = next_a;
      m_b = next_b;
      float sum_a = 0.f, sum_b = 0.f, weighted_a = 0.f, weighted_b = 0.f;
      #pragma unroll
      for (int j = 0; j < KT / 8; ++j) {
        #pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float x = kiln_att_exp2((s[j][e] - (e < 2 ? shift_a : shift_b)) * kLog2e);
          if (e < 2) { sum_a += x; weighted_a = fmaf(x, dp[j][e], weighted_a); }
          else { sum_b += x; weighted_b = fmaf(x, dp[j][e], weighted_b); }
        }
      }
      l_a = l_a * alpha_a + sum_a;
      l_b = l_b * alpha_b + sum_b;
      w_a = w_a * alpha_a + weighted_a;
      w_b = w_b * alpha_b + weighted_b;
    }
    // Each row's maximum (0 where it is -inf), 1 / sum and Σ P∘dP over its quad of threads
    // (as the f32 kernel's: NaN where every key took a fill of -inf).
    #pragma unroll
    for (int lanes = 1; lanes < 4; lanes <<= 1) {
      l_a += __shfl_xor_sync(0xffffffffu, l_a, lanes);
      l_b += __shfl_xor_sync(0xffffffffu, l_b, lanes);
      w_a += __shfl_xor_sync(0xffffffffu, w_a, lanes);
      w_b += __shfl_xor_sync(0xffffffffu, w_b, lanes);
    }
    const float shift_a = m_a == kNegInf ? 0.f : m_a, shift_b = m_b == kNegInf ? 0.f : m_b;
    const float inv_a = 1.f / l_a, inv_b = 1.f / l_b, dr_a = w_a * inv_a, dr_b = w_b * inv_b;
    if (t == 0 && row_a < T) {
      scratch[(p * T + row_a) * STATS] = shift_a;
      scratch[(p * T + row_a) * STATS + 1] = inv_a;
      scratch[(p * T + row_a) * STATS + 2] = dr_a;
    }
    if (t == 0 && row_b < T) {
      scratch[(p * T + row_b) * STATS] = shift_b;
      scratch[(p * T + row_b) * STATS + 1] = inv_b;
      scratch[(p * T + row_b) * STATS + 2] = dr_b;
    }
    // dq = dS·k over the keys up to the block's last query (past it f masks every score,
    // whose dS is 0), dS rounded to the precision.
    float dq[D16 / 8][4];
    #pragma unroll
    for (int j = 0; j < D16 / 8; ++j) dq[j][0] = dq[j][1] = dq[j][2] = dq[j][3] = 0.f;
    for (int kb = 0; kb < tiles_needed; ++kb) {
      __syncthreads();
      kiln_attg_tile(ks, k, ko, KRS, KCS, kb * KT, KT, S, D16, D);
      kiln_attg_tile(vs, v, vo, VRS, VCS, kb * KT, KT, S, DV16, DV);
      __syncthreads();
      float s[KT / 8][4], dp[KT / 8][4];
      kiln_attg_products(s, qs, ks, D16 / 16, warp, lane);
      kiln_attg_products(dp, dos, vs, DV16 / 16, warp, lane);
      #pragma unroll
      for (int j = 0; j < KT / 8; ++j) {
        #pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = e < 2 ? row_a : row_b, key = kb * KT + j * 8 + 2 * t + (e & 1);
          float ds = 0.f;
          if (row < T && key < S) {
            float x = s[j][e];
            bool kept = true;
$TRANSFORMS
$KEPT
            const float pr = kiln_att_exp2((x - (e < 2 ? shift_a : shift_b)) * kLog2e) * (e < 2 ? inv_a : inv_b);
            ds = kept ? pr * (dp[j][e] - (e < 2 ? dr_a : dr_b)) * SCALE : 0.f;
          }
          s[j][e] = ds;
        }
      }
      kiln_attg_accumulate(dq, s, ks, lane);
    }
    kiln_attg_store(dq_out, dqo, DQRS, DQCS, dq, row_a, T, D, t);
  }
)";

// The second kernel: d(kᵀ) and dv of a block of keys, a warp 16 of them (key_a and key_b
// its mma's rows g and g + 8). Its arrays: k's and v's block and a tile of q's and dO's
// rows, as they lie in the precision, and the tile's row values.
const char* const kAttentionGradientHalfKeysKernel = R"(
  static_assert(KB == 64 && QT == 64, "4 warps of 16 keys, 8 mma tiles of query rows");
  constexpr int QP = D16 + 8, VP = DV16 + 8;
  KILN_DYNAMIC_SHARED(unsigned short, kiln_shared_halves);
  unsigned short (*ks)[QP] = reinterpret_cast<unsigned short (*)[QP]>(kiln_shared_halves);
  unsigned short (*qs)[QP] = reinterpret_cast<unsigned short (*)[QP]>(kiln_shared_halves + KB * QP);
  unsigned short (*vs)[VP] = reinterpret_cast<unsigned short (*)[VP]>(kiln_shared_halves + (KB + QT) * QP);
  unsigned short (*dos)[VP] = reinterpret_cast<unsigned short (*)[VP]>(kiln_shared_halves + (KB + QT) * QP + KB * VP);
  float (*stats)[STATS] = reinterpret_cast<float (*)[STATS]>(kiln_shared_halves + (KB + QT) * (QP + VP));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const float kLog2e = 1.4426950408889634f;
  constexpr int KBLOCKS = (S + KB - 1) / KB, TILES = (T + QT - 1) / QT;
  for (long long w = blockIdx.x; w < (long long)BATCH * KBLOCKS; w += gridDim.x) {
    const long long p = w / KBLOCKS;
    const int k0 = (int)(w % KBLOCKS) * KB;
$OFFSETS
    __syncthreads();
    kiln_attg_tile(ks, k, ko, KRS, KCS, k0, KB, S, D16, D);
    kiln_attg_tile(vs, v, vo, VRS, VCS, k0, KB, S, DV16, DV);
    const int key_a = k0 + warp * 16 + g, key_b = key_a + 8;
    float dk[D16 / 8][4], dv[DV16 / 8][4];
    #pragma unroll
    for (int j = 0; j < D16 / 8; ++j) dk[j][0] = dk[j][1] = dk[j][2] = dk[j][3] = 0.f;
    #pragma unroll
    for (int j = 0; j < DV16 / 8; ++j) dv[j][0] = dv[j][1] = dv[j][2] = dv[j][3] = 0.f;
    // Query tiles before the block's first key: f masks every score, so only their P
    // (exp(fill - max) / sum, NaN in a row whose sum is 0) could reach dv.
    const int masked_tiles = CAUSAL ? min(TILES, k0 / QT) : 0;
    for (int qt = 0; qt < TILES; ++qt) {
      const int r0 = qt * QT;
      __syncthreads();
      kiln_attg_tile(qs, q, qo, QRS, QCS, r0, QT, T, D16, D);
      kiln_attg_tile(dos, d_out, go, GRS, GCS, r0, QT, T, DV16, DV);
      for (int r = threadIdx.x; r < QT; r += blockDim.x) {
        const int row = r0 + r;
        #pragma unroll
        for (int c = 0; c < STATS; ++c) stats[r][c] = row < T ? scratch[(p * T + row) * STATS + c] : 0.f;
      }
      __syncthreads();
      if (qt < masked_tiles) {
        bool needed = false;
        for (int r = threadIdx.x; r < QT; r += blockDim.x)
          needed = needed || (r0 + r < T && !(FILL - stats[r][0] < -104.f && stats[r][1] <= 1.f));
        if (!__syncthreads_or(needed)) continue;
      }
      // The scores and dP transposed: [key][row].
      float s[QT / 8][4], dp[QT / 8][4];
      kiln_attg_products(s, ks, qs, D16 / 16, warp, lane);
      kiln_attg_products(dp, vs, dos, DV16 / 16, warp, lane);
      #pragma unroll
      for (int j = 0; j < QT / 8; ++j) {
        #pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = e < 2 ? key_a : key_b, r = j * 8 + 2 * t + (e & 1), row = r0 + r;
          float pr = 0.f, ds = 0.f;
          if (row < T && key < S) {
            float x = s[j][e];
            bool kept = true;
$TRANSFORMS
$KEPT
            pr = kiln_att_exp2((x - stats[r][0]) * kLog2e) * stats[r][1];
            ds = kept ? pr * (dp[j][e] - stats[r][2]) * SCALE : 0.f;
          }
          s[j][e] = pr;
          dp[j][e] = ds;
        }
      }
      kiln_attg_accumulate(dv, s, dos, lane);
      kiln_attg_accumulate(dk, dp, qs, lane);
    }
    kiln_attg_store(dv_out, dvo, DVRS, DVCS, dv, key_a, S, DV, t);
    // d(kᵀ)'s element (col, key): a key's row of dk lies along DKCS.
    kiln_attg_store(dk_out, dko, DKCS, DKRS, dk, key_a, S, D, t);
  }
)";

}  // namespace kiln::codegen::cuda
