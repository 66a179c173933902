// Loop kernels that read an input across rows (a transpose of the output's last two dims)
// walk it in tiles (codegen/cpu/kernel_emitter.cc's emit_tiles): which inputs the element
// probe finds (ir/element_probe.h), and every tiled kernel against the interpreter, run
// whole and in pieces that split rows and tiles, as the runtime's threads do.
#include <fmt/format.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <string>
#include <vector>

#include "codegen/cpu/kernel_emitter.h"
#include "ir/element_probe.h"
#include "ir/printer.h"
#include "passes/pipeline.h"
#include "tests/unit/kernel_run.h"
#include "tests/unit/random_graph.h"

using namespace kiln;

namespace {

// The names of the inputs the one loop step of `text` (fused) reads across rows, after
// the dim their rows run down ("dim 1: x").
std::vector<std::string> read_across_rows(const std::string& text) {
  ir::Graph g = kiln::testing::planned(kiln::testing::parse_ok(text), true);
  std::vector<std::string> names;
  for (const ir::Step& step : g.program->steps)
    if (step.kind == ir::StepKind::Loop)
      if (auto across = ir::inputs_read_across_rows(g, step))
        for (ir::ValueId v : across->inputs) names.push_back(fmt::format("dim {}: {}", across->dim, g.values[v].name));
  return names;
}

// The vector shuffles in the kernels of `g`: a tiled kernel transposes its tiles with them.
int shuffles(const ir::Graph& g, int vector_bytes) {
  llvm::LLVMContext ctx;
  llvm::Module m("tiles", ctx);
  REQUIRE(codegen::cpu::emit_kernels(g, m, int64_t{16} << 20, vector_bytes).ok());
  int count = 0;
  for (llvm::Function& f : m)
    for (llvm::BasicBlock& block : f)
      for (llvm::Instruction& instruction : block) count += llvm::isa<llvm::ShuffleVectorInst>(instruction);
  return count;
}

}  // namespace

TEST_CASE("the element probe finds the inputs a loop step reads across rows", "[codegen][cpu][tiles]") {
  CHECK(read_across_rows(R"(graph @g(%x: f32[40,24]) {
  %t: f32[24,40] = transpose(%x) {perm=[1,0]}
  %y: f32[24,40] = exp(%t)
  return %y
}
)") == std::vector<std::string>{"dim 0: x"});
  // The last two dims of each batch index, the others read in place or broadcast along rows.
  CHECK(read_across_rows(R"(graph @g(%x: f32[3,20,24], %y: f32[3,24,20], %b: f32[20]) {
  %t: f32[3,24,20] = transpose(%x) {perm=[0,2,1]}
  %bb: f32[3,24,20] = broadcast(%b) {shape=[3,24,20], dims=[2]}
  %s: f32[3,24,20] = add(%t, %y)
  %z: f32[3,24,20] = mul(%s, %bb)
  return %z
}
)") == std::vector<std::string>{"dim 1: x"});
  // A vision transformer's patches: [C, H, W] merged to [C, H·W], then transposed.
  CHECK(read_across_rows(R"(graph @g(%x: f32[2,12,5,7]) {
  %r: f32[2,12,35] = reshape(%x) {shape=[2,12,35]}
  %t: f32[2,35,12] = transpose(%r) {perm=[0,2,1]}
  %y: f32[2,35,12] = tanh(%t)
  return %y
}
)") == std::vector<std::string>{"dim 1: x"});
  // Channels-last to channels-first: rows down C, columns along H·W.
  CHECK(read_across_rows(R"(graph @g(%x: f32[2,5,7,16]) {
  %t: f32[2,16,5,7] = transpose(%x) {perm=[0,3,1,2]}
  %y: f32[2,16,5,7] = exp(%t)
  return %y
}
)") == std::vector<std::string>{"dim 1: x"});
  // [A,B,C] to [C,A,B]: rows down C, columns along A·B.
  CHECK(read_across_rows(R"(graph @g(%x: f32[16,16,16]) {
  %t: f32[16,16,16] = transpose(%x) {perm=[2,0,1]}
  %y: f32[16,16,16] = exp(%t)
  return %y
}
)") == std::vector<std::string>{"dim 0: x"});
  // Rows swapped, each read along its line: nothing across.
  CHECK(read_across_rows(R"(graph @g(%x: f32[16,16,16]) {
  %t: f32[16,16,16] = transpose(%x) {perm=[1,0,2]}
  %y: f32[16,16,16] = exp(%t)
  return %y
}
)")
            .empty());
  // Read in place and transposed: a tile could not stand for both reads.
  CHECK(read_across_rows(R"(graph @g(%x: f32[24,24]) {
  %t: f32[24,24] = transpose(%x) {perm=[1,0]}
  %y: f32[24,24] = add(%x, %t)
  return %y
}
)")
            .empty());
  // Windows of 7 (MaxViT's): the index moves by one for 7 rows, then jumps.
  CHECK(read_across_rows(R"(graph @g(%x: f32[16,14,14]) {
  %r: f32[16,2,7,2,7] = reshape(%x) {shape=[16,2,7,2,7]}
  %t: f32[2,2,7,7,16] = transpose(%r) {perm=[1,3,2,4,0]}
  %w: f32[4,49,16] = reshape(%t) {shape=[4,49,16]}
  %y: f32[4,49,16] = exp(%w)
  return %y
}
)")
            .empty());
  // Too narrow for tiles.
  CHECK(read_across_rows(R"(graph @g(%x: f32[40,4]) {
  %t: f32[4,40] = transpose(%x) {perm=[1,0]}
  %y: f32[4,40] = exp(%t)
  return %y
}
)")
            .empty());
  CHECK(read_across_rows(R"(graph @g(%x: f32[40,24], %y: f32[40,24]) {
  %z: f32[40,24] = add(%x, %y)
  return %z
}
)")
            .empty());
}

TEST_CASE("two reads of one input that meet at every probed element are still two reads", "[codegen][cpu][tiles]") {
  // x read transposed, and again through its first batch index: one element at batch 0,
  // where the probe looks, two elsewhere. Fusion materializes such a slice, so this step
  // is built by hand: the probe must not count on fusion to keep the reads apart.
  ir::Graph g = kiln::testing::parse_ok(R"(graph @g(%x: f32[2,24,40]) {
  %x0: f32[1,24,40] = slice(%x) {starts=[0,0,0], ends=[1,24,40]}
  %xb: f32[2,24,40] = broadcast(%x0) {shape=[2,24,40], dims=[0,1,2]}
  %d: f32[2,24,40] = sub(%x, %xb)
  %y: f32[2,40,24] = transpose(%d) {perm=[0,2,1]}
  return %y
}
)");
  ir::Step step;
  step.name = "by_hand";
  for (int n = 0; n < static_cast<int>(g.nodes.size()); ++n) step.nodes.push_back(n);
  step.inputs = {g.args[0].value};
  step.outputs = {g.results[0]};
  auto reads = ir::element_reads(g, step, {1, 0, 0});
  REQUIRE(reads);
  CHECK(reads->size() == 2);                                  // x[1,0,0] and x[0,0,0]
  CHECK(ir::element_reads(g, step, {0, 0, 0})->size() == 2);  // the same element, by two reads
  CHECK(!ir::inputs_read_across_rows(g, step));
}

TEST_CASE("tiled loop kernels give the interpreter's values, whole and in pieces that split rows and tiles",
          "[codegen][cpu][tiles]") {
  const std::vector<std::string> models = {
      // Partial tiles in both dims.
      R"(graph @g(%x: f32[37,45]) {
  %t: f32[45,37] = transpose(%x) {perm=[1,0]}
  %y: f32[45,37] = exp(%t)
  return %y
}
)",
      R"(graph @g(%x: f32[3,20,24], %y: f32[3,24,20], %b: f32[20]) {
  %t: f32[3,24,20] = transpose(%x) {perm=[0,2,1]}
  %bb: f32[3,24,20] = broadcast(%b) {shape=[3,24,20], dims=[2]}
  %s: f32[3,24,20] = add(%t, %y)
  %z: f32[3,24,20] = mul(%s, %bb)
  return %z
}
)",
      R"(graph @g(%x: f32[2,12,5,7]) {
  %r: f32[2,12,35] = reshape(%x) {shape=[2,12,35]}
  %t: f32[2,35,12] = transpose(%r) {perm=[0,2,1]}
  %y: f32[2,35,12] = tanh(%t)
  return %y
}
)",
      // Two inputs across rows, one of them bf16, and two outputs.
      R"(graph @g(%a: f32[33,18], %b: bf16[33,18]) {
  %ta: f32[18,33] = transpose(%a) {perm=[1,0]}
  %tb: bf16[18,33] = transpose(%b) {perm=[1,0]}
  %cb: f32[18,33] = cast(%tb) {to=f32}
  %s: f32[18,33] = add(%ta, %cb)
  %p: f32[18,33] = mul(%ta, %cb)
  return %s, %p
}
)",
      // Channels-last to channels-first, with a bias per channel: rows down C, columns
      // along H·W (35: whole tiles and a part).
      R"(graph @g(%x: f32[2,5,7,40], %b: f32[40]) {
  %t: f32[2,40,5,7] = transpose(%x) {perm=[0,3,1,2]}
  %bb: f32[2,40,5,7] = broadcast(%b) {shape=[2,40,5,7], dims=[1]}
  %y: f32[2,40,5,7] = add(%t, %bb)
  return %y
}
)",
      // Read in place and transposed: not tiled, still right.
      R"(graph @g(%x: f32[24,24]) {
  %t: f32[24,24] = transpose(%x) {perm=[1,0]}
  %y: f32[24,24] = add(%x, %t)
  return %y
}
)",
  };
  // The shuffles of the tile transposes, log2(side) rounds of `side` per tile buffer, where
  // a tile's side is one vector of f32. With AVX-512, 16 where 512-bit vectors pay (exp,
  // tanh: the third's rows of 12 are then too short for a tile), else 8; with AVX2, 8.
  const std::vector<int> shuffles_wide = {64, 24, 0, 2 * 24, 24, 0}, shuffles_narrow = {24, 24, 24, 2 * 24, 24, 0};
  for (size_t k = 0; k < models.size(); ++k) {
    INFO(models[k]);
    ir::Graph parsed = kiln::testing::parse_ok(models[k]);
    auto inputs = kiln::testing::seeded_arguments(parsed, 7 + k);
    auto expected = kiln::testing::eval_ok(parsed, inputs);
    ir::Graph g = kiln::testing::planned(parsed, true);
    CHECK(shuffles(g, 64) == shuffles_wide[k]);
    CHECK(shuffles(g, 32) == shuffles_narrow[k]);
    for (int64_t chunk : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{100}, int64_t{333}, int64_t{1000}}) {
      INFO("pieces of " << chunk);
      auto got = kiln::testing::run_compiled(g, inputs, fmt::format("tiles-{}-{}", k, chunk), chunk);
      if (!got.ok()) FAIL(got.error().message);
      kiln::testing::check_same(*got, expected, 1e-5, 1e-6, /*half_ulp=*/true);
    }
  }
}
