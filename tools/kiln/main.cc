// kiln: the command line. Each subcommand lives in its own file.
#include <fmt/format.h>

#include "compiler/artifact_contents.h"
#include "compiler/compile.h"

#include "tools/kiln/cli.h"
#include "tools/kiln/run_cli.h"
#include "tools/kiln/versions.h"

namespace {

constexpr std::string_view kUsage = R"(usage: kiln COMMAND [ARGS]

kiln compiles static deep learning graphs.

commands:
  opt   FILE.kir   run passes and print the IR
  eval  FILE.kir   run a graph with the reference interpreter
  dot   FILE.kir   print the graph in Graphviz DOT
  compile FILE.kir  compile a graph to a .kiln artifact
  run   M.kiln     run an artifact with the runtime
  inspect M.kiln   verify an artifact and show what it holds
  bench            time the benchmark suites: fused, unfused, plain copy

'kiln COMMAND --help' describes each command; 'kiln --version' prints the versions of
the compiler, LLVM, NVRTC, the runtime, the artifact format and the CUDA driver.
)";

}  // namespace

namespace {

int run_command(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "{}", kUsage);
    return 1;
  }
  std::string_view command = argv[1];
  std::span<char* const> rest(argv + 2, static_cast<size_t>(argc - 2));
  if (command == "opt") return kiln::cli::run_opt(rest);
  if (command == "eval") return kiln::cli::run_eval(rest);
  if (command == "dot") return kiln::cli::run_dot(rest);
  if (command == "inspect") return kiln::cli::run_inspect(rest);
  if (command == "compile") return kiln::cli::run_compile(rest);
  if (command == "bench") return kiln::cli::run_bench(rest);
  if (command == "run") return kiln::cli::run_artifact("kiln run", rest);
  if (command == "--version" || command == "version") {
    fmt::print("compiler: {} ({}, {})\n{}", kiln::compiler_version(), kiln::llvm_version(), kiln::nvrtc_version(), kiln::cli::runtime_versions());
    return 0;
  }
  if (command == "-h" || command == "--help" || command == "help") {
    fmt::print("{}", kUsage);
    return 0;
  }
  return kiln::cli::fail("kiln", fmt::format("unknown command '{}'; see 'kiln --help'", command));
}

}  // namespace

int main(int argc, char** argv) {
  kiln::cli::enter_user_directory();
  return kiln::cli::run_guarded("kiln", [&] { return run_command(argc, argv); });
}
