// kiln bench MODEL: one model's latency, its per-step profile and a trace.
#include <fmt/format.h>

#include "base/file.h"
#include "bench/model_bench.h"
#include "runtime/format/artifact.h"
#include "runtime/model.h"
#include "runtime/npy.h"
#include "tools/kiln/cli.h"

namespace kiln::cli {

constexpr std::string_view kBenchModelHelp =
    R"(usage: kiln bench MODEL.kir|MODEL.kiln [--target=cpu|cuda] [--weights W.safetensors | --random-weights]
                  [--input NAME=X.npy ...] [--repeat=N] [--warmup=N] [--threads=N] [--cpu=LIST]
                  [--json FILE] [--profile] [--trace FILE] [--quick] [--steps-in-order]

Times one model: a .kir is compiled first (the compile time is reported), a .kiln is loaded
as it is. Prints a table on stdout and progress on stderr. Build with -c opt for real
figures (bazel run -c opt //tools:kiln -- bench ...).

Inputs not given with --input get seeded random data (input k of the signature, from 1,
seed k): floats uniform in [-1, 1); integers that index a table (gather, scatter_add) in
[0, the table's rows along the axis), labels of cross_entropy in [0, classes), other
integers in [0, 10); bools 0 or 1. A .kiln finds these uses in the IR it embeds.

The latency of a run: on the CPU, run() on 64-byte-aligned host buffers; on CUDA,
run_device() on device buffers (the CUDA Graph replayed, then synchronized), as the JSON
says in latency_clock.

  --target=cpu|cuda   where to run (default: cpu; a .kiln runs where it was compiled for,
                      and --target must agree)
  --weights=FILE      params (and initial state) from a safetensors file, by name
  --random-weights    seeded random params: floats uniform in +-1/sqrt(fan_in), fan_in
                      the product of all dims but the last; state starts at zero, as a
                      training run does
  --input NAME=PATH   the value of input %NAME, a .npy file of exactly its type (repeatable)
  --repeat=N          timed runs, and profiled runs with --profile (default: 100)
  --warmup=N          untimed runs first (default: 10)
  --threads=N         runtime threads (default: one per hardware thread)
  --cpu=LIST          a .kir's CPU targets, as kiln compile --cpu takes them
  --allow-tf32        a .kir for CUDA: f32 matmuls may use TF32 (kiln compile --allow-tf32)
  --precision=P       a .kir: f32 (default), bf16 or f16, as kiln compile --precision
  --json=FILE         write the results as JSON (fields: docs/profiling.md)
  --profile           time every step: kernels, library calls, and the copies after them,
                      each with its bytes, GB/s, fraction of a plain copy's bandwidth,
                      flops, and a library step's kernel where the runtime names it; on
                      CUDA with events between plain launches (no graph)
  --trace=FILE        with --profile: write the profiled runs as Chrome trace events,
                      for Perfetto (ui.perfetto.dev) or chrome://tracing
  --quick             5 timed runs after 1 warm-up, for a first look and tests
  --steps-in-order    the CPU: run every step in program order, none side by side
                      (runtime::Options::side_by_side_steps off), to measure what the
                      side-by-side schedule (the header's "schedule:" line) gains
  -h, --help          this help
)";

int run_bench_model(const Args& args) {
  constexpr std::string_view cmd = "kiln bench";
  if (args.positional.size() != 1)
    return fail(cmd, fmt::format("expected one model file, got {}; see 'kiln bench --help'", args.positional.size()));
  for (std::string_view suite_flag : {"suite", "filter", "svg", "export"})
    if (args.has(suite_flag))
      return fail(cmd, fmt::format("--{} is a flag of the suites; a model takes none", suite_flag));
  const std::string& path = args.positional[0];
  const bool is_kir = path.size() >= 4 && path.substr(path.size() - 4) == ".kir";
  const bool is_kiln = path.size() >= 5 && path.substr(path.size() - 5) == ".kiln";
  if (!is_kir && !is_kiln) return fail(cmd, fmt::format("{}: expected a .kir or .kiln file", path));
  if (args.has("weights") && args.has("random-weights"))
    return fail(cmd, "give --weights or --random-weights, not both");
  if (args.has("trace") && !args.has("profile")) return fail(cmd, "--trace needs --profile");

  bench::ModelSource source;
  source.name = path;
  if (is_kir) {
    auto graph = load_graph(cmd, path);
    if (!graph.ok()) return fail_located(graph.error());
    auto weights = read_weights_flag(args);
    if (!weights.ok()) return fail(cmd, weights.error().message);
    source.weights = args.has("random-weights") ? bench::random_weights(*graph) : std::move(*weights);
    source.graph = std::move(*graph);
  } else {
    if (args.has("weights") || args.has("random-weights"))
      return fail(cmd, fmt::format("{} holds its weights; --weights and --random-weights are for a .kir", path));
    auto bytes = format::read_artifact_file(path);
    if (!bytes.ok())
      return fail(cmd, bytes.error().code ? fmt::format("{}: {}", path, bytes.error().message) : bytes.error().message);
    for (std::string_view compile_flag : {"cpu", "allow-tf32", "precision"})
      if (args.has(compile_flag))
        return fail(cmd, fmt::format("--{} is for compiling a .kir; {} holds its kernels already", compile_flag, path));
    source.artifact = std::move(*bytes);
  }

  bench::ModelBenchOptions options;
  options.target = args.get("target");
  options.cpu = args.get("cpu", options.cpu);
  options.profile = args.has("profile");
  options.side_by_side_steps = !args.has("steps-in-order");
  options.allow_tf32 = args.has("allow-tf32");
  options.precision = args.get("precision", "f32");
  if (args.has("quick")) options.repeat = 5, options.warmup = 1;
  auto repeat = integer_flag(args, "repeat", options.repeat, 1, 1'000'000);
  if (!repeat.ok()) return fail(cmd, repeat.error().message);
  auto warmup = integer_flag(args, "warmup", options.warmup, 0, 1'000'000);
  if (!warmup.ok()) return fail(cmd, warmup.error().message);
  auto threads = integer_flag(args, "threads", 0, 1, runtime::kMaxThreads);
  if (!threads.ok()) return fail(cmd, threads.error().message);
  options.repeat = static_cast<int>(*repeat);
  options.warmup = static_cast<int>(*warmup);
  options.threads = static_cast<int>(*threads);
  auto input_files = named_values(args, "input", "NAME=PATH.npy");
  if (!input_files.ok()) return fail(cmd, input_files.error().message);
  for (const NamedValue& input : *input_files) {
    auto npy = runtime::read_npy_file(input.value);
    if (!npy.ok()) return fail(cmd, fmt::format("--input {}: {}", input.name, npy.error().message));
    // read_npy_file names only the runtime's element types.
    const runtime::ElementType type = runtime::element_type_named(npy->dtype).value_or(runtime::ElementType::F32);
    options.inputs[input.name] = {{input.name, type, npy->shape}, std::move(npy->data)};
  }

  auto result = bench::bench_model(source, options, [](const std::string& line) { fmt::print(stderr, "{}\n", line); });
  if (!result.ok()) return fail(cmd, fmt::format("{}: {}", path, result.error().message));
  fmt::print("{}", bench::model_table(*result));
  if (args.has("json")) {
    Status s = write_file(args.get("json"), bench::model_json(*result));
    if (!s.ok()) return fail(cmd, s.error().message);
  }
  if (args.has("trace")) {
    Status s = write_file(args.get("trace"), bench::model_trace(*result));
    if (!s.ok()) return fail(cmd, s.error().message);
  }
  return 0;
}

std::string_view bench_model_help() { return kBenchModelHelp; }

}  // namespace kiln::cli
