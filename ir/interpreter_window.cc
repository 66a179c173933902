// The interpreter's windowed ops, computed directly (not through their decompositions, which
// the code generators run), so that each decomposition is checked against an independent sum.
#include <cmath>
#include <limits>

#include "ir/interpreter.h"
#include "ir/window.h"

namespace kiln::ir {
namespace {

// A window over exactly three spatial dims: missing leading dims have extent 1, so one
// loop nest serves 1, 2 and 3 spatial dims.
struct Window3 {
  int64_t input[3], window[3], stride[3], dilation[3], lo[3], hi[3], output[3];

  explicit Window3(const Window& w) {
    const int64_t skip = 3 - w.spatial_rank();
    for (int64_t d = 0; d < 3; ++d) {
      const bool real = d >= skip;
      const int64_t i = d - skip;
      input[d] = real ? w.input[i] : 1;
      window[d] = real ? w.window[i] : 1;
      stride[d] = real ? w.strides[i] : 1;
      dilation[d] = real ? w.dilations[i] : 1;
      lo[d] = real ? w.pad_lo[i] : 0;
      hi[d] = real ? w.pad_hi[i] : 0;
      output[d] = real ? w.output[i] : 1;
    }
  }
  int64_t input_size() const { return input[0] * input[1] * input[2]; }
  int64_t output_size() const { return output[0] * output[1] * output[2]; }
  int64_t window_size() const { return window[0] * window[1] * window[2]; }

  // Calls f(output position, window tap, input position or -1 where the tap is padding).
  template <class F>
  void for_each_tap(F f) const {
    int64_t e[3], t[3];
    for (e[0] = 0; e[0] < output[0]; ++e[0])
      for (e[1] = 0; e[1] < output[1]; ++e[1])
        for (e[2] = 0; e[2] < output[2]; ++e[2]) {
          const int64_t out = (e[0] * output[1] + e[1]) * output[2] + e[2];
          for (t[0] = 0; t[0] < window[0]; ++t[0])
            for (t[1] = 0; t[1] < window[1]; ++t[1])
              for (t[2] = 0; t[2] < window[2]; ++t[2]) {
                int64_t in = 0;
                for (int d = 0; d < 3 && in >= 0; ++d) {
                  const int64_t p = e[d] * stride[d] - lo[d] + t[d] * dilation[d];
                  in = (p < 0 || p >= input[d]) ? -1 : in * input[d] + p;
                }
                f(out, (t[0] * window[1] + t[1]) * window[2] + t[2], in);
              }
        }
  }
};

// conv and its two gradients share one loop over (image, output channel, input channel of
// its group, output position, tap): y += x·w, dx += dy·w, dw += dy·x.
Tensor conv_family(Op op, const Tensor& a, const Tensor& b, const Attrs& attrs, const TensorType& rt) {
  const bool input_grad = op == Op::ConvInputGrad, weight_grad = op == Op::ConvWeightGrad;
  const Shape x_shape = input_grad ? Shape(attrs.get_ints("shape")) : a.type.shape;
  const Shape w_shape = weight_grad ? Shape(attrs.get_ints("shape")) : b.type.shape;
  const Window3 g(*window_of(Op::Conv, x_shape, Shape(w_shape.begin() + 2, w_shape.end()), attrs));
  const int64_t batch = x_shape[0], channels = x_shape[1], outs = w_shape[0];
  const int64_t groups = attrs.get_int("groups", 1), group_in = channels / groups, group_out = outs / groups;
  const double* x = input_grad ? nullptr : a.floats.data();
  const double* w = weight_grad ? nullptr : b.floats.data();
  const double* dy = input_grad ? a.floats.data() : b.floats.data();  // conv: unused
  std::vector<double> out(static_cast<size_t>(rt.num_elements()), 0.0);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t o = 0; o < outs; ++o) {
      const size_t y_at = static_cast<size_t>((n * outs + o) * g.output_size());
      const int64_t group = o / group_out;
      for (int64_t c = 0; c < group_in; ++c) {
        const size_t x_at = static_cast<size_t>((n * channels + group * group_in + c) * g.input_size());
        const size_t w_at = static_cast<size_t>((o * group_in + c) * g.window_size());
        g.for_each_tap([&](int64_t e, int64_t t, int64_t i) {
          if (i < 0) return;
          if (op == Op::Conv) out[y_at + e] += x[x_at + i] * w[w_at + t];
          else if (input_grad) out[x_at + i] += dy[y_at + e] * w[w_at + t];
          else out[w_at + t] += dy[y_at + e] * x[x_at + i];
        });
      }
    }
  return Tensor::from_doubles(rt, out);
}

// max_pool of an integer tensor, in its own type (padding never wins).
Tensor int_max_pool(const Tensor& x, const Window3& g, const TensorType& rt) {
  const int64_t planes = x.type.shape[0] * x.type.shape[1];
  std::vector<int64_t> y(static_cast<size_t>(rt.num_elements()), int_min(rt.dtype));
  for (int64_t p = 0; p < planes; ++p) {
    const int64_t* image = &x.ints[static_cast<size_t>(p * g.input_size())];
    int64_t* out = &y[static_cast<size_t>(p * g.output_size())];
    g.for_each_tap([&](int64_t e, int64_t, int64_t i) {
      if (i >= 0) out[e] = std::max(out[e], image[i]);
    });
  }
  return Tensor::from_ints(rt, y);
}

Tensor pool(Op op, const Tensor& x, const Attrs& attrs, const TensorType& rt) {
  const Window3 g(*window_of(op, x.type.shape, {}, attrs));
  if (!x.holds_floats()) return int_max_pool(x, g, rt);  // only max_pool takes integers
  const bool include_pad = attrs.get_bool("count_include_pad", false);
  const int64_t planes = x.type.shape[0] * x.type.shape[1];
  std::vector<double> y(static_cast<size_t>(rt.num_elements()));
  // Per output position: the divisor of avg_pool, or the running max.
  std::vector<double> count(static_cast<size_t>(g.output_size()));
  for (int64_t p = 0; p < planes; ++p) {
    const double* image = &x.floats[static_cast<size_t>(p * g.input_size())];
    double* out = &y[static_cast<size_t>(p * g.output_size())];
    const double start = op == Op::MaxPool ? -std::numeric_limits<double>::infinity() : 0.0;
    std::fill(out, out + g.output_size(), start);
    std::fill(count.begin(), count.end(), 0.0);
    g.for_each_tap([&](int64_t e, int64_t, int64_t i) {
      if (i < 0) return;
      if (op == Op::MaxPool) {
        if (image[i] > out[e] || std::isnan(image[i])) out[e] = image[i];
      } else {
        out[e] += image[i];
        count[e] += 1;
      }
    });
    if (op == Op::MaxPool) continue;
    if (include_pad) {  // padding counts, but not the part of a ceil_mode window past it
      int64_t e[3];
      for (e[0] = 0; e[0] < g.output[0]; ++e[0])
        for (e[1] = 0; e[1] < g.output[1]; ++e[1])
          for (e[2] = 0; e[2] < g.output[2]; ++e[2]) {
            double size = 1;
            for (int d = 0; d < 3; ++d) {
              const int64_t begin = e[d] * g.stride[d] - g.lo[d];
              size *= static_cast<double>(std::min(begin + g.window[d], g.input[d] + g.hi[d]) - begin);
            }
            count[static_cast<size_t>((e[0] * g.output[1] + e[1]) * g.output[2] + e[2])] = size;
          }
    }
    for (int64_t e = 0; e < g.output_size(); ++e) out[e] /= count[static_cast<size_t>(e)];
  }
  return Tensor::from_doubles(rt, y);
}

Tensor pad(const Tensor& x, const Attrs& attrs, const TensorType& rt) {
  const Padding p = *padding_of(x.type.shape, attrs);
  const double value = attrs.get_float("value", 0.0);
  const std::vector<int64_t> in_strides = row_major_strides(x.type.shape);
  const int64_t rank = rt.rank(), count = rt.num_elements();
  std::vector<double> y(static_cast<size_t>(count), value);
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  for (int64_t k = 0; k < count; ++k) {
    int64_t src = 0;
    for (int64_t d = 0; d < rank && src >= 0; ++d) {
      const int64_t i = idx[d] - p.lo[d];
      src = (i < 0 || i >= x.type.shape[d]) ? -1 : src + i * in_strides[d];
    }
    if (src >= 0) y[static_cast<size_t>(k)] = x.get(src);
    for (int64_t d = rank; d-- > 0;) {
      if (++idx[d] < rt.shape[d]) break;
      idx[d] = 0;
    }
  }
  return x.holds_floats() ? Tensor::from_doubles(rt, y)
                          : Tensor::from_ints(rt, std::vector<int64_t>(y.begin(), y.end()));
}

}  // namespace

bool interpreted_directly(Op op) { return op == Op::MaxPool || op == Op::AvgPool || op == Op::Pad; }

Tensor evaluate_window_op(Op op, std::span<const Tensor* const> in, const Attrs& attrs, const TensorType& rt) {
  if (op == Op::Conv || op == Op::ConvInputGrad || op == Op::ConvWeightGrad)
    return conv_family(op, *in[0], *in[1], attrs, rt);
  if (op == Op::Pad) return pad(*in[0], attrs, rt);
  return pool(op, *in[0], attrs, rt);
}

}  // namespace kiln::ir
