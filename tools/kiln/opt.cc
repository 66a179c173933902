// kiln opt: parse, verify, run passes, print the IR.
#include <fmt/format.h>

#include "base/file.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/pipeline.h"
#include "tools/kiln/cli.h"

namespace kiln::cli {
namespace {

// The registered passes with their options, one per line, for --help.
std::string pass_list() {
  std::string list;
  for (const std::string& usage : passes::pass_usages()) list += fmt::format("{:24}{}\n", "", usage);
  return list;
}

// Parses, runs the passes on and prints one input; errors go to stderr as whole lines.
bool optimize(const std::string& text, const std::string& name, const Args& args) {
  auto graph = ir::parse(text, name);
  if (!graph.ok()) return fail_located(graph.error()), false;
  Status ok = run_passes(*graph, args);
  if (!ok.ok()) return fail("kiln opt", ok.error().message), false;
  fmt::print("{}", ir::print(*graph));
  return true;
}

}  // namespace

constexpr std::string_view kOptHelp =
    R"(usage: kiln opt FILE.kir|M.onnx [--passes=a,b,c] [--pipeline=default] [--wrt=NAMES] [--no-fusion] [--stats]
                [--dump-after=NAME|all] [--dump-dir=DIR] [--split-input-file]

Parses and verifies FILE.kir ('-' for stdin), or imports M.onnx, runs the passes in order (verifying the
IR after each) and prints the resulting IR to stdout: after fusion, as a program of
steps; after memory-plan, with the plan as comments.

  --passes=LIST       comma-separated passes, each with its options in braces
                      (quote the list for the shell), e.g.
                      --passes='autodiff{{wrt=w}},decompose,fusion{{fuse=false}}'.
                      The passes:
{passes}  --pipeline=default  then the standard pipeline: decompose, canonicalize, cse, dce,
                      fusion, memory-plan
  --wrt=NAMES         autodiff{{wrt=NAMES}} where autodiff sets no wrt: differentiate
                      the first result (a scalar loss) with respect to these
                      arguments; adds results %grad_NAME
  --no-fusion         fusion{{fuse=false}} where fusion sets no fuse: every op in a step
                      of its own (the unfused baseline)
  --stats             print kernels, library_calls, arena_bytes,
                      live_lower_bound_bytes and naive_bytes to stderr
  --dump-after=NAMES  also print the IR after these passes (comma-separated, or 'all')
                      to stderr
  --dump-dir=DIR      write the dumps to DIR/NN-PASS.kir instead of stderr
  --split-input-file  treat the parts of FILE between lines '# -----' as separate
                      inputs: each is optimized and printed on its own (outputs
                      separated by '# -----'), an error in one does not stop the others,
                      and the exit status is 1 if any failed
  -h, --help          this help
)";

int run_opt(std::span<char* const> argv) {
  std::vector<FlagSpec> specs(std::begin(kPassFlags), std::end(kPassFlags));
  specs.push_back({"dump-after", true});
  specs.push_back({"dump-dir", true});
  specs.push_back({"split-input-file"});
  auto args = parse_args("kiln opt", argv, specs);
  if (!args.ok()) return fail_located(args.error());
  if (args->help) {
    fmt::print(fmt::runtime(kOptHelp), fmt::arg("passes", pass_list()));
    return 0;
  }
  if (args->positional.size() != 1) return fail("kiln opt", "expected one input file; see 'kiln opt --help'");
  const std::string& path = args->positional[0];
  if (path.ends_with(".onnx")) {  // imported, its initializers as params
    if (args->has("split-input-file")) return fail("kiln opt", "--split-input-file is for .kir files");
    auto graph = load_graph("kiln opt", path);
    if (!graph.ok()) return fail_located(graph.error());
    Status ok = run_passes(*graph, *args);
    if (!ok.ok()) return fail("kiln opt", ok.error().message);
    fmt::print("{}", ir::print(*graph));
    return 0;
  }
  auto text = read_file(path, ir::ParseLimits{}.max_bytes);
  if (!text.ok()) return fail("kiln opt", text.error().message);
  std::string name = path == "-" ? "<stdin>" : path;
  if (!args->has("split-input-file")) return optimize(*text, name, *args) ? 0 : 1;
  if (args->has("dump-dir"))
    return fail("kiln opt",
                "--dump-dir cannot be combined with --split-input-file (each part would overwrite the last's dumps)");
  bool all_ok = true;
  std::vector<std::string> parts = ir::split_input_parts(*text);
  for (size_t k = 0; k < parts.size(); ++k) {
    if (k > 0) fmt::print("{}\n", ir::kSplitMarker);
    std::fflush(stdout);  // each part's output before the next part's errors
    all_ok = optimize(parts[k], name, *args) && all_ok;
    std::fflush(stdout);
  }
  return all_ok ? 0 : 1;
}

}  // namespace kiln::cli
