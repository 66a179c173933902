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
