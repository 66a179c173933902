// `kiln bench MODEL`: one model's latency over many runs, and with a profile, the time of
// every step of its program, each against the machine's limits (a plain copy's bandwidth;
// the flops it does), with a Chrome trace of the profiled runs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "compiler/compile.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "runtime/types.h"

namespace kiln::bench {

/// What to measure: a graph to compile, or an artifact as it is.
struct ModelSource {
  std::string name;  ///< the file, as reports name the model
  std::optional<ir::Graph> graph;
  std::map<std::string, ir::Tensor> weights;  ///< params and initial state, for a graph
  std::vector<uint8_t> artifact;              ///< without a graph
};

/// How to measure.
struct ModelBenchOptions {
  std::string target;  ///< "cpu" or "cuda"; empty: the artifact's (a graph: cpu)
  std::string cpu = std::string(kDefaultCpus);
  int repeat = 100;  ///< timed runs (and profiled runs, with a profile)
  int warmup = 10;
  int threads = 0;                 ///< 0: one per hardware thread
  bool side_by_side_steps = true;  ///< runtime::Options::side_by_side_steps
  bool profile = false;
  bool allow_tf32 = false;        ///< CUDA: CompileOptions::allow_tf32 for a graph
  std::string precision = "f32";  ///< CompileOptions::precision for a graph
  /// Inputs given by the caller; the others get seeded random data (random_inputs).
  std::map<std::string, runtime::HostTensor> inputs;
};

/// Milliseconds over the timed runs.
struct LatencyStats {
  double median = 0, p90 = 0, p99 = 0, min = 0, max = 0, mean = 0;
};

/// One step's figures: the median of its profiled times, and that against the machine.
struct StepResult {
  runtime::StepInfo info;
  double ms = 0, gbps = 0, fraction_of_copy = 0, tflops = 0;
};

/// Where the time of a run goes, from the profile.
struct ProfileSummary {
  int runs = 0;
  std::string clock;
  double steps_ms = 0;         ///< the sum of the steps' medians
  double memory_bound_ms = 0;  ///< loop, reduction and copy steps
  double library_ms = 0;       ///< library calls (matmuls)
  double other_ms = 0;         ///< the rest (scatter steps)
  double overhead_ms = 0;      ///< the latency's median minus steps_ms
  /// Within each profiled run: its time from call to return, and what its steps leave out
  /// (medians over the profiled runs).
  double profiled_run_ms = 0, unaccounted_ms = 0;
  /// What a run spends outside its steps, per step, at most, on this target: the
  /// profiled run's time is within 10% of its steps' sum plus this per step.
  double per_step_overhead_ms = 0;
  bool adds_up = false;
  double copy_gbps = 0;  ///< a plain copy, timed in the same process
  int64_t copy_bytes = 0;
};

/// One profiled run, for the trace: when it started (ms from the first) and its steps.
struct TracedRun {
  double start_ms = 0;
  runtime::RunProfile profile;
};

struct ModelBenchResult {
  std::string model, target, device, date;
  /// CPU: the --cpu the kernels that ran were compiled for (runtime::Model::code).
  std::string code;
  /// CPU: which steps ran side by side (runtime::Model::schedule), or "".
  std::string side_by_side;
  std::optional<double> compile_s;  ///< for a compiled graph
  int64_t arena_bytes = 0;
  /// CPU: the system's transparent huge page mode, which decides whether the arena and
  /// packed weights the runtime advises onto huge pages get them; empty for CUDA.
  std::string huge_pages;
  int runs = 0, warmup = 0, threads = 0;
  std::string latency_clock;  ///< what a timed run is
  LatencyStats latency_ms;
  double throughput_per_s = 0;  ///< runs per second at the median latency
  /// How each input that was not given was filled ("%x: f32 uniform in [-1, 1), seed 1").
  std::vector<std::string> random_inputs;
  std::vector<StepResult> steps;  ///< empty without a profile
  std::optional<ProfileSummary> summary;
  std::vector<TracedRun> traced;
};

/// Compiles (a graph) or loads (an artifact), fills the inputs, times the runs, and with
/// a profile, times every step. `progress` receives a line per stage.
Result<ModelBenchResult> bench_model(const ModelSource& source, const ModelBenchOptions& options,
                                     const std::function<void(const std::string&)>& progress);

/// Seeded random values for every param of `graph` with no weight (--random-weights):
/// floats uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)) where fan_in is the product of all
/// dims but the last (1 for rank 0 and 1), integers as random_inputs makes them.
std::map<std::string, ir::Tensor> random_weights(const ir::Graph& graph);

/// The bound of each integer argument the graph uses as indices, by name: the rows of the
/// table a gather reads with it, or the classes of a cross_entropy it labels (the least
/// over its uses, followed through movement ops, casts and calls).
std::map<std::string, int64_t> index_bounds(const ir::Graph& graph);

std::string model_table(const ModelBenchResult& result);
std::string model_json(const ModelBenchResult& result);
/// The profiled runs as Chrome trace events ({"traceEvents": [...]}), one complete event
/// per step per run, for Perfetto and chrome://tracing.
std::string model_trace(const ModelBenchResult& result);

}  // namespace kiln::bench
