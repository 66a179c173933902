#include "bench/model_bench.h"

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>

#include "bench/machine.h"
#include "bench/timing.h"
#include "ir/parser.h"
#include "ir/shape_inference.h"
#include "runtime/cpu/page_memory.h"
#include "runtime/format/artifact.h"
#include "runtime/model.h"

namespace kiln::bench {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// What a run spends outside its steps, per step, at most: the clock reads, the step's
// pointers, and on CUDA the event records and their readout after the run.
constexpr double kCpuPerStepOverheadMs = 0.01, kCudaPerStepOverheadMs = 0.02;
// Integer inputs that are no table's indices and no labels.
constexpr int64_t kDefaultIntBound = 10;

// The least index bound among the uses of `v` in `g` (0: none), each value's once: a value
// used twice by each of a chain of ops would otherwise be walked 2^length times.
using BoundMemo = std::map<std::pair<const ir::Graph*, ir::ValueId>, int64_t>;
int64_t use_bound(const ir::Graph& g, ir::ValueId v, int depth, BoundMemo& memo) {
  if (depth > 64) return 0;  // functions call only earlier functions: deeper is a loop
  auto known = memo.find({&g, v});
  if (known != memo.end()) return known->second;
  int64_t bound = 0;
  auto least = [&](int64_t b) {
    if (b > 0) bound = bound == 0 ? b : std::min(bound, b);
  };
  for (const ir::Node& n : g.nodes)
    for (size_t p = 0; p < n.operands.size(); ++p) {
      if (n.operands[p] != v) continue;
      const ir::TensorType& first = g.type(n.operands[0]);
      switch (n.op) {
        case ir::Op::Gather:
        case ir::Op::ScatterAdd:
          if (p == 1)
            if (auto axis = ir::normalize_axis(n.attrs.get_int("axis", 0), first.rank()))
              least(first.shape[static_cast<size_t>(*axis)]);
          break;
        case ir::Op::CrossEntropy:
          if (p == 1 && !first.shape.empty()) least(first.shape.back());
          break;
        case ir::Op::Reshape:
        case ir::Op::Transpose:
        case ir::Op::Broadcast:
        case ir::Op::Slice:
        case ir::Op::Concat:
        case ir::Op::Cast: least(use_bound(g, n.result, depth + 1, memo)); break;
        case ir::Op::Call: {
          const std::string callee = n.attrs.get_string("callee");
          for (const ir::Graph& f : g.functions)
            if (f.name == callee && p < f.args.size()) least(use_bound(f, f.args[p].value, depth + 1, memo));
          break;
        }
        default: break;
      }
    }
  memo[{&g, v}] = bound;
  return bound;
}

// The graph an artifact was compiled from, when its IR section parses.
std::optional<ir::Graph> embedded_graph(const format::ArtifactView& view) {
  auto ir = view.section(*view.metadata().ir());
  auto g = ir::parse(std::string_view(reinterpret_cast<const char*>(ir.data()), ir.size()), "artifact IR");
  if (!g.ok()) return std::nullopt;
  return std::move(*g);
}

// p in [0, 1] of sorted `ms`, nearest rank.
double percentile(const std::vector<double>& sorted, double p) {
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

LatencyStats stats(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  LatencyStats s;
  s.min = ms.front();
  s.max = ms.back();
  s.median = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
  s.p90 = percentile(ms, 0.9);
  s.p99 = percentile(ms, 0.99);
  double sum = 0;
  for (double m : ms) sum += m;
  s.mean = sum / static_cast<double>(ms.size());
  return s;
}

double median_of(std::vector<double> v) { return stats(std::move(v)).median; }

// The model's buffers, every input filled: the caller's, checked, or seeded random data
// (described in `random_inputs`).
Result<std::unique_ptr<ModelBuffers>> make_buffers(const runtime::Model& model, const ModelBenchOptions& options,
                                                   const std::map<std::string, int64_t>& bounds,
                                                   std::vector<std::string>& random_inputs) {
  for (const auto& [name, given] : options.inputs)
    if (std::none_of(model.inputs().begin(), model.inputs().end(),
                     [&](const runtime::TensorInfo& i) { return i.name == name; }))
      return make_error(fmt::format("--input {}: the model has no input %{}", name, name));
  return ModelBuffers::make(model, [&](const runtime::TensorInfo& info, size_t index, uint8_t* bytes) -> Status {
    auto given = options.inputs.find(info.name);
    if (given != options.inputs.end()) {
      const runtime::TensorInfo& got = given->second.info;
      if (got.type != info.type || got.shape != info.shape)
        return make_error(fmt::format("--input {}: the model's input %{} is {}, but the file holds {}", info.name,
                                      info.name, info.type_string(), got.type_string()));
      std::copy(given->second.data.begin(), given->second.data.end(), bytes);
      return Status::Ok();
    }
    const uint64_t seed = index + 1;
    auto bound = bounds.find(info.name);
    const int64_t ints = bound != bounds.end() ? bound->second : kDefaultIntBound;
    fill_random(info, seed, bytes, 1, ints);
    const bool is_int = info.type == runtime::ElementType::I32 || info.type == runtime::ElementType::I64;
    random_inputs.push_back(
        is_int ? fmt::format("%{}: {} uniform in [0, {}){}, seed {}", info.name, info.type_string(), ints,
                             bound != bounds.end() ? " (its indices' bound)" : "", seed)
        : info.type == runtime::ElementType::Bool
            ? fmt::format("%{}: {} 0 or 1, seed {}", info.name, info.type_string(), seed)
            : fmt::format("%{}: {} uniform in [-1, 1), seed {}", info.name, info.type_string(), seed));
    return Status::Ok();
  });
}

// The steps' figures and the summary, from the profiled runs.
void summarize(ModelBenchResult& r, const std::vector<runtime::StepInfo>& steps, double copy_gbps, int64_t copy_bytes,
               bool cuda) {
  // The time some step ran: steps that ran side by side overlap, and count once.
  auto time_in_steps = [](const runtime::RunProfile& profile) {
    std::vector<runtime::StepTime> steps = profile.steps;
    std::sort(steps.begin(), steps.end(),
              [](const runtime::StepTime& a, const runtime::StepTime& b) { return a.start_ms < b.start_ms; });
    double covered = 0, reached = 0;
    for (const runtime::StepTime& st : steps) {
      const double end = st.start_ms + st.ms;
      if (end > reached) covered += end - std::max(reached, st.start_ms);
      reached = std::max(reached, end);
    }
    return covered;
  };
  ProfileSummary s;
  s.runs = static_cast<int>(r.traced.size());
  s.clock = r.traced.front().profile.clock;
  s.copy_gbps = copy_gbps;
  s.copy_bytes = copy_bytes;
  s.per_step_overhead_ms = cuda ? kCudaPerStepOverheadMs : kCpuPerStepOverheadMs;
  for (size_t i = 0; i < steps.size(); ++i) {
    std::vector<double> ms;
    for (const TracedRun& t : r.traced) ms.push_back(t.profile.steps[i].ms);
    StepResult step{steps[i], median_of(ms), 0, 0, 0};
    step.gbps = gbps(step.info.bytes, step.ms);
    step.fraction_of_copy = copy_gbps > 0 ? step.gbps / copy_gbps : 0;
    step.tflops = step.ms > 0 ? static_cast<double>(step.info.flops) / step.ms / 1e9 : 0;
    s.steps_ms += step.ms;
    (step.info.kind == "library"   ? s.library_ms
     : step.info.kind == "scatter" ? s.other_ms
                                   : s.memory_bound_ms) += step.ms;
    r.steps.push_back(std::move(step));
  }
  std::vector<double> run_ms, unaccounted;
  for (const TracedRun& t : r.traced) {
    run_ms.push_back(t.profile.total_ms);
    unaccounted.push_back(t.profile.total_ms - time_in_steps(t.profile));
  }
  s.profiled_run_ms = median_of(run_ms);
  // The least over the runs: a step the profile misses is missing from every run, while a
  // thread descheduled between steps (a busy machine) only adds time to some.
  s.unaccounted_ms = *std::min_element(unaccounted.begin(), unaccounted.end());
  s.overhead_ms = r.latency_ms.median - s.steps_ms;
  s.adds_up = std::abs(s.unaccounted_ms) <=
              0.1 * s.profiled_run_ms + s.per_step_overhead_ms * static_cast<double>(steps.size());
  r.summary = s;
}

}  // namespace

std::map<std::string, int64_t> index_bounds(const ir::Graph& graph) {
  std::map<std::string, int64_t> bounds;
  BoundMemo memo;
  for (const ir::Arg& a : graph.args)
    if (ir::is_int(graph.type(a.value).dtype))
      if (int64_t b = use_bound(graph, a.value, 0, memo); b > 0) bounds[graph.value_name(a.value)] = b;
  return bounds;
}

std::map<std::string, ir::Tensor> random_weights(const ir::Graph& graph) {
  std::map<std::string, ir::Tensor> weights;
  const std::map<std::string, int64_t> bounds = index_bounds(graph);
  uint64_t seed = 1001;
  for (const ir::Arg& a : graph.args) {
    if (a.kind != ir::ArgKind::Param) continue;
    const ir::TensorType& type = graph.type(a.value);
    const std::string& name = graph.value_name(a.value);
    int64_t fan_in = 1;
    for (size_t d = 0; d + 1 < type.shape.size(); ++d) fan_in *= type.shape[d];
    if (type.shape.size() < 2) fan_in = 1;
    runtime::TensorInfo info{name, static_cast<runtime::ElementType>(type.dtype), type.shape};
    std::vector<uint8_t> bytes(static_cast<size_t>(info.bytes()));
    auto bound = bounds.find(name);
    fill_random(info, seed++, bytes.data(), 1 / std::sqrt(static_cast<double>(fan_in)),
                bound != bounds.end() ? bound->second : kDefaultIntBound);
    weights[name] = ir::tensor_from_bytes(type, bytes.data());
  }
  return weights;
}

Result<ModelBenchResult> bench_model(const ModelSource& source, const ModelBenchOptions& options,
                                     const std::function<void(const std::string&)>& progress) {
  if (options.repeat < 1) return make_error(fmt::format("--repeat must be at least 1, got {}", options.repeat));
  ModelBenchResult r;
  r.model = source.name;
  r.date = today_utc();
  r.runs = options.repeat;
  r.warmup = options.warmup;
  std::vector<uint8_t> artifact = source.artifact;
  std::optional<ir::Graph> graph = source.graph;
  if (graph) {
    r.target = options.target.empty() ? "cpu" : options.target;
    KILN_RETURN_IF_ERROR(check_target(r.target));
    CompileOptions compile;
    compile.target = r.target;
    compile.cpu = options.cpu;
    compile.allow_tf32 = options.allow_tf32;
    compile.precision = options.precision;
    compile.weights = source.weights;
    progress(fmt::format("compiling {} for {}", source.name, r.target));
    const Clock::time_point started = Clock::now();
    KILN_ASSIGN_OR_RETURN(artifact, compile_to_artifact(*graph, compile));
    r.compile_s = ms_since(started) / 1000;
  }
  KILN_ASSIGN_OR_RETURN(format::ArtifactView view, format::read_artifact(artifact));
  const std::string artifact_target = view.metadata().target()->str();
  const std::string family = artifact_target.substr(0, artifact_target.find('-'));
  if (!graph) {
    if (!options.target.empty() && options.target != family)
      return make_error(
          fmt::format("{} is a {} artifact, but --target={} was given", source.name, artifact_target, options.target));
    r.target = family;
    graph = embedded_graph(view);
  }
  const std::map<std::string, int64_t> bounds = graph ? index_bounds(*graph) : std::map<std::string, int64_t>{};
  r.arena_bytes = static_cast<int64_t>(view.metadata().arena_bytes());
  const bool cuda = r.target == "cuda";
  runtime::Options load_options;
  load_options.threads = options.threads;
  load_options.side_by_side_steps = options.side_by_side_steps;
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<runtime::Model> model,
                        runtime::Model::load_bytes(std::move(artifact), load_options));
  r.threads = cuda                  ? 0
              : options.threads > 0 ? options.threads
                                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<ModelBuffers> buffers, make_buffers(*model, options, bounds, r.random_inputs));
  if (cuda) {
    KILN_RETURN_IF_ERROR(buffers->to_device());
    KILN_ASSIGN_OR_RETURN(r.device, gpu_name(buffers->driver()));
    r.latency_clock = "host steady_clock around run_device on device buffers (CUDA Graph replay, then synchronize)";
  } else {
    r.device = cpu_model_name();
    r.code = model->code();
    r.side_by_side = model->schedule();
    r.huge_pages = runtime::cpu::transparent_huge_pages();
    r.latency_clock = "host steady_clock around run on host buffers (64-byte aligned)";
  }
  auto run = [&] { return buffers->run(); };
  progress(fmt::format("{} warm-up runs, then {} timed runs", options.warmup, options.repeat));
  for (int i = 0; i < options.warmup; ++i) KILN_RETURN_IF_ERROR(run());
  std::vector<double> ms;
  for (int i = 0; i < options.repeat; ++i) {
    const Clock::time_point started = Clock::now();
    KILN_RETURN_IF_ERROR(run());
    ms.push_back(ms_since(started));
  }
  r.latency_ms = stats(ms);
  r.throughput_per_s = r.latency_ms.median > 0 ? 1000 / r.latency_ms.median : 0;
  if (!options.profile) return r;

  // The copy moves as many bytes as the largest step, so both meet the same caches.
  int64_t copy_bytes = int64_t{1} << 20;
  for (const runtime::StepInfo& s : model->steps()) copy_bytes = std::max(copy_bytes, s.bytes / 2);
  copy_bytes = std::min(copy_bytes, int64_t{1} << 30);
  progress(fmt::format("timing a plain copy of {} bytes, then {} profiled runs", copy_bytes, options.repeat));
  Timing copy;
  if (cuda) {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<DeviceCopy> device_copy, DeviceCopy::make(buffers->driver(), copy_bytes));
    copy = time_runs(std::min(options.repeat, 20), [&] { device_copy->run(); });
  } else {
    runtime::ThreadPool pool(r.threads - 1);
    HostCopy host_copy(copy_bytes, pool, r.threads);
    copy = time_runs(std::min(options.repeat, 20), [&] { host_copy.run(); });
  }
  const Clock::time_point first = Clock::now();
  for (int i = 0; i < options.repeat; ++i) {
    const double start = ms_since(first);
    auto profile = buffers->profile();
    if (!profile.ok()) return profile.error();
    r.traced.push_back({start, std::move(*profile)});
  }
  summarize(r, model->steps(), gbps(2 * copy_bytes, copy.median_ms), copy_bytes, cuda);
  return r;
}

}  // namespace kiln::bench
