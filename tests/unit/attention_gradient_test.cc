// An attention's backward as one CPU step (ir/attention_match.h's AttentionGradientMatch,
// passes/attention_split.h, runtime/cpu/attention_gradient.cc): each form a training graph
// takes, differentiated by autodiff, against the interpreter.
#include <string>
#include <vector>

#include "ir/printer.h"
#include "passes/attention_split.h"
#include "passes/autodiff.h"
#include "passes/pipeline.h"
#include "runtime/format/artifact.h"
#include "tests/unit/attention_gradient_graphs.h"
#include "tests/unit/run_util.h"

using namespace kiln;

namespace {

ir::Graph differentiated(const std::string& text, const std::vector<std::string>& wrt) {
  ir::Graph g = kiln::testing::parse_ok(text);
  auto changed = passes::AutodiffPass(wrt).run(g);
  if (!changed.ok()) FAIL(changed.error().message);
  return g;
}

// The CPU artifact's attention steps: forward ones, and backward ones.
std::pair<int, int> attention_steps(const ir::Graph& g, const std::map<std::string, ir::Tensor>& args) {
  const std::vector<uint8_t> bytes = kiln::testing::compiled_artifact(g, kiln::testing::param_weights(g, args));
  auto view = format::read_artifact(bytes, "cpu-x86_64");
  if (!view.ok()) FAIL(view.error().message);
  std::pair<int, int> count{0, 0};
  for (const format::Step* s : *view->metadata().steps())
    if (s->attention()) ++(s->attention()->gradient() ? count.second : count.first);
  return count;
}

// A graph of attention_gradient_graphs() (`name`), its loss differentiated: `steps`
// forward and backward attention steps, every result within the interpreter's, on 1 and
// 4 threads.
void check_gradient(const kiln::testing::AttentionGradientGraph& graph, std::pair<int, int> steps = {1, 1}) {
  INFO(graph.name << ": " << graph.text);
  const ir::Graph g = differentiated(graph.text, graph.wrt);
  const auto args = kiln::testing::seeded_arguments(g, graph.seed, graph.bound);
  CHECK(attention_steps(g, args) == steps);
  kiln::testing::check_against_interpreter("attention backward", g, args);
  const auto expected = kiln::testing::eval_ok(g, args);
  for (int threads : {1, 4}) {
    INFO(threads << " threads");
    auto got = kiln::testing::compile_and_run(g, args, {}, {threads});
    if (!got.ok()) FAIL(got.error().message);
    kiln::testing::check_same(*got, expected, 1e-4, 1e-4, /*half_ulp=*/true);
  }
}

void check_gradient(const std::string& name) {
  for (const auto& graph : kiln::testing::attention_gradient_graphs())
    if (graph.name == name) return check_gradient(graph);
  FAIL("no attention gradient graph named " << name);
}

}  // namespace

TEST_CASE("the attention op's backward is one step with the interpreter's gradients", "[runtime][attention]") {
  check_gradient("the op, causal");
  check_gradient("not causal, 300 queries");
  check_gradient("cross attention, bool mask");
  check_gradient("head dims 128 and 96");
}

TEST_CASE("GPT-2's attention backward reads its heads in place out of the projection", "[runtime][attention]") {
  check_gradient("GPT-2 heads");
}

TEST_CASE("BERT's attention backward: an additive mask read through its broadcast", "[runtime][attention]") {
  check_gradient("BERT additive mask");
}

TEST_CASE("masked scores whose fill does not vanish get no gradient", "[runtime][attention]") {
  check_gradient("fill -1, shared keys");
}

TEST_CASE("a softmax read by other ops than a backward keeps its three steps", "[runtime][attention]") {
  // P is also a result, so stored: the backward reads it back rather than computing it
  // again, and the forward keeps its steps too.
  check_gradient({"P also a result",
                  R"(graph @g(%q: f32[2,8,4], %k: f32[2,4,8], %v: f32[2,8,4]) {
    %s: f32[2,8,8] = matmul(%q, %k)
    %p: f32[2,8,8] = softmax(%s) {axis=-1}
    %o: f32[2,8,4] = matmul(%p, %v)
    %l: f32[] = reduce_sum(%o) {axes=[0,1,2]}
    return %l, %p
  })",
                  {"q", "k", "v"},
                  6},
                 {0, 0});
}

TEST_CASE("a mask folded to a constant is the same mask in the backward's copy", "[runtime][attention]") {
  check_gradient("mask folded to a constant");
}

TEST_CASE("a softmax with a reader besides the backward is left as it was", "[runtime][attention]") {
  // P's sum joins the loss: its extra reader is no backward's, so the copy is undone
  // (the graph and its value table as they were) and nothing is one step.
  const std::string text = R"(graph @g(%q: f32[2,8,4], %k: f32[2,4,8], %v: f32[2,8,4]) {
    %s: f32[2,8,8] = matmul(%q, %k)
    %p: f32[2,8,8] = softmax(%s) {axis=-1}
    %o: f32[2,8,4] = matmul(%p, %v)
    %oo: f32[2,8,4] = mul(%o, %o)
    %pp: f32[2,8,8] = mul(%p, %p)
    %lo: f32[] = reduce_sum(%oo) {axes=[0,1,2]}
    %lp: f32[] = reduce_sum(%pp) {axes=[0,1,2]}
    %l: f32[] = add(%lo, %lp)
    return %l
  })";
  auto pipeline = passes::pipeline_from_text("autodiff{wrt=q,k,v},decompose,canonicalize,cse,dce");
  REQUIRE(pipeline.ok());
  ir::Graph g = kiln::testing::parse_ok(text);
  REQUIRE(pipeline->run(g).ok());
  const std::string before = ir::print(g);
  const size_t values = g.values.size();
  CHECK(passes::split_attention_gradients(g, ir::AttentionRunner::kCpu) == 0);
  CHECK(ir::print(g) == before);
  CHECK(g.values.size() == values);
  check_gradient({"P read by the loss too", text, {"q", "k", "v"}, 8}, {0, 0});
}

TEST_CASE("a query row masked whole with -inf is NaN in every key's dv; with a finite fill, uniform",
          "[runtime][attention]") {
  check_gradient("a row masked whole");
  check_gradient("rows masked whole with float's lowest");
  check_gradient("rows masked whole by -1e9, causal");
}
