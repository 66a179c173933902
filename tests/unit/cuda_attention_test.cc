// CUDA's attention kernels without a GPU (the GPU tier runs them): which attentions become
// one step on CUDA (bf16, f16 and f32, on sm_80 and later) and which stay matmuls, and
// that every kernel of tests/unit/cuda_attention_graphs.h compiles with NVRTC for sm_80
// and sm_90 (each variant of the bf16 kernel for sm_90) with the launch the artifact
// records.
#include <fmt/format.h>

#include <string>
#include <tuple>

#include "codegen/cuda/kernel_emitter.h"
#include "compiler/compile.h"
#include "passes/pipeline.h"
#include "runtime/format/artifact.h"
#include "runtime/format/target.h"
#include "tests/unit/cuda_attention_graphs.h"
#include "tests/unit/half_precisions.h"
#include "tests/unit/test_util.h"

using namespace kiln;

namespace {

// The attention steps of the graph's CUDA artifact.
std::vector<const format::Step*> attention_steps(const format::ArtifactView& view) {
  std::vector<const format::Step*> steps;
  for (const format::Step* s : *view.metadata().steps())
    if (s->attention()) steps.push_back(s);
  return steps;
}

CompileOptions cuda_options(const char* precision, std::vector<std::string> archs = {"sm_80", "sm_90"}) {
  CompileOptions options;
  options.target = "cuda";
  options.precision = precision;
  options.cuda_archs = std::move(archs);
  options.use_compile_cache = false;
  return options;
}

}  // namespace

TEST_CASE("CUDA attention kernels compile for sm_80 and sm_90 in bf16 and f16, each one step with its launch",
          "[codegen][cuda][attention]") {
  for (const auto& [name, text] : kiln::testing::cuda_attention_graphs()) {
    INFO(name);
    const ir::Graph g = kiln::testing::parse_ok(text);
    for (const kiln::testing::HalfPrecision& p : kiln::testing::kHalfPrecisions) {
      INFO(p.name);
      auto bytes = compile_to_artifact(g, cuda_options(p.name));
      if (!bytes.ok()) FAIL(bytes.error().message.substr(0, 4000));
      auto view = format::read_artifact(*bytes, "cuda-sm_80");
      if (!view.ok()) FAIL(view.error().message);
      const auto steps = attention_steps(*view);
      REQUIRE(steps.size() == 1);
      const format::Step& step = *steps[0];
      CHECK(step.kind() == format::StepKind::Library);
      CHECK(step.symbol()->str() == format::kernel_symbol(step.name()->str()));
      CHECK(step.block_threads() == 128);
      CHECK(step.grid_blocks() >= 1);
      CHECK(step.attention()->precision() == p.stored);
      // Each code object holds the kernel.
      CHECK(view->metadata().code()->size() == 3);
    }
  }
}

TEST_CASE("CUDA bf16 attention kernels compile for sm_90 in each variant, with the variant's launch",
          "[codegen][cuda][attention]") {
  for (const kiln::testing::AttentionVariantSpec& variant : kiln::testing::kAttentionVariants) {
    INFO(variant.warp_rows << " rows a warp, cp.async up to D=" << variant.async_head_dim);
    const kiln::testing::AttentionVariantSet set(variant);
    for (const auto& [name, text] : kiln::testing::cuda_attention_graphs()) {
      INFO(name);
      const ir::Graph g = kiln::testing::parse_ok(text);
      auto bytes = compile_to_artifact(g, cuda_options("bf16", {"sm_90"}));
      if (!bytes.ok()) FAIL(bytes.error().message.substr(0, 4000));
      auto view = format::read_artifact(*bytes, "cuda-sm_90");
      if (!view.ok()) FAIL(view.error().message);
      const auto steps = attention_steps(*view);
      REQUIRE(steps.size() == 1);
      // 32 rows a warp, where it applies (head dims up to 64), halves the query blocks.
      const int64_t rows = std::string(variant.warp_rows) == "32" && steps[0]->attention()->head_dim() <= 64 &&
                                   steps[0]->attention()->value_dim() <= 64
                               ? 128
                               : 64;
      int64_t batch = 1;
      for (int64_t b : *steps[0]->attention()->batch()) batch *= b;
      CHECK(steps[0]->block_threads() == 128);
      CHECK(steps[0]->grid_blocks() == batch * ((steps[0]->attention()->queries() + rows - 1) / rows));
    }
  }
}

TEST_CASE("CUDA f32 attention kernels compile for sm_80 and sm_90, each one step with its launch",
          "[codegen][cuda][attention]") {
  for (const auto& [name, text] : kiln::testing::cuda_f32_attention_graphs()) {
    INFO(name);
    auto bytes = compile_to_artifact(kiln::testing::parse_ok(text), cuda_options("f32"));
    if (!bytes.ok()) FAIL(bytes.error().message.substr(0, 4000));
    auto view = format::read_artifact(*bytes, "cuda-sm_80");
    if (!view.ok()) FAIL(view.error().message);
    const auto steps = attention_steps(*view);
    REQUIRE(steps.size() == 1);
    CHECK(steps[0]->kind() == format::StepKind::Library);
    CHECK(steps[0]->block_threads() == 128);
    CHECK(steps[0]->attention()->precision() == format::DType::F32);
    // Its arrays in dynamic shared memory: q's 64 rows and k's 32 (padded to 68 and 36),
    // v's 32 rows of Dv rounded up to 32, P's 32 rows of 64 (68), in floats.
    const int64_t d = steps[0]->attention()->head_dim(), dv = steps[0]->attention()->value_dim();
    CHECK(steps[0]->shared_bytes() == 4 * (d * 68 + d * 36 + 32 * ((dv + 31) / 32 * 32) + 32 * 68));
    CHECK(view->metadata().code()->size() == 3);
  }
}

TEST_CASE("CUDA leaves head dims its kernels do not take and pre-sm_80 targets to the matmuls",
          "[codegen][cuda][attention]") {
  const ir::Graph causal = kiln::testing::parse_ok(kiln::testing::cuda_attention_graphs()[0].second);
  auto count = [](const ir::Graph& g, const CompileOptions& options) {
    auto bytes = compile_to_artifact(g, options);
    if (!bytes.ok()) FAIL(bytes.error().message.substr(0, 4000));
    auto view = format::read_artifact(*bytes);
    if (!view.ok()) FAIL(view.error().message);
    return attention_steps(*view).size();
  };
  CHECK(count(causal, cuda_options("bf16", {"sm_90"})) == 1);
  CHECK(count(causal, cuda_options("f32", {"sm_90"})) == 1);
  // An architecture before sm_80 has no bf16 mma.sync: the matmuls, also where sm_90 is
  // given, and in f32 too (one rule for both kernels).
  CHECK(count(causal, cuda_options("bf16", {"sm_75", "sm_90"})) == 0);
  CHECK(count(causal, cuda_options("f32", {"sm_75", "sm_90"})) == 0);
  // Head dims: bf16's multiples of 8 up to 128, f32's multiples of 4 up to 128.
  for (auto [d, bf16_steps, f32_steps] :
       {std::tuple{8, 1, 1}, {24, 1, 1}, {6, 0, 0}, {20, 0, 1}, {96, 1, 1}, {100, 0, 1}, {132, 0, 0}, {144, 0, 0}}) {
    INFO("D=" << d);
    const ir::Graph g = kiln::testing::parse_ok(fmt::format(
        R"(graph @g(%q: f32[1,2,40,{0}], %k: f32[1,2,40,{0}], %v: f32[1,2,40,{0}]) {{
  %y: f32[1,2,40,{0}] = attention(%q, %k, %v) {{causal=true, scale=0.125}}
  return %y
}})",
        d));
    CHECK(count(g, cuda_options("bf16", {"sm_90"})) == static_cast<size_t>(bf16_steps));
    CHECK(count(g, cuda_options("f32", {"sm_90"})) == static_cast<size_t>(f32_steps));
  }
}

TEST_CASE("CUDA code generation refuses an attention step its kernel does not run, as text",
          "[codegen][cuda][attention][errors]") {
  // kiln opt's pipeline can make the CPU's steps (attention=cpu) of what CUDA's kernels
  // do not take (a head dim of 6); CUDA's code generation says so rather than guess.
  ir::Graph g = kiln::testing::parse_ok(R"(graph @g(%q: f32[1,2,40,6], %k: f32[1,2,40,6], %v: f32[1,2,40,6]) {
  %y: f32[1,2,40,6] = attention(%q, %k, %v) {causal=true, scale=0.35}
  return %y
})");
  auto pipeline = passes::pipeline_from_text(
      "decompose,autocast{precision=bf16},canonicalize,cse,dce,fusion{matmul_views=true attention=cpu},memory-plan");
  REQUIRE(pipeline.ok());
  REQUIRE(pipeline->run(g).ok());
  auto program = codegen::cuda::emit_kernels(g);
  REQUIRE(!program.ok());
  CHECK(program.error().message ==
        "cuda codegen: step attention_0 is an attention that CUDA's kernels do not run (they take bf16 or f16 "
        "products with head dims that are multiples of 8 up to 128, or f32 products with head dims that are "
        "multiples of 4 up to 128, and rows read contiguously)");
}
