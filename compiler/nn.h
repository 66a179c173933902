// nn: building blocks for models written with the model-definition API.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/model.h"

namespace kiln::nn {

/// A layer: a function of one tensor, with its params declared in a Model.
class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor operator()(Tensor x) = 0;
};

/// How a Linear layer stores its weight.
enum class WeightLayout {
  InOut,  ///< [in, out], kiln's: y = x @ w + b
  OutIn,  ///< [out, in], PyTorch's nn.Linear: y = x @ wᵀ + b, so its state_dict loads as it is
};

/// Options of a Linear layer.
struct LinearOptions {
  bool bias = true;
  Init init = Init::kaiming_uniform();
  WeightLayout layout = WeightLayout::InOut;
};

/// y = x @ w + b, w: [in, out] (Kaiming-uniform by default) or, with WeightLayout::OutIn,
/// [out, in], whose transpose the compiler folds into the matmul's library call; b: [out]
/// (zeros). The params are NAME.weight and NAME.bias, as PyTorch names them.
class Linear : public Module {
 public:
  Linear(Model& model, const std::string& name, int64_t in_features, int64_t out_features, bool bias = true,
         Init init = Init::kaiming_uniform());
  Linear(Model& model, const std::string& name, int64_t in_features, int64_t out_features,
         const LinearOptions& options);
  Tensor operator()(Tensor x) override;
  Tensor weight, bias;  ///< bias is invalid when constructed without one

 private:
  WeightLayout layout_ = WeightLayout::InOut;
};

/// Layer normalization over the trailing `normalized_shape` dims, with learned scale
/// (ones) and bias (zeros).
class LayerNorm : public Module {
 public:
  LayerNorm(Model& model, const std::string& name, ir::Shape normalized_shape, double eps = 1e-5);
  Tensor operator()(Tensor x) override;
  Tensor scale, bias;

 private:
  int64_t normalized_rank_;
  double eps_;
};

/// Root-mean-square normalization over the last dim (LLaMA's, T5's): x / sqrt(mean(x²) + eps),
/// times a learned scale NAME.weight (ones), with no mean subtracted and no bias.
class RMSNorm : public Module {
 public:
  RMSNorm(Model& model, const std::string& name, int64_t width, double eps = 1e-6);
  Tensor operator()(Tensor x) override;
  Tensor weight;

 private:
  double eps_;
};

/// Options of a Conv2d layer, as PyTorch's nn.Conv2d takes them (pads the same on both
/// sides of each spatial dim).
struct Conv2dOptions {
  std::vector<int64_t> stride{1, 1}, padding{0, 0}, dilation{1, 1};
  int64_t groups = 1;
  bool bias = true;
};

/// A 2-D convolution of x: [N, in, H, W] with weight [out, in/groups, kh, kw] (He-uniform,
/// U(±sqrt(6/fan_in)), fan_in = in/groups·kh·kw) and bias [out] (zeros), named NAME.weight and
/// NAME.bias as PyTorch names them, so a state_dict loads as it is.
class Conv2d : public Module {
 public:
  Conv2d(Model& model, const std::string& name, int64_t in_channels, int64_t out_channels,
         std::vector<int64_t> kernel_size, const Conv2dOptions& options = {});
  Tensor operator()(Tensor x) override;
  Tensor weight, bias;

 private:
  ConvOptions conv_;
};

/// Options of a BatchNorm2d layer.
struct BatchNormOptions {
  double eps = 1e-5;
  double momentum = 0.1;  ///< running = (1 - momentum) running + momentum batch, as PyTorch
  /// Training: normalize with the batch's statistics and update the running ones (state,
  /// with Model::update). Inference: the batch_norm op with the running statistics as params.
  bool training = false;
};

/// Batch normalization over axis 1 of x: [N, C, ...], with scale NAME.weight (ones), bias
/// NAME.bias (zeros), NAME.running_mean (zeros) and NAME.running_var (ones), PyTorch's names.
/// Training uses the biased batch variance to normalize and the unbiased one in the
/// running variance, as PyTorch does.
class BatchNorm2d : public Module {
 public:
  BatchNorm2d(Model& model, const std::string& name, int64_t channels, const BatchNormOptions& options = {});
  Tensor operator()(Tensor x) override;
  Tensor scale, bias, running_mean, running_var;

 private:
  Model* model_;
  BatchNormOptions options_;
};

/// Options of the pooling layers; an empty stride means the kernel size, as in PyTorch.
struct Pool2dOptions {
  std::vector<int64_t> stride, padding{0, 0}, dilation{1, 1};
  bool ceil_mode = false;
  bool count_include_pad = true;  ///< AvgPool2d only; PyTorch's default
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(std::vector<int64_t> kernel_size, const Pool2dOptions& options = {});
  Tensor operator()(Tensor x) override;

 private:
  std::vector<int64_t> window_;
  PoolOptions pool_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(std::vector<int64_t> kernel_size, const Pool2dOptions& options = {});
  Tensor operator()(Tensor x) override;

 private:
  std::vector<int64_t> window_;
  PoolOptions pool_;
};

/// [N, d1, d2, ...] to [N, d1·d2·...].
class Flatten : public Module {
 public:
  Tensor operator()(Tensor x) override;
};

/// Activation functions as modules.
enum class Activation { Relu, Gelu, GeluTanh, Tanh, Sigmoid, Silu, None };
/// Applies an activation.
Tensor activate(Activation activation, Tensor x);

/// A module wrapping an activation.
class ActivationLayer : public Module {
 public:
  explicit ActivationLayer(Activation activation) : activation_(activation) {}
  Tensor operator()(Tensor x) override { return activate(activation_, x); }

 private:
  Activation activation_;
};

/// Modules applied one after another.
class Sequential : public Module {
 public:
  /// Appends a module; returns *this for chaining.
  Sequential& add(std::unique_ptr<Module> module);
  template <class M, class... Args>
  Sequential& emplace(Args&&... args) {
    return add(std::make_unique<M>(std::forward<Args>(args)...));
  }
  Tensor operator()(Tensor x) override;
  size_t size() const { return modules_.size(); }

 private:
  std::vector<std::unique_ptr<Module>> modules_;
};

/// A multilayer perceptron: Linear layers of the given sizes (sizes[0] inputs, then
/// one layer per further size) named NAME.0, NAME.1, ..., with `activation` between
/// layers and none after the last.
Sequential mlp(Model& model, const std::string& name, const std::vector<int64_t>& sizes,
               Activation activation = Activation::Relu);

}  // namespace kiln::nn
