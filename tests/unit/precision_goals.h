// Issue 24's accuracy measurements, for any target: GPT-2's block in a half precision
// against f64, and the models suite's MLP trained in f32 or mixed precision
// (precision_goals_test.cc on the CPU, cuda_gpu_test.cc on CUDA).
#pragma once

#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/models.h"
#include "tests/unit/op_graphs.h"
#include "tests/unit/run_util.h"

namespace kiln::testing {

/// The max-norm error, max |got − f64| / max |f64|, of GPT-2's block (B=1, T=128, C=768,
/// 12 heads) compiled for `target` at `precision`, on seeded inputs in [-1, 1).
inline double gpt2_block_error(const std::string& target, const std::string& precision) {
  auto row = bench::gpt2_block({1, 128, 768, 12}, false);
  if (!row.ok()) FAIL(row.error().message);
  std::map<std::string, ir::Tensor> args = row->weights;
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> uniform(-1, 1);
  for (const ir::Arg& a : row->graph.args) {
    if (a.kind != ir::ArgKind::Input) continue;
    const ir::TensorType& t = row->graph.type(a.value);
    std::vector<double> data(static_cast<size_t>(t.num_elements()));
    for (double& x : data) x = uniform(rng);
    args[row->graph.value_name(a.value)] = ir::Tensor::from_doubles(t, data);
  }
  const ir::Graph f64 = in_precision(row->graph, ir::DType::F64);
  const ir::Tensor want = eval_ok(f64, in_precision(args, ir::DType::F64))[0];
  CompileOptions options;
  options.target = target;
  options.precision = precision;
  auto got = compile_and_run(row->graph, args, options);
  if (!got.ok()) FAIL(got.error().message);
  double diff = 0, scale = 0;
  for (int64_t k = 0; k < want.size(); ++k) {
    diff = std::max(diff, std::fabs((*got)[0].get(k) - want.get(k)));
    scale = std::max(scale, std::fabs(want.get(k)));
  }
  return diff / scale;
}

/// The loss after each of `steps` Adam steps of the models suite's MLP (batch 128) on one
/// fixed seeded batch, compiled for `target` in f32 or `mixed` precision.
inline std::vector<double> mlp_losses(const std::string& target, const std::optional<MixedPrecision>& mixed,
                                      int steps) {
  constexpr int64_t kBatch = 128;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> uniform(-1, 1);
  std::vector<double> x(static_cast<size_t>(kBatch * 784));
  for (double& v : x) v = uniform(rng);
  std::vector<int64_t> labels(static_cast<size_t>(kBatch));
  for (int64_t& l : labels) l = static_cast<int64_t>(rng() % 10);
  auto row = bench::mlp_row("mlp_train", kBatch, true, mixed);
  if (!row.ok()) FAIL(row.error().message);
  CompileOptions options;
  options.target = target;
  auto artifact = compile_to_artifact(row->graph, options);
  if (!artifact.ok()) FAIL(artifact.error().message);
  auto model = runtime::Model::load_bytes(std::move(*artifact));
  if (!model.ok()) FAIL(model.error().message);
  for (const auto& [name, value] : row->state) REQUIRE((*model)->write_state(name, host(value, name)).ok());
  const std::map<std::string, runtime::HostTensor> inputs = {
      {"x", host(ir::Tensor::from_doubles({ir::DType::F32, {kBatch, 784}}, x), "x")},
      {"labels", host(ir::Tensor::from_ints({ir::DType::I32, {kBatch}}, labels), "labels")}};
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    auto out = (*model)->run(inputs);
    if (!out.ok()) FAIL(out.error().message);
    losses.push_back(tensor_of((*out)[0]).get(0));
  }
  return losses;
}

/// Checks issue 24's goals on `target`, printing what it measured: GPT-2's block in bf16
/// within 3e-2 of f64 (f16 within 1e-2), and the MLP after 500 steps in bf16 and in f16
/// with loss scaling no more than 2% above f32's loss (on a batch it has learned the
/// losses are near 1e-5, where a run that ends lower is no worse).
inline void check_precision_goals(const std::string& target) {
  for (auto [precision, bound] : {std::pair<const char*, double>{"bf16", 3e-2}, {"f16", 1e-2}}) {
    const double error = gpt2_block_error(target, precision);
    std::printf("%s: gpt2_block (B=1, T=128, C=768) in %s: max-norm error %.3g against f64\n", target.c_str(),
                precision, error);
    INFO(target << " " << precision);
    CHECK(error <= bound);
  }
  constexpr int kSteps = 500;
  std::map<std::string, std::vector<double>> losses;
  losses["f32"] = mlp_losses(target, std::nullopt, kSteps);
  losses["bf16"] = mlp_losses(target, MixedPrecision::bf16(), kSteps);
  losses["f16"] = mlp_losses(target, MixedPrecision::f16(), kSteps);
  for (const char* name : {"f32", "bf16", "f16"})
    std::printf("%s: mlp_train in %s: loss %.5g at step 1, %.5g at step 100, %.5g at step %d\n", target.c_str(), name,
                losses[name].front(), losses[name][99], losses[name].back(), kSteps);
  const double f32 = losses["f32"].back();
  CHECK(f32 < 1e-3 * losses["f32"].front());  // it learns the batch
  for (const char* name : {"bf16", "f16"}) {
    INFO(target << " " << name << ": " << losses[name].back() << " against f32's " << f32);
    CHECK(losses[name].back() <= 1.02 * f32);
  }
}

}  // namespace kiln::testing
