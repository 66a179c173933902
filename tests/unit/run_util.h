// Compiling graphs to artifacts and running them through the runtime, for the end-to-end
// tests of every target.
#pragma once

#include <atomic>
#include <cmath>
#include <thread>

#include "compiler/compile.h"
#include "runtime/model.h"
#include "tests/unit/test_util.h"

namespace kiln::testing {

inline runtime::HostTensor host(const ir::Tensor& t, const std::string& name) {
  return {{name, static_cast<runtime::ElementType>(t.type.dtype), t.type.shape}, ir::tensor_to_bytes(t)};
}

inline ir::Tensor tensor_of(const runtime::HostTensor& h) {
  return ir::tensor_from_bytes({static_cast<ir::DType>(h.info.type), h.info.shape}, h.data.data());
}

/// Compiles (with `options`, whose weights are filled from `args`), loads and runs a
/// graph with the given arguments (state written into the model), returning the outputs.
inline Result<std::vector<ir::Tensor>> compile_and_run(const ir::Graph& g,
                                                       const std::map<std::string, ir::Tensor>& args,
                                                       CompileOptions options, const runtime::Options& load = {}) {
  std::map<std::string, runtime::HostTensor> inputs;
  std::map<std::string, ir::Tensor> state;
  for (const ir::Arg& a : g.args) {
    const std::string& name = g.value_name(a.value);
    if (a.kind == ir::ArgKind::Param) options.weights[name] = args.at(name);
    else if (a.kind == ir::ArgKind::State) state[name] = args.at(name);
    else inputs[name] = host(args.at(name), name);
  }
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> artifact, compile_to_artifact(g, options));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<runtime::Model> model, runtime::Model::load_bytes(std::move(artifact), load));
  for (auto& [name, t] : state) KILN_RETURN_IF_ERROR(model->write_state(name, host(t, name)));
  KILN_ASSIGN_OR_RETURN(std::vector<runtime::HostTensor> outputs, model->run(inputs));
  std::vector<ir::Tensor> out;
  for (const auto& h : outputs) out.push_back(tensor_of(h));
  return out;
}

/// A built model (Model::build) compiled for this CPU with `weights` (its initial values):
/// the artifact's bytes (format::read_artifact's view points into them).
inline std::vector<uint8_t> compiled_artifact(const Result<ir::Graph>& g, std::map<std::string, ir::Tensor> weights) {
  if (!g.ok()) FAIL(g.error().message);
  CompileOptions options;
  options.weights = std::move(weights);
  auto bytes = compile_to_artifact(*g, options);
  if (!bytes.ok()) FAIL(bytes.error().message);
  return std::move(*bytes);
}

/// A deterministic f32 input of `shape` that differs with i: sin(0.01 k + i) at element k.
inline ir::Tensor wave_input(const ir::Shape& shape, int i) {
  std::vector<double> v(static_cast<size_t>(ir::num_elements(shape)));
  for (size_t k = 0; k < v.size(); ++k) v[k] = std::sin(0.01 * static_cast<double>(k) + i);
  return ir::Tensor::from_doubles({ir::DType::F32, shape}, v);
}

/// The first output of `count` runs of `model` from this thread, with input %`name` =
/// wave_input(shape, i) in run i: what mismatches_across_threads expects.
inline std::vector<std::vector<uint8_t>> outputs_one_thread(const runtime::Model& model, const std::string& name,
                                                            const ir::Shape& shape, int count) {
  std::vector<std::vector<uint8_t>> outputs;
  for (int i = 0; i < count; ++i) {
    auto out = model.run({{name, host(wave_input(shape, i), name)}});
    REQUIRE(out.ok());
    outputs.push_back((*out)[0].data);
  }
  return outputs;
}

/// Runs `model` from `threads` threads, `runs` times each, with input %`name` =
/// wave_input(shape, i) for i = thread * runs + run, and counts the runs that fail or
/// whose first output is not exactly `expected[i]`.
inline int mismatches_across_threads(const runtime::Model& model, const std::string& name, const ir::Shape& shape,
                                     int threads, int runs, const std::vector<std::vector<uint8_t>>& expected) {
  std::atomic<int> mismatches{0};
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t)
    running.emplace_back([&, t] {
      for (int r = 0; r < runs; ++r) {
        int i = t * runs + r;
        auto out = model.run({{name, host(wave_input(shape, i), name)}});
        if (!out.ok() || (*out)[0].data != expected[static_cast<size_t>(i)]) ++mismatches;
      }
    });
  for (auto& th : running) th.join();
  return mismatches;
}

/// Checks outputs against the interpreter's: their types, and values at the matmul
/// tolerance (1e-4) unless given others.
inline void check_same(const std::vector<ir::Tensor>& got, const std::vector<ir::Tensor>& want, double rtol = 1e-4,
                       double atol = 1e-4) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    std::vector<double> expected;
    for (int64_t k = 0; k < want[i].size(); ++k) expected.push_back(want[i].get(k));
    check_close(got[i], want[i].type.to_string(), expected, rtol, atol);
  }
}

/// Compiles `g` with `options`, fused and unfused, runs it with `args`, and checks the
/// outputs against the interpreter's (check_same).
inline void check_against_interpreter(const std::string& name, const ir::Graph& g,
                                      const std::map<std::string, ir::Tensor>& args, CompileOptions options = {}) {
  auto expected = eval_ok(g, args);
  for (bool fuse : {true, false}) {
    INFO(name << (fuse ? " fused" : " unfused"));
    options.fuse = fuse;
    auto got = compile_and_run(g, args, options);
    if (!got.ok()) FAIL(got.error().message);
    check_same(*got, expected);
  }
}

}  // namespace kiln::testing
