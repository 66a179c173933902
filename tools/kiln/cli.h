// Shared pieces of the kiln subcommands: flags, files, tensors.
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "compiler/weights.h"
#include "frontends/onnx/importer.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "tools/kiln/flags.h"

namespace kiln::cli {

/// Reads and parses (and verifies) a .kir file ('-' for stdin), or imports an .onnx file
/// (its symbolic dims fixed by `shapes`, its initializers' values put in `onnx_weights`
/// where given). Errors are whole lines: a parse error carries its location, others the
/// command ("kiln opt: error: cannot read ..."), for fail_located.
/// Where given, `source_names` gets the ONNX names of its inputs and outputs by kiln name.
Result<ir::Graph> load_graph(std::string_view command, const std::string& path,
                             std::map<std::string, ir::Tensor>* onnx_weights = nullptr,
                             const std::map<std::string, std::vector<int64_t>>& shapes = {},
                             std::map<std::string, std::string>* source_names = nullptr);
/// Import options with the --shape flags' dims.
onnx_import::ImportOptions import_options(const std::map<std::string, std::vector<int64_t>>& shapes);
/// The --shape NAME=D0,D1,... flags (ONNX inputs' dims), by input name.
Result<std::map<std::string, std::vector<int64_t>>> shape_flags(const Args& args);
/// The help line of --shape.
inline constexpr std::string_view kShapeHelp =
    R"(  --shape=NAME=D0,D1,...  an .onnx input's dims, for its symbolic or unknown ones
                      (repeatable)
)";
/// The pass flags opt, eval and dot share.
inline constexpr FlagSpec kPassFlags[] = {
    {"passes", true}, {"pipeline", true}, {"wrt", true}, {"no-fusion"}, {"stats"}};

/// Runs --passes, then the passes of --pipeline, on a graph: --wrt lists autodiff's
/// arguments, --no-fusion makes fusion put every node in its own step, --dump-after and
/// --dump-dir dump the IR after passes, --stats prints program and memory figures to
/// stderr.
Status run_passes(ir::Graph& graph, const Args& args);
/// The weights flags compile and eval share.
inline constexpr FlagSpec kWeightsFlags[] = {{"weights", true}, {"weights-dtype", true}, {"allow-unused-weights"}};
/// --weights: the tensors of the safetensors file, by name (none without the flag).
Result<std::map<std::string, ir::Tensor>> read_weights_flag(const Args& args);
/// --weights-dtype=exact|convert and --allow-unused-weights.
Result<WeightsOptions> weights_options(const Args& args);
/// The help lines of the weights flags.
inline constexpr std::string_view kWeightsHelp =
    R"(  --weights=FILE      a safetensors file with a tensor per param (and, optionally, per
                      state: its initial value), by name; a tensor named for no param
                      or state is an error
  --weights-dtype=exact|convert
                      convert rounds floating weights of another floating type (f64,
                      f16, bf16) to their argument's type (default: exact)
  --allow-unused-weights  ignore tensors named for no param or state
)";

/// Reads a .npy file as a tensor.
Result<ir::Tensor> read_tensor(const std::string& path);
/// Writes a tensor as a .npy file.
Status write_tensor(const std::string& path, const ir::Tensor& tensor);

int run_opt(std::span<char* const> argv);
int run_eval(std::span<char* const> argv);
int run_dot(std::span<char* const> argv);
int run_inspect(std::span<char* const> argv);
int run_compile(std::span<char* const> argv);
int run_import(std::span<char* const> argv);
int run_bench(std::span<char* const> argv);
/// kiln bench MODEL (tools/kiln/bench_model.cc), from run_bench's parsed flags.
int run_bench_model(const Args& args);
std::string_view bench_model_help();

}  // namespace kiln::cli
