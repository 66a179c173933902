// kiln opt: parse, verify, run passes, print the IR.
#include <fmt/format.h>

#include "ir/printer.h"
#include "tools/kiln/cli.h"

namespace kiln::cli {

constexpr std::string_view kOptHelp = R"(usage: kiln opt FILE.kir [--passes=a,b,c] [--wrt=NAMES] [--dump-after=NAME|all] [--dump-dir=DIR]

Parses and verifies FILE.kir ('-' for stdin), runs the passes in order (verifying the
IR after each) and prints the resulting IR to stdout.

  --passes=LIST       comma-separated passes: autodiff, decompose, canonicalize, cse, dce
  --wrt=NAMES         autodiff: differentiate the first result (a scalar loss) with
                      respect to these arguments; adds results %grad_NAME
  --dump-after=NAMES  also print the IR after these passes (comma-separated, or 'all')
                      to stderr
  --dump-dir=DIR      write the dumps to DIR/NN-PASS.kir instead of stderr
  -h, --help          this help
)";

int run_opt(std::span<char* const> argv) {
  constexpr FlagSpec specs[] = {{"passes", true}, {"wrt", true}, {"dump-after", true}, {"dump-dir", true}};
  auto args = parse_args("kiln opt", argv, specs);
  if (!args.ok()) return fail_located(args.error());
  if (args->help) {
    fmt::print("{}", kOptHelp);
    return 0;
  }
  if (args->positional.size() != 1) return fail("kiln opt", "expected one input file; see 'kiln opt --help'");
  auto graph = load_graph(args->positional[0]);
  if (!graph.ok()) return fail_located(graph.error());
  Status ok = run_passes(*graph, args->get("passes"), args->get("wrt"), args->get("dump-after"), args->get("dump-dir"));
  if (!ok.ok()) return fail("kiln opt", ok.error().message);
  fmt::print("{}", ir::print(*graph));
  return 0;
}

}  // namespace kiln::cli
