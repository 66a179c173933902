#include "tools/kiln/cli.h"

#include <fmt/format.h>

#include "base/file.h"
#include "base/parse_number.h"
#include "compiler/safetensors.h"
#include "frontends/onnx/importer.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/program.h"
#include "passes/pipeline.h"
#include "runtime/npy.h"

namespace kiln::cli {

Result<ir::Graph> load_graph(std::string_view command, const std::string& path,
                             std::map<std::string, ir::Tensor>* onnx_weights,
                             const std::map<std::string, std::vector<int64_t>>& shapes,
                             std::map<std::string, std::string>* source_names) {
  if (path.ends_with(".onnx")) {
    auto imported = onnx_import::import_file(path, import_options(shapes));
    if (!imported.ok()) return make_error(fmt::format("{}: error: {}", command, imported.error().message));
    if (onnx_weights) *onnx_weights = std::move(imported->weights);
    if (source_names)
      for (const auto* names : {&imported->inputs, &imported->outputs})
        for (const onnx_import::NameMapping& m : *names) (*source_names)[m.kiln] = m.onnx;
    return std::move(imported->graph);
  }
  if (!shapes.empty())
    return make_error(fmt::format("{}: error: --shape is for .onnx files; {} is not one", command, path));
  auto text = read_file(path, ir::ParseLimits{}.max_bytes);
  if (!text.ok()) return make_error(fmt::format("{}: error: {}", command, text.error().message));
  return ir::parse(*text, path == "-" ? "<stdin>" : path);
}

onnx_import::ImportOptions import_options(const std::map<std::string, std::vector<int64_t>>& shapes) {
  onnx_import::ImportOptions options;
  options.shapes = shapes;
  return options;
}

Result<std::map<std::string, std::vector<int64_t>>> shape_flags(const Args& args) {
  KILN_ASSIGN_OR_RETURN(std::vector<NamedValue> specs, named_values(args, "shape", "NAME=D0,D1,..."));
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const NamedValue& spec : specs) {
    std::vector<int64_t>& dims = shapes[spec.name];
    for (size_t start = 0; start <= spec.value.size();) {
      const size_t comma = std::min(spec.value.find(',', start), spec.value.size());
      auto dim = parse_integer(std::string_view(spec.value).substr(start, comma - start));
      if (!dim || *dim < 0)
        return make_error(
            fmt::format("--shape {}={}: dims are integers from 0, separated by commas", spec.name, spec.value));
      dims.push_back(*dim);
      start = comma + 1;
    }
  }
  return shapes;
}

namespace {

std::vector<std::string> split_commas(const std::string& list) {
  std::vector<std::string> items;
  for (size_t start = 0; start < list.size();) {
    size_t comma = std::min(list.find(',', start), list.size());
    if (comma > start) items.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

void print_stats(const ir::Graph& graph) {
  if (!graph.program) return;
  int kernels = 0, library_calls = 0;
  for (const ir::Step& step : graph.program->steps) (step.kind == ir::StepKind::Library ? library_calls : kernels)++;
  fmt::print(stderr, "kernels: {}\nlibrary_calls: {}\n", kernels, library_calls);
  if (!graph.memory) return;
  const ir::MemoryPlan& plan = *graph.memory;
  fmt::print(stderr, "arena_bytes: {}\nlive_lower_bound_bytes: {}\nnaive_bytes: {}\n", plan.arena_bytes,
             plan.live_lower_bound_bytes, plan.naive_bytes);
}

}  // namespace

Status run_passes(ir::Graph& graph, const Args& args) {
  std::string names = args.get("passes");
  if (args.has("pipeline")) {
    KILN_ASSIGN_OR_RETURN(std::string pipeline, passes::pipeline_passes(args.get("pipeline")));
    names += (names.empty() ? "" : ",") + pipeline;
  }
  KILN_ASSIGN_OR_RETURN(std::vector<passes::PassSpec> specs, passes::parse_pipeline_text(names));
  // --wrt and --no-fusion are the options of every autodiff and fusion pass that sets none.
  if (args.has("wrt")) passes::set_option_default(specs, "autodiff", "wrt", args.get("wrt"));
  if (args.has("no-fusion")) passes::set_option_default(specs, "fusion", "fuse", "false");
  KILN_ASSIGN_OR_RETURN(passes::Pipeline pipeline, passes::pipeline_from_specs(specs));
  passes::DumpOptions dump;
  for (const std::string& name : split_commas(args.get("dump-after"))) {
    bool known = name == "all";
    std::vector<std::string> run;
    for (const auto& p : pipeline.passes()) {
      known = known || p->name() == name;
      run.emplace_back(p->name());
    }
    if (run.empty())
      return make_error(
          fmt::format("--dump-after={}: no pass runs; choose them with --passes=LIST or --pipeline=default", name));
    if (!known)
      return make_error(
          fmt::format("--dump-after={} names no pass that runs (they are: {}; or 'all')", name, fmt::join(run, ", ")));
    dump.after.insert(name);
  }
  dump.dir = args.get("dump-dir");
  dump.sink = [](std::string_view pass, std::string_view text) {
    fmt::print(stderr, "# IR after pass '{}'\n{}", pass, text);
  };
  pipeline.set_dump(std::move(dump));
  auto r = pipeline.run(graph);
  if (!r.ok()) return r.error();
  if (args.has("stats")) {
    if (!graph.program)
      return make_error("--stats needs a fused program: add --pipeline=default (or the fusion and memory-plan passes)");
    print_stats(graph);
  }
  return Status::Ok();
}

Result<std::map<std::string, ir::Tensor>> read_weights_flag(const Args& args) {
  if (!args.has("weights")) return std::map<std::string, ir::Tensor>();
  return read_safetensors(args.get("weights"));
}

Result<WeightsOptions> weights_options(const Args& args) {
  const std::string dtype = args.get("weights-dtype", "exact");
  if (dtype != "exact" && dtype != "convert")
    return make_error(fmt::format("--weights-dtype expects exact or convert, got '{}'", dtype));
  return WeightsOptions{dtype == "convert", args.has("allow-unused-weights")};
}

Result<ir::Tensor> read_tensor(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(runtime::NpyArray array, runtime::read_npy_file(path));
  ir::TensorType type{*ir::parse_dtype(array.dtype), array.shape};
  return ir::tensor_from_bytes(type, array.data.data());
}

Status write_tensor(const std::string& path, const ir::Tensor& t) {
  runtime::NpyArray array{std::string(ir::dtype_name(t.type.dtype)), t.type.shape, ir::tensor_to_bytes(t)};
  return runtime::write_npy_file(path, array);
}

}  // namespace kiln::cli
