// The GPU tier's attention cases (tag "gpu"; see cuda_gpu_test.cc): CUDA's attention
// kernels, bf16, f16 (each variant) and f32, against the interpreter on the graphs of
// cuda_attention_graphs.h, from 8 threads and from unaligned device buffers; and the f32
// backward's on those of attention_gradient_graphs.h.
#include <cmath>
#include <cstdlib>
#include <tuple>

#include "passes/autodiff.h"
#include "runtime/format/artifact.h"
#include "tests/unit/attention_gradient_graphs.h"
#include "tests/unit/autocast_graph.h"
#include "tests/unit/cuda_attention_graphs.h"
#include "tests/unit/gpu_tier.h"
#include "tests/unit/half_precisions.h"
#include "tests/unit/run_util.h"

using namespace kiln;
using kiln::testing::AttentionVariantSet;
using kiln::testing::AttentionVariantSpec;
using kiln::testing::check_same;
using kiln::testing::kAttentionVariants;
using kiln::testing::seeded_arguments;
using namespace kiln::testing::gpu_tier;

namespace {

// How many attention steps the artifact has, forward ones or backward ones.
int attention_steps(const std::vector<uint8_t>& artifact, bool backward = false) {
  auto view = format::read_artifact(artifact);
  REQUIRE(view.ok());
  int steps = 0;
  for (const format::Step* s : *view->metadata().steps())
    steps += s->attention() != nullptr && s->attention()->gradient() == backward;
  return steps;
}

// The text of the graph of cuda_attention_graphs() whose name starts with `prefix`.
std::string graph_named(const std::string& prefix) {
  for (const auto& [name, text] : kiln::testing::cuda_attention_graphs())
    if (name.rfind(prefix, 0) == 0) return text;
  FAIL("no attention graph named " << prefix);
  return "";
}

// The backward of training graph g in precision p as CUDA's two kernels (one step) against
// the interpreter on the autocast graph; with `threads`, 8 threads' runs agree too.
void check_half_gradient(const ir::Graph& g, const std::map<std::string, ir::Tensor>& args,
                         const kiln::testing::HalfPrecision& p, bool threads) {
  INFO(p.name);
  CompileOptions options = cuda_options(true);
  options.precision = p.name;
  auto artifact = compile_to_artifact(g, options);
  if (!artifact.ok()) FAIL(artifact.error().message);
  CHECK(attention_steps(*artifact, /*backward=*/true) == 1);
  // As on the CPU (attention_half_test.cc): a rounding of dS or P that falls the other way
  // moves a gradient by a unit of the precision at its scale, summed over the keys.
  auto got = kiln::testing::run_artifact(*artifact, g, args);
  if (!got.ok()) FAIL(got.error().message);
  const double bound = 16 * std::ldexp(1.0, -p.mantissa_bits);
  check_same(*got, kiln::testing::autocast_values(g, args, p.name), bound, bound);
  if (threads) CHECK(runs_differing(std::move(*artifact), args, repeats(5)) == 0);
}

}  // namespace

TEST_CASE(
    "CUDA: bf16 and f16 attention as one kernel gives the autocast graph's values, the same bytes in each variant; 8 "
    "threads agree",
    "[gpu][cuda][attention]") {
  if (!have_gpu()) return;
  for (const auto& [name, text] : kiln::testing::cuda_attention_graphs()) {
    INFO(name);
    const ir::Graph g = kiln::testing::parse_ok(text);
    // Inputs of scale 0.5 keep the scores near 1, where a unit of the precision moves a
    // probability by a few of its own units. A v of its own, 16 times larger, makes the
    // outputs (averages of v's rows) larger than the bound's absolute part, so that a
    // tile of the wrong keys fails the check against the interpreter too.
    auto args = seeded_arguments(g, 7, 0.5);
    if (auto v = args.find("v"); v != args.end()) {
      std::vector<double> scaled;
      for (int64_t i = 0; i < v->second.size(); ++i) scaled.push_back(16 * v->second.get(i));
      v->second = ir::Tensor::from_doubles(v->second.type, scaled);
    }
    for (const kiln::testing::HalfPrecision& p : kiln::testing::kHalfPrecisions) {
      INFO(p.name);
      // The interpreter on the graph as kiln compile --precision casts it, every cast
      // rounded exactly. The kernel rounds P before dividing by the row's sum (the
      // decomposition after): a few more units than the CPU's step (attention_half_test).
      const auto want = kiln::testing::eval_ok(kiln::testing::autocast_graph(g, p.name), args);
      const double bound = 16 * std::ldexp(1.0, -p.mantissa_bits);
      std::vector<ir::Tensor> first;
      for (const AttentionVariantSpec& variant : kAttentionVariants) {
        INFO(variant.warp_rows << " rows a warp, cp.async up to D=" << variant.async_head_dim);
        const AttentionVariantSet set(variant);
        CompileOptions options = cuda_options(true);
        options.precision = p.name;
        auto artifact = compile_to_artifact(g, options);
        if (!artifact.ok()) FAIL(artifact.error().message);
        CHECK(attention_steps(*artifact) == 1);
        auto got = kiln::testing::run_artifact(*artifact, g, args);
        if (!got.ok()) FAIL(got.error().message);
        check_same(*got, want, bound, bound);
        // Every variant does each row's sums in the same order: the default's bytes. A
        // tile of the wrong keys stays within the bound above (averages of small values)
        // but not within this.
        if (first.empty()) first = *got;
        else
          for (size_t i = 0; i < first.size(); ++i) CHECK(got->at(i).floats == first[i].floats);
        CHECK(runs_differing(std::move(*artifact), args, repeats(5)) == 0);
      }
    }
  }
}

TEST_CASE("CUDA: f32 attention as one kernel gives the interpreter's values; 8 threads agree",
          "[gpu][cuda][attention]") {
  if (!have_gpu()) return;
  for (const auto& [name, text] : kiln::testing::cuda_f32_attention_graphs()) {
    INFO(name);
    const ir::Graph g = kiln::testing::parse_ok(text);
    const auto args = seeded_arguments(g, 11, 1.0);
    auto artifact = compile_to_artifact(g, cuda_options(true));
    if (!artifact.ok()) FAIL(artifact.error().message);
    CHECK(attention_steps(*artifact) == 1);
    // f32 sums in another order than the interpreter's and an online softmax: a few units
    // of f32 on each score, which exp carries into P relative to the score's size (scores
    // in the hundreds: about 1e-5).
    auto got = kiln::testing::run_artifact(*artifact, g, args);
    if (!got.ok()) FAIL(got.error().message);
    check_same(*got, kiln::testing::eval_ok(g, args), 1e-4, 1e-5);
    CHECK(runs_differing(std::move(*artifact), args, repeats(5)) == 0);
  }
}

TEST_CASE("CUDA: an f32 attention's backward as two kernels gives the interpreter's gradients; 8 threads agree",
          "[gpu][cuda][attention]") {
  if (!have_gpu()) return;
  // The default leaves the backward to the library's GEMMs (compiler/compile.cc).
  const kiln::testing::ScopedEnv kernels("KILN_CUDA_ATTENTION_BACKWARD", "kernels");
  for (const kiln::testing::AttentionGradientGraph& graph : kiln::testing::attention_gradient_graphs()) {
    INFO(graph.name);
    ir::Graph g = kiln::testing::parse_ok(graph.text);
    auto differentiated = passes::AutodiffPass(graph.wrt).run(g);
    if (!differentiated.ok()) FAIL(differentiated.error().message);
    const auto args = seeded_arguments(g, graph.seed, graph.bound);
    auto artifact = compile_to_artifact(g, cuda_options(true));
    if (!artifact.ok()) FAIL(artifact.error().message);
    CHECK(attention_steps(*artifact, /*backward=*/true) == 1);
    // As on the CPU (attention_gradient_test.cc): f32 sums in another order than the
    // interpreter's, P from each row's log-sum-exp.
    auto got = kiln::testing::run_artifact(*artifact, g, args);
    if (!got.ok()) FAIL(got.error().message);
    check_same(*got, kiln::testing::eval_ok(g, args), 1e-4, 1e-4, /*half_ulp=*/true);
    CHECK(runs_differing(std::move(*artifact), args, repeats(5)) == 0);
  }
}

TEST_CASE(
    "CUDA: a bf16 or f16 attention's backward as two tensor-core kernels gives the autocast graph's gradients; 8 "
    "threads agree",
    "[gpu][cuda][attention]") {
  if (!have_gpu()) return;
  const kiln::testing::ScopedEnv kernels("KILN_CUDA_ATTENTION_BACKWARD", "kernels");
  for (const kiln::testing::AttentionGradientGraph& graph : kiln::testing::attention_gradient_graphs()) {
    INFO(graph.name);
    ir::Graph g = kiln::testing::parse_ok(graph.text);
    auto differentiated = passes::AutodiffPass(graph.wrt).run(g);
    if (!differentiated.ok()) FAIL(differentiated.error().message);
    const auto args = seeded_arguments(g, graph.seed, 0.5);
    // f16's kernels differ from bf16's in their conversions only: on the emulator, whose
    // fibers run a thread at a time, the 8 threads run bf16's.
    for (const kiln::testing::HalfPrecision& p : kiln::testing::kHalfPrecisions)
      check_half_gradient(g, args, p, p.stored == format::DType::BF16 || !on_emulator());
  }
  // q, k, v and dO stored in the precision, so the gradients are too (format 1.21).
  for (const kiln::testing::HalfPrecision& p : kiln::testing::kHalfPrecisions) {
    INFO("stored in it");
    ir::Graph g = kiln::testing::parse_ok(kiln::testing::half_stored_attention_gradient(p.name));
    REQUIRE(passes::AutodiffPass({"q", "k", "v"}).run(g).ok());
    check_half_gradient(g, seeded_arguments(g, 21, 0.5), p, false);
  }
}

TEST_CASE("CUDA: attention kernels give the same bytes from aligned and unaligned device buffers",
          "[gpu][cuda][attention]") {
  if (!have_gpu()) return;
  // bf16 k and v by cp.async (D=64, and 128 in that variant; 16 and 32 rows a warp) and
  // by 16-byte loads (D=32), f32 operands of a bf16 product by 16-byte loads, and the f32
  // kernel.
  const std::vector<std::tuple<std::string, const char*, AttentionVariantSpec>> cases = {
      {kiln::testing::causal_bf16_attention("[1,2", 256, 256, 64, 64, 0.125), "bf16", kAttentionVariants[0]},
      {kiln::testing::causal_bf16_attention("[1,2", 256, 256, 64, 64, 0.125), "bf16", kAttentionVariants[1]},
      {graph_named("bf16, causal, D=128"), "bf16", kAttentionVariants[2]},
      {kiln::testing::causal_bf16_attention("[2,3", 100, 77, 32, 16, 0.17), "bf16", kAttentionVariants[0]},
      {kiln::testing::cuda_attention_graphs()[0].second, "bf16", kAttentionVariants[0]},
      {kiln::testing::cuda_attention_graphs()[0].second, "f32", kAttentionVariants[0]},
  };
  for (const auto& [text, precision, variant] : cases) {
    INFO(precision << ", " << variant.warp_rows << " rows a warp, cp.async up to D=" << variant.async_head_dim << ": "
                   << text);
    const AttentionVariantSet set(variant);
    const ir::Graph g = kiln::testing::parse_ok(text);
    CompileOptions options = cuda_options(true);
    options.precision = precision;
    auto artifact = compile_to_artifact(g, options);
    if (!artifact.ok()) FAIL(artifact.error().message);
    CHECK(attention_steps(*artifact) == 1);
    auto model = runtime::Model::load_bytes(std::move(*artifact));
    if (!model.ok()) FAIL(model.error().message);
    std::map<std::string, runtime::HostTensor> inputs;
    for (const auto& [name, t] : seeded_arguments(g, 5, 0.5)) inputs[name] = kiln::testing::host(t, name);
    auto aligned = (*model)->run(inputs);
    if (!aligned.ok()) FAIL(aligned.error().message);
    const std::vector<std::vector<uint8_t>> got = run_unaligned(**model, inputs, {"y"}, *aligned);
    CHECK(got[0] == (*aligned)[0].data);
  }
}

TEST_CASE("CUDA: the bf16 attention backward's kernels give the same bytes from aligned and unaligned device buffers",
          "[gpu][cuda][attention]") {
  if (!have_gpu()) return;
  const kiln::testing::ScopedEnv kernels("KILN_CUDA_ATTENTION_BACKWARD", "kernels");
  // q, k, v and dO read 16 bytes at a time where their rows start 16-byte aligned (f32
  // rows of "the op, causal"; bf16 ones stored in the precision), else element by element.
  std::vector<std::string> texts = {kiln::testing::half_stored_attention_gradient("bf16")};
  for (const kiln::testing::AttentionGradientGraph& graph : kiln::testing::attention_gradient_graphs())
    if (graph.name == "the op, causal") texts.push_back(graph.text);
  REQUIRE(texts.size() == 2);
  for (const std::string& text : texts) {
    INFO(text);
    ir::Graph g = kiln::testing::parse_ok(text);
    REQUIRE(passes::AutodiffPass({"q", "k", "v"}).run(g).ok());
    CompileOptions options = cuda_options(true);
    options.precision = "bf16";
    auto artifact = compile_to_artifact(g, options);
    if (!artifact.ok()) FAIL(artifact.error().message);
    CHECK(attention_steps(*artifact, /*backward=*/true) == 1);
    auto model = runtime::Model::load_bytes(std::move(*artifact));
    if (!model.ok()) FAIL(model.error().message);
    std::map<std::string, runtime::HostTensor> inputs;
    for (const auto& [name, t] : seeded_arguments(g, 5, 0.5)) inputs[name] = kiln::testing::host(t, name);
    auto aligned = (*model)->run(inputs);
    if (!aligned.ok()) FAIL(aligned.error().message);
    std::vector<std::string> names;
    for (ir::ValueId r : g.results) names.push_back(g.value_name(r));
    const std::vector<std::vector<uint8_t>> got = run_unaligned(**model, inputs, names, *aligned);
    for (size_t o = 0; o < names.size(); ++o) {
      INFO(names[o]);
      CHECK(got[o] == (*aligned)[o].data);
    }
  }
}
