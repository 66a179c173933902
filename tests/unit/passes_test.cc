// The pipeline contract and "the optimized graph computes the same numbers".
#include <fmt/format.h>

#include "compiler/model.h"
#include "compiler/nn.h"
#include "ir/value_range.h"
#include "passes/decompose.h"
#include "passes/pipeline.h"
#include "tests/unit/test_util.h"

using namespace kiln;

namespace {

class BreakingPass : public passes::Pass {
 public:
  std::string_view name() const override { return "breaking"; }
  Result<bool> run(ir::Graph& g) override {
    g.results.push_back(static_cast<ir::ValueId>(g.values.size() + 10));
    return true;
  }
};

std::vector<ir::Tensor> run_with(const ir::Graph& graph, const std::string& passes,
                                 const std::map<std::string, ir::Tensor>& in) {
  ir::Graph g = graph;
  auto p = passes::pipeline_from_text(passes);
  REQUIRE(p.ok());
  auto r = p->run(g);
  if (!r.ok()) FAIL(r.error().message);
  // The result prints and parses back: passes leave the text format intact.
  kiln::testing::parse_ok(ir::print(g));
  return kiln::testing::eval_ok(g, in);
}

}  // namespace

TEST_CASE("optimized graphs compute the same numbers as the original", "[passes]") {
  Model m("block", 11);
  Tensor x = m.input("x", {4, 6});
  nn::LayerNorm norm(m, "ln", {6});
  nn::Linear fc(m, "fc", 6, 6);
  Tensor h = gelu(fc(norm(x)));
  Tensor twice = transpose(transpose(h, {1, 0}), {1, 0}) * 1.0 + 0.0;
  Tensor dup = exp(h) + exp(h);
  Tensor folded = m.scalar(2.0) * m.scalar(3.0);
  m.output(softmax(twice + dup * folded), "y");
  m.output(cross_entropy(h, m.input("labels", {4}, ir::DType::I64)), "loss");
  auto graph = m.build();
  REQUIRE(graph.ok());
  auto inputs = m.initial_values();
  inputs["x"] = ir::Tensor::from_doubles({ir::DType::F32, {4, 6}}, {0.1, -2, 3, 0.5, 1,    -1, 2, 2,  2, 2, 2, 2.5,
                                                                    -3,  0,  0, 1,   0.25, 4,  9, -9, 1, 1, 0, -0.5});
  inputs["labels"] = ir::Tensor::from_ints({ir::DType::I64, {4}}, {0, 5, 2, 3});
  auto reference = kiln::testing::eval_ok(*graph, inputs);
  for (std::string passes : {"decompose", "canonicalize", "cse", "dce", "decompose,canonicalize,cse,dce",
                             "canonicalize,decompose,cse,canonicalize,dce"}) {
    INFO(passes);
    auto optimized = run_with(*graph, passes, inputs);
    REQUIRE(optimized.size() == reference.size());
    for (size_t i = 0; i < reference.size(); ++i) {
      std::vector<double> expected(reference[i].floats.begin(), reference[i].floats.end());
      kiln::testing::check_close(optimized[i], reference[i].type.to_string(), expected, 1e-5, 1e-6);
    }
  }
}

TEST_CASE("the pipeline shrinks the graph", "[passes]") {
  ir::Graph g = kiln::testing::parse_ok(R"(graph @g(%x: f32[2,3]) {
  %t: f32[3,2] = transpose(%x) {perm=[1,0]}
  %u: f32[2,3] = transpose(%t) {perm=[1,0]}
  %one: f32[] = constant {value=1.0}
  %m: f32[2,3] = mul(%u, %one)
  %a: f32[2,3] = exp(%m)
  %b: f32[2,3] = exp(%x)
  %s: f32[2,3] = add(%a, %b)
  %dead: f32[2,3] = neg(%s)
  return %s
}
)");
  auto p = passes::pipeline_from_text("canonicalize,cse,dce");
  REQUIRE(p.ok());
  auto changed = p->run(g);
  REQUIRE(changed.ok());
  CHECK(*changed);
  CHECK(ir::print(g) ==
        "graph @g(%x: f32[2,3]) {\n  %a: f32[2,3] = exp(%x)\n  %s: f32[2,3] = add(%a, %a)\n  return %s\n}\n");
  auto again = p->run(g);
  REQUIRE(again.ok());
  CHECK(!*again);
}

TEST_CASE("the pipeline verifies between passes and dumps where asked", "[passes]") {
  ir::Graph g = kiln::testing::parse_ok("graph @g(%x: f32[2]) {\n  %y: f32[2] = softmax(%x)\n  return %y\n}\n");
  passes::Pipeline p;
  p.add(std::make_unique<passes::DecomposePass>());
  p.add(std::make_unique<BreakingPass>());
  std::vector<std::string> dumped;
  p.set_dump({{"all"}, "", [&](std::string_view name, std::string_view) { dumped.emplace_back(name); }});
  auto r = p.run(g);
  REQUIRE(!r.ok());
  // BreakingPass returns the id one past the value table plus ten.
  CHECK(r.error().message ==
        fmt::format("after pass 'breaking': error: @g: returned value id {} is not defined", g.values.size() + 10));
  CHECK(dumped == std::vector<std::string>{"decompose"});
}

TEST_CASE("unknown pass names are refused with the list of known ones", "[passes][errors]") {
  auto p = passes::pipeline_from_text("cse,fuse");
  REQUIRE(!p.ok());
  CHECK(p.error().message ==
        "unknown pass 'fuse' (known passes: autocast, autodiff, decompose, canonicalize, cse, dce, fusion, lower-conv, "
        "memory-plan)");
}

TEST_CASE("integer ranges: iotas, constants, sums, products and views; none where a type could wrap", "[ir][range]") {
  // Where a gather's indices provably stay in its table, kernels read them unclamped
  // (ir/element_walker.h): a wrong range would read outside the table.
  const ir::Graph g = kiln::testing::parse_ok(R"(graph @g(%x: i64[4,6]) {
    %t: i64[4,6] = iota {shape=[4,6], axis=0}
    %p: i64[4,6] = iota {shape=[4,6], axis=1}
    %three: i64[] = constant {value=3}
    %neg: i64[] = constant {value=-2}
    %tp: i64[4,6] = mul(%t, %three)
    %idx: i64[4,6] = add(%tp, %p)
    %flat: i64[24] = reshape(%idx) {shape=[24]}
    %back: i64[4,6] = sub(%p, %t)
    %scaled: i64[4,6] = mul(%back, %neg)
    %in: i64[4,6] = add(%idx, %x)
    %b: u8[300] = iota {shape=[300], axis=0}
    %c: i32[2] = constant {value=[7, -9]}
    %s0: i64[4,6] = add(%idx, %idx)
    %s1: i64[4,6] = add(%s0, %s0)
    %s2: i64[4,6] = add(%s1, %s1)
    %s3: i64[4,6] = add(%s2, %s2)
    %s4: i64[4,6] = add(%s3, %s3)
    %s5: i64[4,6] = add(%s4, %s4)
    %s6: i64[4,6] = add(%s5, %s5)
    %s7: i64[4,6] = add(%s6, %s6)
    %s8: i64[4,6] = add(%s7, %s7)
    return %flat, %scaled, %in, %b, %c, %s8
  })");
  const std::vector<int> producers = g.producers();
  auto range = [&](const std::string& name) {
    for (ir::ValueId v = 0; v < static_cast<ir::ValueId>(g.values.size()); ++v)
      if (g.values[static_cast<size_t>(v)].name == name) return ir::integer_range(g, producers, v);
    FAIL("no value " << name);
    return std::optional<ir::IntegerRange>{};
  };
  auto is = [](std::optional<ir::IntegerRange> r, int64_t lo, int64_t hi) { return r && r->min == lo && r->max == hi; };
  CHECK(is(range("flat"), 0, 14));     // 3·[0,3] + [0,5]
  CHECK(is(range("scaled"), -10, 6));  // -2·([0,5] - [0,3])
  CHECK(is(range("c"), -9, 7));
  CHECK_FALSE(range("in"));  // an input's values are unknown
  CHECK_FALSE(range("b"));   // 0..299 does not fit u8: it wraps
  CHECK_FALSE(range("s8"));  // past the visits a walk may take (2^9 paths to the iotas)
}
