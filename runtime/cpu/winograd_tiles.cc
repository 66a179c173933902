#include "runtime/cpu/winograd_tiles.h"

#include <immintrin.h>

#include "runtime/cpu/score_rows.h"

namespace kiln::runtime::cpu {
namespace {

// Tile t of the batch: its image, and the first row and column of its m x m outputs.
struct Tile {
  int64_t image, row, col;
};
Tile tile_of(const WinogradShape& s, int64_t t) {
  const int64_t plane = s.tiles_h * s.tiles_w;
  return {t / plane, s.m * (t % plane / s.tiles_w), s.m * (t % s.tiles_w)};
}

__attribute__((target("avx512f"))) inline __m512 zeros() { return _mm512_setzero_ps(); }

// One dim of each transform, 16 channels at a time: r = Bᵀ d (input) and o = Aᵀ p
// (output), with Lavin and Gray's matrices, d and p read `stride` vectors apart.
template <int m>
struct Transform;

// Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], Aᵀ = [1 1 1 0; 0 1 -1 -1].
template <>
struct Transform<2> {
  __attribute__((target("avx512f"))) static void input(const __m512* d, int stride, __m512* r) {
    const __m512 d0 = d[0], d1 = d[stride], d2 = d[2 * stride], d3 = d[3 * stride];
    r[0] = _mm512_sub_ps(d0, d2);
    r[1] = _mm512_add_ps(d1, d2);
    r[2] = _mm512_sub_ps(d2, d1);
    r[3] = _mm512_sub_ps(d1, d3);
  }
  __attribute__((target("avx512f"))) static void output(const __m512* p, int stride, __m512* o) {
    const __m512 p1 = p[stride], p2 = p[2 * stride];
    o[0] = _mm512_add_ps(_mm512_add_ps(p[0], p1), p2);
    o[1] = _mm512_sub_ps(_mm512_sub_ps(p1, p2), p[3 * stride]);
  }
};

// Bᵀ = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0;
// 0 4 0 -5 0 1], Aᵀ = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1], with
// their rows' common terms shared.
template <>
struct Transform<4> {
  __attribute__((target("avx512f"))) static void input(const __m512* d, int stride, __m512* r) {
    const __m512 d0 = d[0], d1 = d[stride], d2 = d[2 * stride], d3 = d[3 * stride], d4 = d[4 * stride],
                 d5 = d[5 * stride];
    const __m512 four = _mm512_set1_ps(4), five = _mm512_set1_ps(5), two = _mm512_set1_ps(2);
    const __m512 a = _mm512_fnmadd_ps(four, d2, d4), b = _mm512_fnmadd_ps(four, d1, d3);
    const __m512 c = _mm512_sub_ps(d4, d2), e = _mm512_mul_ps(two, _mm512_sub_ps(d3, d1));
    r[0] = _mm512_fmadd_ps(four, d0, _mm512_fnmadd_ps(five, d2, d4));
    r[1] = _mm512_add_ps(a, b);
    r[2] = _mm512_sub_ps(a, b);
    r[3] = _mm512_add_ps(c, e);
    r[4] = _mm512_sub_ps(c, e);
    r[5] = _mm512_fmadd_ps(four, d1, _mm512_fnmadd_ps(five, d3, d5));
  }
  __attribute__((target("avx512f"))) static void output(const __m512* p, int stride, __m512* o) {
    const __m512 p1 = p[stride], p2 = p[2 * stride], p3 = p[3 * stride], p4 = p[4 * stride];
    const __m512 a = _mm512_add_ps(p1, p2), b = _mm512_sub_ps(p1, p2), c = _mm512_add_ps(p3, p4),
                 e = _mm512_sub_ps(p3, p4);
    o[0] = _mm512_add_ps(_mm512_add_ps(p[0], a), c);
    o[1] = _mm512_fmadd_ps(_mm512_set1_ps(2), e, b);
    o[2] = _mm512_fmadd_ps(_mm512_set1_ps(4), c, a);
    o[3] = _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(8), e, b), p[5 * stride]);
  }
};

// Whether in_register() applies a kind: one without exponentials (a kind added to the
// format must be placed here: the switch has no default).
bool in_register_kind(format::PostOpKind kind) {
  switch (kind) {
    case format::PostOpKind::Bias:
    case format::PostOpKind::ChannelAdd:
    case format::PostOpKind::ChannelSub:
    case format::PostOpKind::ChannelMul:
    case format::PostOpKind::Add:
    case format::PostOpKind::Relu:
    case format::PostOpKind::Clip: return true;
    case format::PostOpKind::Sigmoid:
    case format::PostOpKind::Tanh:
    case format::PostOpKind::Silu:
    case format::PostOpKind::HardSwish:
    case format::PostOpKind::GeluErf:
    case format::PostOpKind::GeluTanh: return false;
  }
  return false;
}

// One post-op without exponentials, as apply_post_ops and oneDNN apply it, on 16 outputs
// of channels k.. at `at` in y (where an added tensor lies before the store).
__attribute__((target("avx512f"))) inline __m512 in_register(const WinogradPostOp& op, const float* operand, __m512 v,
                                                             int64_t k, const float* at) {
  switch (op.kind) {
    case format::PostOpKind::Bias:
    case format::PostOpKind::ChannelAdd: return _mm512_add_ps(v, _mm512_loadu_ps(operand + k));
    case format::PostOpKind::ChannelSub: return _mm512_sub_ps(v, _mm512_loadu_ps(operand + k));
    case format::PostOpKind::ChannelMul: return _mm512_mul_ps(v, _mm512_loadu_ps(operand + k));
    case format::PostOpKind::Add: return _mm512_add_ps(v, _mm512_loadu_ps(at));
    // max and min return their second operand where either is NaN: NaN stays NaN.
    case format::PostOpKind::Relu: return _mm512_max_ps(zeros(), v);
    case format::PostOpKind::Clip: return _mm512_min_ps(_mm512_set1_ps(op.hi), _mm512_max_ps(_mm512_set1_ps(op.lo), v));
    default: return v;  // in_registers() sends the others through activate(), below
  }
}

// The post-ops, in order, on 16 outputs: a chain for which in_registers() holds.
__attribute__((target("avx512f"))) inline __m512 post_ops(const std::vector<WinogradPostOp>& ops,
                                                          const float* const* operands, __m512 v, int64_t k,
                                                          const float* at) {
  for (size_t i = 0; i < ops.size(); ++i) v = in_register(ops[i], operands[i], v, k, at);
  return v;
}

// Whether post_ops() applies the whole chain: it has no activation with exponentials
bool in_registers(const std::vector<WinogradPostOp>& ops) {
  for (const WinogradPostOp& op : ops)
    if (!in_register_kind(op.kind)) return false;
  return true;
}

// e^-x, in place: score_rows' exp, within 2 units in the last place.
void exp_of_negated(float* t, int64_t n) {
  for (int64_t i = 0; i < n; ++i) t[i] = -t[i];
  exp_in_place(t, n);
}

// The post-ops, in order, on the k results of one output pixel (`v`, a scratch row), the
// added tensor read from `at` in y, then stored at `at`: a chain with sigmoid, tanh, SiLU,
// hard swish or tanh GELU, whose exponentials take vectors of their own. `t` is a scratch
// row of k floats.
__attribute__((target("avx512f"))) void activate(const std::vector<WinogradPostOp>& ops, const float* const* operands,
                                                 float* v, float* t, float* at, int64_t k) {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (in_register_kind(ops[i].kind)) {  // k is a multiple of 16
      for (int64_t c = 0; c < k; c += 16)
        _mm512_storeu_ps(v + c, in_register(ops[i], operands[i], _mm512_loadu_ps(v + c), c, at + c));
      continue;
    }
    switch (ops[i].kind) {
      case format::PostOpKind::Sigmoid:
      case format::PostOpKind::Silu:
        for (int64_t c = 0; c < k; ++c) t[c] = v[c];
        exp_of_negated(t, k);
        if (ops[i].kind == format::PostOpKind::Sigmoid)
          for (int64_t c = 0; c < k; ++c) v[c] = 1.0f / (1.0f + t[c]);
        else
          for (int64_t c = 0; c < k; ++c) v[c] = v[c] / (1.0f + t[c]);
        break;
      case format::PostOpKind::Tanh:
      case format::PostOpKind::GeluTanh: {
        // tanh(u) = 2 / (1 + e^-2u) - 1: -1 where e^-2u overflows, 1 where it underflows.
        const bool gelu = ops[i].kind == format::PostOpKind::GeluTanh;
        for (int64_t c = 0; c < k; ++c)
          t[c] = gelu ? 2.0f * 0.7978845608f * (v[c] + 0.044715f * v[c] * v[c] * v[c]) : 2.0f * v[c];
        exp_of_negated(t, k);
        if (gelu)
          for (int64_t c = 0; c < k; ++c) v[c] = v[c] / (1.0f + t[c]);  // 0.5 v (1 + tanh(u))
        else
          for (int64_t c = 0; c < k; ++c) v[c] = 2.0f / (1.0f + t[c]) - 1.0f;
        break;
      }
      case format::PostOpKind::HardSwish:
        for (int64_t c = 0; c < k; ++c) {
          const float gate = v[c] / 6.0f + 0.5f;
          v[c] *= gate < 0 ? 0.0f : gate > 1 ? 1.0f : gate;
        }
        break;
      case format::PostOpKind::GeluErf: break;  // WinogradConv::plan refuses it (no erf here)
      default: break;                           // in_register_kind(), above
    }
  }
  for (int64_t c = 0; c < k; ++c) at[c] = v[c];
}

template <int m>
__attribute__((target("avx512f"))) void input_tiles(const WinogradShape& s, const float* x, float* v, int64_t first,
                                                    int64_t begin, int64_t end) {
  constexpr int n = m + 2;
  const int64_t matrix_stride = s.rows * s.c;
  for (int64_t t = begin; t < end; ++t) {
    const Tile tile = tile_of(s, t);
    const int64_t y0 = tile.row - s.pad_top, x0 = tile.col - s.pad_left;
    const bool inside = y0 >= 0 && x0 >= 0 && y0 + n <= s.h && x0 + n <= s.w;
    const float* image = x + tile.image * s.h * s.w * s.c;
    for (int64_t c = 0; c < s.c; c += 16) {
      __m512 d[n][n];
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
          const int64_t yy = y0 + i, xx = x0 + j;
          d[i][j] = inside || (yy >= 0 && yy < s.h && xx >= 0 && xx < s.w)
                        ? _mm512_loadu_ps(image + (yy * s.w + xx) * s.c + c)
                        : zeros();
        }
      __m512 e[n][n];  // Bᵀ d, a column at a time
      for (int j = 0; j < n; ++j) {
        __m512 column[n];
        Transform<m>::input(&d[0][j], n, column);
        for (int i = 0; i < n; ++i) e[i][j] = column[i];
      }
      float* out = v + (t - first) * s.c + c;
      for (int i = 0; i < n; ++i) {
        __m512 row[n];  // (Bᵀ d) B
        Transform<m>::input(e[i], 1, row);
        for (int j = 0; j < n; ++j) _mm512_storeu_ps(out + (i * n + j) * matrix_stride, row[j]);
      }
    }
  }
}

template <int m>
__attribute__((target("avx512f"))) void output_tiles(const WinogradShape& s, const float* p, float* y,
                                                     const std::vector<WinogradPostOp>& ops,
                                                     const float* const* operands, int64_t first, int64_t begin,
                                                     int64_t end) {
  constexpr int n = m + 2;
  const int64_t matrix_stride = s.rows * s.k;
  // A chain with exponentials goes through rows of the tile's results (then a row of
  // scratch for activate()), a pixel at a time.
  const bool registers = in_registers(ops);
  std::vector<float> rows(registers ? 0 : static_cast<size_t>((m * m + 1) * s.k));
  for (int64_t t = begin; t < end; ++t) {
    const Tile tile = tile_of(s, t);
    float* image = y + tile.image * s.oh * s.ow * s.k;
    for (int64_t k = 0; k < s.k; k += 16) {
      const float* in = p + (t - first) * s.k + k;
      __m512 r[m][n];  // Aᵀ P, a column at a time
      for (int j = 0; j < n; ++j) {
        __m512 column[n], out[m];
        for (int i = 0; i < n; ++i) column[i] = _mm512_loadu_ps(in + (i * n + j) * matrix_stride);
        Transform<m>::output(column, 1, out);
        for (int i = 0; i < m; ++i) r[i][j] = out[i];
      }
      for (int i = 0; i < m && tile.row + i < s.oh; ++i) {
        __m512 out[m];  // (Aᵀ P) A
        Transform<m>::output(r[i], 1, out);
        for (int j = 0; j < m && tile.col + j < s.ow; ++j) {
          float* at = image + ((tile.row + i) * s.ow + tile.col + j) * s.k + k;
          if (registers) _mm512_storeu_ps(at, post_ops(ops, operands, out[j], k, at));
          else _mm512_storeu_ps(rows.data() + (i * m + j) * s.k + k, out[j]);
        }
      }
    }
    if (registers) continue;
    for (int i = 0; i < m && tile.row + i < s.oh; ++i)
      for (int j = 0; j < m && tile.col + j < s.ow; ++j)
        activate(ops, operands, rows.data() + (i * m + j) * s.k, rows.data() + m * m * s.k,
                 image + ((tile.row + i) * s.ow + tile.col + j) * s.k, s.k);
  }
}

}  // namespace

void winograd_input_tiles(const WinogradShape& s, const float* x, float* v, int64_t first, int64_t begin, int64_t end) {
  if (s.m == 4) input_tiles<4>(s, x, v, first, begin, end);
  else input_tiles<2>(s, x, v, first, begin, end);
}

void winograd_output_tiles(const WinogradShape& s, const float* p, float* y, const std::vector<WinogradPostOp>& ops,
                           const float* const* operands, int64_t first, int64_t begin, int64_t end) {
  if (s.m == 4) output_tiles<4>(s, p, y, ops, operands, first, begin, end);
  else output_tiles<2>(s, p, y, ops, operands, first, begin, end);
}

}  // namespace kiln::runtime::cpu
