// kiln compile: a .kir graph to a .kiln artifact.
#include <fmt/format.h>
#include <fstream>

#include "compiler/compile.h"
#include "compiler/safetensors.h"
#include "tools/kiln/cli.h"

namespace kiln::cli {

constexpr std::string_view kCompileHelp = R"(usage: kiln compile FILE.kir --target=cpu [--weights W.safetensors] [--cpu=NAME] [--no-fusion] -o M.kiln

Compiles FILE.kir through the default pipeline (decompose, canonicalize, cse, dce, fusion,
memory-plan) and CPU code generation (LLVM, O3) into the artifact M.kiln, which the
runtime (`kiln run`, `kiln-run`, runtime/model.h) loads without the compiler.

  --target=cpu        the target (the CUDA backend comes later)
  --weights=FILE      a safetensors file with a tensor per param, by name
  --cpu=NAME          the CPU to compile for (default: native, this machine's)
  --no-fusion         one kernel per op (the unfused baseline)
  -o, --output=FILE   the artifact to write
  -h, --help          this help
)";

int run_compile(std::span<char* const> argv) {
  constexpr std::string_view cmd = "kiln compile";
  std::vector<char*> args(argv.begin(), argv.end());
  for (char*& a : args)
    if (std::string_view(a) == "-o") a = const_cast<char*>("--output");
  constexpr FlagSpec specs[] = {{"target", true}, {"weights", true}, {"cpu", true}, {"no-fusion"}, {"output", true}};
  auto parsed = parse_args(cmd, args, specs);
  if (!parsed.ok()) return fail_located(parsed.error());
  if (parsed->help) {
    fmt::print("{}", kCompileHelp);
    return 0;
  }
  if (parsed->positional.size() != 1) return fail(cmd, "expected one input file; see 'kiln compile --help'");
  if (!parsed->has("output")) return fail(cmd, "no output file; give one with -o M.kiln");
  auto graph = load_graph(parsed->positional[0]);
  if (!graph.ok()) return fail_located(graph.error());
  CompileOptions options;
  options.target = parsed->get("target", "cpu");
  options.cpu = parsed->get("cpu", "native");
  options.fuse = !parsed->has("no-fusion");
  if (parsed->has("weights")) {
    std::string path = parsed->get("weights");
    auto bytes = read_file(path, size_t{1} << 36);
    if (!bytes.ok()) return fail(cmd, bytes.error().message);
    auto weights = parse_safetensors(*bytes, path);
    if (!weights.ok()) return fail(cmd, weights.error().message);
    options.weights = std::move(*weights);
  }
  auto artifact = compile_to_artifact(*graph, options);
  if (!artifact.ok()) return fail(cmd, artifact.error().message);
  std::string out = parsed->get("output");
  std::ofstream file(out, std::ios::binary);
  file.write(reinterpret_cast<const char*>(artifact->data()), static_cast<std::streamsize>(artifact->size()));
  if (!file) return fail(cmd, fmt::format("cannot write '{}'", out));
  fmt::print("wrote {} ({} bytes)\n", out, artifact->size());
  return 0;
}

}  // namespace kiln::cli
