#include "compiler/nn.h"

#include <fmt/format.h>

namespace kiln::nn {

Linear::Linear(Model& model, const std::string& name, int64_t in_features, int64_t out_features, bool has_bias,
               Init init)
    : Linear(model, name, in_features, out_features, LinearOptions{has_bias, init, WeightLayout::InOut}) {}

Linear::Linear(Model& model, const std::string& name, int64_t in_features, int64_t out_features,
               const LinearOptions& options)
    : layout_(options.layout) {
  Init init = options.init;
  init.out_in = options.layout == WeightLayout::OutIn;
  ir::Shape shape = init.out_in ? ir::Shape{out_features, in_features} : ir::Shape{in_features, out_features};
  weight = model.param(name + ".weight", shape, init);
  if (options.bias) bias = model.param(name + ".bias", {out_features}, Init::zeros());
}

Tensor Linear::operator()(Tensor x) {
  Tensor w = layout_ == WeightLayout::OutIn ? transpose(weight, {1, 0}) : weight;
  return bias.valid() ? linear(x, w, bias) : matmul(x, w);
}

LayerNorm::LayerNorm(Model& model, const std::string& name, ir::Shape normalized_shape, double eps)
    : scale(model.param(name + ".scale", normalized_shape, Init::ones())),
      bias(model.param(name + ".bias", normalized_shape, Init::zeros())),
      normalized_rank_(static_cast<int64_t>(normalized_shape.size())),
      eps_(eps) {}

Tensor LayerNorm::operator()(Tensor x) { return layer_norm(x, scale, bias, -normalized_rank_, eps_); }

RMSNorm::RMSNorm(Model& model, const std::string& name, int64_t width, double eps)
    : weight(model.param(name + ".weight", {width}, Init::ones())), eps_(eps) {}

Tensor RMSNorm::operator()(Tensor x) { return x * rsqrt(mean(x * x, {-1}, /*keepdims=*/true) + eps_) * weight; }

Tensor activate(Activation activation, Tensor x) {
  switch (activation) {
    case Activation::Relu: return relu(x);
    case Activation::Gelu: return gelu(x);
    case Activation::GeluTanh: return gelu(x, true);
    case Activation::Tanh: return tanh(x);
    case Activation::Sigmoid: return sigmoid(x);
    case Activation::Silu: return silu(x);
    case Activation::None: return x;
  }
  return x;
}

Sequential& Sequential::add(std::unique_ptr<Module> module) {
  modules_.push_back(std::move(module));
  return *this;
}

Tensor Sequential::operator()(Tensor x) {
  for (auto& m : modules_) x = (*m)(x);
  return x;
}

Sequential mlp(Model& model, const std::string& name, const std::vector<int64_t>& sizes, Activation activation) {
  Sequential seq;
  for (size_t i = 1; i < sizes.size(); ++i) {
    seq.emplace<Linear>(model, fmt::format("{}.{}", name, i - 1), sizes[i - 1], sizes[i]);
    if (i + 1 < sizes.size() && activation != Activation::None) seq.emplace<ActivationLayer>(activation);
  }
  return seq;
}

}  // namespace kiln::nn
