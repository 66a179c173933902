// Loop steps over activations in oneDNN's layouts (ir/channel_layouts.h): the rewritten
// step against the plain one in the interpreter, which steps get kernels in which layouts,
// and the runtime's plan that runs them between convolutions.
#include "ir/channel_layouts.h"

#include "compiler/compile.h"
#include "compiler/model.h"
#include "passes/pipeline.h"
#include "runtime/cpu/layout_plan.h"
#include "runtime/format/artifact.h"
#include "tests/unit/run_util.h"

using namespace kiln;

namespace {

// The graph through the default pipeline (fused and planned).
ir::Graph planned(const Model& m) {
  auto built = m.build();
  REQUIRE(built.ok());
  ir::Graph g = *built;
  auto pipeline = passes::pipeline_from_text(passes::kDefaultPipeline);
  REQUIRE(pipeline.ok());
  auto ran = pipeline->run(g);
  if (!ran.ok()) FAIL(ran.error().message);
  return g;
}

// [N, C, D...] laid out as [N, C/block, D..., block], or [N, D..., C] for channels-last (one
// block of all the channels).
ir::Tensor laid_out(const ir::Tensor& t, int64_t layout) {
  const ir::Shape& shape = t.type.shape;
  const int64_t channels = shape[1], inner = ir::num_elements(shape) / shape[0] / channels;
  const int64_t block = layout == ir::kChannelsLast || channels == 1 ? channels : layout;
  std::vector<double> laid(static_cast<size_t>(t.size()));
  for (int64_t k = 0; k < t.size(); ++k) {
    const int64_t n = k / (channels * inner), c = k / inner % channels, d = k % inner;
    laid[static_cast<size_t>(((n * (channels / block) + c / block) * inner + d) * block + c % block)] = t.get(k);
  }
  return ir::Tensor::from_doubles({t.type.dtype, ir::channel_layout_shape(shape, layout)}, laid);
}

// The graph's one step (a loop or a reduction), in each of `layouts`, computes the plain graph's results in
// that layout (its inputs of other ranks as they are).
void check_laid_step(const std::string& what, const Model& m,
                     std::vector<int64_t> layouts = {ir::kChannelsLast, 8, 16}) {
  INFO(what);
  ir::Graph g = planned(m);
  REQUIRE(g.program->steps.size() == 1);  // the step computes the graph's results
  const ir::Step* loop = &g.program->steps[0];
  const int64_t rank = g.type(loop->outputs[0]).rank();
  const auto args = kiln::testing::seeded_arguments(g, 5);
  const std::vector<ir::Tensor> want = kiln::testing::eval_ok(g, args);
  for (int64_t layout : layouts) {
    INFO("layout " << layout);
    std::optional<ir::Graph> laid = ir::channel_layout_step(g, *loop, layout);
    REQUIRE(laid);
    CHECK(laid->program->steps[0].name ==
          loop->name + (layout == ir::kChannelsLast ? "_channels_last" : "_c" + std::to_string(layout)));
    std::map<std::string, ir::Tensor> laid_args;
    for (const ir::Arg& a : laid->args) {
      const std::string& name = laid->value_name(a.value);
      const ir::Tensor& arg = args.at(name);
      laid_args.emplace(name, arg.type.rank() == rank ? laid_out(arg, layout) : arg);
    }
    const std::vector<ir::Tensor> got = kiln::testing::eval_ok(*laid, laid_args);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const ir::Tensor expected = laid_out(want[i], layout);
      REQUIRE(got[i].type == expected.type);
      for (int64_t k = 0; k < expected.size(); ++k) REQUIRE(got[i].get(k) == expected.get(k));
    }
  }
}

// Per step of the program, the layouts it gets kernels in.
std::vector<std::vector<int64_t>> laid_steps(const Model& m) { return ir::channel_layouts_of_steps(planned(m)); }

using Layouts = std::vector<std::vector<int64_t>>;
constexpr int64_t kLast = ir::kChannelsLast;

}  // namespace

TEST_CASE("a loop step in oneDNN's layouts computes the plain step's elements", "[layouts]") {
  check_laid_step("ResNet's max_pool 3x3, stride 2, pads 1", [] {
    Model m("pool");
    m.output(max_pool(m.input("x", {2, 32, 9, 10}), {3, 3}, {{2, 2}, {1, 1, 1, 1}, {}, false}), "y");
    return m;
  }());
  check_laid_step("avg_pool not counting the padding (its counts per position), ceil_mode", [] {
    Model m("avg");
    m.output(avg_pool(m.input("x", {1, 16, 7, 6}), {3, 2}, {{2, 2}, {1, 0, 1, 1}, {}, false, true}), "y");
    return m;
  }());
  check_laid_step("a pool, then a residual add and relu: two inputs, a scalar", [] {
    Model m("sum");
    Tensor p = max_pool(m.input("x", {1, 16, 8, 8}), {2, 2}, {{2, 2}, {}, {}, false});
    m.output(relu(p + m.input("r", {1, 16, 4, 4})) * 0.5, "y");
    return m;
  }());
  check_laid_step("a value of one channel computed in the step, broadcast across the channels", [] {
    Model m("scale");
    Tensor x = m.input("x", {2, 16, 3, 5});
    Tensor rows = broadcast(m.constant({0.5, -1, 2}, {3}), {2, 1, 3, 5}, {2});
    m.output(x * broadcast(exp(rows), x.shape(), {0, 1, 2, 3}), "y");
    return m;
  }());
  check_laid_step("a per-channel scale and shift, read as they are (batch norm, then relu)",
                  [] {
                    Model m("norm");
                    Tensor x = m.input("x", {2, 16, 3, 5});
                    Tensor scale = broadcast(m.input("s", {16}), x.shape(), {1}),
                           shift = broadcast(m.input("b", {16}), x.shape(), {1});
                    m.output(relu(x * scale + shift), "y");
                    return m;
                  }(),
                  {kLast});
  check_laid_step("a concat along the channels, of whole blocks (an Inception block's)", [] {
    Model m("join");
    Tensor a = m.input("a", {1, 16, 4, 5}), b = m.input("b", {1, 32, 4, 5});
    m.output(concat({tanh(a), b, a}, 1), "y");
    return m;
  }());
  check_laid_step("a slice of channels (a split), and of rows", [] {
    Model m("split");
    m.output(relu(slice(m.input("x", {1, 48, 6, 6}), {0, 16, 1, 0}, {1, 32, 5, 6})), "y");
    return m;
  }());
  check_laid_step("channels a block does not split, concatenated and sliced: channels-last only",
                  [] {
                    Model m("odd");
                    Tensor a = m.input("a", {1, 3, 4, 4}), b = m.input("b", {1, 5, 4, 4});
                    m.output(slice(concat({a, b}, 1), {0, 1, 0, 0}, {1, 7, 4, 4}, {1, 2, 1, 1}), "y");
                    return m;
                  }(),
                  {kLast});
  check_laid_step("a global average pool, keeping its dims (a squeeze-and-excitation block's), channels-last",
                  [] {
                    Model m("squeeze");
                    m.output(reduce_sum(m.input("x", {1, 16, 5, 7}), {2, 3}, true), "y");
                    return m;
                  }(),
                  {kLast});
  check_laid_step("a max over the spatial dims, channels-last",
                  [] {
                    Model m("max");
                    m.output(reduce_max(m.input("x", {1, 8, 5, 7}), {2, 3}, true), "y");
                    return m;
                  }(),
                  {kLast});
  check_laid_step("max_pool in 1-D", [] {
    Model m("dims");
    m.output(max_pool(m.input("a", {1, 16, 11}), {3}, {{2}, {1, 1}, {}, true}), "a_pool");
    return m;
  }());
  check_laid_step("max_pool in 3-D", [] {
    Model m("dims3");
    m.output(max_pool(m.input("b", {1, 16, 3, 4, 5}), {2, 2, 3}, {{1, 2, 1}, {0, 1, 1, 1, 0, 1}, {}, false}), "b_pool");
    return m;
  }());
}

TEST_CASE("which steps get kernels in which layouts: next to a convolution, as far as the layout can follow",
          "[layouts]") {
  auto weights = [](Model& m, const std::string& name, ir::Shape shape) {
    return m.param(name, std::move(shape), Init::uniform(-0.2, 0.2));
  };
  {
    Model m("between");  // conv -> pool -> conv: the pool's step, in every layout
    Tensor a = relu(conv(m.input("x", {1, 3, 16, 16}), weights(m, "w1", {16, 3, 3, 3}), {{2, 2}, {1, 1, 1, 1}, {}, 1}));
    Tensor p = max_pool(a, {3, 3}, {{2, 2}, {1, 1, 1, 1}, {}, false});
    m.output(conv(p, weights(m, "w2", {16, 16, 1, 1})), "y");
    CHECK(laid_steps(m) == Layouts{{}, {kLast, 8, 16}, {}});
  }
  {
    Model m("se");  // a squeeze-and-excitation block: the pool (a reduction) channels-last only
    Tensor a = conv(m.input("x", {1, 16, 8, 8}), weights(m, "w1", {16, 16, 1, 1}));
    Tensor pooled = reduce_sum(a, {2, 3}, true);
    Tensor scale = sigmoid(conv(pooled, weights(m, "w2", {16, 16, 1, 1})));
    m.output(conv(a * broadcast(scale, a.shape(), {0, 1, 2, 3}), weights(m, "w3", {16, 16, 1, 1})), "y");
    const Layouts laid = laid_steps(m);
    REQUIRE(laid.size() == 5);
    CHECK(laid[1] == std::vector<int64_t>{kLast});
    CHECK(laid[3] == std::vector<int64_t>{kLast, 8, 16});
  }
  {
    Model m("batch");  // a pool over a batch of two: rows across the channels, so none
    Tensor a = conv(m.input("x", {2, 16, 8, 8}), weights(m, "w1", {16, 16, 1, 1}));
    m.output(conv(reduce_sum(a, {2, 3}, true), weights(m, "w2", {16, 16, 1, 1})), "y");
    CHECK(laid_steps(m) == Layouts{{}, {}, {}});
  }
  {
    Model m("norm");  // a batch norm of a concat, before a convolution (DenseNet's)
    Tensor x = m.input("x", {1, 16, 8, 8});
    Tensor joined = concat({conv(x, weights(m, "w1", {16, 16, 1, 1})), x}, 1);
    Tensor var = abs(m.input("var", {32})) + 1.0;
    Tensor normed = relu(batch_norm(joined, m.input("s", {32}), m.input("b", {32}), m.input("mean", {32}), var));
    m.output(conv(normed, weights(m, "w2", {16, 32, 1, 1})), "y");
    ir::Graph g = planned(m);
    const Layouts laid = ir::channel_layouts_of_steps(g);
    // Its per-channel scale is a step of its own over the 32 channels, so the step that
    // joins and normalizes is a loop step, in channels-last (as a row step walked across
    // the channels there, DenseNet ran 1.89x slower).
    int per_channel = 0, normalizing = 0;
    for (size_t k = 0; k < g.program->steps.size(); ++k) {
      const ir::Step& step = g.program->steps[k];
      CHECK(step.kind != ir::StepKind::Reduction);
      bool relu = false, rsqrt = false;
      for (int n : step.nodes) {
        relu = relu || g.nodes[n].op == ir::Op::Relu;
        rsqrt = rsqrt || g.nodes[n].op == ir::Op::Rsqrt;
      }
      if (rsqrt) {
        ++per_channel;
        CHECK(g.type(step.outputs[0]).num_elements() == 32);
        CHECK(laid[k].empty());
      }
      if (relu) {
        ++normalizing;
        CHECK(!rsqrt);
        CHECK(laid[k] == std::vector<int64_t>{kLast});
      }
    }
    CHECK(per_channel == 1);
    CHECK(normalizing == 1);
  }
  {
    Model m("dropped");  // a pool that drops its dims ([N, C]) gets none: a reshape would follow
    Tensor a = conv(m.input("x", {1, 16, 8, 8}), weights(m, "w1", {16, 16, 1, 1}));
    m.output(reduce_sum(a, {2, 3}) + 1.0, "y");
    CHECK(laid_steps(m) == Layouts{{}, {}});
  }
  {
    Model m("alone");  // a pool of an input, returned: no convolution keeps a layout of its own
    m.output(max_pool(m.input("x", {1, 16, 8, 8}), {2, 2}, {{2, 2}, {}, {}, false}), "y");
    CHECK(laid_steps(m) == Layouts{{}});
  }
  {
    Model m("half");  // channels 8..24 of 32: whole blocks of 8, not of 16
    Tensor a = conv(m.input("x", {1, 16, 8, 8}), weights(m, "w1", {32, 16, 1, 1}));
    Tensor half = tanh(slice(a, {0, 8, 0, 0}, {1, 24, 8, 8}));
    m.output(conv(half, weights(m, "w2", {16, 16, 1, 1})), "y");
    CHECK(laid_steps(m) == Layouts{{}, {kLast, 8}, {}});
  }
  {
    Model m("shuffle");  // a channel shuffle (reshape and transpose) moves data across channels
    Tensor a = conv(m.input("x", {1, 16, 4, 4}), weights(m, "w1", {16, 16, 1, 1}));
    Tensor shuffled = reshape(transpose(reshape(a, {1, 2, 8, 4, 4}), {0, 2, 1, 3, 4}), {1, 16, 4, 4});
    m.output(conv(shuffled, weights(m, "w2", {16, 16, 1, 1})), "y");
    ir::Graph g = planned(m);
    REQUIRE(g.program->steps.size() == 3);
    CHECK(ir::channel_layouts_of_steps(g) == Layouts{{}, {}, {}});
  }
  {
    Model m("one");  // an input of one channel: channels-last only
    Tensor a = conv(m.input("x", {1, 16, 8, 8}), weights(m, "w1", {16, 16, 1, 1}));
    m.output(conv(a * broadcast(m.input("s", {1, 1, 8, 8}), a.shape(), {0, 1, 2, 3}), weights(m, "w2", {16, 16, 1, 1})),
             "y");
    CHECK(laid_steps(m) == Layouts{{}, {kLast}, {}});
  }
  {
    Model m("odd");  // 24 channels: blocks of 8, not of 16
    Tensor a = conv(m.input("x", {1, 16, 8, 8}), weights(m, "w1", {24, 16, 1, 1}));
    Tensor p = max_pool(a, {2, 2}, {{2, 2}, {}, {}, false});
    m.output(conv(p, weights(m, "w2", {16, 24, 1, 1})), "y");
    CHECK(laid_steps(m) == Layouts{{}, {kLast, 8}, {}});
  }
}

// A pool between two convolutions (and a residual it adds) runs in the layout oneDNN keeps
// their activations in: both convolutions keep it, and nothing reorders them.
TEST_CASE("the runtime passes a pool between convolutions oneDNN's activations as they are", "[layouts][onednn]") {
  Model m("head", 1);
  auto weights = [&](const std::string& name, ir::Shape shape) {
    return m.param(name, std::move(shape), Init::uniform(-0.2, 0.2));
  };
  Tensor a = relu(conv(m.input("x", {1, 3, 32, 32}), weights("w1", {32, 3, 7, 7}), {{2, 2}, {3, 3, 3, 3}, {}, 1}));
  Tensor p = max_pool(a, {3, 3}, {{2, 2}, {1, 1, 1, 1}, {}, false});
  m.output(relu(conv(p, weights("w2", {32, 32, 3, 3}), {{}, {1, 1, 1, 1}, {}, 1}) + p), "y");
  const std::vector<uint8_t> bytes = kiln::testing::compiled_artifact(m.build(), m.initial_values());
  auto view = format::read_artifact(bytes, "cpu-x86_64");
  if (!view.ok()) FAIL(view.error().message);
  const format::Artifact& artifact = view->metadata();
  std::vector<char> pinned(artifact.values()->size(), 0);
  for (const format::Argument* arg : *artifact.args()) pinned[arg->value()] = 1;
  for (uint32_t v : *artifact.results()) pinned[v] = 1;
  const std::vector<runtime::cpu::StepLayout> layouts = runtime::cpu::plan_layouts(artifact, pinned);
  REQUIRE(layouts.size() == 3);
  const format::Step& pool = *artifact.steps()->Get(1);
  REQUIRE(pool.channel_layouts());
  CHECK(std::vector<int>(pool.channel_layouts()->begin(), pool.channel_layouts()->end()) == std::vector<int>{0, 8, 16});
  CHECK(layouts[1].channel_layout != runtime::cpu::StepLayout::kPlain);
  CHECK(layouts[0].y_native);
  CHECK(!layouts[0].y_blocked);
  CHECK(layouts[2].x_native);
  CHECK(layouts[2].added_native);
}
