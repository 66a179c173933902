// kiln eval: run a graph with the reference interpreter.
#include <fmt/format.h>
#include <filesystem>

#include "ir/interpreter.h"
#include "ir/printer.h"
#include "tools/kiln/cli.h"
#include "tools/kiln/tensor_text.h"

namespace kiln::cli {

constexpr std::string_view kEvalHelp =
    R"(usage: kiln eval FILE.kir [--input NAME=PATH.npy ...] [--weights W.safetensors] [--output DIR]
                 [--passes=a,b,c] [--pipeline=default]

Runs FILE.kir with the reference interpreter. Every argument (input, param or state)
needs a value: an --input whose .npy file holds exactly its element type and shape, or
(params and state) a tensor of --weights.
With --output, writes one DIR/NAME.npy per returned value (NAME without '%');
without it, prints the returned values. After fusion and memory-plan (for example
--pipeline=default) it runs the program step by step through its planned arena.

  --input NAME=PATH   the value of argument %NAME (repeatable)
  --output DIR        directory for the results (created if missing)
  --passes=LIST       comma-separated passes to run before evaluating
  --pipeline=default  then the standard pipeline
  --wrt=NAMES         arguments for the autodiff pass
  --no-fusion         every op in a step of its own
  --stats             program and memory figures to stderr
  -h, --help          this help
)";

int run_eval(std::span<char* const> argv) {
  constexpr std::string_view cmd = "kiln eval";
  std::vector<FlagSpec> specs(std::begin(kPassFlags), std::end(kPassFlags));
  specs.push_back({"input", true, true});
  specs.push_back({"output", true});
  specs.insert(specs.end(), std::begin(kWeightsFlags), std::end(kWeightsFlags));
  auto args = parse_args(cmd, argv, specs);
  if (!args.ok()) return fail_located(args.error());
  if (args->help) {
    fmt::print("{}{}", kEvalHelp, kWeightsHelp);
    return 0;
  }
  if (args->positional.size() != 1) return fail(cmd, "expected one input file; see 'kiln eval --help'");
  std::map<std::string, ir::Tensor> onnx_weights;
  auto graph = load_graph(cmd, args->positional[0], &onnx_weights);
  if (!graph.ok()) return fail_located(graph.error());
  // Results keep the names written in the file, even where a pass forwards a result to
  // another value (x*1 -> x).
  std::vector<std::string> result_names;
  std::vector<std::string> names = ir::display_names(*graph);
  for (ir::ValueId v : graph->results) result_names.push_back(names[v]);
  Status ok = run_passes(*graph, *args);
  if (!ok.ok()) return fail(cmd, ok.error().message);

  auto weights = read_weights_flag(*args);
  if (!weights.ok()) return fail(cmd, weights.error().message);
  weights->merge(onnx_weights);  // an .onnx file's initializers, unless --weights gives them
  auto matching = weights_options(*args);
  if (!matching.ok()) return fail(cmd, matching.error().message);
  auto matched = match_weights(*graph, *weights, *matching);
  if (!matched.ok()) return fail(cmd, matched.error().message);
  std::map<std::string, ir::Tensor> inputs = std::move(*matched);
  auto input_files = named_values(*args, "input", "NAME=PATH.npy");
  if (!input_files.ok()) return fail(cmd, input_files.error().message);
  for (const auto& [name, path] : *input_files) {
    const ir::Arg* arg = graph->find_arg(name);
    if (!arg) return fail(cmd, fmt::format("@{} has no argument %{}", graph->name, name));
    if (inputs.count(name)) return fail(cmd, fmt::format("%{} is given by both --weights and --input", name));
    auto tensor = read_tensor(path);
    if (!tensor.ok()) return fail(cmd, tensor.error().message);
    const ir::TensorType& want = graph->type(arg->value);
    if (tensor->type != want)
      return fail(cmd, fmt::format("argument %{} is {}, but {} holds {}", name, want.to_string(), path,
                                   tensor->type.to_string()));
    inputs.emplace(name, std::move(*tensor));
  }
  for (const ir::Arg& a : graph->args) {
    const std::string& name = graph->value_name(a.value);
    if (!inputs.count(name))
      return fail(cmd, fmt::format("missing --input {}=PATH.npy{} for argument %{}: {}", name,
                                   a.kind == ir::ArgKind::Input ? "" : " (or --weights)", name,
                                   graph->type(a.value).to_string()));
  }
  // A fused, planned program runs step by step through its arena.
  auto results = graph->program && graph->memory ? ir::evaluate_program(*graph, inputs) : ir::evaluate(*graph, inputs);
  if (!results.ok()) return fail(cmd, results.error().message);

  // Results a pass added (autodiff's gradients) print with their own names.
  std::vector<std::string> names_after = ir::display_names(*graph);
  std::string dir = args->get("output");
  if (!dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return fail(cmd, fmt::format("cannot create directory '{}': {}", dir, ec.message()));
  }
  for (size_t i = 0; i < results->size(); ++i) {
    const std::string& name = i < result_names.size() ? result_names[i] : names_after[graph->results[i]];
    const ir::Tensor& t = (*results)[i];
    if (dir.empty()) {
      std::string prefix = fmt::format("%{}: {} = ", name, t.type.to_string());
      fmt::print("{}{}\n", prefix,
                 format_tensor(ir::dtype_name(t.type.dtype), t.type.shape, ir::tensor_to_bytes(t), prefix.size()));
      continue;
    }
    std::string path = (std::filesystem::path(dir) / (name + ".npy")).string();
    Status written = write_tensor(path, t);
    if (!written.ok()) return fail(cmd, written.error().message);
    fmt::print("wrote {}: {}\n", path, t.type.to_string());
  }
  return 0;
}

}  // namespace kiln::cli
