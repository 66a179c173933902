// Fusion and memory planning: random graphs run through their planned arena give the
// plain interpreter's values; the plan checker catches bad plans; the arena goals hold.
#include <random>
#include <tuple>

#include "base/memory_check.h"
#include "compiler/nn.h"
#include "compiler/train.h"
#include "ir/builder.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "tests/unit/random_graph.h"
#include "tests/unit/test_util.h"

using namespace kiln;
using ir::DType;
using ir::Op;
using ir::ValueId;

namespace {

using kiln::testing::random_graph;
using kiln::testing::RandomGraph;

using kiln::testing::planned;

bool same_bits(const ir::Tensor& a, const ir::Tensor& b) { return ir::tensor_to_bytes(a) == ir::tensor_to_bytes(b); }

}  // namespace

TEST_CASE("600 random graphs: the planned program computes what the interpreter computes", "[program][random]") {
  int fused_steps = 0, unfused_steps = 0;
  for (uint64_t seed = 1; seed <= 600; ++seed) {
    RandomGraph rg = random_graph(seed);
    auto expected = kiln::testing::eval_ok(rg.graph, rg.inputs);
    for (bool fuse : {true, false}) {
      ir::Graph g = planned(rg.graph, fuse);
      INFO("seed " << seed << (fuse ? " fused" : " unfused") << "\n" << ir::print(g));
      (fuse ? fused_steps : unfused_steps) += static_cast<int>(g.program->steps.size());
      const ir::MemoryPlan& plan = *g.memory;
      CHECK(plan.arena_bytes >= plan.live_lower_bound_bytes);
      CHECK(plan.arena_bytes <= plan.naive_bytes);
      auto got = ir::evaluate_program(g, rg.inputs);
      if (!got.ok()) FAIL(got.error().message);
      REQUIRE(got->size() == expected.size());
      for (size_t i = 0; i < expected.size(); ++i) {
        if (rg.elementwise_only) {
          CHECK(same_bits((*got)[i], expected[i]));
        } else {
          std::vector<double> want(expected[i].floats.begin(), expected[i].floats.end());
          kiln::testing::check_close((*got)[i], expected[i].type.to_string(), want, 1e-5, 1e-6);
        }
      }
    }
  }
  CHECK(fused_steps < unfused_steps / 2);
}

TEST_CASE("the arena checker refuses overlapping, misplaced and unaligned buffers", "[program][errors]") {
  auto check = [](std::vector<ArenaBuffer> buffers, int64_t arena = 1024) {
    Status s = check_arena(buffers, arena, 256);
    return s.ok() ? std::string("ok") : s.error().message;
  };
  CHECK(check({{"%a", 0, 256, 0, 1}, {"%b", 256, 256, 0, 1}}) == "ok");
  CHECK(check({{"%a", 0, 256, 0, 1}, {"%b", 0, 256, 2, 3}}) == "ok");  // reuse after death
  CHECK(check({{"%a", 0, 512, 0, 2}, {"%b", 256, 256, 1, 3}}) ==
        "memory plan: %a [0, 512) and %b [256, 512) overlap while both are live (steps 1..2)");
  CHECK(check({{"%a", 0, 256, 0, 1}, {"%b", 0, 256, 1, 2, 0}}) == "ok");  // in place at step 1
  CHECK(check({{"%a", 0, 256, 0, 2}, {"%b", 0, 256, 1, 3, 0}}) ==
        "memory plan: %a [0, 256) and %b [0, 256) overlap while both are live (steps 1..2)");
  CHECK(check({{"%a", 768, 512, 0, 1}}) == "memory plan: %a ends at byte 1280, past the arena's 1024");
  CHECK(check({{"%a", 128, 4, 0, 1}}) == "memory plan: %a is not 256-byte aligned");
  CHECK(check({{"%a", INT64_MAX - 4, 256, 0, 1}}) == "memory plan: %a has a negative or overflowing offset or size");
  CHECK(check({{"%a", 0, 4, 3, 1}}) == "memory plan: %a dies before it is born");
}

TEST_CASE("the verifier refuses a corrupted program or plan", "[program][errors]") {
  ir::Graph g = planned(kiln::testing::parse_ok(R"(graph @g(%x: f32[64]) {
  %a: f32[64] = exp(%x)
  %s: f32[] = reduce_sum(%a) {axes=[0]}
  %b: f32[64] = mul(%a, %a)
  return %b, %s
}
)"),
                        false);
  REQUIRE(ir::verify(g).ok());
  ir::Graph overlap = g;
  for (ir::Buffer& b : overlap.memory->buffers)
    if (b.home == ir::Home::Arena) b.offset = 0;
  auto e1 = ir::verify(overlap);
  REQUIRE(!e1.ok());
  CHECK(e1.error().message.find("overlap while both are live") != std::string::npos);
  ir::Graph missing = g;
  missing.program->steps.erase(missing.program->steps.begin() + 1);
  missing.memory.reset();
  auto e2 = ir::verify(missing);
  REQUIRE(!e2.ok());
  CHECK(e2.error().message.rfind("error: @g: program: ", 0) == 0);
}

TEST_CASE("state updates are written in place when nothing reads the old state afterwards", "[program]") {
  ir::Graph g = planned(kiln::testing::parse_ok(R"(graph @g(%x: f32[8], state %s: f32[8], state %t: f32[2,4],
                          %y: f32[2,4]) {
  %d: f32[8] = mul(%x, %s)
  %s.next: f32[8] = add(%s, %d)
  %r: f32[] = reduce_sum(%t) {axes=[0,1]}
  %t.next: f32[2,4] = neg(%y)
  %tt: f32[4,2] = transpose(%t.next) {perm=[1,0]}
  %late: f32[2,2] = matmul(%t, %tt)
  return %r, %s.next, %t.next, %late
}
)"),
                        true);
  const ir::Buffer* s_next = g.memory->find(g.results[1]);
  REQUIRE(s_next);
  CHECK(s_next->home == ir::Home::State);
  // %t is still read after %t.next is computed, by the matmul that reads both: its
  // update is copied at the end.
  REQUIRE(g.memory->state_copies.size() == 1);
  CHECK(g.value_name(g.memory->state_copies[0].first) == "t");
  std::map<std::string, ir::Tensor> in = {{"x", kiln::testing::tensor(DType::F32, {8}, {1, 2, 3, 4, 5, 6, 7, 8})},
                                          {"s", kiln::testing::tensor(DType::F32, {8}, {1, 1, 1, 1, 1, 1, 1, 1})},
                                          {"t", kiln::testing::tensor(DType::F32, {2, 4}, {2, 2, 2, 2, 2, 2, 2, 2})},
                                          {"y", kiln::testing::tensor(DType::F32, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8})}};
  auto got = ir::evaluate_program(g, in);
  REQUIRE(got.ok());
  kiln::testing::check_close((*got)[1], "f32[8]", {2, 3, 4, 5, 6, 7, 8, 9});
  kiln::testing::check_close((*got)[3], "f32[2,2]", {-20, -52, -20, -52});
}

TEST_CASE("a step that reads a state runs before the state's update where nothing orders them", "[program]") {
  // %late's kernel reads %t and not %t.next: under the graph's order it ran after the
  // update's kernel (its op comes later), and the update was copied at the end.
  for (const char* order : {"memory", "graph"}) {
    INFO(order);
    ir::Graph g = kiln::testing::parse_ok(R"(graph @g(%x: f32[8], state %t: f32[8]) {
  %t.next: f32[8] = neg(%x)
  %late: f32[8] = mul(%t, %x)
  return %t.next, %late
}
)");
    auto pipeline = passes::pipeline_from_text(fmt::format("fusion{{order={}}},memory-plan", order));
    REQUIRE(pipeline.ok());
    REQUIRE(pipeline->run(g).ok());
    CHECK(g.memory->state_copies.empty());
    REQUIRE(g.memory->find(g.results[0]));
    CHECK(g.memory->find(g.results[0])->home == ir::Home::State);
    REQUIRE(g.program->steps.size() == 2);
    CHECK(g.program->steps[0].outputs == std::vector<ir::ValueId>{g.results[1]});
  }
}

TEST_CASE("a gradient's kernel recomputes GELU's factors and a mask's broadcast instead of reading them back",
          "[program][recompute]") {
  const char* gelu = R"(graph @gelu_train(%x: f32[64,32], param %w: f32[32,48], param %b: f32[48]) {
  %h: f32[64,48] = linear(%x, %w, %b)
  %a: f32[64,48] = gelu(%h) {approximate="tanh"}
  %s: f32[] = reduce_sum(%a) {axes=[0,1]}
  return %s
}
)";
  const char* causal = R"(graph @causal_softmax_train(%q: f32[1,2,128,8], %k: f32[1,2,128,8]) {
  %kt: f32[1,2,8,128] = transpose(%k) {perm=[0,1,3,2]}
  %s: f32[1,2,128,128] = matmul(%q, %kt)
  %i: i64[128,128] = iota {shape=[128,128], axis=0}
  %j: i64[128,128] = iota {shape=[128,128], axis=1}
  %keep: bool[128,128] = le(%j, %i)
  %mb: bool[1,2,128,128] = broadcast(%keep) {shape=[1,2,128,128], dims=[2,3]}
  %ninf: f32[] = constant {value=-1e9}
  %sm: f32[1,2,128,128] = select(%mb, %s, %ninf)
  %p: f32[1,2,128,128] = softmax(%sm) {axis=-1}
  %sq: f32[1,2,128,128] = mul(%p, %p)
  %l: f32[] = reduce_sum(%sq) {axes=[0,1,2,3]}
  return %l
}
)";
  for (auto [text, wrt, full] :
       {std::tuple{gelu, "x,w,b", ir::Shape{64, 48}}, {causal, "q,k", ir::Shape{1, 2, 128, 128}}}) {
    ir::Graph g = kiln::testing::parse_ok(text);
    auto differentiate = passes::pipeline_from_text(std::string("autodiff{wrt=") + wrt + "}");
    REQUIRE(differentiate.ok());
    REQUIRE(differentiate->run(g).ok());
    const std::map<std::string, ir::Tensor> args = kiln::testing::seeded_arguments(g, 7);
    const std::vector<ir::Tensor> expected = kiln::testing::eval_ok(g, args);
    ir::Graph fused = planned(g, true);
    INFO(ir::print(fused));
    // GELU's gradient kernel reads one value of the layer's size (the matmul's result) where
    // it read four (the pre-activation, tanh and two factors); no kernel reads the mask's
    // broadcast.
    const std::vector<int> producer = fused.producers();
    for (const ir::Step& step : fused.program->steps) {
      int full_inputs = 0, full_masks = 0;
      for (ValueId v : step.inputs) {
        full_inputs += fused.type(v).shape == full;
        full_masks += fused.type(v).shape == full && fused.type(v).dtype == DType::Bool;
      }
      CHECK(full_masks == 0);
      for (ValueId v : fused.results)
        if (fused.value_name(v) == "grad_b" &&
            std::find(step.nodes.begin(), step.nodes.end(), producer[v]) != step.nodes.end())
          CHECK(full_inputs == 1);
    }
    auto got = ir::evaluate_program(fused, args);
    if (!got.ok()) FAIL(got.error().message);
    REQUIRE(got->size() == expected.size());
    for (size_t i = 0; i < expected.size(); ++i) CHECK(same_bits((*got)[i], expected[i]));
  }
}

TEST_CASE("arena goals: within 10% of the live lower bound; a training step under half of naive", "[program][goals]") {
  auto plan_of = [](const ir::Graph& graph) { return *planned(graph, true).memory; };
  // An MLP forward pass and its Adam training step, batch 256, 784-512-512-10.
  Model m("mlp", 1);
  Tensor x = m.input("x", {256, 784});
  Tensor labels = m.input("labels", {256}, DType::I32);
  nn::Sequential net = nn::mlp(m, "fc", {784, 512, 512, 10});
  m.output(cross_entropy(net(x), labels), "loss");
  auto forward = m.build();
  REQUIRE(forward.ok());
  auto step = build_train_step(m, Adam{});
  REQUIRE(step.ok());
  for (const ir::Graph* graph : {&*forward, &step->graph}) {
    ir::MemoryPlan plan = plan_of(*graph);
    INFO(graph->name << ": arena " << plan.arena_bytes << ", live lower bound " << plan.live_lower_bound_bytes
                     << ", naive " << plan.naive_bytes);
    CHECK(plan.arena_bytes <= 1.10 * plan.live_lower_bound_bytes);
  }
  ir::MemoryPlan train = plan_of(step->graph);
  INFO("training step: arena " << train.arena_bytes << ", naive " << train.naive_bytes);
  CHECK(train.arena_bytes <= 0.5 * train.naive_bytes);
}
