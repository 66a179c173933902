// The convolutional layers of compiler/nn.h.
#include <cmath>
#include <numeric>

#include "compiler/nn.h"

namespace kiln::nn {
namespace {

// Each of two values given for the two spatial dims, as begin pads then end pads.
std::vector<int64_t> both_sides(const std::vector<int64_t>& padding) {
  std::vector<int64_t> pads = padding;
  pads.insert(pads.end(), padding.begin(), padding.end());
  return pads;
}

PoolOptions pool_options(const std::vector<int64_t>& kernel_size, const Pool2dOptions& o, bool max) {
  PoolOptions p;
  p.strides = o.stride.empty() ? kernel_size : o.stride;
  p.pads = both_sides(o.padding);
  if (max) p.dilations = o.dilation;
  p.ceil_mode = o.ceil_mode;
  p.count_include_pad = !max && o.count_include_pad;
  return p;
}

}  // namespace

Conv2d::Conv2d(Model& model, const std::string& name, int64_t in_channels, int64_t out_channels,
               std::vector<int64_t> kernel_size, const Conv2dOptions& options)
    : conv_{options.stride, both_sides(options.padding), options.dilation, options.groups} {
  if (kernel_size.size() == 1) kernel_size.push_back(kernel_size[0]);
  const int64_t groups = options.groups > 0 ? options.groups : 1;
  ir::Shape shape{out_channels, in_channels / groups};
  shape.insert(shape.end(), kernel_size.begin(), kernel_size.end());
  const int64_t fan_in = std::accumulate(shape.begin() + 1, shape.end(), int64_t{1}, std::multiplies<>());
  const double bound = std::sqrt(6.0 / static_cast<double>(std::max<int64_t>(fan_in, 1)));
  weight = model.param(name + ".weight", shape, Init::uniform(-bound, bound));
  if (options.bias) bias = model.param(name + ".bias", {out_channels}, Init::zeros());
}

Tensor Conv2d::operator()(Tensor x) {
  Tensor y = conv(x, weight, conv_);
  if (!bias.valid() || !y.valid()) return y;
  return y + broadcast(bias, y.shape(), {1});
}

BatchNorm2d::BatchNorm2d(Model& model, const std::string& name, int64_t channels, const BatchNormOptions& options)
    : scale(model.param(name + ".weight", {channels}, Init::ones())),
      bias(model.param(name + ".bias", {channels}, Init::zeros())),
      model_(&model),
      options_(options) {
  if (options.training) {
    running_mean = model.state(name + ".running_mean", {channels}, Init::zeros());
    running_var = model.state(name + ".running_var", {channels}, Init::ones());
  } else {
    running_mean = model.param(name + ".running_mean", {channels}, Init::zeros());
    running_var = model.param(name + ".running_var", {channels}, Init::ones());
  }
}

Tensor BatchNorm2d::operator()(Tensor x) {
  if (!options_.training) return batch_norm(x, scale, bias, running_mean, running_var, options_.eps);
  if (!x.valid()) return x;
  std::vector<int64_t> axes{0};
  for (int64_t d = 2; d < x.rank(); ++d) axes.push_back(d);
  const ir::Shape shape = x.shape();
  const int64_t count =
      shape.size() > 2 ? std::accumulate(shape.begin() + 2, shape.end(), shape[0], std::multiplies<>()) : shape[0];
  Tensor mean = reduce_sum(x, axes) / static_cast<double>(count);
  Tensor centered = x - broadcast(mean, shape, {1});
  Tensor var = reduce_sum(centered * centered, axes) / static_cast<double>(count);
  Tensor factor = rsqrt(var + options_.eps) * scale;
  Tensor y = centered * broadcast(factor, shape, {1}) + broadcast(bias, shape, {1});
  const double m = options_.momentum;
  const double unbiased = count > 1 ? static_cast<double>(count) / static_cast<double>(count - 1) : 1.0;
  model_->update(running_mean, running_mean * (1 - m) + mean * m);
  model_->update(running_var, running_var * (1 - m) + var * (m * unbiased));
  return y;
}

MaxPool2d::MaxPool2d(std::vector<int64_t> kernel_size, const Pool2dOptions& options)
    : window_(kernel_size), pool_(pool_options(kernel_size, options, true)) {}
Tensor MaxPool2d::operator()(Tensor x) { return max_pool(x, window_, pool_); }

AvgPool2d::AvgPool2d(std::vector<int64_t> kernel_size, const Pool2dOptions& options)
    : window_(kernel_size), pool_(pool_options(kernel_size, options, false)) {}
Tensor AvgPool2d::operator()(Tensor x) { return avg_pool(x, window_, pool_); }

Tensor Flatten::operator()(Tensor x) {
  if (!x.valid() || x.rank() < 1) return x;
  return reshape(x, {x.shape()[0], x.shape()[0] ? x.type().num_elements() / x.shape()[0] : 0});
}

}  // namespace kiln::nn
