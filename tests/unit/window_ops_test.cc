// conv, max_pool, avg_pool, pad and batch_norm: closed-form values, the decompositions
// (what both code generators run) against the interpreter's direct sums over every
// attribute combination shape inference accepts at small sizes, the CPU code generator,
// gradients by finite differences, and the verifier's messages.
#include <fmt/format.h>

#include "compiler/compile.h"
#include "compiler/nn.h"
#include "compiler/train.h"
#include "ir/decompose.h"
#include "runtime/cpu/dnnl.h"
#include "runtime/cpu/dnnl_conv.h"
#include "runtime/format/artifact.h"
#include "tests/unit/gradient_check.h"
#include "tests/unit/run_util.h"

using namespace kiln;
using ir::DType;
using kiln::testing::check_close;

namespace {

std::vector<double> counting(int64_t n, double scale = 1) {
  std::vector<double> v;
  for (int64_t k = 0; k < n; ++k) v.push_back(static_cast<double>(k + 1) * scale);
  return v;
}

// The graph, evaluated directly and through its decomposition (composites) or lowering
// (convolutions), with seeded arguments.
void check_decomposition(const std::string& what, const ir::Graph& g) {
  INFO(what);
  auto args = kiln::testing::seeded_arguments(g, 7);
  auto direct = kiln::testing::eval_ok(g, args);
  ir::Graph lowered = g;
  const bool composites = ir::decompose_composites(lowered), convs = ir::lower_convolutions(lowered);
  REQUIRE((composites || convs));
  REQUIRE(std::none_of(lowered.nodes.begin(), lowered.nodes.end(), [](const ir::Node& n) {
    return ir::op_kind(n.op) == ir::OpKind::Composite || ir::is_convolution(n.op);
  }));
  auto decomposed = kiln::testing::eval_ok(lowered, args);
  kiln::testing::check_same(decomposed, direct, 1e-5, 1e-5);
}

// A one-op model; nullopt where the op refuses the attributes.
std::optional<ir::Graph> one_op(const std::function<Tensor(Model&)>& body) {
  Model m("window");
  Tensor y = body(m);
  if (!y.valid()) return std::nullopt;
  m.output(y, "y");
  auto g = m.build();
  if (!g.ok()) return std::nullopt;
  return *g;
}

ir::Shape spatial(int64_t n, int64_t c, std::vector<int64_t> dims) {
  ir::Shape s{n, c};
  s.insert(s.end(), dims.begin(), dims.end());
  return s;
}

// conv(x, w) with its two gradients at an input %dy of y's shape, made by the model's last
// op (the conv): the gradients are outputs %dx and %dw, the conv's result is returned.
Tensor conv_with_gradients(Model& m, Tensor x, Tensor w, const ConvOptions& o) {
  Tensor y = conv(x, w, o);
  if (!y.valid()) return y;
  ir::Attrs input = m.graph().nodes.back().attrs, weights = input;
  input.set("shape", x.shape());
  weights.set("shape", w.shape());
  Tensor dy = m.input("dy", y.shape());
  m.output(m.apply(ir::Op::ConvInputGrad, {dy, w}, input), "dx");
  m.output(m.apply(ir::Op::ConvWeightGrad, {x, dy}, weights), "dw");
  return y;
}

std::vector<int64_t> repeat(int64_t v, int64_t k) { return std::vector<int64_t>(static_cast<size_t>(k), v); }

}  // namespace

TEST_CASE("windowed ops: closed-form values in the interpreter", "[window]") {
  ir::Graph g = kiln::testing::parse_ok(R"(
graph @w(%x: f32[1,1,3,3], %k: f32[1,1,2,2]) {
  %conv: f32[1,1,2,2] = conv(%x, %k)
  %strided: f32[1,1,2,2] = conv(%x, %k) {strides=[2,2], pads=[1,1,0,0]}
  %max: f32[1,1,2,2] = max_pool(%x) {window=[2,2], strides=[1,1]}
  %avg: f32[1,1,3,3] = avg_pool(%x) {window=[3,3], strides=[1,1], pads=[1,1,1,1]}
  %avg_pad: f32[1,1,3,3] = avg_pool(%x) {window=[3,3], strides=[1,1], pads=[1,1,1,1], count_include_pad=true}
  %pad: f32[1,1,4,2] = pad(%x) {pads=[0,0,1,0,0,0,0,-1], value=-1.0}
  return %conv, %strided, %max, %avg, %avg_pad, %pad
}
)");
  auto out = kiln::testing::eval_ok(g, {{"x", kiln::testing::tensor(DType::F32, {1, 1, 3, 3}, counting(9))},
                                        {"k", kiln::testing::tensor(DType::F32, {1, 1, 2, 2}, {1, 1, 1, 1})}});
  check_close(out[0], "f32[1,1,2,2]", {12, 16, 24, 28});
  // Windows from (-1,-1) in steps of 2: only the bottom-right tap lands at first.
  check_close(out[1], "f32[1,1,2,2]", {1, 5, 11, 28});
  check_close(out[2], "f32[1,1,2,2]", {5, 6, 8, 9});
  check_close(out[3], "f32[1,1,3,3]", {3, 3.5, 4, 4.5, 5, 5.5, 6, 6.5, 7});
  check_close(out[4], "f32[1,1,3,3]", {12 / 9., 21 / 9., 16 / 9., 27 / 9., 45 / 9., 33 / 9., 24 / 9., 39 / 9., 28 / 9.},
              1e-6);
  check_close(out[5], "f32[1,1,4,2]", {-1, -1, 1, 2, 4, 5, 7, 8});
}

TEST_CASE("conv and its gradients: the lowering matches the direct sums for every accepted combination", "[window]") {
  int accepted = 0, refused = 0;
  for (int64_t k : {1, 2, 3}) {
    const std::vector<int64_t> dims = k == 1   ? std::vector<int64_t>{7}
                                      : k == 2 ? std::vector<int64_t>{5, 6}
                                               : std::vector<int64_t>{4, 2, 5};
    for (int64_t stride : {1, 2, 3})
      for (int64_t pad_lo : {0, 1, 2})
        for (int64_t pad_hi : {0, 1})
          for (int64_t dilation : {1, 2})
            for (int64_t groups : {1, 2, 4})
              for (int64_t kernel : {1, 2, 3}) {
                if (k == 3 && (stride == 3 || pad_lo == 2 || kernel == 3)) continue;  // keep the 3-D sweep small
                // conv, and its two gradients at a gradient of its result's shape.
                auto g = one_op([&](Model& m) {
                  Tensor x = m.input("x", spatial(2, 4, dims));
                  Tensor w = m.input("w", spatial(groups == 4 ? 4 : 6, 4 / groups, repeat(kernel, k)));
                  ConvOptions o{repeat(stride, k), repeat(pad_lo, k), repeat(dilation, k), groups};
                  for (int64_t d = 0; d < k; ++d) o.pads.push_back(pad_hi);
                  return conv_with_gradients(m, x, w, o);
                });
                if (!g) {
                  ++refused;
                  continue;
                }
                ++accepted;
                check_decomposition(fmt::format("conv {}-D stride {} pads {}/{} dilation {} groups {} kernel {}", k,
                                                stride, pad_lo, pad_hi, dilation, groups, kernel),
                                    *g);
              }
  }
  CHECK(accepted > 400);
  CHECK(refused > 0);  // windows larger than the padded input
}

TEST_CASE("conv with more than 16 taps: gathered columns match the direct sums", "[window]") {
  // Beyond 16 taps the lowering gathers the columns with indices computed from iotas
  // (ir/lower_conv.cc), where fewer taps are slices: windows of 17 to 27 taps in one, two
  // and three dims, with strides, dilations, padding and groups.
  int gathered = 0;
  for (int64_t k : {1, 2, 3}) {
    const std::vector<int64_t> dims = k == 1   ? std::vector<int64_t>{30}
                                      : k == 2 ? std::vector<int64_t>{9, 11}
                                               : std::vector<int64_t>{5, 4, 6};
    const std::vector<int64_t> kernel = k == 1   ? std::vector<int64_t>{17}
                                        : k == 2 ? std::vector<int64_t>{5, 4}
                                                 : std::vector<int64_t>{3, 3, 3};
    for (int64_t stride : {1, 2})
      for (int64_t pad : {0, 2})
        for (int64_t dilation : {1, 2})
          for (int64_t groups : {1, 2}) {
            auto g = one_op([&](Model& m) {
              Tensor x = m.input("x", spatial(2, 4, dims));
              Tensor w = m.input("w", spatial(6, 4 / groups, kernel));
              ConvOptions o{repeat(stride, k), repeat(pad, 2 * k), repeat(dilation, k), groups};
              return conv_with_gradients(m, x, w, o);
            });
            if (!g) continue;
            ir::Graph lowered = *g;
            ir::lower_convolutions(lowered);
            gathered += std::count_if(lowered.nodes.begin(), lowered.nodes.end(),
                                      [](const ir::Node& n) { return n.op == ir::Op::Gather; }) > 0;
            check_decomposition(
                fmt::format("conv {}-D stride {} pads {} dilation {} groups {}", k, stride, pad, dilation, groups), *g);
          }
  }
  CHECK(gathered > 20);
}

TEST_CASE("max_pool and avg_pool: the decompositions match the direct sums", "[window]") {
  int accepted = 0;
  for (ir::Op op : {ir::Op::MaxPool, ir::Op::AvgPool})
    for (int64_t k : {1, 2, 3}) {
      const std::vector<int64_t> dims = k == 1   ? std::vector<int64_t>{9}
                                        : k == 2 ? std::vector<int64_t>{7, 6}
                                                 : std::vector<int64_t>{5, 4, 6};
      for (int64_t window : {1, 2, 3})
        for (int64_t stride : {1, 2, 3})
          for (int64_t pad : {0, 1, 2})
            for (int64_t dilation : {1, 2})
              for (bool ceil_mode : {false, true})
                for (bool include_pad : {false, true}) {
                  if (op == ir::Op::MaxPool ? include_pad : dilation > 1) continue;
                  auto g = one_op([&](Model& m) {
                    Tensor x = m.input("x", spatial(2, 3, dims));
                    PoolOptions o{repeat(stride, k), repeat(pad, 2 * k), {}, ceil_mode, include_pad};
                    if (op == ir::Op::MaxPool) o.dilations = repeat(dilation, k);
                    return op == ir::Op::MaxPool ? max_pool(x, repeat(window, k), o)
                                                 : avg_pool(x, repeat(window, k), o);
                  });
                  if (!g) continue;
                  ++accepted;
                  check_decomposition(
                      fmt::format("{} {}-D window {} stride {} pad {} dilation {} ceil {} include {}", ir::op_name(op),
                                  k, window, stride, pad, dilation, ceil_mode, include_pad),
                      *g);
                }
    }
  CHECK(accepted > 300);
}

TEST_CASE("pad: the decomposition matches the direct copy, crops included", "[window]") {
  for (std::vector<int64_t> pads : std::vector<std::vector<int64_t>>{
           {0, 0, 0, 0}, {1, 2, 3, 0}, {-1, 0, 0, -2}, {2, -1, -1, 3}, {0, -3, 0, 0}, {1, 1, 1, 1}})
    for (double value : {0.0, -2.5}) {
      auto g = one_op([&](Model& m) { return pad(m.input("x", {3, 4}), pads, value); });
      REQUIRE(g);
      check_decomposition(fmt::format("pad [{}] value {}", fmt::join(pads, ","), value), *g);
    }
  auto ints = kiln::testing::parse_ok(
      "graph @p(%x: i32[2,2]) {\n  %y: i32[3,3] = pad(%x) {pads=[1,0,0,1], value=7.0}\n  return %y\n}\n");
  auto out = kiln::testing::eval_ok(ints, {{"x", ir::Tensor::from_ints({DType::I32, {2, 2}}, {1, 2, 3, 4})}});
  check_close(out[0], "i32[3,3]", {7, 7, 7, 1, 2, 7, 3, 4, 7});
}

TEST_CASE("windowed ops on the CPU code generator match the interpreter", "[window][cpu]") {
  const std::vector<std::pair<std::string, std::function<Tensor(Model&)>>> cases = {
      {"conv stride 2 pads 1 groups 2 + bias + relu",
       [](Model& m) {
         Tensor y = conv(m.input("x", {2, 4, 9, 8}), m.param("w", {6, 2, 3, 3}, Init::uniform(-1, 1)),
                         {{2, 2}, {1, 1, 1, 0}, {}, 2});
         return relu(y + broadcast(m.param("b", {6}, Init::uniform(-1, 1)), y.shape(), {1}));
       }},
      // A long window over few positions runs as gathered columns and a GEMM, not on
      // oneDNN (passes/lower_conv.h): wav2vec2's positional convolution at a small size,
      // 1-D windows of 33 taps in 4 groups, padded, with GELU after it.
      {"conv of 33 taps in 4 groups over 20 positions, then GELU",
       [](Model& m) {
         Tensor y = conv(m.input("x", {2, 16, 20}), m.param("w", {16, 4, 33}, Init::uniform(-0.3, 0.3)),
                         {{1}, {16, 16}, {}, 4});
         return gelu(y);
       }},
      // A 1x1 convolution to 3 channels over 32x36 pixels (a segmentation head's), as a
      // matmul: a batch of 2, with its bias.
      {"1x1 conv to 3 channels over 1152 pixels + bias",
       [](Model& m) {
         Tensor y = conv(m.input("x", {2, 8, 32, 36}), m.param("w", {3, 8, 1, 1}, Init::uniform(-0.3, 0.3)));
         return y + broadcast(m.param("b", {3}, Init::uniform(-1, 1)), y.shape(), {1});
       }},
      {"conv of 17 taps, stride 2, dilation 2, 2 groups",
       [](Model& m) {
         return conv(m.input("x", {1, 6, 60}), m.param("w", {6, 3, 17}, Init::uniform(-0.3, 0.3)),
                     {{2}, {8, 8}, {2}, 2});
       }},
      // The epilogues a convolution's call applies (bias, relu, clip, a residual add), and
      // activations passed between convolutions in oneDNN's layout (16 and 32 channels),
      // with an intermediate returned (it stays in the plain layout).
      {"conv epilogues: a residual block with a strided shortcut, and a clip",
       [](Model& m) {
         auto bias = [&](const std::string& name, Tensor y) {
           return y + broadcast(m.param(name, {y.shape()[1]}, Init::uniform(-1, 1)), y.shape(), {1});
         };
         auto weights = [&](const std::string& name, ir::Shape shape) {
           return m.param(name, std::move(shape), Init::uniform(-0.3, 0.3));
         };
         Tensor x = m.input("x", {2, 16, 8, 8});
         Tensor a = relu(bias("b1", conv(x, weights("w1", {32, 16, 3, 3}), {{2, 2}, {1, 1, 1, 1}, {}, 1})));
         Tensor b = bias("b2", conv(a, weights("w2", {32, 32, 3, 3}), {{}, {1, 1, 1, 1}, {}, 1}));
         Tensor shortcut = bias("b3", conv(x, weights("w3", {32, 16, 1, 1}), {{2, 2}, {}, {}, 1}));
         // The added tensor is not the step's last input: a per-channel product follows it.
         Tensor block = relu((b + shortcut) * broadcast(m.param("k", {32}, Init::uniform(0.5, 1.5)), b.shape(), {1}));
         Tensor six = minimum(maximum(bias("b4", conv(block, weights("w4", {32, 1, 3, 3}), {{}, {1, 1, 1, 1}, {}, 32})),
                                      broadcast(m.scalar(0.0), block.shape(), {})),
                              broadcast(m.scalar(6.0), block.shape(), {}));
         // Batch norm (inference) after a convolution without bias: per-channel sub, mul, add.
         Tensor var = abs(m.param("var", {32}, Init::uniform(-1, 1))) + 0.5;
         Tensor normed = relu(
             batch_norm(conv(six, weights("w5", {32, 32, 1, 1})), m.param("s", {32}, Init::uniform(-1, 1)),
                        m.param("bn_b", {32}, Init::uniform(-1, 1)), m.param("mean", {32}, Init::uniform(-1, 1)), var));
         return reduce_sum(normed, {1, 2, 3}) + reduce_sum(a, {1, 2, 3});
       }},
      // The result written over the residual it adds (the memory plan's in-place rule):
      // a residual a kernel wrote in the plain layout, added by a convolution whose result
      // another convolution reads in oneDNN's layout, so the residual is reordered from a
      // copy; and one added where both are in oneDNN's layout.
      {"conv over the residual it adds, plain and in oneDNN's layout",
       [](Model& m) {
         auto weights = [&](const std::string& name, ir::Shape shape) {
           return m.param(name, std::move(shape), Init::uniform(-0.2, 0.2));
         };
         Tensor r = tanh(m.input("r", {2, 16, 6, 6}));
         Tensor y = conv(m.input("x", {2, 16, 6, 6}), weights("w1", {16, 16, 3, 3}), {{}, {1, 1, 1, 1}, {}, 1}) + r;
         Tensor z = relu(conv(y, weights("w2", {16, 16, 1, 1})));
         Tensor out = conv(z, weights("w3", {16, 16, 1, 1})) + y;
         return conv(out, weights("w4", {8, 16, 1, 1}));
       }},
      // The activations a call applies besides relu and clip: SiLU and hard swish (x read
      // twice), tanh, sigmoid; activations passed between the convolutions in oneDNN's
      // layout.
      {"conv epilogues: SiLU, hard swish, tanh, sigmoid",
       [](Model& m) {
         auto weights = [&](const std::string& name, ir::Shape shape) {
           return m.param(name, std::move(shape), Init::uniform(-0.2, 0.2));
         };
         auto splat = [&](double v, const Tensor& like) { return broadcast(m.scalar(v), like.shape(), {}); };
         Tensor a = conv(m.input("x", {2, 16, 6, 6}), weights("w1", {16, 16, 3, 3}), {{}, {1, 1, 1, 1}, {}, 1});
         Tensor b = conv(a * sigmoid(a), weights("w2", {16, 16, 1, 1}));
         Tensor hard_swish =
             b * maximum(minimum(b * splat(1.0 / 6.0, b) + splat(0.5, b), splat(1.0, b)), splat(0.0, b));
         Tensor c = tanh(conv(hard_swish, weights("w3", {16, 16, 1, 1})));
         return sigmoid(conv(c, weights("w4", {8, 16, 1, 1})));
       }},
      {"conv's gradients on oneDNN: stride 2, asymmetric pads, dilation 2, groups 2",
       [](Model& m) {
         return conv_with_gradients(m, m.input("x", {2, 4, 9, 8}), m.input("w", {6, 2, 3, 2}),
                                    {{2, 1}, {1, 0, 2, 1}, {2, 1}, 2});
       }},
      {"conv 1x1",
       [](Model& m) {
         return conv(m.input("x", {2, 5, 4, 4}), m.input("w", {3, 5, 1, 1}));
       }},
      {"depthwise conv, dilated",
       [](Model& m) {
         return conv(m.input("x", {2, 3, 7, 7}), m.input("w", {3, 1, 3, 3}), {{}, {2, 2, 2, 2}, {2, 2}, 3});
       }},
      {"conv 1-D and 3-D",
       [](Model& m) {
         Tensor a = conv(m.input("a", {2, 3, 10}), m.input("wa", {4, 3, 3}), {{2}, {1, 1}, {}, 1});
         Tensor b = conv(m.input("b", {1, 2, 4, 5, 3}), m.input("wb", {2, 2, 2, 2, 2}), {{1, 2, 1}, {}, {}, 1});
         return reduce_sum(a, {1, 2}) + reduce_sum(b, {1, 2, 3, 4});
       }},
      {"max_pool ceil_mode, avg_pool with pads",
       [](Model& m) {
         Tensor x = m.input("x", {2, 3, 7, 7});
         return max_pool(x, {3, 3}, {{2, 2}, {1, 1, 1, 1}, {}, true}) +
                avg_pool(x, {3, 3}, {{2, 2}, {1, 1, 1, 1}, {}, true});
       }},
      // Padded windows over rows long enough for vectors: the row walk runs the columns
      // that read the padding apart from those between (codegen/cpu).
      {"padded max_pool over long rows, stride 1",
       [](Model& m) {
         return max_pool(m.input("x", {2, 3, 9, 41}), {3, 3}, {{1, 1}, {1, 1, 1, 1}, {}, false});
       }},
      {"padded max_pool over long rows, stride 3, dilation 2, asymmetric pads, ceil_mode",
       [](Model& m) {
         return max_pool(m.input("x", {2, 3, 9, 70}), {3, 4}, {{2, 3}, {1, 2, 0, 1}, {1, 2}, true});
       }},
      {"padded avg_pool over long rows, with and without the padding counted",
       [](Model& m) {
         Tensor x = m.input("x", {1, 4, 6, 45});
         return avg_pool(x, {3, 5}, {{1, 1}, {1, 2, 1, 2}, {}, false, false}) +
                avg_pool(x, {3, 5}, {{1, 1}, {1, 2, 1, 2}, {}, true, true});
       }},
      {"padded max_pool in 1-D, ceil_mode",
       [](Model& m) {
         return max_pool(m.input("a", {2, 3, 50}), {5}, {{2}, {2, 2}, {}, true});
       }},
      {"padded max_pool in 3-D",
       [](Model& m) {
         return max_pool(m.input("b", {1, 2, 4, 5, 37}), {2, 3, 3}, {{1, 1, 1}, {1, 1, 1, 0, 1, 1}, {}, false});
       }},
      {"pad and batch_norm",
       [](Model& m) {
         Tensor x = pad(m.input("x", {2, 3, 4, 4}), {0, 0, 1, -1, 0, 0, 0, 2}, 0.5);
         Tensor var = abs(m.input("var", {3})) + 0.5;
         return batch_norm(x, m.input("s", {3}), m.input("b", {3}), m.input("mean", {3}), var);
       }},
  };
  for (const auto& [name, body] : cases) {
    auto g = one_op(body);
    REQUIRE(g);
    kiln::testing::check_against_interpreter(name, *g, kiln::testing::seeded_arguments(*g, 3));
  }
}

// oneDNN falls back to its reference code (tens of times slower) for what its kernels do
// not take, without an error: a depthwise convolution asked for a channel-blocked result
// got it, and MobileNetV2 ran 35x slower, with every test passing.
TEST_CASE("convolutions of every kind run on oneDNN's optimized kernels, not its reference code", "[window][onednn]") {
  Model m("kinds", 1);
  Tensor image = m.input("image", {1, 3, 32, 32});
  auto weights = [&](const std::string& name, ir::Shape shape) {
    return m.param(name, std::move(shape), Init::uniform(-0.2, 0.2));
  };
  auto bias_relu = [&](const std::string& name, Tensor y) {
    return relu(y + broadcast(m.param(name, {y.shape()[1]}, Init::uniform(-1, 1)), y.shape(), {1}));
  };
  // A first layer of 3 channels (a channel-blocked result), a depthwise and a grouped
  // convolution, a 1x1 with a residual added, a strided one, and a dilated one.
  Tensor a = bias_relu("b0", conv(image, weights("w0", {16, 3, 3, 3}), {{2, 2}, {1, 1, 1, 1}, {}, 1}));
  Tensor d = bias_relu("b1", conv(a, weights("w1", {16, 1, 3, 3}), {{}, {1, 1, 1, 1}, {}, 16}));
  Tensor g = conv(d, weights("w2", {32, 8, 3, 3}), {{}, {1, 1, 1, 1}, {}, 2});
  Tensor p = conv(g, weights("w3", {32, 32, 1, 1})) + g;
  Tensor s = conv(p, weights("w4", {32, 32, 3, 3}), {{2, 2}, {1, 1, 1, 1}, {}, 1});
  m.output(conv(s, weights("w5", {8, 32, 3, 3}), {{}, {2, 2, 2, 2}, {2, 2}, 1}), "y");
  const std::vector<uint8_t> bytes = kiln::testing::compiled_artifact(m.build(), m.initial_values());
  auto view = format::read_artifact(bytes, "cpu-x86_64");
  if (!view.ok()) FAIL(view.error().message);
  int convolutions = 0;
  for (const format::Step* step : *view->metadata().steps()) {
    if (!step->conv()) continue;
    ++convolutions;
    const std::string implementation = runtime::cpu::conv_implementation(*step->conv(), {});
    INFO(step->name()->str() << ": " << implementation);
    CHECK(!implementation.empty());
    CHECK(implementation.rfind("ref", 0) != 0);
  }
  CHECK(convolutions == 6);
}

// A grouped convolution of several channels per group keeps its activations
// channels-last, as its neighbours have them: oneDNN's own choice (blocks of 4 channels)
// cost two reorders per run (ResNeXt-50 0.86-0.90 and RegNetY-400MF 0.66-0.68 of their
// time without them, docs/cpu.md).
TEST_CASE("grouped convolutions read and write channels-last", "[window][onednn]") {
  const runtime::cpu::DnnlApi* api = runtime::cpu::dnnl_api();
  REQUIRE(api);
  Model m("grouped", 1);
  Tensor x = m.input("x", {1, 32, 16, 16});
  Tensor w = m.param("w", {32, 4, 3, 3}, Init::uniform(-0.2, 0.2));
  m.output(relu(conv(x, w, {{}, {1, 1, 1, 1}, {}, 8})), "y");
  const std::vector<uint8_t> bytes = kiln::testing::compiled_artifact(m.build(), m.initial_values());
  auto view = format::read_artifact(bytes, "cpu-x86_64");
  if (!view.ok()) FAIL(view.error().message);
  const format::Step* step = view->metadata().steps()->Get(0);
  REQUIRE(step->conv());
  const auto layouts = runtime::cpu::conv_native_layouts(*step->conv(), {});
  REQUIRE(layouts);
  const dnnl_dim_t dims[] = {1, 32, 16, 16};
  dnnl_memory_desc_t last;
  REQUIRE(api->memory_desc_init_by_tag(&last, 4, dims, dnnl_f32, dnnl_acdb) == dnnl_success);
  CHECK(api->memory_desc_equal(&layouts->x, &last));
  CHECK(api->memory_desc_equal(&layouts->y, &last));
  CHECK(runtime::cpu::conv_implementation(*step->conv(), {}).rfind("ref", 0) != 0);
}

TEST_CASE("windowed ops: gradients against finite differences", "[window][autodiff]") {
  using kiln::testing::check_gradients;
  using V = const std::vector<Tensor>&;
  check_gradients("conv, stride 2, asymmetric pads, dilation 2, groups 2", {{2, 4, 6, 5}, {4, 2, 2, 3}},
                  [](Model&, V x) {
                    return conv(x[0], x[1], {{2, 1}, {1, 0, 0, 2}, {2, 1}, 2});
                  });
  check_gradients("conv 1-D, stride 3", {{1, 2, 8}, {3, 2, 3}}, [](Model&, V x) {
    return conv(x[0], x[1], {{3}, {2, 1}, {}, 1});
  });
  check_gradients("conv 3-D", {{1, 2, 3, 3, 4}, {2, 2, 2, 1, 2}}, [](Model&, V x) {
    return conv(x[0], x[1], {{1, 1, 2}, {1, 0, 0, 0, 1, 1}, {}, 1});
  });
  check_gradients("depthwise conv", {{2, 3, 5, 5}, {3, 1, 3, 3}}, [](Model&, V x) {
    return conv(x[0], x[1], {{2, 2}, {1, 1, 1, 1}, {}, 3});
  });
  check_gradients("max_pool, overlapping windows, pads, ceil_mode", {{2, 2, 5, 6}}, [](Model&, V x) {
    return max_pool(x[0], {3, 2}, {{2, 1}, {1, 1, 1, 0}, {1, 2}, true});
  });
  check_gradients("max_pool tiling its input, a row and a column left over", {{2, 3, 5, 7}}, [](Model&, V x) {
    return max_pool(x[0], {2, 2}, {{2, 2}, {}, {}, false});
  });
  check_gradients("max_pool tiling, padded, ceil_mode, 1-D and 3-D", {{1, 2, 7}, {1, 2, 3, 4, 5}}, [](Model&, V x) {
    Tensor a = max_pool(x[0], {3}, {{3}, {1, 1}, {}, true});
    Tensor b = max_pool(x[1], {2, 2, 3}, {{2, 2, 3}, {1, 0, 0, 0, 1, 1}, {}, false});
    return reduce_sum(a, {1, 2}) + reduce_sum(b, {1, 2, 3, 4});
  });
  check_gradients("avg_pool, pads excluded", {{1, 2, 5, 5}}, [](Model&, V x) {
    return avg_pool(x[0], {3, 3}, {{2, 2}, {1, 1, 1, 1}, {}, true, false});
  });
  check_gradients("avg_pool, pads counted", {{1, 2, 5, 4}}, [](Model&, V x) {
    return avg_pool(x[0], {2, 3}, {{2, 1}, {1, 1, 0, 1}, {}, false, true});
  });
  check_gradients("pad with crops", {{3, 4}}, [](Model&, V x) { return pad(x[0], {1, -1, -2, 2}, 0.5); });
  check_gradients("batch_norm", {{2, 3, 2, 2}, {3}, {3}, {3}, {3}},
                  [](Model&, V x) { return batch_norm(x[0], x[1], x[2], x[3], abs(x[4]) + 0.5); });
}

TEST_CASE("windowed ops: errors name the op, the shapes and the attribute", "[window]") {
  using kiln::testing::parse_error;
  auto one = [](const std::string& args, const std::string& def) {
    return parse_error("graph @e(" + args + ") {\n  " + def + "\n  return %y\n}\n");
  };
  CHECK(
      one("%x: f32[1,4,5,5], %w: f32[6,3,3,3]", "%y: f32[1,6,3,3] = conv(%x, %w) {groups=3}") ==
      "bad.kir:2:3: error: conv: groups=3 must divide the input channels C and the output channels O of x f32[1,4,5,5] "
      "and w f32[6,3,3,3]");
  CHECK(one("%x: f32[1,0,5,5], %w: f32[6,0,3,3]", "%y: f32[1,6,3,3] = conv(%x, %w)") ==
        "bad.kir:2:3: error: conv: x f32[1,0,5,5] has no input channels (a convolution needs C >= 1)");
  CHECK(
      one("%x: f32[1,4,5,5], %w: f32[6,3,3,3]", "%y: f32[1,6,3,3] = conv(%x, %w)") ==
      "bad.kir:2:3: error: conv: w f32[6,3,3,3] must have C/groups = 4 input channels for x f32[1,4,5,5] and groups=1");
  CHECK(one("%x: f32[1,1,2,2], %w: f32[1,1,3,3]", "%y: f32[1,1,1,1] = conv(%x, %w)") ==
        "bad.kir:2:3: error: conv: the window (extent 3 in spatial dim 0) is larger than the padded input (2 + 0 + 0) "
        "of x [1,1,2,2]");
  CHECK(one("%x: f32[4,5]", "%y: f32[4,5] = max_pool(%x) {window=[2]}") ==
        "bad.kir:2:3: error: max_pool: expected x: [N, C, D1..Dk] with 1 to 3 spatial dims, got [4,5]");
  CHECK(one("%x: f32[1,1,5,5]", "%y: f32[1,1,2,2] = max_pool(%x) {window=[2,2], strides=[2]}") ==
        "bad.kir:2:3: error: max_pool: strides must list 2 values (1 per spatial dim of x [1,1,5,5]), got [2]");
  CHECK(one("%x: f32[1,1,5,5]", "%y: f32[1,1,2,2] = avg_pool(%x) {window=[2,2], pads=[2,0,0,0]}") ==
        "bad.kir:2:3: error: avg_pool: pads [2,0,0,0] must be smaller than the window's extent 2 in each dim, so that "
        "every window covers the input");
  CHECK(one("%x: f32[1,1,5,5]", "%y: f32[1,1,2,2] = avg_pool(%x) {window=[2,2], dilations=[2,2]}") ==
        "bad.kir:2:50: error: avg_pool: unknown attribute 'dilations' (expected window, strides, pads, "
        "count_include_pad, "
        "ceil_mode)");
  CHECK(one("%x: f32[3,4]", "%y: f32[3,4] = pad(%x) {pads=[0,0,-4,0]}") ==
        "bad.kir:2:3: error: pad: pads [0,0,-4,0] crop more than dim 0 of x [3,4] holds");
  CHECK(one("%x: f32[3,4]", "%y: f32[3,4] = pad(%x) {pads=[1,1]}") ==
        "bad.kir:2:3: error: pad: pads must list 4 values (all begin pads, then all end pads, for x [3,4]), got [1,1]");
  CHECK(one("%x: f32[2,3], %s: f32[2]", "%y: f32[2,3] = batch_norm(%x, %s, %s, %s, %s)") ==
        "bad.kir:2:3: error: batch_norm: expected x: [N, C, ...] and scale, bias, mean, var: [C] of one type, got "
        "f32[2,3], "
        "f32[2], f32[2], f32[2], f32[2]");
}

TEST_CASE("nn conv layers: shapes, PyTorch's names, batch norm's running statistics in the step", "[window][nn]") {
  Model m("cnn", 1);
  Tensor x = m.input("x", {4, 1, 8, 8});
  Tensor labels = m.input("labels", {4}, DType::I32);
  nn::Conv2d conv1(m, "conv1", 1, 4, {3}, {{1, 1}, {1, 1}});
  nn::BatchNorm2d bn(m, "bn", 4, {1e-5, 0.1, true});
  nn::MaxPool2d pool({2, 2});
  nn::Flatten flatten;
  nn::Linear fc(m, "fc", 4 * 4 * 4, 3);
  Tensor h = pool(relu(bn(conv1(x))));
  CHECK(h.shape() == ir::Shape{4, 4, 4, 4});
  m.output(cross_entropy(fc(flatten(h)), labels), "loss");
  CHECK(conv1.weight.shape() == ir::Shape{4, 1, 3, 3});
  auto step = build_train_step(m, Adam{});
  if (!step.ok()) FAIL(step.error().message);
  auto& names = step->state_names;
  CHECK(std::find(names.begin(), names.end(), "bn.running_mean") != names.end());
  CHECK(std::find(names.begin(), names.end(), "conv1.weight") != names.end());
  std::map<std::string, ir::Tensor> state = step->initial_state;
  ir::Tensor images = kiln::testing::wave_input({4, 1, 8, 8}, 1);
  std::map<std::string, ir::Tensor> inputs{{"x", images},
                                           {"labels", ir::Tensor::from_ints({DType::I32, {4}}, {0, 1, 2, 1})}};
  // The running mean moves 0.1 of the way to the batch mean of conv1's output.
  ir::Graph forward = *m.build();
  auto conv_out = one_op([&](Model& f) {
    return conv(f.input("x", {4, 1, 8, 8}), f.input("w", {4, 1, 3, 3}), {{1, 1}, {1, 1, 1, 1}, {}, 1}) +
           broadcast(f.input("b", {4}), {4, 4, 8, 8}, {1});
  });
  REQUIRE(conv_out);
  auto y = kiln::testing::eval_ok(*conv_out,
                                  {{"x", images}, {"w", state.at("conv1.weight")}, {"b", state.at("conv1.bias")}});
  std::vector<double> expected(4, 0.0);
  for (int64_t k = 0; k < y[0].size(); ++k) expected[static_cast<size_t>((k / 64) % 4)] += y[0].floats[k] / 256 * 0.1;
  auto loss = run_train_step(*step, state, inputs);
  if (!loss.ok()) FAIL(loss.error().message);
  check_close(state.at("bn.running_mean"), "f32[4]", expected, 1e-5, 1e-6);
}

TEST_CASE("max_pool's gradient goes to the first maximum of each window", "[window][autodiff]") {
  // Ties: relu's zeros and equal maxima, in tiling and in overlapping windows.
  for (bool tiling : {true, false}) {
    INFO((tiling ? "tiling" : "overlapping"));
    Model m("ties");
    Tensor x = m.input("x", {1, 1, 2, 4});
    Tensor y =
        tiling ? max_pool(x, {2, 2}, {{2, 2}, {}, {}, false}) : max_pool(x, {2, 2}, {{1, 2}, {0, 0, 1, 0}, {}, false});
    m.output(reduce_sum(y, {0, 1, 2, 3}), "loss");
    ir::Graph g = *m.build();
    REQUIRE(passes::AutodiffPass({"x"}).run(g).ok());
    auto out =
        kiln::testing::eval_ok(g, {{"x", kiln::testing::tensor(DType::F32, {1, 1, 2, 4}, {1, 1, 0, 0, 0, 1, 0, 0})}});
    // Windows [[1,1],[0,1]] and [[0,0],[0,0]]; overlapping adds a padded third row whose
    // windows [[0,1],[pad,pad]] and [[0,0],[pad,pad]] pick the first 0 of the second row.
    check_close(out[1], "f32[1,1,2,4]",
                tiling ? std::vector<double>{1, 0, 1, 0, 0, 0, 0, 0} : std::vector<double>{1, 0, 1, 0, 0, 1, 1, 0});
  }
}
