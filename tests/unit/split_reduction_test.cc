// Reductions split into parts (ir/reduction_split.h): the plan from shapes alone, the
// compiled kernels against the interpreter, bit-identical results over any thread count,
// and the artifact's checks of the scratch and of the kernels' recorded split.
#include <fmt/format.h>
#include <algorithm>

#include "codegen/cpu/compile.h"
#include "compiler/artifact_contents.h"
#include "ir/reduction_split.h"
#include "passes/pipeline.h"
#include "tests/unit/run_util.h"
#include "tests/unit/split_graphs.h"

using namespace kiln;
using Walk = ir::ReductionSplit::Walk;
using kiln::testing::kBiasGradient;
using kiln::testing::kInnerColumns;
using kiln::testing::kLongRows;
using kiln::testing::kLossBesideOutput;

namespace {

ir::Graph planned_graph(const std::string& text) {
  ir::Graph g = kiln::testing::parse_ok(text);
  auto pipeline = passes::pipeline_from_text(passes::kDefaultPipeline);
  REQUIRE(pipeline.ok());
  REQUIRE(pipeline->run(g).ok());
  return g;
}

// The split of the planned graph's only step.
std::optional<ir::ReductionSplit> split_of(const std::string& text) {
  ir::Graph g = planned_graph(text);
  REQUIRE(g.program->steps.size() == 1);
  return ir::reduction_split(g, g.program->steps[0], ir::kCpuSplit);
}

std::string sum_text(const std::string& shape, const std::string& axes, const std::string& result) {
  return fmt::format("graph @g(%x: f32[{}]) {{\n  %s: f32[{}] = reduce_sum(%x) {{axes=[{}]}}\n  return %s\n}}\n", shape,
                     result, axes);
}

}  // namespace

TEST_CASE("a reduction splits by its shapes alone: columns and few long rows, never what every core already shares",
          "[split][cpu]") {
  auto columns = split_of(sum_text("8192,768", "0", "768"));
  REQUIRE(columns);
  CHECK(columns->walk == Walk::Columns);
  CHECK(columns->part_length == 344);  // 2^18 elements of 768 columns, in whole groups of 8 rows
  CHECK(columns->parts == 24);
  CHECK(columns->partial_items == 24);
  CHECK(columns->scratch_bytes == 24 * 768 * 8);

  auto narrow = split_of(sum_text("65536,16", "0", "16"));
  REQUIRE(narrow);
  CHECK(narrow->walk == Walk::Columns);
  CHECK(narrow->parts == 4);

  auto full = split_of(sum_text("67108864", "0", ""));
  REQUIRE(full);
  CHECK(full->walk == Walk::Rows);
  CHECK(full->parts == 256);  // kSplitMaxParts
  CHECK(full->part_length == 262144);
  CHECK(full->scratch_bytes == 256 * 8);

  auto twelve = split_of(sum_text("3145728", "0", ""));
  REQUIRE(twelve);
  CHECK(twelve->parts == 12);  // 3·2^20 in parts of 2^18

  // The same sum beside a full-shape output: parts of 2^14, which the partial kernel walks
  // twice on the CPU; on CUDA, parts of 2^12, a block each (768 blocks).
  auto beside = split_of(kiln::testing::kLossBesideOutput);
  REQUIRE(beside);
  CHECK(beside->walk == Walk::Rows);
  CHECK(beside->parts == 192);
  CHECK(beside->part_length == 16384);
  ir::Graph loss = planned_graph(kiln::testing::kLossBesideOutput);
  auto on_cuda = ir::reduction_split(loss, loss.program->steps[0], ir::kCudaSplit);
  REQUIRE(on_cuda);
  CHECK(on_cuda->parts == 768);
  CHECK(on_cuda->part_length == 4096);

  CHECK(!split_of(sum_text("128,16384", "1", "128")));   // enough rows
  CHECK(!split_of(sum_text("100,100", "0", "100")));     // small
  CHECK(!split_of(sum_text("32,65536", "0", "65536")));  // enough columns
  CHECK(!split_of(sum_text("1048583", "0", "")));        // a prime length: no equal parts
  // Two reductions (softmax over one long row): the row's second pass needs the first.
  CHECK(!split_of(R"(graph @g(%x: f32[1,2097152]) {
  %m: f32[1] = reduce_max(%x) {axes=[1]}
  %mb: f32[1,2097152] = broadcast(%m) {shape=[1,2097152], dims=[0]}
  %e: f32[1,2097152] = sub(%x, %mb)
  %s: f32[1] = reduce_sum(%e) {axes=[1]}
  return %s
}
)"));
}

TEST_CASE("sums over dims inside kept ones are column sums where the rows after them are long enough", "[split][cpu]") {
  ir::Graph p = planned_graph(kInnerColumns);
  std::vector<std::string> walks;
  for (const ir::Step& step : p.program->steps) {
    auto rc = ir::row_class(p, step);
    if (!rc) continue;
    auto split = ir::reduction_split(p, step, ir::kCpuSplit);
    ir::ValueId sum = ir::kNoValue;
    for (int n : step.nodes)
      if (ir::op_kind(p.nodes[n].op) == ir::OpKind::Reduction) sum = p.nodes[n].result;
    walks.push_back(fmt::format("{}:{}{}", p.type(sum).to_string(), ir::sums_columns(p, step, *rc) ? "columns" : "rows",
                                split ? fmt::format(" in {} parts", split->parts) : ""));
  }
  std::sort(walks.begin(), walks.end());
  CHECK(walks == std::vector<std::string>{"f32[2,1024]:columns in 4 parts", "f32[4,64]:columns", "f32[6,8]:rows",
                                          "f32[8,2,256,64]:columns"});
}

TEST_CASE("split reductions agree with the interpreter and are bit-identical over 1, 2 and 7 threads",
          "[split][cpu][runtime]") {
  for (const char* text : {kBiasGradient, kLongRows, kLossBesideOutput, kInnerColumns}) {
    ir::Graph g = kiln::testing::parse_ok(text);
    ir::Graph p = planned_graph(text);
    int splits = 0, cuda_splits = 0;
    for (const ir::Step& step : p.program->steps) {
      splits += ir::reduction_split(p, step, ir::kCpuSplit).has_value();
      cuda_splits += ir::reduction_split(p, step, ir::kCudaSplit).has_value();
    }
    CHECK(splits == (text == kLongRows ? 2 : 1));
    // CUDA also walks the group sum by columns, as one part.
    CHECK(cuda_splits == (text == kInnerColumns ? 2 : splits));
    auto args = kiln::testing::seeded_arguments(g, 5, 3);
    auto expected = kiln::testing::eval_ok(g, args);
    std::vector<std::vector<ir::Tensor>> runs;
    for (int threads : {1, 2, 7}) {
      INFO(threads << " threads");
      runtime::Options load;
      load.threads = threads;
      auto got = kiln::testing::compile_and_run(g, args, {}, load);
      if (!got.ok()) FAIL(got.error().message);
      kiln::testing::check_same(*got, expected);
      runs.push_back(*got);
    }
    for (size_t r = 1; r < runs.size(); ++r)
      for (size_t o = 0; o < runs[0].size(); ++o)
        CHECK(ir::tensor_to_bytes(runs[r][o]) == ir::tensor_to_bytes(runs[0][o]));
  }
}

TEST_CASE("an artifact's scratch must be free during its step, on a CPU split step, as its kernels were compiled",
          "[split][artifact][errors]") {
  ir::Graph p = planned_graph(sum_text("8192,768", "0", "768"));
  auto contents = artifact_contents(p, {}, "cpu-x86_64", "");
  REQUIRE(contents.ok());
  REQUIRE(contents->steps.size() == 1);
  const format::ArtifactContents::StepInfo& step = contents->steps[0];
  CHECK(step.partial_symbol == "kiln_reduce_sum_0_partial");
  CHECK(step.partial_items == 24);
  CHECK(step.scratch_offset == 3072);  // past the planned arena (the result, 768 floats)
  CHECK(contents->arena_bytes == 3072 + 24 * 768 * 8);
  auto kernels = codegen::cpu::compile_kernels(p, {});
  REQUIRE(kernels.ok());
  contents->code.push_back({"elf", "x86_64", kernels->elf, kernels->cpu_features, "native"});
  REQUIRE(runtime::Model::load_bytes(format::write_artifact(*contents)).ok());

  auto refusal = [&](auto&& tamper) {
    format::ArtifactContents c = *contents;
    tamper(c.steps[0]);
    auto model = runtime::Model::load_bytes(format::write_artifact(c));
    REQUIRE(!model.ok());
    return model.error().message;
  };
  CHECK(refusal([](auto& s) { s.scratch_offset = 0; }) ==
        "artifact: bad memory plan: memory plan: buffer 1 [0, 3072) and step 0's scratch [0, 147456) overlap while "
        "both are live (steps 0..0)");
  CHECK(refusal([](auto& s) { s.partial_items = 12; }) ==
        "artifact: shape mismatch: step reduce_sum_0: its kernels sum 24 parts into 147456 bytes of scratch, the "
        "metadata gives 12 and 147456");
  CHECK(refusal([](auto& s) { s.partial_symbol = "kiln_nothing"; }) ==
        "runtime: the kernels have no entry point kiln_nothing");
  CHECK(refusal([](auto& s) { s.partial_items = 0; }) ==
        "artifact: out of range: step 0 has 0 partial work items and 147456 bytes of scratch at 3072");
  CHECK(refusal([](auto& s) { s.partial_symbol.clear(); }) ==
        "artifact: malformed metadata: step 0 has scratch or a partial kernel, which only a split reduction step or a "
        "CUDA attention backward has");
}
