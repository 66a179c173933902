#include "tools/kiln/run_cli.h"

#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/model.h"
#include "runtime/npy.h"
#include "tools/kiln/flags.h"

namespace kiln::cli {
namespace {

constexpr std::string_view kHelp = R"(usage: {} M.kiln --input NAME=PATH.npy ... [--output DIR] [--threads N]

Loads the artifact M.kiln with the runtime (no compiler in the process) and runs it once.
Every plain input needs an --input whose .npy file holds exactly its element type and
shape. With --output, writes DIR/NAME.npy per output; without, prints a summary.

  --input NAME=PATH   the value of input %NAME (repeatable)
  --output DIR        directory for the outputs (created if missing)
  --threads N         threads that split kernels (default: the hardware threads)
  -h, --help          this help
)";

// The element type a .npy reader name stands for (runtime/npy.h names them as the runtime does).
runtime::ElementType type_of(const std::string& name) {
  for (int i = 0; i < 7; ++i) {
    auto type = static_cast<runtime::ElementType>(i);
    if (runtime::element_type_name(type) == name) return type;
  }
  return runtime::ElementType::F32;
}

}  // namespace

int run_artifact(std::string_view cmd, std::span<char* const> argv) {
  constexpr FlagSpec specs[] = {{"input", true, true}, {"output", true}, {"threads", true}};
  auto args = parse_args(cmd, argv, specs);
  if (!args.ok()) return fail_located(args.error());
  if (args->help) {
    fmt::print(fmt::runtime(kHelp), cmd);
    return 0;
  }
  if (args->positional.empty()) return fail(cmd, fmt::format("expected an artifact file; see '{} --help'", cmd));
  if (args->positional.size() > 1) return fail(cmd, fmt::format("expected one artifact, got '{}' too", args->positional[1]));
  const std::string& path = args->positional[0];
  const std::string output = args->get("output");
  auto threads = integer_flag(*args, "threads", 0, 1, runtime::kMaxThreads);
  if (!threads.ok()) return fail(cmd, threads.error().message);
  auto input_files = named_values(*args, "input", "NAME=PATH.npy");
  if (!input_files.ok()) return fail(cmd, input_files.error().message);
  auto model = runtime::Model::load_file(path, {static_cast<int>(*threads)});
  if (!model.ok()) return fail(cmd, model.error().message);
  std::map<std::string, runtime::HostTensor> inputs;
  for (const NamedValue& input : *input_files) {
    auto npy = runtime::read_npy_file(input.value);
    if (!npy.ok()) return fail(cmd, npy.error().message);
    inputs[input.name] = {{input.name, type_of(npy->dtype), npy->shape}, std::move(npy->data)};
  }
  auto outputs = (*model)->run(inputs);
  if (!outputs.ok()) return fail(cmd, outputs.error().message);
  if (!output.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(output, ec);
    if (ec) return fail(cmd, fmt::format("cannot create directory '{}': {}", output, ec.message()));
  }
  for (const runtime::HostTensor& t : *outputs) {
    if (output.empty()) {
      fmt::print("%{}: {}\n", t.info.name, t.info.type_string());
      continue;
    }
    std::string file = (std::filesystem::path(output) / (t.info.name + ".npy")).string();
    Status written = runtime::write_npy_file(file, {std::string(runtime::element_type_name(t.info.type)), t.info.shape, t.data});
    if (!written.ok()) return fail(cmd, written.error().message);
    fmt::print("wrote {}: {}\n", file, t.info.type_string());
  }
  return 0;
}

}  // namespace kiln::cli
