// End to end on the CPU: graphs compiled to artifacts, loaded by the runtime and run,
// against the reference interpreter; fused and unfused artifacts agree; one loaded
// model runs from 8 threads at once.
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "compiler/compile.h"
#include "compiler/model.h"
#include "compiler/nn.h"
#include "runtime/format/artifact.h"
#include "runtime/model.h"
#include "tests/unit/op_graphs.h"
#include "tests/unit/random_graph.h"
#include "tests/unit/run_util.h"
#include "tests/unit/test_util.h"

using namespace kiln;

namespace {

using kiln::testing::check_against_interpreter;
using kiln::testing::check_same;
using kiln::testing::host;
using kiln::testing::seeded_arguments;
using kiln::testing::tensor_of;

Result<std::vector<ir::Tensor>> compile_and_run(const ir::Graph& g, const std::map<std::string, ir::Tensor>& args,
                                                bool fuse) {
  CompileOptions options;
  options.fuse = fuse;
  return kiln::testing::compile_and_run(g, args, options);
}

}  // namespace

TEST_CASE("every text-test model: the compiled artifact, fused and unfused, gives the interpreter's values",
          "[runtime][e2e]") {
  auto models = kiln::testing::text_test_models();
  for (size_t k = 0; k < models.size(); ++k) {
    const auto& [path, g] = models[k];
    check_against_interpreter(path, g, seeded_arguments(g, kiln::testing::model_seed(path)));
  }
  CHECK(models.size() >= 20);
}

// kiln compile's own pipeline on each target (matmul views, epilogues and attention on the
// CPU; matmul views on CUDA), where the codegen tests plan with the plain default pipeline.
TEST_CASE("30 random graphs through kiln compile give the interpreter's values on the CPU, and compile for CUDA",
          "[runtime][e2e][random]") {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    kiln::testing::RandomGraph rg = kiln::testing::random_graph(seed);
    const std::string name = fmt::format("random graph {}", seed);
    check_against_interpreter(name, rg.graph, rg.inputs);
    for (bool fuse : {true, false}) {
      INFO(name << (fuse ? " fused" : " unfused") << " for CUDA");
      CompileOptions cuda;
      cuda.target = "cuda";
      cuda.fuse = fuse;
      for (const ir::Arg& a : rg.graph.args)
        if (a.kind == ir::ArgKind::Param)
          cuda.weights[rg.graph.value_name(a.value)] = rg.inputs.at(rg.graph.value_name(a.value));
      auto artifact = compile_to_artifact(rg.graph, cuda);
      if (!artifact.ok()) FAIL(artifact.error().message);
    }
  }
}

TEST_CASE("one loaded model, 8 threads x 200 runs with distinct inputs, each equal to its single-thread result",
          "[runtime][threads]") {
  Model m("mlp", 5);
  Tensor x = m.input("x", {16, 32});
  nn::Sequential net = nn::mlp(m, "fc", {32, 64, 10}, nn::Activation::Gelu);
  m.output(softmax(net(x)), "probs");
  auto g = m.build();
  REQUIRE(g.ok());
  CompileOptions options;
  options.weights = m.initial_values();
  auto artifact = compile_to_artifact(*g, options);
  if (!artifact.ok()) FAIL(artifact.error().message);
  auto model = runtime::Model::load_bytes(*artifact, {4});
  if (!model.ok()) FAIL(model.error().message);
  const auto single = kiln::testing::outputs_one_thread(**model, "x", {16, 32}, 1600);
  CHECK(kiln::testing::mismatches_across_threads(**model, "x", {16, 32}, 8, 200, single) == 0);
}

TEST_CASE("the runtime refuses bad inputs and bad artifacts with clear errors", "[runtime][errors]") {
  auto g = kiln::testing::parse_ok("graph @g(%x: f32[4]) {\n  %y: f32[4] = exp(%x)\n  return %y\n}\n");
  auto artifact = compile_to_artifact(g, {});
  REQUIRE(artifact.ok());
  auto model = runtime::Model::load_bytes(*artifact);
  REQUIRE(model.ok());
  auto missing = (*model)->run({});
  REQUIRE(!missing.ok());
  CHECK(missing.error().message == "run: missing input %x: f32[4]");
  auto shape = (*model)->run({{"x", {{"x", runtime::ElementType::F32, {5}}, std::vector<uint8_t>(20)}}});
  REQUIRE(!shape.ok());
  CHECK(shape.error().message == "run: input %x must be f32[4], got f32[5]");
  auto extra = (*model)->run({{"x", {{"x", runtime::ElementType::F32, {4}}, std::vector<uint8_t>(16)}},
                              {"z", {{"z", runtime::ElementType::F32, {4}}, std::vector<uint8_t>(16)}}});
  REQUIRE(!extra.ok());
  CHECK(extra.error().message == "run: the model has no input %z");
  // The same checks on the caller's buffers.
  std::vector<uint8_t> x(16), y(16);
  std::map<std::string, std::span<uint8_t>> out{{"y", std::span<uint8_t>(y)}};
  using Inputs = std::map<std::string, std::span<const uint8_t>>;
  auto message = [](const Status& s) { return s.ok() ? std::string("ok") : s.error().message; };
  CHECK(message((*model)->run(Inputs{}, out)) == "run: missing input %x: f32[4]");
  CHECK(message((*model)->run(Inputs{{"x", std::span<const uint8_t>(x.data(), 12)}}, out)) ==
        "run: the buffer for input %x has 12 bytes, not 16 (f32[4])");
  CHECK(message((*model)->run(Inputs{{"x", x}, {"z", x}}, out)) == "run: the model has no input %z");
  CHECK(message((*model)->run(Inputs{{"x", x}}, {})) == "run: no buffer for output %y: f32[4]");
  std::vector<uint8_t> extra_output(16);
  CHECK(message((*model)->run(Inputs{{"x", x}},
                              {{"y", std::span<uint8_t>(y)}, {"yy", std::span<uint8_t>(extra_output)}})) ==
        "run: the model has no output %yy");
  const float values[4] = {0, 1, -1, 2};
  std::memcpy(x.data(), values, 16);
  REQUIRE((*model)->run(Inputs{{"x", x}}, out).ok());
  float got[4];
  std::memcpy(got, y.data(), 16);
  for (int i = 0; i < 4; ++i) CHECK(got[i] == Approx(std::exp(values[i])).epsilon(1e-6));
  std::vector<uint8_t> corrupt = *artifact;
  corrupt[corrupt.size() / 2] ^= 0x40;
  auto refused = runtime::Model::load_bytes(corrupt);
  REQUIRE(!refused.ok());
  CHECK(refused.error().message.rfind("artifact: ", 0) == 0);
  auto file = runtime::Model::load_file("/nonexistent/m.kiln");
  REQUIRE(!file.ok());
  CHECK(file.error().message == "runtime: cannot read '/nonexistent/m.kiln': No such file or directory");
}

TEST_CASE("every op, compiled and run, gives the interpreter's values", "[runtime][ops]") {
  auto [g, args] = kiln::testing::all_ops_graph();
  check_against_interpreter("all ops", g, args);
}

TEST_CASE("long rows holding -inf and +inf: softmax, log_softmax, layer_norm and sums give the interpreter's values",
          "[runtime][rows]") {
  auto [g, args] = kiln::testing::long_rows_graph();
  auto expected = kiln::testing::eval_ok(g, args);
  // The rows are what the graph says: softmax is 0 at row 1's -inf elements, NaN over
  // row 2 (all -inf) and row 3 (+inf elements).
  int zeros = 0;
  for (int64_t k = 40000; k < 80000; ++k) zeros += expected[0].get(k) == 0.0;
  CHECK(zeros > 6000);  // x < -0.6: a fifth
  CHECK(std::isnan(expected[0].get(80000)));
  CHECK(std::isnan(expected[0].get(120000)));
  CHECK(expected[0].get(0) > 0.0);
  check_against_interpreter("long rows", g, args);
}

TEST_CASE("every element type compiles: f64, f16, bf16, i32, i64, bool, i8, u8", "[runtime][dtypes]") {
  auto g = kiln::testing::dtypes_graph();
  auto args = seeded_arguments(g, 5);
  auto expected = kiln::testing::eval_ok(g, args);
  auto got = compile_and_run(g, args, true);
  if (!got.ok()) FAIL(got.error().message);
  kiln::testing::check_dtypes_close(*got, expected);
}

TEST_CASE(
    "streaming stores: inputs and outputs at every alignment, split across threads, give the interpreter's values",
    "[runtime][streaming]") {
  // Sizes that split into several thread chunks (loops) with odd and even counts of
  // streamed blocks (written in two interleaved streams), and rows whose starts fall on
  // every 16-byte phase of a line, with outputs of three widths and a row output. The
  // softmax over rows of 576 (a last sum block of one chunk) is pipelined: each row's
  // outputs, %t and %u, are written during the next row's exp pass. layer_norm's sums over
  // rows of 576 are chunked, one row at a time.
  auto g = kiln::testing::parse_ok(
      R"(graph @stream(%x: f32[40003], %r: f32[61,1001], %q: f32[37,576], %a: f32[29,576], %c: f32[29,576], %w: f32[576], %b: f32[576]) {
  %two: f32[] = constant {value=2.0}
  %y: f32[40003] = mul(%x, %two)
  %d: f64[40003] = cast(%x) {to=f64}
  %zero: f32[] = constant {value=0.0}
  %p: bool[40003] = gt(%x, %zero)
  %s: f32[61,1001] = softmax(%r) {axis=-1}
  %m: f32[61] = reduce_max(%r) {axes=[1]}
  %e: f32[61,1001] = exp(%s)
  %t: f32[37,576] = softmax(%q) {axis=-1}
  %u: f32[37,576] = mul(%t, %two)
  %qm: f32[37] = reduce_max(%q) {axes=[1]}
  %h: f32[29,576] = add(%a, %c)
  %n: f32[29,576] = layer_norm(%h, %w, %b) {axis=-1, eps=1e-5}
  return %y, %d, %p, %s, %m, %e, %t, %u, %qm, %h, %n
}
)");
  auto args = seeded_arguments(g, 11);
  auto expected = kiln::testing::eval_ok(g, args);
  CompileOptions options;
  options.streaming_store_bytes = 0;  // stream every output the kernels can
  auto artifact = compile_to_artifact(g, options);
  if (!artifact.ok()) FAIL(artifact.error().message);
  auto model = runtime::Model::load_bytes(std::move(*artifact), {2});
  if (!model.ok()) FAIL(model.error().message);
  for (size_t offset : {0, 4, 8, 16, 24, 36, 60}) {
    INFO("input and output buffers " << offset << " bytes past a 64-byte boundary");
    std::vector<std::vector<uint8_t>> storage;
    auto buffer_at_offset = [&](size_t bytes) {
      storage.emplace_back(bytes + 128, 0);
      return storage.back().data() + (64 - reinterpret_cast<uintptr_t>(storage.back().data()) % 64) + offset;
    };
    std::map<std::string, std::span<const uint8_t>> inputs;
    for (const auto& [name, tensor] : args) {
      std::vector<uint8_t> bytes = ir::tensor_to_bytes(tensor);
      uint8_t* at = buffer_at_offset(bytes.size());
      std::copy(bytes.begin(), bytes.end(), at);
      inputs[name] = std::span<const uint8_t>(at, bytes.size());
    }
    std::map<std::string, std::span<uint8_t>> outputs;
    for (const runtime::TensorInfo& info : (*model)->outputs())
      outputs[info.name] =
          std::span<uint8_t>(buffer_at_offset(static_cast<size_t>(info.bytes())), static_cast<size_t>(info.bytes()));
    Status ran = (*model)->run(inputs, outputs);
    if (!ran.ok()) FAIL(ran.error().message);
    std::vector<ir::Tensor> got;
    for (const runtime::TensorInfo& info : (*model)->outputs())
      got.push_back(ir::tensor_from_bytes({static_cast<ir::DType>(info.type), info.shape}, outputs[info.name].data()));
    check_same(got, expected);
  }
}

TEST_CASE("two models loaded at once run their own kernels, whose names are the same", "[runtime][load]") {
  auto compile_text = [](const std::string& text) {
    auto artifact = compile_to_artifact(kiln::testing::parse_ok(text), CompileOptions{});
    REQUIRE(artifact.ok());
    auto model = runtime::Model::load_bytes(std::move(*artifact));
    REQUIRE(model.ok());
    return *model;
  };
  auto run_one = [](runtime::Model& m) {
    auto out = m.run({{"x", host(ir::Tensor::from_doubles({ir::DType::F32, {2}}, {1, 2}), "x")}});
    REQUIRE(out.ok());
    return tensor_of((*out)[0]).get(1);
  };
  auto twice = compile_text("graph @a(%x: f32[2]) {\n  %y: f32[2] = add(%x, %x)\n  return %y\n}\n");
  auto plus_one = compile_text(
      "graph @b(%x: f32[2]) {\n  %one: f32[] = constant {value=1.0}\n  %y: f32[2] = add(%x, %one)\n  return %y\n}\n");
  CHECK(run_one(*twice) == 4.0);
  CHECK(run_one(*plus_one) == 3.0);
  twice.reset();
  auto times_three = compile_text(
      "graph @c(%x: f32[2]) {\n  %three: f32[] = constant {value=3.0}\n  %y: f32[2] = mul(%x, %three)\n  return "
      "%y\n}\n");
  CHECK(run_one(*times_three) == 6.0);
  CHECK(run_one(*plus_one) == 3.0);
}

TEST_CASE("an arena larger than memory is a load error naming its bytes; the interpreter says the same of a value",
          "[runtime][memory]") {
  ir::Graph g = kiln::testing::parse_ok(R"(graph @huge(%a: f32[1000]) {
  %b: f32[100000000,1000] = broadcast(%a) {shape=[100000000,1000], dims=[1]}
  return %b
})");
  auto artifact = compile_to_artifact(g, {});
  REQUIRE(artifact.ok());
  auto model = runtime::Model::load_bytes(*artifact);
  REQUIRE(!model.ok());
  CHECK(model.error().message.rfind("cannot allocate 400000000000 bytes (372.5 GiB) for the arena: this machine has ",
                                    0) == 0);
  auto evaluated = ir::evaluate(g, {{"a", ir::Tensor::zeros({ir::DType::F32, {1000}})}});
  REQUIRE(!evaluated.ok());
  CHECK(evaluated.error().message.rfind(
            "cannot allocate 800000000000 bytes (745.1 GiB) for %b = broadcast: f32[100000000,1000] in the interpreter",
            0) == 0);
}

TEST_CASE("thread counts outside 0..kMaxThreads are load errors", "[runtime][threads]") {
  ir::Graph g = kiln::testing::parse_ok("graph @g(%x: f32[4]) {\n  %y: f32[4] = exp(%x)\n  return %y\n}");
  auto artifact = compile_to_artifact(g, {});
  REQUIRE(artifact.ok());
  for (int threads : {-1, runtime::kMaxThreads + 1, 1000000}) {
    auto model = runtime::Model::load_bytes(*artifact, {threads});
    REQUIRE(!model.ok());
    CHECK(model.error().message ==
          "runtime: threads must be from 1 to 1024, or 0 for one per hardware thread; got " + std::to_string(threads));
  }
  CHECK(runtime::Model::load_bytes(*artifact, {runtime::kMaxThreads}).ok());
}

TEST_CASE("nn::Linear in PyTorch's [out, in] layout: the transpose folds into the matmul call, y = x @ wT + b",
          "[runtime][nn]") {
  Model m("torch_layout", 3);
  Tensor x = m.input("x", {4, 3});
  nn::Linear fc(m, "fc", 3, 5, nn::LinearOptions{.layout = nn::WeightLayout::OutIn});
  m.output(fc(x), "y");
  CHECK(fc.weight.shape() == ir::Shape{5, 3});
  auto g = m.build();
  REQUIRE(g.ok());
  // PyTorch's weight [out, in] as the state_dict holds it.
  std::vector<double> w(15), b = {1, 2, 3, 4, 5};
  for (int o = 0; o < 5; ++o)
    for (int i = 0; i < 3; ++i) w[o * 3 + i] = o - i * 0.5;
  CompileOptions options;
  options.weights = {{"fc.weight", ir::Tensor::from_doubles({ir::DType::F32, {5, 3}}, w)},
                     {"fc.bias", ir::Tensor::from_doubles({ir::DType::F32, {5}}, b)}};
  auto artifact = compile_to_artifact(*g, options);
  REQUIRE(artifact.ok());
  auto view = format::read_artifact(*artifact);
  REQUIRE(view.ok());
  // One step: the matmul with its bias (the result is returned, so no kernel reads it),
  // and no transpose kernel.
  REQUIRE(view->metadata().steps()->size() == 1);
  CHECK(view->metadata().steps()->Get(0)->matmul()->trans_b());
  REQUIRE(view->metadata().steps()->Get(0)->matmul()->post_ops());
  CHECK(view->metadata().steps()->Get(0)->matmul()->post_ops()->size() == 1);
  auto model = runtime::Model::load_bytes(*artifact);
  REQUIRE(model.ok());
  ir::Tensor xv = kiln::testing::wave_input({4, 3}, 1);
  auto out = (*model)->run({{"x", host(xv, "x")}});
  REQUIRE(out.ok());
  ir::Tensor y = tensor_of((*out)[0]);
  for (int r = 0; r < 4; ++r)
    for (int o = 0; o < 5; ++o) {
      double want = b[o];
      for (int i = 0; i < 3; ++i) want += xv.floats[r * 3 + i] * w[o * 3 + i];
      CHECK(y.floats[r * 5 + o] == Approx(want).epsilon(1e-5));
    }
}

TEST_CASE("matmuls of baked-in weights with a bias and an activation, at few rows (sgemm) and many (packed)",
          "[runtime][matmul]") {
  // Below 64 rows the weights stay as they are and the post-ops apply after sgemm; from
  // 64 the weights are packed once for oneDNN's primitive, which applies them (matmul.cc).
  for (int64_t rows : {1, 7, 63, 64, 130}) {
    INFO(rows << " rows");
    const std::string text = fmt::format(R"(graph @g(%x: f32[{0},40], param %w: f32[40,72], param %b: f32[72],
                                                   param %w2: f32[72,24]) {{
      %h: f32[{0},72] = matmul(%x, %w)
      %bb: f32[{0},72] = broadcast(%b) {{shape=[{0},72], dims=[1]}}
      %a: f32[{0},72] = add(%h, %bb)
      %g: f32[{0},72] = gelu(%a) {{approximate="tanh"}}
      %y: f32[{0},24] = matmul(%g, %w2)
      %r: f32[{0},24] = relu(%y)
      return %r
    }})",
                                         rows);
    const ir::Graph g = kiln::testing::parse_ok(text);
    const std::vector<uint8_t> bytes =
        kiln::testing::compiled_artifact(g, kiln::testing::param_weights(g, kiln::testing::seeded_arguments(g, 5)));
    auto view = format::read_artifact(bytes, "cpu-x86_64");
    if (!view.ok()) FAIL(view.error().message);
    int with_post_ops = 0;
    for (const format::Step* s : *view->metadata().steps())
      with_post_ops += s->matmul() && s->matmul()->post_ops() && s->matmul()->post_ops()->size() > 0;
    CHECK(with_post_ops == 2);
    kiln::testing::check_against_interpreter("weights matmuls", g, kiln::testing::seeded_arguments(g, 5));
  }
}

TEST_CASE("a state update left out of a run's outputs stays in the state, in place or copied", "[runtime][state]") {
  // %n.next is written over %n in place (an elementwise update); %m.next, a matmul of %m
  // with itself, cannot be, so the runtime copies it into %m after the last step.
  ir::Graph g = kiln::testing::parse_ok(R"(graph @step(%x: f32[4], state %n: f32[4], state %m: f32[2,2]) {
  %n.next: f32[4] = add(%n, %x)
  %m.next: f32[2,2] = matmul(%m, %m)
  %s: f32[] = reduce_sum(%x) {axes=[0]}
  return %s, %n.next, %m.next
}
)");
  auto artifact = compile_to_artifact(g, {});
  REQUIRE(artifact.ok());
  auto loaded = runtime::Model::load_bytes(std::move(*artifact), {2});
  REQUIRE(loaded.ok());
  runtime::Model& model = **loaded;
  CHECK(model.output_states() == std::vector<std::string>{"", "n", "m"});
  auto floats_of = [](const runtime::HostTensor& t) {
    std::vector<float> v(t.data.size() / 4);
    std::memcpy(v.data(), t.data.data(), t.data.size());
    return v;
  };
  // [[1,1],[0,1]]: squared k times, [[1,2^k],[0,1]].
  runtime::HostTensor m0{{"m", runtime::ElementType::F32, {2, 2}}, std::vector<uint8_t>(16)};
  const float m0_values[4] = {1, 1, 0, 1};
  std::memcpy(m0.data.data(), m0_values, 16);
  REQUIRE(model.write_state("m", m0).ok());
  std::vector<float> x{1, 2, 3, 4}, s(1);
  const std::span<const uint8_t> x_bytes(reinterpret_cast<const uint8_t*>(x.data()), 16);
  const std::span<uint8_t> s_bytes(reinterpret_cast<uint8_t*>(s.data()), 4);
  using Inputs = std::map<std::string, std::span<const uint8_t>>;
  for (int run = 1; run <= 3; ++run) {
    REQUIRE(model.run(Inputs{{"x", x_bytes}}, {{"s", s_bytes}}).ok());
    CHECK(s[0] == 10.0f);
    auto n = model.read_state("n");
    REQUIRE(n.ok());
    CHECK(floats_of(*n) == std::vector<float>{1.0f * run, 2.0f * run, 3.0f * run, 4.0f * run});
    auto m = model.read_state("m");
    REQUIRE(m.ok());
    CHECK(floats_of(*m) == std::vector<float>{1, float(1 << run), 0, 1});
  }
  // Asked for, a state update is copied out as before.
  std::vector<float> n_out(4), m_out(4);
  REQUIRE(
      model
          .run(Inputs{{"x", x_bytes}}, {{"s", s_bytes},
                                        {"n.next", std::span<uint8_t>(reinterpret_cast<uint8_t*>(n_out.data()), 16)},
                                        {"m.next", std::span<uint8_t>(reinterpret_cast<uint8_t*>(m_out.data()), 16)}})
          .ok());
  CHECK(n_out == std::vector<float>{4, 8, 12, 16});
  CHECK(m_out == std::vector<float>{1, 16, 0, 1});
  // Any other output is still required.
  const Status missing = model.run(Inputs{{"x", x_bytes}}, {});
  REQUIRE(!missing.ok());
  CHECK(missing.error().message == "run: no buffer for output %s: f32[]");
}

TEST_CASE("state updates written by a reduction's epilogue, in place, give the interpreter's state run after run",
          "[runtime][state]") {
  const ir::Graph g = kiln::testing::parse_ok(kiln::testing::kEpilogueStateUpdates);
  for (bool fuse : {true, false}) {
    INFO((fuse ? "fused" : "unfused"));
    CompileOptions options;
    options.fuse = fuse;
    kiln::testing::check_state_updates(g, kiln::testing::seeded_arguments(g, 11), options, 3);
  }
}

TEST_CASE("a profiled run times every step and the copies after them, and writes what run() writes",
          "[runtime][profile]") {
  // A state update returned as an output and an output returned twice: both are copies.
  ir::Graph g = kiln::testing::parse_ok(R"(graph @counter(%x: f32[64], state %n: f32[64]) {
  %two: f32[] = constant {value=2}
  %y: f32[64] = mul(%x, %two)
  %n.next: f32[64] = add(%n, %y)
  %s: f32[] = reduce_sum(%n.next) {axes=[0]}
  return %s, %y, %y, %n.next
}
)");
  auto artifact = compile_to_artifact(g, {});
  REQUIRE(artifact.ok());
  auto model = runtime::Model::load_bytes(std::move(*artifact), {1});
  REQUIRE(model.ok());
  const std::vector<runtime::StepInfo>& steps = (*model)->steps();
  REQUIRE(steps.size() >= 2);
  CHECK(steps.back().kind == "copy");
  CHECK(steps.back().name == "copies");
  CHECK(steps.back().bytes > 0);
  for (size_t i = 0; i + 1 < steps.size(); ++i) {
    CHECK_FALSE(steps[i].ops.empty());
    CHECK(steps[i].bytes > 0);
    CHECK(steps[i].flops > 0);
  }
  std::vector<float> x(64, 1.5f);
  auto bytes = [](const std::vector<float>& v) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4);
  };
  std::vector<float> s(1), y1(64), y2(64), m(64), s_plain(1), y_plain(64), m_plain(64);
  auto span = [](std::vector<float>& v) {
    return std::span<uint8_t>(reinterpret_cast<uint8_t*>(v.data()), v.size() * 4);
  };
  // Two outputs share the name %y: one buffer; the profiled run and a plain run of the
  // same state give the same values.
  REQUIRE(
      (*model)->run({{"x", bytes(x)}}, {{"s", span(s_plain)}, {"y", span(y_plain)}, {"n.next", span(m_plain)}}).ok());
  auto profile = (*model)->profile({{"x", bytes(x)}}, {{"s", span(s)}, {"y", span(y1)}, {"n.next", span(m)}});
  REQUIRE(profile.ok());
  REQUIRE(profile->steps.size() == steps.size());
  double sum = 0, previous_end = 0;
  for (const runtime::StepTime& t : profile->steps) {
    CHECK(t.ms >= 0);
    CHECK(t.start_ms >= previous_end);
    previous_end = t.start_ms + t.ms;
    sum += t.ms;
  }
  CHECK(profile->total_ms >= sum);
  CHECK(profile->clock == "host steady_clock around each step");
  CHECK(y1 == y_plain);
  CHECK(m[0] == Approx(m_plain[0] + 3.0f));  // the state advanced by one run: n += 2x
  CHECK(s[0] == Approx(64 * m[0]));
  auto wrong = (*model)->profile({}, {});
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().message == "run: missing input %x: f32[64]");
}

TEST_CASE("reshapes index their operand block by block: split, merged, regrouped and unit dims", "[runtime][reshape]") {
  // Each reshape feeds an add and a transpose, so it is a movement inside a loop kernel,
  // walked a row of the last dim at a time (rows of at least 16).
  const std::vector<std::pair<ir::Shape, ir::Shape>> cases = {
      {{2, 5, 48}, {2, 5, 3, 16}},    // the head split of attention: C into H, D
      {{2, 3, 16, 17}, {2, 48, 17}},  // merged
      {{6, 40}, {40, 6}},             // regrouped: one block of both dims
      {{2, 1, 48}, {2, 3, 16}},       // a unit dim joins the block
      {{96}, {2, 3, 1, 16}},          // from flat
      {{2, 3, 32}, {2, 96, 1}},       // a trailing unit dim
  };
  for (const auto& [from, to] : cases) {
    ir::Shape perm_shape = to;
    std::swap(perm_shape[0], perm_shape[1]);
    std::string perm = "1,0";
    for (size_t d = 2; d < to.size(); ++d) perm += "," + std::to_string(d);
    auto shape_text = [](const ir::Shape& s) {
      std::string t;
      for (int64_t d : s) t += (t.empty() ? "" : ",") + std::to_string(d);
      return t;
    };
    const std::string text = fmt::format(R"(graph @g(%x: f32[{0}], %y: f32[{1}]) {{
  %r: f32[{1}] = reshape(%x) {{shape=[{1}]}}
  %a: f32[{1}] = add(%r, %y)
  %t: f32[{2}] = transpose(%a) {{perm=[{3}]}}
  return %t
}}
)",
                                         shape_text(from), shape_text(to), shape_text(perm_shape), perm);
    INFO(text);
    ir::Graph g = kiln::testing::parse_ok(text);
    kiln::testing::check_against_interpreter("reshape", g, kiln::testing::seeded_arguments(g, 3, 2));
  }
}

TEST_CASE("batched f32 matmuls, split across threads by batch or not, give the interpreter's values",
          "[runtime][threads]") {
  // Batch counts that divide the threads, that do not (3 on 2 threads: one call at a time),
  // a broadcast operand and folded transposes; on 1, 2 and 4 threads.
  const std::string text = R"(graph @batched(%a: f32[8,5,7], %b: f32[8,7,3], %c: f32[3,5,7], %d: f32[3,7,3],
                                             %e: f32[2,4,7,5], %f: f32[4,3,7]) {
    %ab: f32[8,5,3] = matmul(%a, %b)
    %cd: f32[3,5,3] = matmul(%c, %d)
    %et: f32[2,4,5,7] = transpose(%e) {perm=[0,1,3,2]}
    %ft: f32[4,7,3] = transpose(%f) {perm=[0,2,1]}
    %ef: f32[2,4,5,3] = matmul(%et, %ft)
    return %ab, %cd, %ef
  })";
  ir::Graph g = kiln::testing::parse_ok(text);
  const auto args = seeded_arguments(g, 11);
  const auto expected = kiln::testing::eval_ok(g, args);
  for (int threads : {1, 2, 4}) {
    INFO(threads << " threads");
    auto got = kiln::testing::compile_and_run(g, args, {}, {threads});
    if (!got.ok()) FAIL(got.error().message);
    check_same(*got, expected);
  }
  // From 8 threads at once, each run equal to the first (sgemm called from the pool's
  // threads concurrently).
  Model m("attention_scores", 3);
  Tensor q = m.input("x", {16, 32});
  Tensor k = m.param("k", {12, 32, 16}, Init::uniform(-1, 1));
  m.output(matmul(broadcast(q, {12, 16, 32}, {1, 2}), k), "scores");
  auto artifact = kiln::testing::compiled_artifact(m.build(), m.initial_values());
  auto model = runtime::Model::load_bytes(artifact, {2});
  if (!model.ok()) FAIL(model.error().message);
  const auto single = kiln::testing::outputs_one_thread(**model, "x", {16, 32}, 400);
  CHECK(kiln::testing::mismatches_across_threads(**model, "x", {16, 32}, 8, 50, single) == 0);
}
