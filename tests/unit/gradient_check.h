// Gradients against central finite differences in f64 (eps 1e-6, atol 1e-5, rtol 1e-3),
// shared by the autodiff tests and the tests of ops with gradients of their own files.
#pragma once

#include <fmt/format.h>
#include <functional>
#include <numeric>
#include <random>

#include "compiler/model.h"
#include "passes/autodiff.h"
#include "tests/unit/test_util.h"

namespace kiln::testing {

using Body = std::function<kiln::Tensor(kiln::Model&, const std::vector<kiln::Tensor>&)>;

struct Range {
  double lo = -2, hi = 2;
};

inline std::vector<double> random_values(std::mt19937_64& rng, int64_t n, Range r) {
  std::uniform_real_distribution<double> dist(r.lo, r.hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = dist(rng);
  return v;
}

inline double loss_of(const ir::Graph& g, const std::map<std::string, ir::Tensor>& inputs) {
  return kiln::testing::eval_ok(g, inputs)[0].floats[0];
}

// Builds loss = sum(body(xs) * r) with a fixed random r, differentiates it with respect
// to every input, and compares each gradient element with central differences.
inline void check_gradients(const std::string& what, const std::vector<ir::Shape>& shapes, const Body& body,
                            Range range = {}, uint64_t seed = 1) {
  INFO(what);
  std::mt19937_64 rng(seed);
  kiln::Model m("grad_check", seed);
  std::vector<kiln::Tensor> xs;
  std::vector<std::string> names;
  for (size_t i = 0; i < shapes.size(); ++i) {
    names.push_back("x" + std::to_string(i));
    xs.push_back(m.input(names.back(), shapes[i], ir::DType::F64));
  }
  kiln::Tensor y = body(m, xs);
  REQUIRE(y.valid());
  kiln::Tensor r = m.constant(random_values(rng, ir::num_elements(y.shape()), {0.5, 1.5}), y.shape(), ir::DType::F64);
  std::vector<int64_t> all(static_cast<size_t>(y.rank()));
  std::iota(all.begin(), all.end(), 0);
  m.output(reduce_sum(y * r, all), "loss");
  auto built = m.build();
  if (!built.ok()) FAIL(built.error().message);
  ir::Graph forward = *built;

  ir::Graph backward = forward;
  auto changed = passes::AutodiffPass(names).run(backward);
  if (!changed.ok()) FAIL(changed.error().message);
  kiln::testing::parse_ok(ir::print(backward));  // the result is valid text IR

  std::map<std::string, ir::Tensor> inputs;
  for (size_t i = 0; i < shapes.size(); ++i)
    inputs[names[i]] =
        ir::Tensor::from_doubles({ir::DType::F64, shapes[i]}, random_values(rng, ir::num_elements(shapes[i]), range));
  auto results = kiln::testing::eval_ok(backward, inputs);
  REQUIRE(results.size() == 1 + shapes.size());
  const double eps = 1e-6;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const ir::Tensor& analytic = results[1 + i];
    REQUIRE(analytic.type == inputs[names[i]].type);
    for (int64_t k = 0; k < analytic.size(); ++k) {
      auto plus = inputs, minus = inputs;
      plus[names[i]].floats[k] += eps;
      minus[names[i]].floats[k] -= eps;
      double numeric = (loss_of(forward, plus) - loss_of(forward, minus)) / (2 * eps);
      INFO("d loss / d " << names[i] << "[" << k << "]: autodiff " << analytic.floats[k] << ", finite differences "
                         << numeric);
      CHECK(std::fabs(analytic.floats[k] - numeric) <= 1e-5 + 1e-3 * std::fabs(numeric));
    }
  }
}

}  // namespace kiln::testing
