// The GPU tier (tag "gpu"; tools/gpu_tests.sh runs it): CUDA artifacts against the
// interpreter for every op, element type, text-test model, the models suite's quick rows and
// 30 random graphs, fused and
// unfused; CUDA Graph replay against plain launches; caller device pointers; one model
// run from 8 threads; a state returned as a result; cublasLt's epilogues. Without an
// NVIDIA driver every case is skipped with a message, unless KILN_REQUIRE_GPU=1 (as the
// script sets), which makes that a failure.
#include <fmt/format.h>
#include <bit>
#include <cmath>

#include "compiler/nn.h"
#include "ir/parser.h"
#include "runtime/cuda/driver.h"
#include "runtime/format/artifact.h"
#include "tests/unit/autocast_graph.h"
#include "tests/unit/gpu_tier.h"
#include "tests/unit/half_precisions.h"
#include "tests/unit/model_rows.h"
#include "tests/unit/op_graphs.h"
#include "tests/unit/precision_goals.h"
#include "tests/unit/random_graph.h"
#include "tests/unit/run_util.h"
#include "tests/unit/split_graphs.h"

using namespace kiln;
using kiln::testing::check_against_interpreter;
using kiln::testing::check_same;
using kiln::testing::host;
using kiln::testing::seeded_arguments;
using namespace kiln::testing::gpu_tier;

TEST_CASE("CUDA: every op, element type and text-test model gives the interpreter's values", "[gpu][cuda]") {
  if (!have_gpu()) return;
  {
    auto [g, args] = kiln::testing::all_ops_graph();
    check_against_interpreter("all ops", g, args, cuda_options(true));
  }
  {
    auto [g, args] = kiln::testing::long_rows_graph();
    check_against_interpreter("long rows", g, args, cuda_options(true));
  }
  {
    auto g = kiln::testing::dtypes_graph();
    auto args = seeded_arguments(g, 5);
    auto got = kiln::testing::compile_and_run(g, args, cuda_options(true));
    if (!got.ok()) FAIL(got.error().message);
    kiln::testing::check_dtypes_close(*got, kiln::testing::eval_ok(g, args));
  }
  auto models = kiln::testing::text_test_models();
  for (size_t k = 0; k < models.size(); ++k) {
    const auto& [path, g] = models[k];
    check_against_interpreter(path, g, seeded_arguments(g, kiln::testing::model_seed(path)), cuda_options(true));
  }
  CHECK(models.size() >= 20);
}

TEST_CASE("CUDA: each quick row of the models suite gives the interpreter's values, fused and unfused",
          "[gpu][cuda][models]") {
  if (!have_gpu()) return;
  kiln::testing::check_quick_rows(cuda_options(true));
}

TEST_CASE("CUDA: 30 random graphs, fused and unfused, give the interpreter's values", "[gpu][cuda]") {
  if (!have_gpu()) return;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    kiln::testing::RandomGraph rg = kiln::testing::random_graph(seed);
    check_against_interpreter(fmt::format("random graph {}", seed), rg.graph, rg.inputs, cuda_options(true));
  }
}

TEST_CASE("CUDA: graph replay equals plain launches, run after run; caller device pointers; 8 threads", "[gpu][cuda]") {
  if (!have_gpu()) return;
  Model m("mlp", 5);
  Tensor x = m.input("x", {64, 128});
  nn::Sequential net = nn::mlp(m, "fc", {128, 256, 10}, nn::Activation::Gelu);
  m.output(softmax(net(x)), "probs");
  auto g = m.build();
  REQUIRE(g.ok());
  CompileOptions options = cuda_options(true);
  options.weights = m.initial_values();
  auto artifact = compile_to_artifact(*g, options);
  if (!artifact.ok()) FAIL(artifact.error().message);
  auto replayed = runtime::Model::load_bytes(*artifact);
  if (!replayed.ok()) FAIL(replayed.error().message);
  runtime::Options plain_options;
  plain_options.cuda_graphs = false;
  auto plain = runtime::Model::load_bytes(*artifact, plain_options);
  if (!plain.ok()) FAIL(plain.error().message);
  auto input = [](int i) { return kiln::testing::wave_input({64, 128}, i); };
  std::map<std::string, ir::Tensor> args = m.initial_values();
  const int runs = repeats(400, 20);
  std::vector<std::vector<uint8_t>> single(static_cast<size_t>(runs));
  for (int i = 0; i < runs; ++i) {
    auto a = (*replayed)->run({{"x", host(input(i), "x")}});
    auto b = (*plain)->run({{"x", host(input(i), "x")}});
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK((*a)[0].data == (*b)[0].data);
    single[i] = (*a)[0].data;
    if (i < 3) {
      args["x"] = input(i);
      check_same({kiln::testing::tensor_of((*a)[0])}, kiln::testing::eval_ok(*g, args));
    }
  }
  // Device pointers: the caller's buffers, no host copies in the run.
  const runtime::cuda::Driver& cu = **runtime::cuda::driver();
  CUdeviceptr in = 0, out = 0;
  std::vector<uint8_t> x0 = host(input(7), "x").data, probs(single[7].size());
  REQUIRE(cu.mem_alloc(&in, x0.size()) == CUDA_SUCCESS);
  REQUIRE(cu.mem_alloc(&out, probs.size()) == CUDA_SUCCESS);
  REQUIRE(cu.memcpy_htod(in, x0.data(), x0.size()) == CUDA_SUCCESS);
  Status ran = (*replayed)->run_device({{"x", in}}, {{"probs", out}});
  if (!ran.ok()) FAIL(ran.error().message);
  REQUIRE(cu.memcpy_dtoh(probs.data(), out, probs.size()) == CUDA_SUCCESS);
  CHECK(probs == single[7]);
  // A profiled run launches step by step with events between: same values, every step timed.
  REQUIRE(cu.memset_d8(out, 0, probs.size()) == CUDA_SUCCESS);
  auto profile = (*replayed)->profile_device({{"x", in}}, {{"probs", out}});
  if (!profile.ok()) FAIL(profile.error().message);
  REQUIRE(profile->steps.size() == (*replayed)->steps().size());
  double sum = 0;
  for (const runtime::StepTime& t : profile->steps) sum += t.ms;
  CHECK(sum > 0);
  CHECK(profile->total_ms >= sum);
  CHECK(profile->clock == "CUDA events between plain launches (no graph)");
  REQUIRE(cu.memcpy_dtoh(probs.data(), out, probs.size()) == CUDA_SUCCESS);
  CHECK(probs == single[7]);
  cu.mem_free(in);
  cu.mem_free(out);
  Status missing = (*replayed)->run_device({}, {{"probs", out}});
  REQUIRE(!missing.ok());
  CHECK(missing.error().message == "run: no device pointer for input %x: f32[64,128]");
  // 8 threads, each run on its own session.
  CHECK(kiln::testing::mismatches_across_threads(**replayed, "x", {64, 128}, 8, repeats(50, 2), single) == 0);
}

// Random graph 30 returns its state %s beside %s.next: the first GPU run (H100,
// 2026-11-22) returned the updated state for both, since the state update ran before the
// outputs were copied.
TEST_CASE("CUDA: a result that is a state returns it from before the run, run after run, with and without graphs",
          "[gpu][cuda]") {
  if (!have_gpu()) return;
  auto g = ir::parse(
      "graph @accumulate(%x: f32[4], state %s: f32[4]) {\n  %s.next: f32[4] = add(%s, %x)\n  return %s, %s.next\n}\n");
  REQUIRE(g.ok());
  auto artifact = compile_to_artifact(*g, cuda_options(true));
  if (!artifact.ok()) FAIL(artifact.error().message);
  auto times = [](double k) { return ir::Tensor::from_doubles({ir::DType::F32, {4}}, {k, 2 * k, 3 * k, 4 * k}); };
  for (bool graphs : {true, false}) {
    runtime::Options options;
    options.cuda_graphs = graphs;
    auto model = runtime::Model::load_bytes(*artifact, options);
    if (!model.ok()) FAIL(model.error().message);
    for (int k = 0; k < 3; ++k) {
      INFO("run " << k << (graphs ? " replaying a graph" : " launching each step"));
      auto out = (*model)->run({{"x", host(times(1), "x")}});
      if (!out.ok()) FAIL(out.error().message);
      check_same({kiln::testing::tensor_of((*out)[0]), kiln::testing::tensor_of((*out)[1])}, {times(k), times(k + 1)});
    }
  }
}

TEST_CASE("CUDA: state updates written by a reduction's epilogue, in place, give the interpreter's state",
          "[gpu][cuda]") {
  if (!have_gpu()) return;
  const ir::Graph g = kiln::testing::parse_ok(kiln::testing::kEpilogueStateUpdates);
  for (bool fuse : {true, false}) {
    INFO((fuse ? "fused" : "unfused"));
    kiln::testing::check_state_updates(g, seeded_arguments(g, 11), cuda_options(fuse), 3);
  }
}

// Rows in registers load and store 16-byte vectors where every row is aligned, and the
// same elements one at a time where a caller's buffer is not: rows of 32768 (32 elements
// a thread), bf16 rows of 4096 (vectors of 8), rows of 1000 (a warp each, the last
// vectors past the row's end).
TEST_CASE("CUDA: row kernels give the interpreter's values, the same bytes from aligned and unaligned buffers",
          "[gpu][cuda]") {
  if (!have_gpu()) return;
  const ir::Graph g = kiln::testing::parse_ok(R"(graph @rows(%x: f32[6,32768], %h: bf16[5,4096], %w: f32[9,1000]) {
  %a: f32[6,32768] = softmax(%x) {axis=-1}
  %hf: f32[5,4096] = cast(%h) {to=f32}
  %hs: f32[5,4096] = softmax(%hf) {axis=-1}
  %b: bf16[5,4096] = cast(%hs) {to=bf16}
  %c: f32[9,1000] = log_softmax(%w) {axis=-1}
  return %a, %b, %c
})");
  const auto args = seeded_arguments(g, 3, 4);
  const std::vector<ir::Tensor> want = kiln::testing::eval_ok(g, args);
  auto artifact = compile_to_artifact(g, cuda_options(true));
  if (!artifact.ok()) FAIL(artifact.error().message);
  auto model = runtime::Model::load_bytes(*artifact);
  if (!model.ok()) FAIL(model.error().message);
  std::map<std::string, runtime::HostTensor> inputs;
  for (const auto& [name, t] : args) inputs[name] = host(t, name);
  auto aligned = (*model)->run(inputs);
  if (!aligned.ok()) FAIL(aligned.error().message);
  // Softmax's values over 32768 are near 3e-5: an absolute tolerance would pass anything.
  check_same({kiln::testing::tensor_of((*aligned)[0])}, {want[0]}, 1e-4, 1e-9);
  check_same({kiln::testing::tensor_of((*aligned)[1])}, {want[1]}, 1e-2, 1e-7);  // 2.5 bf16 units
  check_same({kiln::testing::tensor_of((*aligned)[2])}, {want[2]}, 1e-5, 1e-6);
  // Each buffer one element past an aligned address.
  const std::vector<std::vector<uint8_t>> got = run_unaligned(**model, inputs, {"a", "b", "c"}, *aligned);
  for (size_t o = 0; o < got.size(); ++o) {
    INFO("output " << o);
    CHECK(got[o] == (*aligned)[o].data);
  }
  // softmax's gradient, whose P (an exp and a division) the first loop keeps for the second.
  const ir::Graph grad = kiln::testing::parse_ok(
      R"(graph @softmax_gradient(%s: f32[40,512], %dp: f32[40,512], %mx: f32[40], %sum: f32[40]) {
  %mb: f32[40,512] = broadcast(%mx) {shape=[40,512], dims=[0]}
  %sb: f32[40,512] = broadcast(%sum) {shape=[40,512], dims=[0]}
  %d: f32[40,512] = sub(%s, %mb)
  %e: f32[40,512] = exp(%d)
  %p: f32[40,512] = div(%e, %sb)
  %pd: f32[40,512] = mul(%dp, %p)
  %t: f32[40] = reduce_sum(%pd) {axes=[1]}
  %tb: f32[40,512] = broadcast(%t) {shape=[40,512], dims=[0]}
  %g: f32[40,512] = sub(%dp, %tb)
  %ds: f32[40,512] = mul(%p, %g)
  return %ds
})");
  check_against_interpreter("softmax gradient", grad, seeded_arguments(grad, 7), cuda_options(true));
}

namespace {

// Float edge values: zeros of both signs, subnormals, the ends of the normal range, powers
// of 2 where a reciprocal stops being normal, infinities and NaN, beside ordinary numbers.
std::vector<double> float_edges() {
  std::vector<double> v = {
      0.0, 0x1p-149, 1e-40,   0x1p-126,  0x1.8p-126, 0x1p-100,       0.1,      1.0,       3.0,
      7.0, 1e30,     0x1p126, 0x1.8p126, 0x1p127,    0x1.fffffep127, INFINITY, 1.0 / 3.0, 0x1.fefp127};
  const size_t n = v.size();
  for (size_t k = 0; k < n; ++k) v.push_back(-v[k]);
  v.push_back(NAN);
  return v;
}

// Bits equal, or both NaN; a finite nonzero value may also be one ulp off (the quotient's
// bound, docs/cuda.md). A zero's sign, an infinity and a NaN must match exactly.
int ulps_apart(double got, double want) {
  const float g = static_cast<float>(got), w = static_cast<float>(want);
  if (std::isnan(g) || std::isnan(w)) return std::isnan(g) && std::isnan(w) ? 0 : 1 << 30;
  const auto gb = std::bit_cast<int32_t>(g), wb = std::bit_cast<int32_t>(w);
  if (gb == wb) return 0;
  if (g == 0 || w == 0 || std::isinf(g) || std::isinf(w) || (gb < 0) != (wb < 0)) return 1 << 30;
  return std::abs(gb - wb);
}

}  // namespace

TEST_CASE("CUDA: f32 division, maximum, minimum and rounding to bf16 at the edges of the range", "[gpu][cuda]") {
  if (!have_gpu()) return;
  const std::vector<double> edges = float_edges();
  const int64_t n = static_cast<int64_t>(edges.size());
  // Every pair of edge values, as x / y, as a broadcast over x, and as y over its row's
  // maximum of x, one divisor a row, which a row kernel's unrolled loop divides by
  // through one reciprocal.
  const ir::Graph g =
      kiln::testing::parse_ok(fmt::format(R"(graph @edges(%x: f32[{0},{0}], %y: f32[{0},{0}], %d: f32[{0}]) {{
  %q: f32[{0},{0}] = div(%x, %y)
  %db: f32[{0},{0}] = broadcast(%d) {{shape=[{0},{0}], dims=[1]}}
  %dx: f32[{0},{0}] = div(%db, %x)
  %m: f32[{0}] = reduce_max(%x) {{axes=[1]}}
  %mb: f32[{0},{0}] = broadcast(%m) {{shape=[{0},{0}], dims=[0]}}
  %r: f32[{0},{0}] = div(%y, %mb)
  %big: f32[{0},{0}] = maximum(%x, %y)
  %small: f32[{0},{0}] = minimum(%x, %y)
  %h: bf16[{0},{0}] = cast(%q) {{to=bf16}}
  return %q, %dx, %r, %big, %small, %h
}})",
                                          n));
  std::vector<double> x, y;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      x.push_back(edges[static_cast<size_t>(i)]);
      y.push_back(edges[static_cast<size_t>(j)]);
    }
  const std::map<std::string, ir::Tensor> args = {{"x", ir::Tensor::from_doubles({ir::DType::F32, {n, n}}, x)},
                                                  {"y", ir::Tensor::from_doubles({ir::DType::F32, {n, n}}, y)},
                                                  {"d", ir::Tensor::from_doubles({ir::DType::F32, {n}}, edges)}};
  const std::vector<ir::Tensor> want = kiln::testing::eval_ok(g, args);
  auto got = kiln::testing::compile_and_run(g, args, cuda_options(true));
  if (!got.ok()) FAIL(got.error().message);
  REQUIRE(got->size() == want.size());
  const char* names[] = {"x / y", "d / x", "y / max(x)", "maximum", "minimum", "bf16(x / y)"};
  for (size_t o = 0; o < want.size(); ++o) {
    int worst = 0, off = 0;
    for (int64_t k = 0; k < want[o].size(); ++k) {
      const int apart = ulps_apart((*got)[o].get(k), want[o].get(k));
      if (apart > 0) ++off;
      if (apart > worst) {
        worst = apart;
        UNSCOPED_INFO(names[o] << " at [" << k / n << ", " << k % n << "]: got " << (*got)[o].get(k) << ", want "
                               << want[o].get(k));
      }
    }
    INFO(names[o] << ": " << off << " of " << want[o].size() << " values off, the worst by " << worst << " ulp");
    CHECK(worst <= (o < 3 ? 1 : 0));
  }
}

TEST_CASE("CUDA: split reductions give the interpreter's values, the same bytes over 100 runs from 8 threads",
          "[gpu][cuda][split]") {
  if (!have_gpu()) return;
  for (const char* text : {kiln::testing::kBiasGradient, kiln::testing::kLongRows, kiln::testing::kLossBesideOutput,
                           kiln::testing::kInnerColumns}) {
    ir::Graph g = kiln::testing::parse_ok(text);
    auto args = seeded_arguments(g, 5, 3);
    check_against_interpreter("split", g, args, cuda_options(true));
    auto artifact = compile_to_artifact(g, cuda_options(true));
    REQUIRE(artifact.ok());
    CHECK(runs_differing(std::move(*artifact), args, repeats(13)) == 0);  // 104 runs in all on a GPU
  }
}

TEST_CASE("CUDA: f32 matmuls are f32 by default; with --allow-tf32 within TF32's bound, which the log gives",
          "[gpu][cuda][tf32]") {
  if (!have_gpu()) return;
  // Each element's error against the interpreter, over sum_k |a_ik| |b_kj| (the bound of
  // a dot product's rounding): f32 rounds at 2^-24, TF32's inputs at 2^-11.
  ir::Graph g = kiln::testing::parse_ok(R"(graph @mm(%a: f32[256,1024], %b: f32[1024,256]) {
  %c: f32[256,256] = matmul(%a, %b)
  %aa: f32[256,1024] = abs(%a)
  %ab: f32[1024,256] = abs(%b)
  %scale: f32[256,256] = matmul(%aa, %ab)
  return %c, %scale
}
)");
  auto args = seeded_arguments(g, 7);
  auto want = kiln::testing::eval_ok(g, args);
  for (bool tf32 : {false, true}) {
    CompileOptions options = cuda_options(true);
    options.allow_tf32 = tf32;
    auto got = kiln::testing::compile_and_run(g, args, options);
    if (!got.ok()) FAIL(got.error().message);
    double worst = 0;
    for (int64_t i = 0; i < want[0].size(); ++i)
      worst = std::max(worst, std::abs((*got)[0].get(i) - want[0].get(i)) / want[1].get(i));
    fmt::print("matmul 256x1024x256, {}: max |error| / sum|a||b| = {:.3g}\n", tf32 ? "--allow-tf32" : "f32", worst);
    if (tf32) {
      CHECK(worst <= std::ldexp(1.0, -10));
      CHECK(worst > std::ldexp(1.0, -20));  // TF32 really ran: f32 alone is far closer
    } else {
      CHECK(worst <= std::ldexp(1.0, -20));
    }
  }
}

TEST_CASE(
    "CUDA: cublasLt's epilogues (bias, relu, tanh GELU) give the interpreter's values, batched, through "
    "views at any alignment, and from 8 threads",
    "[gpu][cuda][epilogue]") {
  // Each output is one epilogue: GELU_BIAS, RELU_BIAS, RELU, GELU, and BIAS (a result);
  // the last two read %x through a slice one column in (4-byte aligned). 33 rows leave a
  // partial tile.
  ir::Graph g = kiln::testing::parse_ok(R"(graph @epilogues(%x: f32[4,33,48], %w1: f32[48,96], %b1: f32[96],
    %w2: f32[96,40], %b2: f32[40], %w3: f32[40,24], %w4: f32[47,16], %w5: f32[47,8], %b5: f32[8]) {
  %h1: f32[4,33,96] = linear(%x, %w1, %b1)
  %gelu_bias: f32[4,33,96] = gelu(%h1) {approximate="tanh"}
  %h2: f32[4,33,40] = linear(%gelu_bias, %w2, %b2)
  %relu_bias: f32[4,33,40] = relu(%h2)
  %m3: f32[4,33,24] = matmul(%relu_bias, %w3)
  %relu: f32[4,33,24] = relu(%m3)
  %xs: f32[4,33,47] = slice(%x) {starts=[0,0,1], ends=[4,33,48]}
  %m4: f32[4,33,16] = matmul(%xs, %w4)
  %gelu: f32[4,33,16] = gelu(%m4) {approximate="tanh"}
  %bias: f32[4,33,8] = linear(%xs, %w5, %b5)
  return %gelu_bias, %relu_bias, %relu, %gelu, %bias
}
)");
  auto args = seeded_arguments(g, 11);
  auto artifact = compile_to_artifact(g, cuda_options(true));
  REQUIRE(artifact.ok());
  {
    auto read = format::read_artifact(*artifact, "");
    REQUIRE(read.ok());
    int with_epilogue = 0;
    for (const format::Step* step : *read->metadata().steps())
      with_epilogue += step->matmul() && step->matmul()->post_ops() && step->matmul()->post_ops()->size() > 0;
    CHECK(with_epilogue == 5);  // in CI too: compiling needs no GPU
  }
  if (!have_gpu()) return;
  const std::vector<ir::Tensor> want = kiln::testing::eval_ok(g, args);
  auto got = kiln::testing::compile_and_run(g, args, cuda_options(true));
  if (!got.ok()) FAIL(got.error().message);
  for (size_t o = 0; o < want.size(); ++o) {
    double worst = 0;
    for (int64_t i = 0; i < want[o].size(); ++i)
      worst = std::max(worst, std::abs((*got)[o].get(i) - want[o].get(i)) / (1 + std::abs(want[o].get(i))));
    fmt::print("epilogue output {}: max |error| / (1 + |want|) = {:.3g}\n", g.value_name(g.results[o]), worst);
  }
  check_same(*got, want);
  check_against_interpreter("epilogues", g, args, cuda_options(true));
  // The same from 8 threads, each on its own session (its own descriptors and bias pointer).
  CHECK(runs_differing(std::move(*artifact), args, repeats(5)) == 0);
}

TEST_CASE("CUDA: f16 and bf16 matmuls (cublasLtMatmul, f32 compute) within one unit in the last place",
          "[gpu][cuda][precision]") {
  if (!have_gpu()) return;
  for (auto [name, bits] : {std::pair<const char*, int>{"bf16", 8}, {"f16", 11}}) {
    ir::Graph g =
        kiln::testing::parse_ok(fmt::format(R"(graph @mm(%a: {0}[3,64,96], %b: {0}[96,48], %c: {0}[3,48,32]) {{
  %ab: {0}[3,64,48] = matmul(%a, %b)
  %abc: {0}[3,64,32] = matmul(%ab, %c)
  return %ab, %abc
}}
)",
                                            name));
    auto args = seeded_arguments(g, 3);
    auto got = kiln::testing::compile_and_run(g, args, cuda_options(true));
    if (!got.ok()) FAIL(got.error().message);
    // The second matmul's operand differs by the first's rounding: two units.
    check_same(*got, kiln::testing::eval_ok(g, args), std::ldexp(2.0, 1 - bits), 1e-4);
  }
}

TEST_CASE("CUDA: every op in f16 and bf16 against the interpreter's rounding of each op, within 4 units",
          "[gpu][cuda][precision]") {
  if (!have_gpu()) return;
  auto [f32_graph, f32_args] = kiln::testing::all_ops_graph();
  for (auto [dtype, bits] : {std::pair<ir::DType, int>{ir::DType::BF16, 8}, {ir::DType::F16, 11}}) {
    ir::Graph g = kiln::testing::in_precision(f32_graph, dtype);
    auto args = kiln::testing::in_precision(f32_args, dtype);
    auto want = kiln::testing::eval_ok(g, args);
    auto got = kiln::testing::compile_and_run(g, args, cuda_options(true));
    if (!got.ok()) FAIL(got.error().message);
    const double ulps = 4 * std::ldexp(1.0, 1 - bits);
    check_same(*got, want, ulps, ulps);
  }
}

TEST_CASE("CUDA: issue 24's accuracy goals: GPT-2's block against f64, the MLP's mixed-precision training",
          "[gpu][cuda][precision]") {
  if (!have_gpu()) return;
  kiln::testing::check_precision_goals("cuda");
}
