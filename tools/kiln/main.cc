// kiln: the command line. Each subcommand lives in its own file.
#include <fmt/format.h>

#include "compiler/artifact_contents.h"
#include "compiler/compile.h"

#include "tools/kiln/cli.h"
#include "tools/kiln/run_cli.h"
#include "tools/kiln/serve.h"
#include "tools/kiln/versions.h"

namespace {

// The subcommands: a new one is a row here, its file under tools/kiln/ (with its --help
// text) and its lit test under tests/lit/cli/.
struct Subcommand {
  std::string_view name, operand, summary;
  int (*run)(std::span<char* const> argv);
};

constexpr Subcommand kSubcommands[] = {
    {"opt", "FILE.kir", "run passes and print the IR", kiln::cli::run_opt},
    {"eval", "FILE.kir", "run a graph with the reference interpreter", kiln::cli::run_eval},
    {"dot", "FILE.kir", "print the graph in Graphviz DOT", kiln::cli::run_dot},
    {"compile", "FILE.kir", "compile a graph (or an .onnx model) to a .kiln artifact", kiln::cli::run_compile},
    {"import", "M.onnx", "import an ONNX model as kiln IR and weights", kiln::cli::run_import},
    {"run", "M.kiln", "run an artifact with the runtime",
     [](std::span<char* const> argv) { return kiln::cli::run_artifact("kiln run", argv); }},
    {"inspect", "M.kiln", "verify an artifact and show what it holds", kiln::cli::run_inspect},
    {"serve", "M.kiln", "serve artifacts over HTTP (KServe v2 protocol)", kiln::cli::run_serve},
    {"bench", "", "time a model, step by step with --profile, or the benchmark suites", kiln::cli::run_bench},
};

std::string usage() {
  std::string text = "usage: kiln COMMAND [ARGS]\n\nkiln compiles static deep learning graphs.\n\ncommands:\n";
  for (const Subcommand& c : kSubcommands) text += fmt::format("  {:<8} {:<9} {}\n", c.name, c.operand, c.summary);
  return text + R"(
'kiln COMMAND --help' describes each command; 'kiln --version' prints the versions of
the compiler, LLVM, NVRTC, the runtime, the artifact format and the CUDA driver.
)";
}

int run_command(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "{}", usage());
    return 1;
  }
  std::string_view command = argv[1];
  std::span<char* const> rest(argv + 2, static_cast<size_t>(argc - 2));
  for (const Subcommand& c : kSubcommands)
    if (command == c.name) return c.run(rest);
  if (command == "--version" || command == "version") {
    fmt::print("compiler: {} ({}, {})\n{}", kiln::compiler_version(), kiln::llvm_version(), kiln::nvrtc_version(),
               kiln::cli::runtime_versions());
    return 0;
  }
  if (command == "-h" || command == "--help" || command == "help") {
    fmt::print("{}", usage());
    return 0;
  }
  return kiln::cli::fail("kiln", fmt::format("unknown command '{}'; see 'kiln --help'", command));
}

}  // namespace

int main(int argc, char** argv) {
  kiln::cli::enter_user_directory();
  return kiln::cli::run_guarded("kiln", [&] { return run_command(argc, argv); });
}
