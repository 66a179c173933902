#include "runtime/cpu/conv_gemm.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace kiln::runtime::cpu {
namespace {

// The geometry over exactly three spatial dims (missing leading ones of extent 1).
struct Geometry {
  int64_t in[3], out[3], kernel[3], stride[3], dilation[3], lo[3];
  int64_t in_size = 1, out_size = 1, taps = 1;

  explicit Geometry(const format::Conv& c) {
    const int64_t k = static_cast<int64_t>(c.x()->size()) - 2, skip = 3 - k;
    for (int64_t d = 0; d < 3; ++d) {
      const bool real = d >= skip;
      const uint32_t i = static_cast<uint32_t>(d - skip);
      in[d] = real ? c.x()->Get(2 + i) : 1;
      out[d] = real ? c.y()->Get(2 + i) : 1;
      kernel[d] = real ? c.w()->Get(2 + i) : 1;
      stride[d] = real ? c.strides()->Get(i) : 1;
      dilation[d] = real ? c.dilations()->Get(i) : 1;
      lo[d] = real ? c.pads_lo()->Get(i) : 0;
      in_size *= in[d];
      out_size *= out[d];
      taps *= kernel[d];
    }
  }

  // cols[(c·taps + t)·out_size + e] = image[c][position of tap t at e], 0 in the padding
  // (to_columns), or the reverse, adding each column entry into its place (from_columns).
  template <bool kToColumns>
  void walk(float* image, float* cols, int64_t channels) const {
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t t0 = t / (kernel[1] * kernel[2]), t1 = t / kernel[2] % kernel[1], t2 = t % kernel[2];
        float* row = cols + (c * taps + t) * out_size;
        float* plane = image + c * in_size;
        for (int64_t e0 = 0; e0 < out[0]; ++e0)
          for (int64_t e1 = 0; e1 < out[1]; ++e1)
            for (int64_t e2 = 0; e2 < out[2]; ++e2) {
              const int64_t p0 = e0 * stride[0] - lo[0] + t0 * dilation[0],
                            p1 = e1 * stride[1] - lo[1] + t1 * dilation[1],
                            p2 = e2 * stride[2] - lo[2] + t2 * dilation[2];
              const bool inside = p0 >= 0 && p0 < in[0] && p1 >= 0 && p1 < in[1] && p2 >= 0 && p2 < in[2];
              float& entry = row[(e0 * out[1] + e1) * out[2] + e2];
              if constexpr (kToColumns) entry = inside ? plane[(p0 * in[1] + p1) * in[2] + p2] : 0.0f;
              else if (inside) plane[(p0 * in[1] + p1) * in[2] + p2] += entry;
            }
      }
  }
};

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, const float* b, float beta, float* c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(ta ? m : k), b,
              static_cast<int>(tb ? k : n), beta, c, static_cast<int>(n));
}

}  // namespace

Status run_conv_gemm(const format::Conv& conv, uint8_t* const* args) {
  const Geometry g(conv);
  const int64_t batch = conv.x()->Get(0), channels = conv.x()->Get(1), outs = conv.w()->Get(0), groups = conv.groups(),
                group_in = channels / groups, group_out = outs / groups,
                rows = group_in * g.taps;  // of a group's columns
  thread_local std::vector<float> cols;
  cols.resize(static_cast<size_t>(rows * g.out_size));
  const bool forward = conv.kind() == format::ConvKind::Forward, data = conv.kind() == format::ConvKind::BackwardData;
  float* x = reinterpret_cast<float*>(args[forward || !data ? 0 : 2]);
  float* w = reinterpret_cast<float*>(args[conv.kind() == format::ConvKind::BackwardWeights ? 2 : 1]);
  float* y = reinterpret_cast<float*>(args[forward ? 2 : data ? 0 : 1]);
  const int64_t x_group = group_in * g.in_size, y_group = group_out * g.out_size, w_group = group_out * rows;
  if (data) std::fill(x, x + batch * channels * g.in_size, 0.0f);
  if (conv.kind() == format::ConvKind::BackwardWeights) std::fill(w, w + outs * group_in * g.taps, 0.0f);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t k = 0; k < groups; ++k) {
      float* image = x + (n * groups + k) * x_group;
      float* result = y + (n * groups + k) * y_group;
      float* weights = w + k * w_group;
      if (data) {
        gemm(true, false, rows, g.out_size, group_out, weights, result, 0.0f, cols.data());
        g.walk<false>(image, cols.data(), group_in);
        continue;
      }
      g.walk<true>(image, cols.data(), group_in);
      if (forward) gemm(false, false, group_out, g.out_size, rows, weights, cols.data(), 0.0f, result);
      else gemm(false, true, group_out, rows, g.out_size, result, cols.data(), 1.0f, weights);
    }
  return Status::Ok();
}

}  // namespace kiln::runtime::cpu
