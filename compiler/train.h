// Training: optimizers written as graph ops, and a builder that turns a model with a loss
// into one static graph computing a whole training step.
#pragma once

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "base/result.h"
#include "compiler/model.h"
#include "ir/graph.h"
#include "ir/tensor.h"

namespace kiln {

/// Stochastic gradient descent. With momentum: v = momentum * v + g; p -= lr * v.
/// weight_decay adds weight_decay * p to g (L2 regularisation).
struct Sgd {
  double learning_rate = 0.01;
  double momentum = 0;
  double weight_decay = 0;
};

/// Adam with bias correction (Kingma & Ba, 2015):
///   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).
/// weight_decay adds weight_decay * p to g, or with decoupled_weight_decay (AdamW,
/// Loshchilov & Hutter, 2019) subtracts lr * weight_decay * p from p directly.
struct Adam {
  double learning_rate = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled_weight_decay = false;
  /// Where positive, the learning rate decays to 0 along a half cosine over this many
  /// steps (then stays 0): step t (the first is 1) uses
  /// learning_rate * (1 + cos(pi * min(t - 1, N) / N)) / 2, computed in the step from
  /// %adam.step (PyTorch's CosineAnnealingLR with T_max = N, stepped after every batch).
  int64_t cosine_decay_steps = 0;

  /// AdamW with the given learning rate and decoupled weight decay.
  static Adam adamw(double learning_rate, double weight_decay = 0.01) {
    return {learning_rate, 0.9, 0.999, 1e-8, weight_decay, true};
  }
};

/// One of the optimizers.
using Optimizer = std::variant<Sgd, Adam>;

/// A whole training step as one graph. Its `state` arguments are the model's params (the
/// weights) followed by the optimizer's slots (Adam: %adam.step, then %adam.m.NAME and
/// %adam.v.NAME per weight; SGD with momentum: %sgd.velocity.NAME). A run returns the loss,
/// then the new value of each state argument in argument order, named %NAME.next, so one
/// run is one step.
struct TrainStep {
  ir::Graph graph;
  /// The state argument names, in the order their new values are returned.
  std::vector<std::string> state_names;
  /// Initial state: the model's initialised weights and zeroed optimizer slots.
  std::map<std::string, ir::Tensor> initial_state;
};

/// Mixed-precision training (PyTorch's autocast with torch.amp.GradScaler): the weights
/// stay f32 state (the master weights) and the optimizer runs in f32, while the matmuls of
/// the forward and backward passes run in `compute` (passes/autocast.h). With
/// `loss_scaling` (for f16, whose range is narrow) the loss is multiplied by the state
/// %amp.scale before differentiation and the gradients divided by it; a step whose
/// gradients hold an inf or NaN changes no weight or optimizer slot and halves the scale,
/// and after `growth_interval` good steps in a row (counted in the state
/// %amp.growth_tracker) the scale doubles. All of it is graph ops of the same step.
struct MixedPrecision {
  ir::DType compute = ir::DType::BF16;  ///< BF16 or F16
  bool loss_scaling = false;            ///< on by default for f16: MixedPrecision::f16()
  double initial_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;

  static MixedPrecision bf16() { return {}; }
  static MixedPrecision f16() { return {ir::DType::F16, true}; }
};

/// Builds the training step of a model whose first output is a floating-point scalar
/// loss; every floating-point param is trained. Other outputs are dropped.
Result<TrainStep> build_train_step(const Model& model, const Optimizer& optimizer);
/// The same, in mixed precision: state also holds %amp.scale and %amp.growth_tracker when
/// the loss is scaled.
Result<TrainStep> build_train_step(const Model& model, const Optimizer& optimizer, const MixedPrecision& mixed);

/// Runs one step with the reference interpreter: reads `state` and the plain `inputs`,
/// replaces `state` with the updated values, and returns the loss.
Result<double> run_train_step(const TrainStep& step, std::map<std::string, ir::Tensor>& state,
                              const std::map<std::string, ir::Tensor>& inputs);

}  // namespace kiln
