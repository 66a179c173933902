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

int fail(std::string_view command, const std::string& message) {
  fmt::print(stderr, "{}: error: {}\n", command, message);
  return 1;
}

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
  std::string path, output;
  std::vector<std::string> input_specs;
  int threads = 0;
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string_view a = argv[i];
    auto value = [&](std::string_view flag) -> std::optional<std::string> {
      if (a.starts_with(std::string(flag) + "=")) return std::string(a.substr(flag.size() + 1));
      if (a == flag && i + 1 < argv.size()) return std::string(argv[++i]);
      return std::nullopt;
    };
    if (a == "-h" || a == "--help") {
      fmt::print(fmt::runtime(kHelp), cmd);
      return 0;
    }
    if (auto v = value("--input")) input_specs.push_back(*v);
    else if (auto o = value("--output")) output = *o;
    else if (auto t = value("--threads")) threads = std::atoi(t->c_str());
    else if (a.starts_with("-")) return fail(cmd, fmt::format("unknown flag '{}'; see '{} --help'", a, cmd));
    else if (path.empty()) path = std::string(a);
    else return fail(cmd, fmt::format("expected one artifact, got '{}' too", a));
  }
  if (path.empty()) return fail(cmd, fmt::format("expected an artifact file; see '{} --help'", cmd));
  auto model = runtime::Model::load_file(path, {threads});
  if (!model.ok()) return fail(cmd, model.error().message);
  std::map<std::string, runtime::HostTensor> inputs;
  for (const std::string& spec : input_specs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) return fail(cmd, fmt::format("--input expects NAME=PATH.npy, got '{}'", spec));
    std::string name = spec.substr(0, eq), file = spec.substr(eq + 1);
    auto npy = runtime::read_npy_file(file);
    if (!npy.ok()) return fail(cmd, npy.error().message);
    inputs[name] = {{name, type_of(npy->dtype), npy->shape}, std::move(npy->data)};
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
