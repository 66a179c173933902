// The models suite's quick rows (bench/models.h) checked against the interpreter on a
// target: model_suite_test on the CPU, the GPU tier (cuda_gpu_test) on CUDA.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>

#include "bench/models.h"
#include "bench/suite.h"
#include "tests/unit/run_util.h"

namespace kiln::testing {

inline double max_abs(const ir::Tensor& t) {
  double m = 0;
  for (int64_t k = 0; k < t.size(); ++k) m = std::max(m, std::fabs(t.get(k)));
  return m;
}

// |got - want| <= 1e-4 (|want| + max|want|): f32 rounding through a layer's matmuls and
// normalizations, measured against the tensor's own scale, since Adam's moment slots are
// 1e-4 and far smaller. Elements where `skip` holds are not compared.
inline void check_scaled(const std::string& name, const ir::Tensor& got, const ir::Tensor& want,
                         const std::function<bool(int64_t)>& skip = {}) {
  INFO(name);
  REQUIRE(got.type == want.type);
  const double scale = max_abs(want);
  int64_t bad = 0, first = -1;
  for (int64_t k = 0; k < want.size(); ++k) {
    if (skip && skip(k)) continue;
    double a = got.get(k), e = want.get(k);
    if (!(std::fabs(a - e) <= 1e-4 * (std::fabs(e) + scale))) {
      if (bad++ == 0) first = k;
    }
  }
  INFO(bad << " of " << want.size() << " elements differ; the first, " << first << ": got "
           << (first >= 0 ? got.get(first) : 0) << ", expected " << (first >= 0 ? want.get(first) : 0));
  CHECK(bad == 0);
}

// Seeded plain inputs (integers 0 or 1: labels, and a padding mask padding half the keys);
// params and state as the row gives them.
inline std::map<std::string, ir::Tensor> arguments_of(const bench::SuiteRow& row) {
  std::map<std::string, ir::Tensor> args = seeded_arguments(row.graph, 11);
  for (const auto& [name, t] : row.weights) args[name] = t;
  for (const auto& [name, t] : row.state) args[name] = t;
  return args;
}

inline std::vector<bench::SuiteRow> quick_rows() {
  auto rows = bench::suite_rows("models", true);
  if (!rows.ok()) FAIL(rows.error().message);
  return std::move(rows).value();
}

// Each quick row compiled with `base` (fused and unfused), run by the runtime and checked
// against the interpreter; a training row's step must also give a finite loss and move
// every weight.
inline void check_quick_rows(const CompileOptions& base) {
  for (const bench::SuiteRow& row : quick_rows()) {
    const ir::Graph& g = row.graph;
    auto args = arguments_of(row);
    std::vector<ir::Tensor> want = eval_ok(g, args);
    const bool train = !row.state.empty();
    for (bool fuse : {true, false}) {
      INFO(row.name << (fuse ? " fused" : " unfused"));
      CompileOptions options = base;
      options.fuse = fuse;
      auto got = compile_and_run(g, args, options);
      if (!got.ok()) FAIL(got.error().message);
      REQUIRE(got->size() == want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        const std::string name = g.value_name(g.results[i]);
        // The first Adam step moves a weight by about lr * sign(gradient): where the
        // gradient is rounding noise (the key bias's is zero in exact arithmetic, since
        // softmax ignores a shift shared by a row), its sign is noise too. An exactly zero
        // gradient (a dead relu) moves nothing on either side, and is compared.
        const std::string slot = "adam.m." + name;
        auto m =
            std::find_if(g.results.begin(), g.results.end(), [&](ir::ValueId v) { return g.value_name(v) == slot; });
        std::function<bool(int64_t)> skip;
        if (train && m != g.results.end()) {
          const ir::Tensor& moment = want[static_cast<size_t>(m - g.results.begin())];
          const double noise = 1e-5 * max_abs(moment);
          skip = [&moment, noise](int64_t k) { return moment.get(k) != 0 && std::fabs(moment.get(k)) <= noise; };
        }
        check_scaled(name, (*got)[i], want[i], skip);
      }
      if (!train) continue;
      // One step: a finite loss, and every weight moved.
      CHECK(std::isfinite((*got)[0].get(0)));
      for (size_t i = 1; i < want.size(); ++i) {
        const std::string name = g.value_name(g.results[i]);
        const std::string weight = name.substr(0, name.size() - std::string(".next").size());
        if (weight.rfind("adam.", 0) == 0) continue;
        INFO(weight);
        const ir::Tensor& before = row.state.at(weight);
        double moved = 0;
        for (int64_t k = 0; k < before.size(); ++k)
          moved = std::max(moved, std::fabs((*got)[i].get(k) - before.get(k)));
        CHECK(moved > 1e-4);
      }
    }
  }
}

}  // namespace kiln::testing
