// kiln opt: parse, verify, run passes, print the IR.
#include <fmt/format.h>

#include "ir/printer.h"
#include "tools/kiln/cli.h"

namespace kiln::cli {

constexpr std::string_view kOptHelp = R"(usage: kiln opt FILE.kir [--passes=a,b,c] [--pipeline=default] [--wrt=NAMES] [--no-fusion] [--stats]
                [--dump-after=NAME|all] [--dump-dir=DIR]

Parses and verifies FILE.kir ('-' for stdin), runs the passes in order (verifying the
IR after each) and prints the resulting IR to stdout: after fusion, as a program of
steps; after memory-plan, with the plan as comments.

  --passes=LIST       comma-separated passes: autodiff, decompose, canonicalize, cse,
                      dce, fusion, memory-plan
  --pipeline=default  then the standard pipeline: decompose, canonicalize, cse, dce,
                      fusion, memory-plan
  --wrt=NAMES         autodiff: differentiate the first result (a scalar loss) with
                      respect to these arguments; adds results %grad_NAME
  --no-fusion         fusion puts every op in a step of its own (the unfused baseline)
  --stats             print kernels, library_calls, arena_bytes,
                      live_lower_bound_bytes and naive_bytes to stderr
  --dump-after=NAMES  also print the IR after these passes (comma-separated, or 'all')
                      to stderr
  --dump-dir=DIR      write the dumps to DIR/NN-PASS.kir instead of stderr
  -h, --help          this help
)";

int run_opt(std::span<char* const> argv) {
  std::vector<FlagSpec> specs(std::begin(kPassFlags), std::end(kPassFlags));
  specs.push_back({"dump-after", true});
  specs.push_back({"dump-dir", true});
  auto args = parse_args("kiln opt", argv, specs);
  if (!args.ok()) return fail_located(args.error());
  if (args->help) {
    fmt::print("{}", kOptHelp);
    return 0;
  }
  if (args->positional.size() != 1) return fail("kiln opt", "expected one input file; see 'kiln opt --help'");
  auto graph = load_graph("kiln opt", args->positional[0]);
  if (!graph.ok()) return fail_located(graph.error());
  Status ok = run_passes(*graph, *args);
  if (!ok.ok()) return fail("kiln opt", ok.error().message);
  fmt::print("{}", ir::print(*graph));
  return 0;
}

}  // namespace kiln::cli
