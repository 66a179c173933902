#include "tools/kiln/run_cli.h"

#include <fmt/format.h>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "runtime/format/safetensors.h"
#include "runtime/model.h"
#include "runtime/npy.h"
#include "tools/kiln/flags.h"
#include "tools/kiln/tensor_text.h"
#include "tools/kiln/versions.h"

namespace kiln::cli {
namespace {

constexpr std::string_view kHelp = R"(usage: {} M.kiln --input NAME=PATH.npy ... [--output DIR] [--threads N]
              [--state-in S.safetensors] [--state-out S.safetensors] [--steps N]
       {} --version

Loads the artifact M.kiln with the runtime (no compiler in the process) and runs it.
Every plain input needs an --input whose .npy file holds exactly its element type and
shape. With --output, writes DIR/NAME.npy per output; without, prints the outputs.

  --input NAME=PATH   the value of input %NAME (repeatable)
  --output DIR        directory for the outputs (created if missing)
  --threads N         threads that split kernels, 1 to 1024 (default: the hardware threads)
  --state-in FILE     state tensors to start from, by name (safetensors; those it does
                      not hold keep the artifact's initial values)
  --state-out FILE    write every state tensor after the last run (safetensors)
  --steps N           run N times with the same inputs, the state carried from each run
                      to the next (a training step N times); outputs are the last run's
  --version           the runtime's and the artifact format's versions
  -h, --help          this help
)";

// The runtime's element types are the artifact's, in the same order (format::kSafetensorsDtypes).
using format::kSafetensorsDtypes;
constexpr int kElementTypes = static_cast<int>(std::size(kSafetensorsDtypes));
static_assert(kElementTypes == static_cast<int>(runtime::ElementType::U8) + 1, "an element type safetensors lacks");

// The element type a .npy reader name stands for (runtime/npy.h names them as the runtime does).
runtime::ElementType type_of(const std::string& name) {
  return runtime::element_type_named(name).value_or(runtime::ElementType::F32);
}

std::string state_names(const runtime::Model& model) {
  std::string names;
  for (const runtime::TensorInfo& s : model.state()) names += (names.empty() ? "%" : ", %") + s.name;
  return names.empty() ? "none" : names;
}

Status read_state_file(runtime::Model& model, const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::vector<format::SafetensorsTensor> tensors, format::read_safetensors_file(path));
  for (format::SafetensorsTensor& t : tensors) {
    int type = 0;
    while (type < kElementTypes && kSafetensorsDtypes[type] != t.dtype) ++type;
    if (type == kElementTypes)
      return make_error(fmt::format("{}: tensor \"{}\" has dtype {}, which no state has", path, t.name, t.dtype));
    bool known = false;
    for (const runtime::TensorInfo& s : model.state()) known = known || s.name == t.name;
    if (!known)
      return make_error(fmt::format("{}: tensor \"{}\" is not a state of the model (its state: {})", path, t.name,
                                    state_names(model)));
    runtime::HostTensor value{{t.name, static_cast<runtime::ElementType>(type), t.shape}, std::move(t.data)};
    Status written = model.write_state(t.name, value);
    if (!written.ok()) return make_error(fmt::format("{}: {}", path, written.error().message));
  }
  return Status::Ok();
}

Status write_state_file(const runtime::Model& model, const std::string& path) {
  std::vector<format::SafetensorsTensor> tensors;
  for (const runtime::TensorInfo& s : model.state()) {
    KILN_ASSIGN_OR_RETURN(runtime::HostTensor value, model.read_state(s.name));
    tensors.push_back(
        {s.name, std::string(kSafetensorsDtypes[static_cast<int>(s.type)]), s.shape, std::move(value.data)});
  }
  return format::write_safetensors_file(path, tensors);
}

Status write_outputs(const std::vector<runtime::HostTensor>& outputs, const std::string& dir) {
  if (dir.empty()) {
    for (const runtime::HostTensor& t : outputs) {
      std::string prefix = fmt::format("%{}: {} = ", t.info.name, t.info.type_string());
      fmt::print("{}{}\n", prefix,
                 format_tensor(runtime::element_type_name(t.info.type), t.info.shape, t.data, prefix.size()));
    }
    return Status::Ok();
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(fmt::format("cannot create directory '{}': {}", dir, ec.message()));
  for (const runtime::HostTensor& t : outputs) {
    std::string file = (std::filesystem::path(dir) / (t.info.name + ".npy")).string();
    KILN_RETURN_IF_ERROR(
        runtime::write_npy_file(file, {std::string(runtime::element_type_name(t.info.type)), t.info.shape, t.data}));
    fmt::print("wrote {}: {}\n", file, t.info.type_string());
  }
  return Status::Ok();
}

}  // namespace

int run_artifact(std::string_view cmd, std::span<char* const> argv) {
  constexpr FlagSpec specs[] = {{"input", true, true}, {"output", true}, {"threads", true}, {"state-in", true},
                                {"state-out", true},   {"steps", true},  {"version"}};
  auto args = parse_args(cmd, argv, specs);
  if (!args.ok()) return fail_located(args.error());
  if (args->help) {
    fmt::print(fmt::runtime(kHelp), cmd, cmd);
    return 0;
  }
  if (args->has("version")) {
    fmt::print("{}", runtime_versions());
    return 0;
  }
  if (args->positional.empty()) return fail(cmd, fmt::format("expected an artifact file; see '{} --help'", cmd));
  if (args->positional.size() > 1)
    return fail(cmd, fmt::format("expected one artifact, got '{}' too", args->positional[1]));
  const std::string& path = args->positional[0];
  auto threads = integer_flag(*args, "threads", 0, 1, runtime::kMaxThreads);
  if (!threads.ok()) return fail(cmd, threads.error().message);
  auto steps = integer_flag(*args, "steps", 1, 1, 1'000'000'000);
  if (!steps.ok()) return fail(cmd, steps.error().message);
  auto input_files = named_values(*args, "input", "NAME=PATH.npy");
  if (!input_files.ok()) return fail(cmd, input_files.error().message);
  auto model = runtime::Model::load_file(path, {static_cast<int>(*threads)});
  if (!model.ok()) return fail(cmd, model.error().message);
  if ((args->has("state-in") || args->has("state-out")) && (*model)->state().empty())
    return fail(cmd, fmt::format("--state-in and --state-out need a model with state; {} has none", path));
  std::map<std::string, runtime::HostTensor> inputs;
  for (const NamedValue& input : *input_files) {
    auto npy = runtime::read_npy_file(input.value);
    if (!npy.ok()) return fail(cmd, npy.error().message);
    inputs[input.name] = {{input.name, type_of(npy->dtype), npy->shape}, std::move(npy->data)};
  }
  if (args->has("state-in")) {
    Status loaded = read_state_file(**model, args->get("state-in"));
    if (!loaded.ok()) return fail(cmd, loaded.error().message);
  }
  Result<std::vector<runtime::HostTensor>> outputs = Error{};
  for (int64_t step = 0; step < *steps; ++step) {
    outputs = (*model)->run(inputs);
    if (!outputs.ok())
      return fail(cmd,
                  *steps > 1 ? fmt::format("step {}: {}", step + 1, outputs.error().message) : outputs.error().message);
  }
  if (args->has("state-out")) {
    Status saved = write_state_file(**model, args->get("state-out"));
    if (!saved.ok()) return fail(cmd, saved.error().message);
  }
  Status written = write_outputs(*outputs, args->get("output"));
  if (!written.ok()) return fail(cmd, written.error().message);
  return 0;
}

}  // namespace kiln::cli
