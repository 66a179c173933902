// kiln dot: the graph as Graphviz DOT.
#include <fmt/format.h>

#include "ir/dot.h"
#include "tools/kiln/cli.h"

namespace kiln::cli {

constexpr std::string_view kDotHelp =
    R"(usage: kiln dot FILE.kir [--passes=a,b,c] [--pipeline=default] [--wrt=NAMES] [--no-fusion]

Prints the graph of FILE.kir ('-' for stdin) in Graphviz DOT, after the passes if
given; a fused program draws one cluster per step. Render it with:
kiln dot model.kir --pipeline=default | dot -Tsvg > model.svg

  --passes=LIST       comma-separated passes to run first
  --pipeline=default  then the standard pipeline
  --wrt=NAMES         arguments for the autodiff pass
  --no-fusion         every op in a step of its own
  --stats             program and memory figures to stderr
  -h, --help     this help
)";

int run_dot(std::span<char* const> argv) {
  auto args = parse_args("kiln dot", argv, kPassFlags);
  if (!args.ok()) return fail_located(args.error());
  if (args->help) {
    fmt::print("{}", kDotHelp);
    return 0;
  }
  if (args->positional.size() != 1) return fail("kiln dot", "expected one input file; see 'kiln dot --help'");
  auto graph = load_graph("kiln dot", args->positional[0]);
  if (!graph.ok()) return fail_located(graph.error());
  Status ok = run_passes(*graph, *args);
  if (!ok.ok()) return fail("kiln dot", ok.error().message);
  fmt::print("{}", ir::to_dot(*graph));
  return 0;
}

}  // namespace kiln::cli
