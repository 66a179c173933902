// kiln bench: the benchmark suites, fused against unfused against a plain copy.
#include <fmt/format.h>

#include "base/file.h"
#include "bench/runner.h"
#include "runtime/model.h"
#include "tools/kiln/cli.h"

namespace kiln::cli {

constexpr std::string_view kBenchHelp =
    R"(usage: kiln bench [--target=cpu|cuda] [--cpu=LIST] [--suite=fusion] [--filter=REGEX] [--repeat=N] [--threads=N]
                  [--json FILE] [--svg FILE] [--quick]

Compiles each row of a benchmark suite twice (fused, and with --no-fusion), runs both with
the runtime, and times them in alternation with a plain copy of the same bytes: the
median, min and max of N timed runs after a warm-up. Prints a table on stdout and progress
on stderr. Build with -c opt (bazel run -c opt //tools:kiln -- bench) for real figures.

The fusion suite: coscos, chain2, chain4, chain8, chain16, bias_gelu, softmax_256,
softmax_4096, softmax_32768, layernorm, residual_layernorm, mlp_forward, mlp_train_step
(64M f32 tensors, 256 MiB each; MLP batch 256).

  --target=cpu|cuda   where to run (default: cpu); cuda times runs on device memory
                      (inputs and outputs stay on the GPU) against a device-to-device copy
  --cpu=LIST          CPU target: the CPUs to compile for, as 'kiln compile --cpu' takes
                      them (default: x86-64-v3,x86-64-v4)
  --suite=NAME        the suite (default: fusion)
  --filter=REGEX      only the rows whose name matches (ECMAScript regex, anywhere in the name)
  --repeat=N          timed runs per candidate (default: 20)
  --threads=N         runtime threads, and the copy's (default: one per hardware thread)
  --json=FILE         write the results as JSON (fields: docs/benchmarks.md)
  --svg=FILE          write a chart: speedup of fused over unfused, fraction of copy bandwidth
  --quick             small sizes (64K f32 tensors, MLP batch 32), for a first look and tests
  -h, --help          this help
)";

int run_bench(std::span<char* const> argv) {
  constexpr std::string_view cmd = "kiln bench";
  constexpr FlagSpec specs[] = {{"target", true},  {"cpu", true},  {"suite", true}, {"filter", true}, {"repeat", true},
                                {"threads", true}, {"json", true}, {"svg", true},   {"quick"}};
  auto parsed = parse_args(cmd, argv, specs);
  if (!parsed.ok()) return fail_located(parsed.error());
  if (parsed->help) {
    fmt::print("{}", kBenchHelp);
    return 0;
  }
  if (!parsed->positional.empty())
    return fail(cmd, fmt::format("unexpected argument '{}'; see 'kiln bench --help'", parsed->positional[0]));
  bench::BenchOptions options;
  options.target = parsed->get("target", "cpu");
  options.cpu = parsed->get("cpu", options.cpu);
  options.suite = parsed->get("suite", "fusion");
  options.filter = parsed->get("filter");
  options.quick = parsed->has("quick");
  auto repeat = integer_flag(*parsed, "repeat", options.repeat, 1, 1'000'000);
  if (!repeat.ok()) return fail(cmd, repeat.error().message);
  options.repeat = static_cast<int>(*repeat);
  auto threads = integer_flag(*parsed, "threads", options.threads, 1, runtime::kMaxThreads);
  if (!threads.ok()) return fail(cmd, threads.error().message);
  options.threads = static_cast<int>(*threads);
  auto result = bench::run_suite(options, [](const std::string& line) { fmt::print(stderr, "{}\n", line); });
  if (!result.ok()) return fail(cmd, result.error().message);
  fmt::print("{}", bench::to_table(*result));
  if (parsed->has("json")) {
    Status s = write_file(parsed->get("json"), bench::to_json(*result));
    if (!s.ok()) return fail(cmd, s.error().message);
  }
  if (parsed->has("svg")) {
    Status s = write_file(parsed->get("svg"), bench::to_svg(*result));
    if (!s.ok()) return fail(cmd, s.error().message);
  }
  return 0;
}

}  // namespace kiln::cli
