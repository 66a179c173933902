#include "codegen/cuda/attention_gradient_source.h"

namespace kiln::codegen::cuda {

// Device helpers both kernels use, once per program.
const char* const kAttentionGradientHelpers = R"(#ifndef KILN_ATTENTION_GRADIENT
#define KILN_ATTENTION_GRADIENT
// acc[i][j] += a[d][a0 + i] * b[d][b0 + j] over d < n, in the order of d (4 values of
// each array read as 16 bytes): a 4x4 block of a product whose operands lie transposed.
template <int AP, int BP>
__device__ __forceinline__ void kiln_att_outer(float (&acc)[4][4], float (*a)[AP], int a0, float (*b)[BP],
                                               int b0, int n) {
  for (int d = 0; d < n; ++d) {
    const kiln_vec4<float> x = *reinterpret_cast<const kiln_vec4<float>*>(&a[d][a0]);
    const kiln_vec4<float> y = *reinterpret_cast<const kiln_vec4<float>*>(&b[d][b0]);
    #pragma unroll
    for (int i = 0; i < 4; ++i)
      #pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(x.v[i], y.v[j], acc[i][j]);
  }
}
// Column j of v into out[r0 + j][c0 .. c0 + 3], 16 bytes each.
template <int P>
__device__ __forceinline__ void kiln_att_store_columns(float (*out)[P], int r0, int c0, const float (&v)[4][4]) {
  #pragma unroll
  for (int j = 0; j < 4; ++j) {
    kiln_vec4<float> column;
    #pragma unroll
    for (int i = 0; i < 4; ++i) column.v[i] = v[i][j];
    *reinterpret_cast<kiln_vec4<float>*>(&out[r0 + j][c0]) = column;
  }
}
// acc[i][4h + e] += w[c][w0 + i] * x[32h + lane + 8e][c] over c < n: 4 rows of a
// gradient, at columns 8 apart across the 8 lanes that share its rows (8 banks).
template <int H, int WP, int XP>
__device__ __forceinline__ void kiln_att_accumulate(float (&acc)[4][H * 4], float (*w)[WP], int w0,
                                                    float (*x)[XP], int lane, int n) {
  for (int c = 0; c < n; ++c) {
    const kiln_vec4<float> wc = *reinterpret_cast<const kiln_vec4<float>*>(&w[c][w0]);
    #pragma unroll
    for (int h = 0; h < H; ++h) {
      #pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float xv = x[h * 32 + lane + 8 * e][c];
        #pragma unroll
        for (int i = 0; i < 4; ++i) acc[i][h * 4 + e] = fmaf(wc.v[i], xv, acc[i][h * 4 + e]);
      }
    }
  }
}
// out[c][r] = m[o + (first + r) * rs + c * cs] for r < n and c < cols: rows of a strided
// matrix transposed into shared memory, 0 at rows from `rows` on and columns from
// `valid` on.
template <int P>
__device__ __forceinline__ void kiln_att_load_transposed(float (*out)[P], const float* __restrict__ m, long long o,
                                                         long long rs, long long cs, int first, int n, int rows,
                                                         int cols, int valid) {
  for (int i = threadIdx.x; i < n * cols; i += blockDim.x) {
    const int r = i / cols, c = i % cols, row = first + r;
    out[c][r] = row < rows && c < valid ? m[o + (long long)row * rs + (long long)c * cs] : 0.f;
  }
}
#endif
)";

// The first kernel: the row values, then dq. Its arrays: q's rows and dO's transposed
// ([d][row]), k's and v's tiles transposed ([d][key], k's d up to DP), and dS as
// [key][row].
const char* const kAttentionGradientRowsKernel = R"(
  static_assert(R == 64 && KT == 32, "16 x 8 threads, each 4 rows by 4 keys of a tile");
  static_assert(STATS == 3, "a row's maximum, 1 / sum and sum of P * dP");
  constexpr int RP = R + 4, KTP = KT + 4;
  KILN_DYNAMIC_SHARED(float, kiln_shared);
  float (*qs)[RP] = reinterpret_cast<float (*)[RP]>(kiln_shared);
  float (*dos)[RP] = reinterpret_cast<float (*)[RP]>(kiln_shared + D * RP);
  float (*ks)[KTP] = reinterpret_cast<float (*)[KTP]>(kiln_shared + (D + DV) * RP);
  float (*vts)[KTP] = reinterpret_cast<float (*)[KTP]>(kiln_shared + (D + DV) * RP + DP * KTP);
  float (*ps)[RP] = reinterpret_cast<float (*)[RP]>(kiln_shared + (D + DV) * RP + (DP + DV) * KTP);
  const int ty = threadIdx.x >> 3, tx = threadIdx.x & 7;
  const float kNegInf = __int_as_float(0xff800000), kLog2e = 1.4426950408889634f;
  constexpr int QBLOCKS = (T + R - 1) / R, TILES = (S + KT - 1) / KT;
  for (long long w = blockIdx.x; w < (long long)BATCH * QBLOCKS; w += gridDim.x) {
    const long long p = w / QBLOCKS;
    const int r0 = (int)(QBLOCKS - 1 - w % QBLOCKS) * R;
$OFFSETS
    __syncthreads();
    kiln_att_load_transposed(qs, q, qo, QRS, QCS, r0, R, T, D, D);
    kiln_att_load_transposed(dos, d_out, go, GRS, GCS, r0, R, T, DV, DV);
    // Over the tiles of keys: each row's maximum and sum (the forward's online softmax)
    // and Σ P∘dP, unnormalized, each thread over its keys.
    float m[4], l[4], pdp[4];
    #pragma unroll
    for (int i = 0; i < 4; ++i) { m[i] = kNegInf; l[i] = 0.f; pdp[i] = 0.f; }
    const int tiles_needed = CAUSAL ? min(TILES, (min(r0 + R, T) - 1) / KT + 1) : TILES;
    for (int kb = 0; kb < TILES; ++kb) {
      if (CAUSAL && kb == tiles_needed) {  // taken where exp(fill - max) is not 0 for some row
        bool needed = false;
        #pragma unroll
        for (int i = 0; i < 4; ++i) needed = needed || (r0 + ty * 4 + i < T && !(FILL - m[i] < -104.f));
        if (!__syncthreads_or(needed)) break;
      }
      __syncthreads();
      kiln_att_load_transposed(ks, k, ko, KRS, KCS, kb * KT, KT, S, D, D);
      kiln_att_load_transposed(vts, v, vo, VRS, VCS, kb * KT, KT, S, DV, DV);
      __syncthreads();
      float s[4][4] = {}, dp[4][4] = {};
      kiln_att_outer(s, qs, ty * 4, ks, tx * 4, D);
      // dP in the order the second pass computes it, so that a row with one key (P 1)
      // has dS exactly 0 there, as the decomposition's.
      kiln_att_outer(dp, dos, ty * 4, vts, tx * 4, DV);
      #pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = r0 + ty * 4 + i;
        float mx = kNegInf;
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int key = kb * KT + tx * 4 + j;
          float x = s[i][j];
          if (row < T && key < S) {
$TRANSFORMS
          } else {
            x = kNegInf;
          }
          s[i][j] = x; mx = fmaxf(mx, x);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
        const float next = fmaxf(m[i], mx), shift = next == kNegInf ? 0.f : next;
        const float alpha = exp2f((m[i] - shift) * kLog2e);
        m[i] = next;
        float sum = 0.f, weighted = 0.f;
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float e = exp2f((s[i][j] - shift) * kLog2e);
          sum += e;
          weighted = fmaf(e, dp[i][j], weighted);
        }
        l[i] = l[i] * alpha + sum;
        pdp[i] = pdp[i] * alpha + weighted;
      }
    }
    // Each row's maximum (0 where it is -inf, as the online softmax shifts by), 1 / sum and
    // Σ P∘dP over the 8 threads that hold it, so that P = exp(x - max) / sum as the
    // decomposition's softmax: NaN where every key took a fill of -inf (0 / 0), 1 / S
    // where every key took the same finite fill (a log-sum-exp of -1e9 or float's lowest
    // would lose the sum's log).
    float shift[4], inv[4], dr[4];
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
      float sum = l[i], weighted = pdp[i];
      #pragma unroll
      for (int lane = 1; lane < 8; lane <<= 1) {
        sum += __shfl_xor_sync(0xffffffffu, sum, lane);
        weighted += __shfl_xor_sync(0xffffffffu, weighted, lane);
      }
      shift[i] = m[i] == kNegInf ? 0.f : m[i];
      inv[i] = 1.f / sum;
      dr[i] = weighted * inv[i];
      const int row = r0 + ty * 4 + i;
      if (tx == 0 && row < T) {
        scratch[(p * T + row) * STATS] = shift[i];
        scratch[(p * T + row) * STATS + 1] = inv[i];
        scratch[(p * T + row) * STATS + 2] = dr[i];
      }
    }
    // dq = dS·k over the keys up to the block's last query (past it f masks every score,
    // whose dS is 0).
    float dq[4][DC * 4];
    #pragma unroll
    for (int i = 0; i < 4; ++i)
      #pragma unroll
      for (int c = 0; c < DC * 4; ++c) dq[i][c] = 0.f;
    for (int kb = 0; kb < tiles_needed; ++kb) {
      __syncthreads();
      kiln_att_load_transposed(ks, k, ko, KRS, KCS, kb * KT, KT, S, DP, D);
      kiln_att_load_transposed(vts, v, vo, VRS, VCS, kb * KT, KT, S, DV, DV);
      __syncthreads();
      float s[4][4] = {}, dp[4][4] = {};
      kiln_att_outer(s, qs, ty * 4, ks, tx * 4, D);
      kiln_att_outer(dp, dos, ty * 4, vts, tx * 4, DV);
      #pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int row = r0 + ty * 4 + i;
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int key = kb * KT + tx * 4 + j;
          float ds = 0.f;
          if (row < T && key < S) {
            float x = s[i][j];
            bool kept = true;
$TRANSFORMS
$KEPT
            const float pr = exp2f((x - shift[i]) * kLog2e) * inv[i];
            ds = kept ? pr * (dp[i][j] - dr[i]) * SCALE : 0.f;
          }
          s[i][j] = ds;
        }
      }
      kiln_att_store_columns(ps, tx * 4, ty * 4, s);
      __syncthreads();
      kiln_att_accumulate<DC>(dq, ps, ty * 4, ks, tx, KT);
    }
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = r0 + ty * 4 + i;
      if (row >= T) continue;
      #pragma unroll
      for (int c = 0; c < DC * 4; ++c) {
        const int col = (c >> 2) * 32 + tx + 8 * (c & 3);
        if (col < D) dq_out[dqo + (long long)row * DQRS + (long long)col * DQCS] = dq[i][c];
      }
    }
  }
)";

// The second kernel: d(kᵀ) and dv of a block of keys. Its arrays: k's and v's blocks
// transposed ([d][key]), a tile of q's and dO's rows transposed ([d][row], d up to DP and
// DVP), P and dS as [row][key], and the tile's row values.
const char* const kAttentionGradientKeysKernel = R"(
  static_assert(KB == 64 && QT == 32, "16 x 8 threads, each 4 keys by 4 rows of a tile");
  constexpr int KBP = KB + 4, QTP = QT + 4;
  KILN_DYNAMIC_SHARED(float, kiln_shared);
  float (*kts)[KBP] = reinterpret_cast<float (*)[KBP]>(kiln_shared);
  float (*vts)[KBP] = reinterpret_cast<float (*)[KBP]>(kiln_shared + D * KBP);
  float (*qs)[QTP] = reinterpret_cast<float (*)[QTP]>(kiln_shared + (D + DV) * KBP);
  float (*dos)[QTP] = reinterpret_cast<float (*)[QTP]>(kiln_shared + (D + DV) * KBP + DP * QTP);
  float (*pst)[KBP] = reinterpret_cast<float (*)[KBP]>(kiln_shared + (D + DV) * KBP + (DP + DVP) * QTP);
  float (*dst)[KBP] = reinterpret_cast<float (*)[KBP]>(kiln_shared + (D + DV + QT) * KBP + (DP + DVP) * QTP);
  float (*stats)[STATS] = reinterpret_cast<float (*)[STATS]>(kiln_shared + (D + DV + 2 * QT) * KBP + (DP + DVP) * QTP);
  const int ty = threadIdx.x >> 3, tx = threadIdx.x & 7;
  const float kLog2e = 1.4426950408889634f;
  constexpr int KBLOCKS = (S + KB - 1) / KB, TILES = (T + QT - 1) / QT;
  for (long long w = blockIdx.x; w < (long long)BATCH * KBLOCKS; w += gridDim.x) {
    const long long p = w / KBLOCKS;
    const int k0 = (int)(w % KBLOCKS) * KB;
$OFFSETS
    __syncthreads();
    kiln_att_load_transposed(kts, k, ko, KRS, KCS, k0, KB, S, D, D);
    kiln_att_load_transposed(vts, v, vo, VRS, VCS, k0, KB, S, DV, DV);
    float dk[4][DC * 4], dv[4][VC * 4];
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
      #pragma unroll
      for (int c = 0; c < DC * 4; ++c) dk[i][c] = 0.f;
      #pragma unroll
      for (int c = 0; c < VC * 4; ++c) dv[i][c] = 0.f;
    }
    // Query tiles before the block's first key: f masks every score, so only their P
    // (exp(fill - max) / sum, NaN in a row whose sum is 0) could reach dv.
    const int masked_tiles = CAUSAL ? min(TILES, k0 / QT) : 0;
    for (int qt = 0; qt < TILES; ++qt) {
      const int r0 = qt * QT;
      __syncthreads();
      kiln_att_load_transposed(qs, q, qo, QRS, QCS, r0, QT, T, DP, D);
      kiln_att_load_transposed(dos, d_out, go, GRS, GCS, r0, QT, T, DVP, DV);
      for (int r = threadIdx.x; r < QT; r += 128) {
        const int row = r0 + r;
        #pragma unroll
        for (int c = 0; c < STATS; ++c) stats[r][c] = row < T ? scratch[(p * T + row) * STATS + c] : 0.f;
      }
      __syncthreads();
      if (qt < masked_tiles) {
        bool needed = false;
        for (int r = threadIdx.x; r < QT; r += 128)
          needed = needed || (r0 + r < T && !(FILL - stats[r][0] < -104.f && stats[r][1] <= 1.f));
        if (!__syncthreads_or(needed)) continue;
      }
      float s[4][4] = {}, dp[4][4] = {};
      kiln_att_outer(s, kts, ty * 4, qs, tx * 4, D);
      kiln_att_outer(dp, vts, ty * 4, dos, tx * 4, DV);
      #pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int key = k0 + ty * 4 + i;
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int row = r0 + tx * 4 + j;
          float pr = 0.f, ds = 0.f;
          if (row < T && key < S) {
            float x = s[i][j];
            bool kept = true;
$TRANSFORMS
$KEPT
            pr = exp2f((x - stats[tx * 4 + j][0]) * kLog2e) * stats[tx * 4 + j][1];
            ds = kept ? pr * (dp[i][j] - stats[tx * 4 + j][2]) * SCALE : 0.f;
          }
          s[i][j] = pr;
          dp[i][j] = ds;
        }
      }
      kiln_att_store_columns(pst, tx * 4, ty * 4, s);
      kiln_att_store_columns(dst, tx * 4, ty * 4, dp);
      __syncthreads();
      kiln_att_accumulate<VC>(dv, pst, ty * 4, dos, tx, QT);
      kiln_att_accumulate<DC>(dk, dst, ty * 4, qs, tx, QT);
    }
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int key = k0 + ty * 4 + i;
      if (key >= S) continue;
      #pragma unroll
      for (int c = 0; c < VC * 4; ++c) {
        const int col = (c >> 2) * 32 + tx + 8 * (c & 3);
        if (col < DV) dv_out[dvo + (long long)key * DVRS + (long long)col * DVCS] = dv[i][c];
      }
      #pragma unroll
      for (int c = 0; c < DC * 4; ++c) {
        const int col = (c >> 2) * 32 + tx + 8 * (c & 3);
        if (col < D) dk_out[dko + (long long)col * DKRS + (long long)key * DKCS] = dk[i][c];
      }
    }
  }
)";

}  // namespace kiln::codegen::cuda
