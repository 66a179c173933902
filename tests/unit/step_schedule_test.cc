// Steps side by side on the CPU (runtime/cpu/step_schedule.h): the order the memory plan's
// reuse of bytes imposes, the phases planned from it, and a model of two independent
// chains of small matmuls run on two threads against the interpreter and against the
// program order.
#include <fmt/format.h>

#include <atomic>

#include "compiler/compile.h"
#include "runtime/cpu/step_schedule.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/model.h"
#include "tests/unit/run_util.h"

using namespace kiln;
using runtime::cpu::StepAccess;
using runtime::cpu::StepCost;

namespace {

StepAccess reads(int64_t begin, int64_t end, int64_t storage = -1) { return {storage, begin, end, false}; }
StepAccess writes(int64_t begin, int64_t end, int64_t storage = -1) { return {storage, begin, end, true}; }

// Two recurrences over the same input, one after the other in the graph, summed at the
// end: as a bidirectional RNN's directions, the memory plan gives the second chain the
// first's dead bytes, so only the values' own bytes let them run side by side.
std::string two_chains(int steps) {
  std::string text = "graph @two_chains(%x: f32[8,64], param %wf: f32[64,64], param %wb: f32[64,64]) {\n";
  for (const char* chain : {"f", "b"}) {
    std::string h = "%x";
    for (int t = 1; t <= steps; ++t) {
      text += fmt::format("  %{0}m{1}: f32[8,64] = matmul({2}, %w{0})\n", chain, t, h);
      text += fmt::format("  %{0}{1}: f32[8,64] = tanh(%{0}m{1})\n", chain, t);
      text += fmt::format("  %{0}s{1}: f32[8,64] = mul(%{0}{1}, %x)\n", chain, t);
      h = fmt::format("%{}s{}", chain, t);
    }
  }
  text += fmt::format("  %y: f32[8,64] = add(%fs{0}, %bs{0})\n  return %y\n}}\n", steps);
  return text;
}

}  // namespace

TEST_CASE("a step follows the last writer of what it reads, and the readers and writer of what it writes",
          "[runtime][cpu]") {
  using runtime::cpu::step_dependencies;
  using Deps = std::vector<std::vector<uint32_t>>;
  // Read after write, write after read, write after write; disjoint bytes order nothing.
  CHECK(step_dependencies({{writes(0, 8)}, {reads(0, 8), writes(8, 16)}, {writes(0, 4)}, {writes(16, 24)}}) ==
        Deps{{}, {0}, {0, 1}, {}});
  // A partial overlap is an overlap; the same offsets in another storage are not.
  CHECK(step_dependencies({{writes(0, 8)}, {reads(7, 9)}, {reads(0, 8, 5)}, {writes(0, 8, 6)}}) ==
        Deps{{}, {0}, {}, {}});
  // A write clears the readers before it: the step after the second write follows only it.
  CHECK(step_dependencies({{reads(0, 8)}, {reads(0, 8)}, {writes(0, 8)}, {writes(0, 8)}}) == Deps{{}, {}, {0, 1}, {2}});
  // In place: a step that reads and writes the same bytes follows the writer before it, not itself.
  CHECK(step_dependencies({{writes(0, 8)}, {reads(0, 8), writes(0, 8)}, {reads(4, 12)}}) == Deps{{}, {0}, {1}});
  // Empty ranges order nothing.
  CHECK(step_dependencies({{writes(0, 0)}, {reads(0, 0)}}) == Deps{{}, {}});
}

TEST_CASE("phases: steps on the pool go first, independent chains of one-thread steps run side by side",
          "[runtime][cpu]") {
  using runtime::cpu::plan_step_schedule;
  // A small matmul 1.6x faster on the pool than alone (as the LSTM's on two threads).
  const StepCost pool{false, 50, 25}, small{true, 8, 5}, kernel{true, 1, 1};
  // 0 on the pool; 1-2 and 4-5 two chains of small matmuls after it; 3 on the pool after
  // 0 only, so it runs before either chain; 6 joins the chains.
  const std::vector<std::vector<uint32_t>> deps{{}, {0}, {1}, {0}, {0}, {4}, {2, 5}};
  const std::vector<StepCost> costs{pool, small, small, pool, small, small, kernel};
  runtime::cpu::StepSchedule s = plan_step_schedule(deps, costs, 2);
  REQUIRE(s.phases.size() == 3);
  CHECK(s.phases[0].steps == std::vector<uint32_t>{0});
  CHECK(s.phases[1].steps == std::vector<uint32_t>{3});
  CHECK(s.phases[2].steps == std::vector<uint32_t>{1, 2, 4, 5, 6});
  CHECK(s.phases[2].side_by_side);
  CHECK(s.phases[2].follows == std::vector<uint32_t>{0, 1, 0, 1, 2});
  CHECK(s.phases[2].followers == std::vector<std::vector<uint32_t>>{{1}, {4}, {3}, {4}, {}});
  CHECK(s.side_by_side_steps == 5);
  // One chain: side by side it would run its matmuls on one thread, slower than on the
  // pool, so the program keeps its order.
  const std::vector<std::vector<uint32_t>> chain{{}, {0}, {1}, {2}};
  runtime::cpu::StepSchedule one = plan_step_schedule(chain, {small, small, small, small}, 2);
  REQUIRE(one.phases.size() == 1);
  CHECK(!one.phases[0].side_by_side);
  CHECK(one.phases[0].steps == std::vector<uint32_t>{0, 1, 2, 3});
  // Kernels the pool would not split anyway gain side by side even in a short phase.
  CHECK(plan_step_schedule({{}, {}}, {kernel, kernel}, 2).side_by_side_steps == 2);
  // One thread: the program order.
  runtime::cpu::StepSchedule alone = plan_step_schedule(deps, costs, 1);
  REQUIRE(alone.phases.size() == 1);
  CHECK(alone.phases[0].steps == std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6});
  CHECK(alone.side_by_side_steps == 0);
}

TEST_CASE("a phase side by side runs each step once after those it follows, and stops at the first error",
          "[runtime][cpu]") {
  using runtime::cpu::StepPhase;
  StepPhase phase;
  phase.steps = {0, 1, 2, 3, 4, 5};
  phase.side_by_side = true;
  // Two chains 0-1-2 and 3-4, joined by 5.
  phase.followers = {{1}, {2}, {5}, {4}, {5}, {}};
  phase.follows = {0, 1, 1, 0, 1, 2};
  runtime::ThreadPool pool(1);
  for (int round = 0; round < 50; ++round) {
    std::vector<std::atomic<int>> ran(6);
    std::atomic<int> order{0};
    std::vector<int> at(6, -1);
    Status ok = runtime::cpu::run_side_by_side(phase, pool, 2, [&](uint32_t s) {
      at[s] = order.fetch_add(1);
      ran[s].fetch_add(1);
      return Status::Ok();
    });
    REQUIRE(ok.ok());
    for (int s = 0; s < 6; ++s) CHECK(ran[static_cast<size_t>(s)].load() == 1);
    CHECK((at[0] < at[1] && at[1] < at[2] && at[3] < at[4] && at[2] < at[5] && at[4] < at[5]));
  }
  std::atomic<bool> last_ran{false};
  Status failed = runtime::cpu::run_side_by_side(phase, pool, 2, [&](uint32_t s) {
    if (s == 5) last_ran = true;
    return s == 1 ? Status(make_error("step 1 failed")) : Status::Ok();
  });
  REQUIRE(!failed.ok());
  CHECK(failed.error().message == "step 1 failed");
  CHECK(!last_ran.load());
}

TEST_CASE("two chains of small matmuls run side by side on two threads as the interpreter computes them",
          "[runtime][cpu]") {
  ir::Graph g = kiln::testing::parse_ok(two_chains(6));
  auto args = kiln::testing::seeded_arguments(g, 3, 0.2);
  const std::vector<ir::Tensor> expected = kiln::testing::eval_ok(g, args);
  std::vector<double> want;
  for (int64_t k = 0; k < expected[0].size(); ++k) want.push_back(expected[0].get(k));
  CompileOptions options;
  for (auto& [name, value] : kiln::testing::param_weights(g, args)) options.weights[name] = value;
  auto artifact = compile_to_artifact(g, options);
  REQUIRE(artifact.ok());
  std::map<std::string, runtime::HostTensor> inputs{{"x", kiln::testing::host(args.at("x"), "x")}};

  // The memory plan gives the second chain's values bytes the first chain's freed, so its
  // first step would wait for the first chain's third: with bytes of their own, it waits
  // for nothing.
  auto view = format::read_artifact(*artifact);
  REQUIRE(view.ok());
  const format::Artifact& a = view->metadata();
  std::vector<int64_t> value_bytes;
  for (const format::Value* v : *a.values()) {
    int64_t bytes = format::element_bytes(v->dtype());
    for (int64_t d : *v->shape()) bytes *= d;
    value_bytes.push_back(bytes);
  }
  std::vector<StepCost> costs;
  for (const format::Step* step : *a.steps())
    costs.push_back({true, step->kind() == format::StepKind::Library ? 2.0 : 1.0, 1.0});
  uint32_t second_chain = 0;  // the first step that reads %wb
  while (a.values()->Get(a.steps()->Get(second_chain)->inputs()->Get(1))->name()->str() != "wb") ++second_chain;
  const auto planned_deps = runtime::cpu::step_dependencies(
      runtime::cpu::artifact_step_accesses(a, value_bytes, std::vector<int64_t>(value_bytes.size(), -1)));
  CHECK(!planned_deps[second_chain].empty());
  const auto own = runtime::cpu::values_of_one_thread_steps(a, costs);
  CHECK(
      runtime::cpu::step_dependencies(runtime::cpu::artifact_step_accesses(a, value_bytes, own))[second_chain].empty());
  const runtime::cpu::StepPlan plan = runtime::cpu::plan_cpu_steps(a, value_bytes, costs, 2);
  REQUIRE(plan.schedule.phases.size() == 1);
  REQUIRE(plan.schedule.phases[0].side_by_side);
  CHECK(plan.schedule.phases[0].follows[second_chain] == 0);
  CHECK(plan.arena_bytes > a.arena_bytes());
  for (int64_t offset : plan.own_offsets)  // after the arena, aligned as the memory plan aligns
    if (offset >= 0) CHECK((offset >= static_cast<int64_t>(a.arena_bytes()) && offset % a.alignment() == 0));

  runtime::Options side_by_side;
  side_by_side.threads = 2;
  runtime::Options in_order = side_by_side;
  in_order.side_by_side_steps = false;
  auto model = runtime::Model::load_bytes(*artifact, side_by_side);
  REQUIRE(model.ok());
  const size_t steps = (*model)->steps().size() - 1;  // less the copies after the last
  // Every step: the final sum is a kernel the pool would not split either.
  CHECK((*model)->schedule().starts_with(fmt::format("{0} of {0} steps side by side, in 1 phase, ", steps)));
  CHECK((*model)->schedule().ends_with(" bytes of arena more for their values"));
  auto ordered = runtime::Model::load_bytes(*artifact, in_order);
  REQUIRE(ordered.ok());
  CHECK((*ordered)->schedule().empty());
  runtime::Options single;
  single.threads = 1;
  CHECK((*runtime::Model::load_bytes(*artifact, single))->schedule().empty());

  auto first = (*model)->run(inputs);
  REQUIRE(first.ok());
  kiln::testing::check_close(kiln::testing::tensor_of((*first)[0]), "f32[8,64]", want, 1e-4, 1e-6);
  auto in_program_order = (*ordered)->run(inputs);
  REQUIRE(in_program_order.ok());
  kiln::testing::check_close(kiln::testing::tensor_of((*in_program_order)[0]), "f32[8,64]", want, 1e-4, 1e-6);
  // Each step runs on one thread, whichever it is: every run gives the same bits.
  for (int run = 0; run < 100; ++run) {
    auto again = (*model)->run(inputs);
    REQUIRE(again.ok());
    REQUIRE((*again)[0].data == (*first)[0].data);
  }
  // A profile still times every step, and computes the same.
  std::vector<uint8_t> y((*first)[0].data.size());
  auto profile = (*model)->profile({{"x", std::span<const uint8_t>(inputs.at("x").data)}}, {{"y", std::span(y)}});
  REQUIRE(profile.ok());
  CHECK(y == (*first)[0].data);
  REQUIRE(profile->steps.size() == steps + 1);
  for (const runtime::StepTime& t : profile->steps) CHECK(t.ms >= 0);
}

TEST_CASE("runs from 8 threads at once, each in phase order while others run, give the single-run bits",
          "[runtime][cpu][threads]") {
  ir::Graph g = kiln::testing::parse_ok(two_chains(4));
  auto args = kiln::testing::seeded_arguments(g, 5, 0.2);
  CompileOptions options;
  for (auto& [name, value] : kiln::testing::param_weights(g, args)) options.weights[name] = value;
  auto artifact = compile_to_artifact(g, options);
  REQUIRE(artifact.ok());
  runtime::Options load;
  load.threads = 2;
  auto model = runtime::Model::load_bytes(*artifact, load);
  REQUIRE(model.ok());
  REQUIRE(!(*model)->schedule().empty());
  const auto single = kiln::testing::outputs_one_thread(**model, "x", {8, 64}, 800);
  CHECK(kiln::testing::mismatches_across_threads(**model, "x", {8, 64}, 8, 100, single) == 0);
}
