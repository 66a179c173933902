// 3x3 convolutions of stride 1 with baked-in weights as Winograd's F(2x2, 3x3) on the CPU
// (runtime/cpu/winograd.h): which convolutions take it, their results and post-ops
// against the interpreter, runs from several threads at once, and KILN_CPU_WINOGRAD. The
// same cases run with KILN_CPU_WINOGRAD=off ([off]) and with a value it refuses ([bad]).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "compiler/compile.h"
#include "runtime/cpu/dnnl_conv.h"
#include "runtime/cpu/winograd.h"
#include "runtime/format/artifact.h"
#include "tests/unit/run_util.h"

using namespace kiln;

namespace {

// A residual block's convolution: batch 2, sizes that leave half tiles (9x11), bias,
// an added tensor and relu.
constexpr std::string_view kResidual = R"(
graph @residual(%x: f32[2,32,9,11], %r: f32[2,32,9,11], param %w: f32[32,32,3,3], param %b: f32[32]) {
  %c: f32[2,32,9,11] = conv(%x, %w) {pads=[1,1,1,1]}
  %bb: f32[2,32,9,11] = broadcast(%b) {shape=[2,32,9,11], dims=[1]}
  %biased: f32[2,32,9,11] = add(%c, %bb)
  %sum: f32[2,32,9,11] = add(%r, %biased)
  %y: f32[2,32,9,11] = relu(%sum)
  return %y
}
)";

// Two convolutions in a row (the activation between them stays channels-last), the
// first without padding and clipped to [0, 6], the second with padding on two sides only
// and batch norm's per-channel subtract, multiply and add.
constexpr std::string_view kChain = R"(
graph @chain(%x: f32[1,32,16,18], param %w1: f32[48,32,3,3], param %w2: f32[32,48,3,3], param %mean: f32[32],
             param %k: f32[32], param %shift: f32[32]) {
  %c1: f32[1,48,14,16] = conv(%x, %w1)
  %zero: f32[] = constant {value=0.0}
  %six: f32[] = constant {value=6.0}
  %lo: f32[1,48,14,16] = broadcast(%zero) {shape=[1,48,14,16], dims=[]}
  %hi: f32[1,48,14,16] = broadcast(%six) {shape=[1,48,14,16], dims=[]}
  %m: f32[1,48,14,16] = maximum(%c1, %lo)
  %a: f32[1,48,14,16] = minimum(%m, %hi)
  %c2: f32[1,32,14,16] = conv(%a, %w2) {pads=[2,0,0,2]}
  %bm: f32[1,32,14,16] = broadcast(%mean) {shape=[1,32,14,16], dims=[1]}
  %centered: f32[1,32,14,16] = sub(%c2, %bm)
  %bk: f32[1,32,14,16] = broadcast(%k) {shape=[1,32,14,16], dims=[1]}
  %scaled: f32[1,32,14,16] = mul(%bk, %centered)
  %bs: f32[1,32,14,16] = broadcast(%shift) {shape=[1,32,14,16], dims=[1]}
  %y: f32[1,32,14,16] = add(%scaled, %bs)
  return %y
}
)";

// 4x4 tiles: batch 2, sizes that leave tiles of 2 rows and 2 columns (22x26), bias and
// relu, then a convolution padded unevenly with the first one's result added and a clip.
constexpr std::string_view kLarge = R"(
graph @large(%x: f32[2,32,22,26], param %w1: f32[32,32,3,3], param %b: f32[32], param %w2: f32[32,32,3,3]) {
  %c1: f32[2,32,22,26] = conv(%x, %w1) {pads=[1,1,1,1]}
  %bb: f32[2,32,22,26] = broadcast(%b) {shape=[2,32,22,26], dims=[1]}
  %biased: f32[2,32,22,26] = add(%c1, %bb)
  %a: f32[2,32,22,26] = relu(%biased)
  %c2: f32[2,32,22,26] = conv(%a, %w2) {pads=[0,1,2,1]}
  %sum: f32[2,32,22,26] = add(%c2, %a)
  %low: f32[] = constant {value=-0.5}
  %high: f32[] = constant {value=0.75}
  %lo: f32[2,32,22,26] = broadcast(%low) {shape=[2,32,22,26], dims=[]}
  %hi: f32[2,32,22,26] = broadcast(%high) {shape=[2,32,22,26], dims=[]}
  %m: f32[2,32,22,26] = maximum(%sum, %lo)
  %y: f32[2,32,22,26] = minimum(%m, %hi)
  return %y
}
)";

// 1125 tiles of 4x4 (5 images of 15x15): more than one pass of 8 MiB (winograd.cc's
// kPassBytes), the second a tile shorter than the first.
constexpr std::string_view kPasses = R"(
graph @passes(%x: f32[5,32,58,60], param %w: f32[32,32,3,3], param %b: f32[32]) {
  %c: f32[5,32,58,60] = conv(%x, %w) {pads=[1,1,1,1]}
  %bb: f32[5,32,58,60] = broadcast(%b) {shape=[5,32,58,60], dims=[1]}
  %biased: f32[5,32,58,60] = add(%c, %bb)
  %y: f32[5,32,58,60] = relu(%biased)
  return %y
}
)";

// Activations with exponentials, each after a convolution of its own (64 tiles of 4x4):
// bias, SiLU and an added tensor (a YOLO-style block), sigmoid, tanh, tanh GELU, and
// hard swish as ONNX's HardSwish imports it.
constexpr std::string_view kActivations = R"(
graph @activations(%x: f32[1,32,32,32], param %w1: f32[32,32,3,3], param %b: f32[32], param %w2: f32[32,32,3,3],
                   param %w3: f32[32,32,3,3], param %w4: f32[32,32,3,3], param %w5: f32[32,32,3,3]) {
  %c1: f32[1,32,32,32] = conv(%x, %w1) {pads=[1,1,1,1]}
  %bb: f32[1,32,32,32] = broadcast(%b) {shape=[1,32,32,32], dims=[1]}
  %biased: f32[1,32,32,32] = add(%c1, %bb)
  %s1: f32[1,32,32,32] = silu(%biased)
  %y1: f32[1,32,32,32] = add(%s1, %x)
  %c2: f32[1,32,32,32] = conv(%x, %w2) {pads=[1,1,1,1]}
  %y2: f32[1,32,32,32] = sigmoid(%c2)
  %c3: f32[1,32,32,32] = conv(%x, %w3) {pads=[1,1,1,1]}
  %y3: f32[1,32,32,32] = tanh(%c3)
  %c4: f32[1,32,32,32] = conv(%x, %w4) {pads=[1,1,1,1]}
  %y4: f32[1,32,32,32] = gelu(%c4) {approximate="tanh"}
  %c5: f32[1,32,32,32] = conv(%x, %w5) {pads=[1,1,1,1]}
  %sixth: f32[] = constant {value=0.16666667}
  %half: f32[] = constant {value=0.5}
  %one: f32[] = constant {value=1.0}
  %zero: f32[] = constant {value=0.0}
  %bsixth: f32[1,32,32,32] = broadcast(%sixth) {shape=[1,32,32,32], dims=[]}
  %bhalf: f32[1,32,32,32] = broadcast(%half) {shape=[1,32,32,32], dims=[]}
  %bone: f32[1,32,32,32] = broadcast(%one) {shape=[1,32,32,32], dims=[]}
  %bzero: f32[1,32,32,32] = broadcast(%zero) {shape=[1,32,32,32], dims=[]}
  %a: f32[1,32,32,32] = mul(%c5, %bsixth)
  %ab: f32[1,32,32,32] = add(%a, %bhalf)
  %lo: f32[1,32,32,32] = minimum(%ab, %bone)
  %h: f32[1,32,32,32] = maximum(%lo, %bzero)
  %y5: f32[1,32,32,32] = mul(%c5, %h)
  return %y1, %y2, %y3, %y4, %y5
}
)";

// What stays on oneDNN's direct kernels: 16 tiles (7x7), a stride of 2, an erf GELU
// after (64 tiles of 2x2 otherwise), 16 output channels (49 tiles of 4x4 otherwise).
constexpr std::string_view kDirect = R"(
graph @direct(%x: f32[1,32,7,7], %z: f32[1,32,16,16], %u: f32[1,32,28,28], param %w: f32[32,32,3,3],
              param %thin: f32[16,32,3,3]) {
  %small: f32[1,32,7,7] = conv(%x, %w) {pads=[1,1,1,1]}
  %strided: f32[1,32,8,8] = conv(%z, %w) {strides=[2,2], pads=[1,1,1,1]}
  %c: f32[1,32,16,16] = conv(%z, %w) {pads=[1,1,1,1]}
  %g: f32[1,32,16,16] = gelu(%c)
  %t: f32[1,16,28,28] = conv(%u, %thin) {pads=[1,1,1,1]}
  return %small, %strided, %g, %t
}
)";

bool winograd_expected() {
  const auto allowed = runtime::cpu::winograd_allowed();
  return allowed.ok() && *allowed && __builtin_cpu_supports("avx512f");
}

// Each convolution step's implementation, in step order, compiled with baked-in weights.
std::vector<std::string> implementations(const ir::Graph& g, uint64_t seed) {
  CompileOptions options;
  for (const auto& [name, value] : kiln::testing::seeded_arguments(g, seed))
    for (const ir::Arg& a : g.args)
      if (a.kind == ir::ArgKind::Param && g.value_name(a.value) == name) options.weights[name] = value;
  auto bytes = compile_to_artifact(g, options);
  if (!bytes.ok()) FAIL(bytes.error().message);
  auto view = format::read_artifact(*bytes, "cpu-x86_64");
  if (!view.ok()) FAIL(view.error().message);
  std::vector<std::string> found;
  for (const format::Step* step : *view->metadata().steps())
    if (step->conv()) found.push_back(runtime::cpu::conv_implementation(*step->conv(), {}));
  return found;
}

bool is_winograd(const std::string& implementation) {
  return implementation.starts_with("winograd_4x4_3x3 + ") || implementation.starts_with("winograd_2x2_3x3 + ");
}

// The largest |value| of the convolutions' sums, by the interpreter: `text` returning
// `sums` instead.
double largest_sum(std::string_view text, const std::string& sums, uint64_t seed) {
  std::string changed(text);
  const size_t at = changed.find("  return %");
  changed.replace(at, changed.find('\n', at) - at, "  return " + sums);
  const ir::Graph g = kiln::testing::parse_ok(changed);
  double largest = 0;
  for (const ir::Tensor& t : kiln::testing::eval_ok(g, kiln::testing::seeded_arguments(g, seed)))
    for (int64_t i = 0; i < t.size(); ++i) largest = std::max(largest, std::fabs(t.get(i)));
  return largest;
}

}  // namespace

TEST_CASE("3x3 convolutions of stride 1 with baked weights run as Winograd and match the interpreter",
          "[winograd][off]") {
  // The tile size each convolution takes (4x4 where it has at least 40 such tiles), and
  // its sums. Measured here, the largest error was 2.3-4.4e-6 of the largest sum with
  // F(4x4, 3x3) (@large, @passes, @activations), 0.7-1.3e-7 with F(2x2, 3x3) (@residual,
  // @chain), and 0.5-3.4e-7 with oneDNN's direct kernel: outputs are checked to 1e-5 of it.
  struct Case {
    std::string_view text;
    std::vector<std::string> implementations;
    std::string sums;
  };
  const std::vector<Case> cases = {
      {kResidual, {"winograd_2x2_3x3 + "}, "%c"},
      {kChain, {"winograd_2x2_3x3 + ", "winograd_2x2_3x3 + "}, "%c1, %c2"},
      {kLarge, {"winograd_4x4_3x3 + ", "winograd_4x4_3x3 + "}, "%c1, %c2"},
      {kPasses, {"winograd_4x4_3x3 + "}, "%c"},
      {kActivations, std::vector<std::string>(5, "winograd_4x4_3x3 + "), "%c1, %c2, %c3, %c4, %c5"},
  };
  for (const Case& c : cases) {
    const ir::Graph g = kiln::testing::parse_ok(c.text);
    INFO(g.name);
    const std::vector<std::string> found = implementations(g, 5);
    REQUIRE(found.size() == c.implementations.size());
    for (size_t i = 0; i < found.size(); ++i) {
      INFO(found[i]);
      CHECK(found[i].starts_with(c.implementations[i]) == winograd_expected());
      CHECK(!found[i].empty());
    }
    const auto args = kiln::testing::seeded_arguments(g, 5);
    const auto expected = kiln::testing::eval_ok(g, args);
    const double tolerance = 1e-5 * largest_sum(c.text, c.sums, 5);
    INFO("tolerance " << tolerance);
    for (bool fuse : {true, false}) {
      INFO((fuse ? "fused" : "unfused"));
      CompileOptions options;
      options.fuse = fuse;
      auto got = kiln::testing::compile_and_run(g, args, options);
      if (!got.ok()) FAIL(got.error().message);
      kiln::testing::check_same(*got, expected, 1e-4, tolerance);
    }
  }
}

TEST_CASE("convolutions Winograd does not suit stay on oneDNN's direct kernels", "[winograd][off]") {
  const ir::Graph g = kiln::testing::parse_ok(kDirect);
  const std::vector<std::string> found = implementations(g, 9);
  REQUIRE(found.size() == 4);
  for (const std::string& implementation : found) {
    INFO(implementation);
    CHECK(!implementation.empty());
    CHECK(!is_winograd(implementation));
  }
  kiln::testing::check_against_interpreter(g.name, g, kiln::testing::seeded_arguments(g, 9));
}

// The transforms' buffers are the calling thread's; sessions share the packed weights.
TEST_CASE("Winograd convolutions run from several threads at once give each run's own result", "[winograd][off]") {
  const ir::Graph g = kiln::testing::parse_ok(kChain);
  CompileOptions options;
  for (const auto& [name, value] : kiln::testing::seeded_arguments(g, 3))
    if (name != "x") options.weights[name] = value;
  auto bytes = compile_to_artifact(g, options);
  REQUIRE(bytes.ok());
  auto model = runtime::Model::load_bytes(std::move(*bytes), {});
  REQUIRE(model.ok());
  // The profile names each step's kernel: both convolutions are Winograd's.
  int winograd_steps = 0;
  for (const runtime::StepInfo& step : (*model)->steps()) winograd_steps += is_winograd(step.implementation);
  CHECK(winograd_steps == (winograd_expected() ? 2 : 0));
  const ir::Shape shape = {1, 32, 16, 18};
  const auto expected = kiln::testing::outputs_one_thread(**model, "x", shape, 12);
  CHECK(kiln::testing::mismatches_across_threads(**model, "x", shape, 4, 3, expected) == 0);
}

TEST_CASE("KILN_CPU_WINOGRAD takes on or off; loading a CPU artifact refuses another value", "[winograd_bad]") {
  const ir::Graph g = kiln::testing::parse_ok(kResidual);
  CompileOptions options;
  for (const auto& [name, value] : kiln::testing::seeded_arguments(g, 5))
    if (name == "w" || name == "b") options.weights[name] = value;
  auto bytes = compile_to_artifact(g, options);
  REQUIRE(bytes.ok());
  auto model = runtime::Model::load_bytes(std::move(*bytes), {});
  REQUIRE(!model.ok());
  CHECK(model.error().message == "runtime: KILN_CPU_WINOGRAD is 'sometimes'; it takes on or off");
}
