// Compiling graphs to artifacts and running them through the runtime, for the end-to-end
// tests of every target.
#pragma once

#include <algorithm>
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

/// Loads and runs `artifact`, compiled from `g` with its params from `args` as weights,
/// with the other arguments (state written into the model), returning the outputs.
inline Result<std::vector<ir::Tensor>> run_artifact(std::vector<uint8_t> artifact, const ir::Graph& g,
                                                    const std::map<std::string, ir::Tensor>& args,
                                                    const runtime::Options& load = {}) {
  std::map<std::string, runtime::HostTensor> inputs;
  std::map<std::string, ir::Tensor> state;
  for (const ir::Arg& a : g.args) {
    const std::string& name = g.value_name(a.value);
    if (a.kind == ir::ArgKind::State) state[name] = args.at(name);
    else if (a.kind != ir::ArgKind::Param) inputs[name] = host(args.at(name), name);
  }
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<runtime::Model> model, runtime::Model::load_bytes(std::move(artifact), load));
  for (auto& [name, t] : state) KILN_RETURN_IF_ERROR(model->write_state(name, host(t, name)));
  KILN_ASSIGN_OR_RETURN(std::vector<runtime::HostTensor> outputs, model->run(inputs));
  std::vector<ir::Tensor> out;
  for (const auto& h : outputs) out.push_back(tensor_of(h));
  return out;
}

/// The params' values among a graph's arguments: what a compile takes as its weights.
inline std::map<std::string, ir::Tensor> param_weights(const ir::Graph& g,
                                                       const std::map<std::string, ir::Tensor>& args) {
  std::map<std::string, ir::Tensor> weights;
  for (const ir::Arg& a : g.args)
    if (a.kind == ir::ArgKind::Param) weights[g.value_name(a.value)] = args.at(g.value_name(a.value));
  return weights;
}

/// Compiles (with `options`, whose weights are filled from `args`), loads and runs a
/// graph with the given arguments (state written into the model), returning the outputs.
inline Result<std::vector<ir::Tensor>> compile_and_run(const ir::Graph& g,
                                                       const std::map<std::string, ir::Tensor>& args,
                                                       CompileOptions options, const runtime::Options& load = {}) {
  for (auto& [name, value] : param_weights(g, args)) options.weights[name] = std::move(value);
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> artifact, compile_to_artifact(g, options));
  return run_artifact(std::move(artifact), g, args, load);
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

/// Compiles `g` with `options`, fused and unfused, runs it with `args`, and checks the
/// outputs against the interpreter's (check_same).
inline void check_against_interpreter(const std::string& name, const ir::Graph& g,
                                      const std::map<std::string, ir::Tensor>& args, CompileOptions options = {}) {
  auto expected = eval_ok(g, args);
  for (bool fuse : {true, false}) {
    INFO(name << (fuse ? " fused" : " unfused"));
    options.fuse = fuse;
    // Two threads, on any machine: independent one-thread steps then run side by side
    // (runtime/cpu/step_schedule.h) wherever the schedule finds them.
    runtime::Options load;
    load.threads = 2;
    auto got = compile_and_run(g, args, options, load);
    if (!got.ok()) FAIL(got.error().message);
    check_same(*got, expected, 1e-4, 1e-4, /*half_ulp=*/true);
  }
}

/// A training-like step whose state updates a reduction kernel's epilogue writes (a bias
/// and its momentum from a column sum of 8192 rows, split into parts, and a layer-norm-
/// like scale from a row sum): the memory plan writes them over their state in place.
inline const char* kEpilogueStateUpdates = R"(graph @bias_step(%g: f32[8192,64], state %b: f32[64], state %m: f32[64],
                 %lr: f32[64], state %s: f32[64], %h: f32[64,128]) {
  %db: f32[64] = reduce_sum(%g) {axes=[0]}
  %m.next: f32[64] = add(%m, %db)
  %step: f32[64] = mul(%m.next, %lr)
  %b.next: f32[64] = sub(%b, %step)
  %ds: f32[64] = reduce_sum(%h) {axes=[1]}
  %s.next: f32[64] = mul(%s, %ds)
  %loss: f32[] = reduce_sum(%db) {axes=[0]}
  return %loss, %b.next, %m.next, %s.next
}
)";

/// Runs `g` (results: a loss, then each state S's S.next in order) `runs` times, its
/// state kept in the loaded model, and checks the loss and the state after each run
/// against the interpreter fed its own updates.
inline void check_state_updates(const ir::Graph& g, std::map<std::string, ir::Tensor> args,
                                const CompileOptions& options, int runs) {
  std::vector<std::string> states;
  for (size_t r = 1; r < g.results.size(); ++r) {
    const std::string& next = g.value_name(g.results[r]);
    states.push_back(next.substr(0, next.size() - 5));
  }
  std::map<std::string, runtime::HostTensor> inputs;
  CompileOptions compile = options;
  for (const ir::Arg& a : g.args)
    if (a.kind == ir::ArgKind::Input) inputs[g.value_name(a.value)] = host(args.at(g.value_name(a.value)), "");
  auto artifact = compile_to_artifact(g, compile);
  if (!artifact.ok()) FAIL(artifact.error().message);
  auto loaded = runtime::Model::load_bytes(std::move(*artifact));
  if (!loaded.ok()) FAIL(loaded.error().message);
  runtime::Model& model = **loaded;
  for (const std::string& name : states) REQUIRE(model.write_state(name, host(args.at(name), name)).ok());
  for (int run = 0; run < runs; ++run) {
    INFO("run " << run);
    const std::vector<ir::Tensor> want = eval_ok(g, args);
    auto got = model.run(inputs);
    if (!got.ok()) FAIL(got.error().message);
    check_same({tensor_of((*got)[0])}, {want[0]});
    for (size_t i = 0; i < states.size(); ++i) {
      auto state = model.read_state(states[i]);
      REQUIRE(state.ok());
      check_same({tensor_of(*state)}, {want[i + 1]});
      args[states[i]] = want[i + 1];
    }
  }
}

}  // namespace kiln::testing
