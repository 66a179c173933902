#include "compiler/train.h"

#include <fmt/format.h>
#include <cmath>

#include "ir/builder.h"
#include "ir/interpreter.h"
#include "passes/autocast.h"
#include "passes/autodiff.h"
#include "passes/dce.h"

namespace kiln {
namespace {

using ir::Op;
using ir::ValueId;

// Emits optimizer updates into a graph with a small vocabulary of scalar-friendly ops.
class UpdateBuilder {
 public:
  explicit UpdateBuilder(ir::Graph& g) : g_(g), b_(g) {}

  ValueId state(const std::string& name, ir::TensorType type, std::map<std::string, ir::Tensor>& init) {
    init[name] = ir::Tensor::zeros(type);
    return b_.arg(name, std::move(type), ir::ArgKind::State);
  }
  ValueId c(double value, ValueId like) { return b_.scalar(value, g_.type(like).dtype); }
  ValueId add(ValueId x, ValueId y) { return b_.binary(Op::Add, x, y); }
  ValueId sub(ValueId x, ValueId y) { return b_.binary(Op::Sub, x, y); }
  ValueId mul(ValueId x, ValueId y) { return b_.binary(Op::Mul, x, y); }
  ValueId div(ValueId x, ValueId y) { return b_.binary(Op::Div, x, y); }
  ValueId scaled(double k, ValueId x) { return mul(x, c(k, x)); }
  ValueId sqrt(ValueId x) { return b_.unary(Op::Sqrt, x); }
  ValueId cos(ValueId x) { return b_.unary(Op::Cos, x); }
  ValueId min(ValueId x, ValueId y) { return b_.binary(Op::Minimum, x, y); }
  ValueId pow(ValueId base, ValueId exponent) { return b_.binary(Op::Pow, base, exponent); }
  ValueId cast(ValueId x, ir::DType to) {
    if (g_.type(x).dtype == to) return x;
    ir::Attrs attrs;
    attrs.set("to", to);
    return b_.emit(Op::Cast, {x}, std::move(attrs));
  }
  // cond ? x : y, a scalar cond spread over x's shape.
  ValueId select(ValueId cond, ValueId x, ValueId y) {
    const ir::Shape& shape = g_.type(x).shape;
    if (!shape.empty()) cond = b_.broadcast(cond, shape, {});
    return b_.emit(Op::Select, {cond, x, y});
  }
  // Whether x holds an inf or a NaN: x - x is 0 for every finite element, NaN otherwise.
  ValueId not_finite_sum(ValueId x) {
    ValueId d = sub(x, x);
    std::vector<int64_t> axes;
    for (size_t a = 0; a < g_.type(x).shape.size(); ++a) axes.push_back(static_cast<int64_t>(a));
    return cast(axes.empty() ? d : b_.reduce(Op::ReduceSum, d, axes), ir::DType::F32);
  }
  ValueId ne(ValueId x, ValueId y) { return b_.binary(Op::Ne, x, y); }
  ir::DType dtype(ValueId x) const { return g_.type(x).dtype; }
  ValueId ge(ValueId x, ValueId y) { return b_.binary(Op::Ge, x, y); }

 private:
  ir::Graph& g_;
  ir::GraphBuilder b_;
};

struct Trained {
  std::string name;
  ValueId param;
  ValueId grad;
};

// Returns the new value of each state it updates, by state name.
void sgd_updates(const Sgd& opt, UpdateBuilder& u, const std::vector<Trained>& params, ir::Graph& g,
                 std::map<std::string, ValueId>& next, std::map<std::string, ir::Tensor>& init) {
  for (const Trained& p : params) {
    ValueId grad = opt.weight_decay ? u.add(p.grad, u.scaled(opt.weight_decay, p.param)) : p.grad;
    if (opt.momentum) {
      std::string name = "sgd.velocity." + p.name;
      ValueId velocity = u.state(name, g.type(p.param), init);
      grad = next[name] = u.add(u.scaled(opt.momentum, velocity), grad);
    }
    next[p.name] = u.sub(p.param, u.scaled(opt.learning_rate, grad));
  }
}

void adam_updates(const Adam& opt, UpdateBuilder& u, const std::vector<Trained>& params, ir::Graph& g,
                  std::map<std::string, ValueId>& next, std::map<std::string, ir::Tensor>& init) {
  ValueId step = u.state("adam.step", {ir::DType::F32, {}}, init);
  ValueId t = next["adam.step"] = u.add(step, u.c(1, step));
  // Bias corrections 1 - beta^t, in f32 and cast to each weight's type.
  ValueId correction1 = u.sub(u.c(1, t), u.pow(u.c(opt.beta1, t), t));
  ValueId correction2 = u.sub(u.c(1, t), u.pow(u.c(opt.beta2, t), t));
  ValueId rate = ir::kNoValue;  // the scheduled learning rate, an f32 scalar
  if (opt.cosine_decay_steps > 0) {
    const double n = static_cast<double>(opt.cosine_decay_steps);
    ValueId done = u.min(step, u.c(n, step));  // t - 1, at most N
    ValueId angle = u.scaled(M_PI / n, done);
    rate = u.scaled(opt.learning_rate / 2, u.add(u.c(1, angle), u.cos(angle)));
  }
  for (const Trained& p : params) {
    ir::TensorType type = g.type(p.param);
    ValueId grad = p.grad;
    if (opt.weight_decay && !opt.decoupled_weight_decay) grad = u.add(grad, u.scaled(opt.weight_decay, p.param));
    std::string m_name = "adam.m." + p.name, v_name = "adam.v." + p.name;
    ValueId m = u.state(m_name, type, init), v = u.state(v_name, type, init);
    ValueId m_next = next[m_name] = u.add(u.scaled(opt.beta1, m), u.scaled(1 - opt.beta1, grad));
    ValueId v_next = next[v_name] = u.add(u.scaled(opt.beta2, v), u.scaled(1 - opt.beta2, u.mul(grad, grad)));
    ValueId m_hat = u.div(m_next, u.cast(correction1, type.dtype));
    ValueId v_hat = u.div(v_next, u.cast(correction2, type.dtype));
    ValueId update = u.div(m_hat, u.add(u.sqrt(v_hat), u.c(opt.eps, m)));
    if (opt.weight_decay && opt.decoupled_weight_decay) update = u.add(update, u.scaled(opt.weight_decay, p.param));
    next[p.name] = u.sub(
        p.param, rate == ir::kNoValue ? u.scaled(opt.learning_rate, update) : u.mul(update, u.cast(rate, type.dtype)));
  }
}

// Dynamic loss scaling's part of the step (torch.amp.GradScaler): the gradients divided
// by the scale, and when any holds an inf or NaN, every state update undone and the scale
// backed off; otherwise the scale grows after growth_interval good steps in a row.
// Returns whether any gradient holds an inf or a NaN (a bool scalar).
ValueId unscale_gradients(UpdateBuilder& u, ValueId scale, std::vector<Trained>& params) {
  ValueId inverse = u.div(u.c(1, scale), scale);
  ValueId bad = ir::kNoValue;
  for (Trained& p : params) {
    p.grad = u.mul(p.grad, u.cast(inverse, u.dtype(p.grad)));
    ValueId b = u.not_finite_sum(p.grad);
    bad = bad == ir::kNoValue ? b : u.add(bad, b);
  }
  return u.ne(bad, bad);
}

void scale_updates(const MixedPrecision& mixed, UpdateBuilder& u, ir::Graph& g, ValueId scale, ValueId tracker,
                   ValueId found_inf, std::map<std::string, ValueId>& next) {
  for (auto& [name, value] : next) value = u.select(found_inf, g.find_arg(name)->value, value);
  ValueId counted = u.add(tracker, u.c(1, tracker));
  ValueId grow = u.ge(counted, u.c(static_cast<double>(mixed.growth_interval), tracker));
  next["amp.scale"] = u.select(found_inf, u.scaled(mixed.backoff_factor, scale),
                               u.select(grow, u.scaled(mixed.growth_factor, scale), scale));
  next["amp.growth_tracker"] = u.select(found_inf, u.c(0, tracker), u.select(grow, u.c(0, tracker), counted));
}

Result<TrainStep> build_step(const Model& model, const Optimizer& optimizer, const MixedPrecision* mixed) {
  KILN_ASSIGN_OR_RETURN(ir::Graph g, model.build());
  std::vector<std::string> weights;
  // State the model updates itself (running statistics): not trained, its new value
  // returned as the model computes it.
  std::vector<std::pair<std::string, ValueId>> updated;
  for (const ir::Arg& a : g.args) {
    if (a.kind == ir::ArgKind::State) {
      const std::string& name = g.value_name(a.value);
      auto update = model.state_updates().find(name);
      if (update == model.state_updates().end())
        return make_error(
            fmt::format("training step of @{}: the model has state %{} without an update; declare trained weights "
                        "with param (the step makes them state), and state the model updates with Model::update",
                        g.name, name));
      updated.emplace_back(name, update->second);
      continue;
    }
    if (a.kind == ir::ArgKind::Param && ir::is_float(g.type(a.value).dtype)) weights.push_back(g.value_name(a.value));
  }
  if (weights.empty())
    return make_error(fmt::format("training step of @{}: the model has no floating-point params to train", g.name));
  TrainStep step;
  UpdateBuilder u(g);
  ValueId scale = ir::kNoValue, tracker = ir::kNoValue;
  const ValueId loss = g.results[0];
  if (mixed) {
    if (mixed->compute != ir::DType::BF16 && mixed->compute != ir::DType::F16)
      return make_error(fmt::format("training step of @{}: mixed precision computes in bf16 or f16, not {}", g.name,
                                    ir::dtype_name(mixed->compute)));
    if (mixed->loss_scaling &&
        (!(mixed->initial_scale > 0) || mixed->growth_interval < 1 || !(mixed->growth_factor >= 1) ||
         !(mixed->backoff_factor > 0 && mixed->backoff_factor < 1)))
      return make_error(fmt::format(
          "training step of @{}: loss scaling needs initial_scale > 0, growth_factor >= 1, 0 < backoff_factor < 1 "
          "and growth_interval >= 1",
          g.name));
    // The master weights stay f32 params here (state below); their matmuls cast them.
    KILN_RETURN_IF_ERROR(passes::AutocastPass(mixed->compute, /*store_params=*/false).run(g));
    if (mixed->loss_scaling) {
      scale = u.state("amp.scale", {ir::DType::F32, {}}, step.initial_state);
      step.initial_state["amp.scale"] = ir::Tensor::from_doubles({ir::DType::F32, {}}, {mixed->initial_scale});
      tracker = u.state("amp.growth_tracker", {ir::DType::F32, {}}, step.initial_state);
      g.results[0] = u.mul(loss, u.cast(scale, u.dtype(loss)));  // what autodiff differentiates: the scaled loss
    }
  }
  for (const auto& [name, value] : updated) g.results.push_back(value);  // kept alive through autodiff
  size_t outputs = g.results.size();
  auto differentiated = passes::AutodiffPass(weights).run(g);
  if (!differentiated.ok())
    return make_error(fmt::format("training step of @{}: {}", g.name, differentiated.error().message));

  std::vector<Trained> params;
  for (size_t i = 0; i < weights.size(); ++i) {
    ValueId grad = g.results[outputs + i];
    g.values[grad].name.clear();  // the update, not the gradient, is what the step returns
    params.push_back({weights[i], g.find_arg(weights[i])->value, grad});
    step.initial_state[weights[i]] = model.initial_values().at(weights[i]);
  }
  for (ir::Arg& a : g.args)
    if (a.kind == ir::ArgKind::Param && ir::is_float(g.type(a.value).dtype)) a.kind = ir::ArgKind::State;

  ValueId found_inf = ir::kNoValue;
  if (scale != ir::kNoValue) found_inf = unscale_gradients(u, scale, params);
  std::map<std::string, ValueId> next;
  if (const Sgd* sgd = std::get_if<Sgd>(&optimizer)) sgd_updates(*sgd, u, params, g, next, step.initial_state);
  else adam_updates(std::get<Adam>(optimizer), u, params, g, next, step.initial_state);
  if (scale != ir::kNoValue) scale_updates(*mixed, u, g, scale, tracker, found_inf, next);
  for (const auto& [name, value] : updated) {
    next[name] = value;
    step.initial_state[name] = model.initial_values().at(name);
  }

  g.results = {loss};
  for (const ir::Arg& a : g.args) {
    if (a.kind != ir::ArgKind::State) continue;
    const std::string& name = g.value_name(a.value);
    ValueId value = next.at(name);
    g.values[value].name = name + ".next";
    g.results.push_back(value);
    step.state_names.push_back(name);
  }
  KILN_RETURN_IF_ERROR(passes::DcePass().run(g));
  step.graph = std::move(g);
  return step;
}

}  // namespace

Result<TrainStep> build_train_step(const Model& model, const Optimizer& optimizer) {
  return build_step(model, optimizer, nullptr);
}

Result<TrainStep> build_train_step(const Model& model, const Optimizer& optimizer, const MixedPrecision& mixed) {
  return build_step(model, optimizer, &mixed);
}

Result<double> run_train_step(const TrainStep& step, std::map<std::string, ir::Tensor>& state,
                              const std::map<std::string, ir::Tensor>& inputs) {
  std::map<std::string, ir::Tensor> feed = inputs;
  for (const std::string& name : step.state_names) {
    auto it = state.find(name);
    if (it == state.end()) return make_error(fmt::format("training step: no value for state %{}", name));
    feed[name] = it->second;
  }
  KILN_ASSIGN_OR_RETURN(std::vector<ir::Tensor> results, ir::evaluate(step.graph, feed));
  for (size_t i = 0; i < step.state_names.size(); ++i) state[step.state_names[i]] = std::move(results[1 + i]);
  return results[0].get(0);
}

}  // namespace kiln
