// kiln bench: the benchmark suites, fused against unfused against a plain copy.
#include <fmt/format.h>

#include <filesystem>

#include "base/file.h"
#include "bench/runner.h"
#include "bench/suite.h"
#include "ir/printer.h"
#include "runtime/format/safetensors.h"
#include "runtime/model.h"
#include "tools/kiln/cli.h"

namespace kiln::cli {

constexpr std::string_view kBenchHelp =
    R"(usage: kiln bench [--target=cpu|cuda] [--cpu=LIST] [--suite=fusion|models] [--filter=REGEX] [--repeat=N]
                  [--threads=N] [--json FILE] [--svg FILE] [--quick] [--allow-tf32]
                  [--precision=f32|bf16|f16]
       kiln bench --suite=fusion|models --export=DIR [--quick]

Compiles each row of a benchmark suite twice (fused, and with --no-fusion), runs both with
the runtime, and times them in alternation with a plain copy of the same bytes: the
median, min and max of N timed runs after a warm-up. Prints a table on stdout and progress
on stderr. Build with -c opt (bazel run -c opt //tools:kiln -- bench) for real figures.

The fusion suite: coscos, chain2, chain4, chain8, chain16, bias_gelu, softmax_256,
softmax_4096, softmax_32768, layernorm, residual_layernorm, mlp_forward, mlp_train_step
(64M f32 tensors, 256 MiB each; MLP batch 256).

The models suite, models people run at the sizes they run them: gpt2_block (GPT-2 small's
block, C=768, 12 heads, causal attention, tanh GELU, B=8, T=512, forward),
gpt2_block_train (its training step: MSE loss, every gradient, AdamW), bert_layer
(BERT-base's encoder layer, post-norm, erf GELU, a padding mask, B=16, T=128, forward),
llama_block and llama_block_train (a LLaMA-style block at GPT-2's sizes: RMSNorm, rotary
embeddings, 4 key-value heads for 12 query heads, SwiGLU 768-2048-768; forward, and its
AdamW training step), mlp_train (784-512-512-10, cross entropy, Adam, batch 128), resnet18 (torchvision's
ResNet-18, inference batch norm, B=16, 224x224) and cnn_train (the Fashion-MNIST CNN's
training step, Adam, batch 128).

  --target=cpu|cuda   where to run (default: cpu); cuda times runs on device memory
                      (inputs and outputs stay on the GPU) against a device-to-device copy
  --cpu=LIST          CPU target: the CPUs to compile for, as 'kiln compile --cpu' takes
                      them (default: kiln compile's)
  --suite=NAME        the suite: fusion or models (default: fusion)
  --filter=REGEX      only the rows whose name matches (ECMAScript regex, anywhere in the name)
  --repeat=N          timed runs per candidate (default: 20)
  --threads=N         runtime threads, and the copy's (default: one per hardware thread)
  --json=FILE         write the results as JSON (fields: docs/benchmarks.md)
  --svg=FILE          write a chart: speedup of fused over unfused, fraction of copy bandwidth
  --quick             small sizes (64K f32 tensors, MLP batch 32; models: C=64, T=16, B=2),
                      for a first look and tests
  --allow-tf32        CUDA: compile with --allow-tf32 (f32 matmuls on TF32 tensor cores);
                      the JSON says so, and compare_torch.py then sets PyTorch's
                      float32 matmul precision to "high" alike
  --precision=P       compile every row with kiln compile --precision=P (f32, bf16 or f16:
                      matmuls in P with f32 accumulation, the rest in f32); the JSON says
                      so, and compare_torch.py then runs PyTorch under torch.autocast in P
  --export=DIR        write each row of the suite as DIR/ROW.kir, with its params and
                      initial state in DIR/ROW.safetensors (for kiln bench ROW.kir --profile)
                      instead of timing it
  -h, --help          this help
)";

namespace {

// Writes each row of a suite as DIR/ROW.kir and its params and initial state as
// DIR/ROW.safetensors, for kiln bench MODEL --profile, kiln compile and other tools.
int export_suite(const std::string& suite, bool quick, const std::string& dir) {
  constexpr std::string_view cmd = "kiln bench";
  auto rows = bench::suite_rows(suite, quick);
  if (!rows.ok()) return fail(cmd, rows.error().message);
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return fail(cmd, fmt::format("cannot create the directory '{}': {}", dir, error.message()));
  for (const bench::SuiteRow& row : *rows) {
    const std::string base = (std::filesystem::path(dir) / row.name).string();
    Status s = write_file(base + ".kir", "# " + row.description + "\n" + ir::print(row.graph));
    if (!s.ok()) return fail(cmd, s.error().message);
    std::vector<format::SafetensorsTensor> tensors;
    for (const auto* values : {&row.weights, &row.state})
      for (const auto& [name, t] : *values)
        tensors.push_back({name, std::string(format::kSafetensorsDtypes[static_cast<int>(t.type.dtype)]), t.type.shape,
                           ir::tensor_to_bytes(t)});
    s = format::write_safetensors_file(base + ".safetensors", tensors);
    if (!s.ok()) return fail(cmd, s.error().message);
    fmt::print("{}.kir {}.safetensors\n", base, base);
  }
  return 0;
}

}  // namespace

int run_bench(std::span<char* const> argv) {
  constexpr std::string_view cmd = "kiln bench";
  // The suites' flags and a model's, in one parser: a model is a positional argument.
  constexpr FlagSpec specs[] = {{"target", true}, {"cpu", true},       {"suite", true},    {"filter", true},
                                {"repeat", true}, {"threads", true},   {"json", true},     {"svg", true},
                                {"quick"},        {"weights", true},   {"random-weights"}, {"input", true, true},
                                {"warmup", true}, {"profile"},         {"trace", true},    {"export", true},
                                {"allow-tf32"},   {"precision", true}, {"steps-in-order"}};
  auto parsed = parse_args(cmd, argv, specs);
  if (!parsed.ok()) return fail_located(parsed.error());
  if (parsed->help) {
    fmt::print("{}\n{}", bench_model_help(), kBenchHelp);
    return 0;
  }
  if (!parsed->positional.empty()) return run_bench_model(*parsed);
  for (std::string_view model_flag :
       {"weights", "random-weights", "input", "warmup", "profile", "trace", "steps-in-order"})
    if (parsed->has(model_flag))
      return fail(cmd, fmt::format("--{} is a flag of kiln bench MODEL; the suites take none", model_flag));
  if (parsed->has("export")) {
    for (std::string_view timing_flag :
         {"target", "cpu", "filter", "repeat", "threads", "json", "svg", "allow-tf32", "precision"})
      if (parsed->has(timing_flag))
        return fail(cmd, fmt::format("--export writes the suite's rows and times nothing; it takes --suite and "
                                     "--quick, not --{}",
                                     timing_flag));
    return export_suite(parsed->get("suite", "fusion"), parsed->has("quick"), parsed->get("export"));
  }
  bench::BenchOptions options;
  options.target = parsed->get("target", "cpu");
  options.cpu = parsed->get("cpu", options.cpu);
  options.suite = parsed->get("suite", "fusion");
  options.filter = parsed->get("filter");
  options.quick = parsed->has("quick");
  options.allow_tf32 = parsed->has("allow-tf32");
  options.precision = parsed->get("precision", "f32");
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
