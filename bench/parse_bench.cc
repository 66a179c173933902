// Parse + verify time of a generated graph with N nodes (default 100,000).
// Not a test: run with `bazel run -c opt //bench:parse_bench -- [N] [REPEATS]`.
#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "ir/parser.h"
#include "ir/printer.h"

int main(int argc, char** argv) {
  long nodes = argc > 1 ? std::atol(argv[1]) : 100000;
  int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  // A chain of elementwise ops with a reduction and a broadcast every 100 nodes, so
  // shape inference sees several op kinds.
  std::string text = "graph @big(%x: f32[64,256], %y: f32[64,256]) {\n";
  std::string prev = "x";
  for (long i = 0; i < nodes; ++i) {
    std::string name = fmt::format("v{}", i);
    if (i % 100 == 99) {
      text += fmt::format("  %r{}: f32[64] = reduce_sum(%{}) {{axes=[1], keepdims=false}}\n", i, prev);
      text += fmt::format("  %{}: f32[64,256] = broadcast(%r{}) {{shape=[64,256], dims=[0]}}\n", name, i);
      ++i;
    } else {
      const char* ops[] = {"add", "mul", "sub", "maximum"};
      text += fmt::format("  %{}: f32[64,256] = {}(%{}, %y)\n", name, ops[i % 4], prev);
    }
    prev = name;
  }
  text += fmt::format("  return %{}\n}}\n", prev);
  std::vector<double> seconds;
  size_t parsed_nodes = 0;
  for (int r = 0; r < repeats; ++r) {
    auto start = std::chrono::steady_clock::now();
    auto g = kiln::ir::parse(text, "big.kir");
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (!g.ok()) {
      fmt::print(stderr, "{}\n", g.error().message);
      return 1;
    }
    parsed_nodes = g->nodes.size();
  }
  std::sort(seconds.begin(), seconds.end());
  fmt::print("parse+verify of {} nodes ({:.1f} MB of text), {} runs: median {:.3f} s, min {:.3f} s, max {:.3f} s\n",
             parsed_nodes, text.size() / 1e6, repeats, seconds[seconds.size() / 2], seconds.front(), seconds.back());
  return 0;
}
