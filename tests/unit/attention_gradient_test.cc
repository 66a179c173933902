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

// `text`'s first result (a loss) differentiated with respect to `wrt`: one forward and one
// backward attention step, every result within the interpreter's, on 1 and 4 threads.
void check_gradient(const std::string& text, const std::vector<std::string>& wrt, uint64_t seed,
                    std::pair<int, int> steps = {1, 1}, double bound = 2) {
  INFO(text);
  const ir::Graph g = differentiated(text, wrt);
  const auto args = kiln::testing::seeded_arguments(g, seed, bound);
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

}  // namespace

TEST_CASE("the attention op's backward is one step with the interpreter's gradients", "[runtime][attention]") {
  // Causal; 300 queries in blocks of 109 rows, the last partial; keys past each block's
  // last query left out.
  check_gradient(R"(graph @g(%q: f32[1,2,300,8], %k: f32[1,2,300,8], %v: f32[1,2,300,8], %w: f32[1,2,300,8]) {
    %y: f32[1,2,300,8] = attention(%q, %k, %v) {causal=true, scale=0.5}
    %yw: f32[1,2,300,8] = mul(%y, %w)
    %l: f32[] = reduce_sum(%yw) {axes=[0,1,2,3]}
    return %l
  })",
                 {"q", "k", "v"}, 1);
  // Cross attention with a bool mask per key, v narrower than q.
  check_gradient(R"(graph @g(%q: f32[2,2,7,8], %k: f32[2,2,33,8], %v: f32[2,2,33,5], %m: bool[7,33], %w: f32[2,2,7,5]) {
    %y: f32[2,2,7,5] = attention(%q, %k, %v, %m) {scale=0.3}
    %yw: f32[2,2,7,5] = mul(%y, %w)
    %l: f32[] = reduce_sum(%yw) {axes=[0,1,2,3]}
    return %l
  })",
                 {"q", "k", "v"}, 2);
}

TEST_CASE("GPT-2's attention backward reads its heads in place out of the projection", "[runtime][attention]") {
  // One qkv projection sliced into heads, j <= i from iotas with a finite fill, a scaling:
  // the gradients flow back into the projection's weight through the heads' concat.
  // Inputs within 0.5: at 2, the scores (about 40) saturate the softmax, whose gradient
  // then cancels, and the fused step and the unfused kernels both land 5e-6 (max-norm)
  // from an f64 run, beyond the per-element bound against the f32 interpreter.
  check_gradient(R"(graph @g(%x: f32[2,40,24], %w: f32[24,72], %t: f32[2,40,24]) {
    %qkv: f32[2,40,72] = matmul(%x, %w)
    %q0: f32[2,40,24] = slice(%qkv) {starts=[0,0,0], ends=[2,40,24]}
    %k0: f32[2,40,24] = slice(%qkv) {starts=[0,0,24], ends=[2,40,48]}
    %v0: f32[2,40,24] = slice(%qkv) {starts=[0,0,48], ends=[2,40,72]}
    %q1: f32[2,40,3,8] = reshape(%q0) {shape=[2,40,3,8]}
    %k1: f32[2,40,3,8] = reshape(%k0) {shape=[2,40,3,8]}
    %v1: f32[2,40,3,8] = reshape(%v0) {shape=[2,40,3,8]}
    %q: f32[2,3,40,8] = transpose(%q1) {perm=[0,2,1,3]}
    %kt: f32[2,3,8,40] = transpose(%k1) {perm=[0,2,3,1]}
    %v: f32[2,3,40,8] = transpose(%v1) {perm=[0,2,1,3]}
    %s: f32[2,3,40,40] = matmul(%q, %kt)
    %c: f32[] = constant {value=0.35}
    %ss: f32[2,3,40,40] = mul(%s, %c)
    %i: i64[40,40] = iota {shape=[40,40], axis=0}
    %j: i64[40,40] = iota {shape=[40,40], axis=1}
    %keep: bool[40,40] = ge(%i, %j)
    %kb: bool[2,3,40,40] = broadcast(%keep) {shape=[2,3,40,40], dims=[2,3]}
    %fill: f32[] = constant {value=-1e9}
    %sk: f32[2,3,40,40] = select(%kb, %ss, %fill)
    %p: f32[2,3,40,40] = softmax(%sk) {axis=-1}
    %o: f32[2,3,40,8] = matmul(%p, %v)
    %ot: f32[2,40,3,8] = transpose(%o) {perm=[0,2,1,3]}
    %y: f32[2,40,24] = reshape(%ot) {shape=[2,40,24]}
    %d: f32[2,40,24] = sub(%y, %t)
    %dd: f32[2,40,24] = mul(%d, %d)
    %l: f32[] = reduce_sum(%dd) {axes=[0,1,2]}
    return %l
  })",
                 {"w", "x"}, 3, {1, 1}, 0.5);
}

TEST_CASE("BERT's attention backward: an additive mask read through its broadcast", "[runtime][attention]") {
  check_gradient(
      R"(graph @g(%q: f32[2,2,20,4], %k: f32[2,2,20,4], %v: f32[2,2,20,4], %bias: f32[2,20], %w: f32[2,2,20,4]) {
    %kt: f32[2,2,4,20] = transpose(%k) {perm=[0,1,3,2]}
    %s: f32[2,2,20,20] = matmul(%q, %kt)
    %c: f32[] = constant {value=2.0}
    %ss: f32[2,2,20,20] = div(%s, %c)
    %b: f32[2,2,20,20] = broadcast(%bias) {shape=[2,2,20,20], dims=[0,3]}
    %sb: f32[2,2,20,20] = add(%ss, %b)
    %p: f32[2,2,20,20] = softmax(%sb) {axis=-1}
    %o: f32[2,2,20,4] = matmul(%p, %v)
    %ow: f32[2,2,20,4] = mul(%o, %w)
    %l: f32[] = reduce_sum(%ow) {axes=[0,1,2,3]}
    return %l
  })",
      {"q", "k", "v"}, 4);
}

TEST_CASE("masked scores whose fill does not vanish get no gradient", "[runtime][attention]") {
  // Fills of -1 beside scores of up to 40: the masked keys' P is not 0, so the block takes
  // every key, and the select's gradient zeroes theirs. Keys shared by the batch (a
  // broadcast k, whose gradient the graph then sums over it).
  check_gradient(R"(graph @g(%q: f32[3,1,40,4], %k: f32[1,1,40,4], %v: f32[3,1,40,4], %w: f32[3,1,40,4]) {
    %q10: f32[3,1,40,4] = mul(%q, %q)
    %kt: f32[1,1,4,40] = transpose(%k) {perm=[0,1,3,2]}
    %s: f32[3,1,40,40] = matmul(%q10, %kt)
    %i: i64[40,40] = iota {shape=[40,40], axis=0}
    %j: i64[40,40] = iota {shape=[40,40], axis=1}
    %keep: bool[40,40] = le(%j, %i)
    %kb: bool[3,1,40,40] = broadcast(%keep) {shape=[3,1,40,40], dims=[2,3]}
    %fill: f32[] = constant {value=-1.0}
    %sk: f32[3,1,40,40] = select(%kb, %s, %fill)
    %p: f32[3,1,40,40] = softmax(%sk) {axis=-1}
    %o: f32[3,1,40,4] = matmul(%p, %v)
    %ow: f32[3,1,40,4] = mul(%o, %w)
    %l: f32[] = reduce_sum(%ow) {axes=[0,1,2,3]}
    return %l
  })",
                 {"q", "k", "v"}, 5);
}

TEST_CASE("a softmax read by other ops than a backward keeps its three steps", "[runtime][attention]") {
  // P is also a result, so stored: the backward reads it back rather than computing it
  // again, and the forward keeps its steps too.
  check_gradient(R"(graph @g(%q: f32[2,8,4], %k: f32[2,4,8], %v: f32[2,8,4]) {
    %s: f32[2,8,8] = matmul(%q, %k)
    %p: f32[2,8,8] = softmax(%s) {axis=-1}
    %o: f32[2,8,4] = matmul(%p, %v)
    %l: f32[] = reduce_sum(%o) {axes=[0,1,2]}
    return %l, %p
  })",
                 {"q", "k", "v"}, 6, {0, 0});
}

TEST_CASE("a mask folded to a constant is the same mask in the backward's copy", "[runtime][attention]") {
  // lt(j, i) of iotas (keys before the query; row 0 keeps none, so it takes the fill)
  // folds to a bool constant, which each step's copy of it reads: compared by content.
  check_gradient(R"(graph @g(%q: f32[2,8,4], %k: f32[2,8,4], %v: f32[2,8,4], %w: f32[2,8,4]) {
    %kt: f32[2,4,8] = transpose(%k) {perm=[0,2,1]}
    %s: f32[2,8,8] = matmul(%q, %kt)
    %i: i64[8,8] = iota {shape=[8,8], axis=0}
    %j: i64[8,8] = iota {shape=[8,8], axis=1}
    %keep: bool[8,8] = lt(%j, %i)
    %kb: bool[2,8,8] = broadcast(%keep) {shape=[2,8,8], dims=[1,2]}
    %fill: f32[] = constant {value=-1.0}
    %sk: f32[2,8,8] = select(%kb, %s, %fill)
    %p: f32[2,8,8] = softmax(%sk) {axis=-1}
    %o: f32[2,8,4] = matmul(%p, %v)
    %ow: f32[2,8,4] = mul(%o, %w)
    %l: f32[] = reduce_sum(%ow) {axes=[0,1,2]}
    return %l
  })",
                 {"q", "k", "v"}, 7);
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
  CHECK(passes::split_attention_gradients(g) == 0);
  CHECK(ir::print(g) == before);
  CHECK(g.values.size() == values);
  check_gradient(text, {"q", "k", "v"}, 8, {0, 0});
}

TEST_CASE("a query row masked whole is NaN in every key's dv, as the decomposition's", "[runtime][attention]") {
  // Keys from 3 on, then causal, both with -inf: queries 0 to 2 keep no key, so their P
  // is NaN, which Pᵀ·dO spreads into dv at every key, past the block's last query too
  // (the block then takes every key).
  check_gradient(R"(graph @g(%q: f32[1,4,4], %k: f32[1,8,4], %v: f32[1,8,2], %w: f32[1,4,2]) {
    %kt: f32[1,4,8] = transpose(%k) {perm=[0,2,1]}
    %s: f32[1,4,8] = matmul(%q, %kt)
    %ninf: f32[] = constant {value=-inf}
    %j0: i64[4,8] = iota {shape=[4,8], axis=1}
    %three: i64[] = constant {value=3}
    %threes: i64[4,8] = broadcast(%three) {shape=[4,8], dims=[]}
    %m: bool[4,8] = ge(%j0, %threes)
    %mb: bool[1,4,8] = broadcast(%m) {shape=[1,4,8], dims=[1,2]}
    %sk: f32[1,4,8] = select(%mb, %s, %ninf)
    %i: i64[4,8] = iota {shape=[4,8], axis=0}
    %j: i64[4,8] = iota {shape=[4,8], axis=1}
    %c: bool[4,8] = le(%j, %i)
    %cb: bool[1,4,8] = broadcast(%c) {shape=[1,4,8], dims=[1,2]}
    %sc: f32[1,4,8] = select(%cb, %sk, %ninf)
    %p: f32[1,4,8] = softmax(%sc) {axis=-1}
    %y: f32[1,4,2] = matmul(%p, %v)
    %yw: f32[1,4,2] = mul(%y, %w)
    %l: f32[] = reduce_sum(%yw) {axes=[0,1,2]}
    return %l
  })",
                 {"q", "k", "v"}, 9);
}
