// The .kiln artifact format: round trip, and refusal with a typed error of anything the
// runtime could not use safely.
#include <fmt/format.h>
#include <algorithm>
#include <random>

#include "compiler/artifact_contents.h"
#include "compiler/nn.h"
#include "compiler/train.h"
#include "passes/pipeline.h"
#include "tests/unit/test_util.h"

using namespace kiln;
using format::ArtifactErrorKind;

namespace {

// The artifact contents of a model through the default pipeline, with stand-in CPU code.
format::ArtifactContents contents_of(const Model& m, std::string_view pipeline_text = kiln::passes::kDefaultPipeline) {
  auto built = m.build();
  REQUIRE(built.ok());
  ir::Graph g = *built;
  auto pipeline = passes::pipeline_from_text(pipeline_text);
  REQUIRE(pipeline.ok());
  REQUIRE(pipeline->run(g).ok());
  auto contents = artifact_contents(g, m.initial_values(), "cpu-x86_64", ir::print(*built));
  if (!contents.ok()) FAIL(contents.error().message);
  contents->code.push_back({"elf", "x86_64", std::vector<uint8_t>(100, 0x7f), {}, {}});
  return *contents;
}

// A small MLP with its loss, plus a step counter kept as state: every kind of argument
// (inputs, params with weights, state updated in place), library steps and kernels.
format::ArtifactContents small_artifact() {
  Model m("small", 3);
  Tensor x = m.input("x", {4, 6});
  Tensor y = m.input("labels", {4}, ir::DType::I32);
  nn::Sequential net = nn::mlp(m, "fc", {6, 8, 3});
  m.output(cross_entropy(net(x), y), "loss");
  Tensor steps = m.state("steps", {}, Init::zeros());
  m.output(steps + 1.0, "steps.next");
  format::ArtifactContents contents = contents_of(m);
  REQUIRE(contents.weights.size() == 5);  // fc.0 and fc.1, weight and bias; the initial value of %steps
  return contents;
}

Error refusal(const std::vector<uint8_t>& bytes, std::string_view target = "") {
  auto r = format::read_artifact(bytes, target);
  REQUIRE(!r.ok());
  return r.error();
}

}  // namespace

TEST_CASE("an artifact reads back what was written", "[artifact]") {
  format::ArtifactContents c = small_artifact();
  std::vector<uint8_t> bytes = format::write_artifact(c);
  auto view = format::read_artifact(bytes, "cpu-x86_64");
  if (!view.ok()) FAIL(view.error().message);
  const format::Artifact& a = view->metadata();
  CHECK(view->format_major() == 1);
  CHECK(a.compiler_version()->str() == "kiln 0.1.0");
  CHECK(a.target()->str() == "cpu-x86_64");
  CHECK(a.values()->size() == c.values.size());
  CHECK(a.steps()->size() == c.steps.size());
  CHECK(a.arena_bytes() == c.arena_bytes);
  REQUIRE(a.code()->size() == 1);
  auto code = view->section(*a.code()->Get(0)->section());
  CHECK(std::vector<uint8_t>(code.begin(), code.end()) == c.code[0].bytes);
  REQUIRE(a.weights()->size() == 5);
  for (size_t i = 0; i < c.weights.size(); ++i) {
    auto w = view->section(*a.weights()->Get(static_cast<uint32_t>(i)));
    CHECK(std::vector<uint8_t>(w.begin(), w.end()) == c.weights[i]);
    CHECK(a.weights()->Get(static_cast<uint32_t>(i))->offset() % 64 == 0);
  }
  auto ir_text = view->section(*a.ir());
  CHECK(std::string(ir_text.begin(), ir_text.end()) == c.ir);
  // The steps' entry points name the kernels the code generator emits.
  int matmuls = 0;
  for (const auto* step : *a.steps()) matmuls += step->symbol()->str().rfind("matmul", 0) == 0;
  CHECK(matmuls == 2);
  CHECK(!a.allow_tf32());
  c.allow_tf32 = true;
  std::vector<uint8_t> tf32 = format::write_artifact(c);
  auto tf32_view = format::read_artifact(tf32, "cpu-x86_64");
  REQUIRE(tf32_view.ok());
  CHECK(tf32_view->metadata().allow_tf32());
}

TEST_CASE("every truncation of an artifact is refused with a typed error", "[artifact][errors]") {
  std::vector<uint8_t> bytes = format::write_artifact(small_artifact());
  for (size_t size = 0; size < bytes.size(); ++size) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size));
    Error e = refusal(cut);
    INFO("size " << size << ": " << e.message);
    CHECK((e.code == static_cast<int>(ArtifactErrorKind::Truncated) ||
           e.code == static_cast<int>(ArtifactErrorKind::BadMagic)));
  }
}

TEST_CASE("1,000 single-bit flips are each refused with a typed error", "[artifact][errors]") {
  std::vector<uint8_t> bytes = format::write_artifact(small_artifact());
  std::mt19937_64 rng(99);
  for (int i = 0; i < 1000; ++i) {
    std::vector<uint8_t> flipped = bytes;
    size_t bit = rng() % (bytes.size() * 8);
    flipped[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    auto r = format::read_artifact(flipped);
    INFO("bit " << bit << " of " << bytes.size() * 8);
    // Every byte is checked (header fields, checksummed sections, zero padding), so no
    // flip can go unseen.
    REQUIRE(!r.ok());
    CHECK(r.error().code >= static_cast<int>(ArtifactErrorKind::BadMagic));
    CHECK(r.error().code <= static_cast<int>(ArtifactErrorKind::WrongTarget));
  }
}

TEST_CASE("semantic checks refuse inconsistent metadata", "[artifact][errors]") {
  auto refused = [](format::ArtifactContents c) { return refusal(format::write_artifact(c)); };
  format::ArtifactContents good = small_artifact();
  {
    auto c = good;
    c.steps[1].inputs.push_back(static_cast<uint32_t>(c.values.size() + 5));
    Error e = refused(c);
    CHECK(e.code == static_cast<int>(ArtifactErrorKind::OutOfRange));
    CHECK(e.message ==
          fmt::format("artifact: out of range: step 1 reads value {} of {}", c.values.size() + 5, c.values.size()));
  }
  {
    auto c = good;
    // The first step that reads what the step before it produces, swapped with that step.
    auto reads_previous = [&](size_t s) {
      for (uint32_t v : c.steps[s].inputs)
        if (std::find(c.steps[s - 1].outputs.begin(), c.steps[s - 1].outputs.end(), v) != c.steps[s - 1].outputs.end())
          return true;
      return false;
    };
    size_t s = 1;
    while (s < c.steps.size() && !reads_previous(s)) ++s;
    REQUIRE(s < c.steps.size());
    std::swap(c.steps[s - 1], c.steps[s]);
    CHECK(refused(c).code == static_cast<int>(ArtifactErrorKind::UseBeforeProduce));
  }
  {
    auto c = good;
    c.weights[0].pop_back();
    Error e = refused(c);
    CHECK(e.code == static_cast<int>(ArtifactErrorKind::ShapeMismatch));
    CHECK(e.message.find("bytes of weights, its section has") != std::string::npos);
  }
  {
    auto c = good;
    for (auto& b : c.buffers)
      if (b.home == format::Home::Arena) b.offset = 0;
    Error e = refused(c);
    CHECK(e.code == static_cast<int>(ArtifactErrorKind::BadMemoryPlan));
    CHECK(e.message.find("overlap while both are live") != std::string::npos);
  }
  {
    auto c = good;
    c.arena_bytes = 64;
    CHECK(refused(c).code == static_cast<int>(ArtifactErrorKind::BadMemoryPlan));
  }
  {
    auto c = good;
    c.values[0].shape = {int64_t{1} << 30, int64_t{1} << 30};
    CHECK(refused(c).code == static_cast<int>(ArtifactErrorKind::OutOfRange));
  }
  {
    auto c = good;
    c.args[0].value = 100000;
    CHECK(refused(c).code == static_cast<int>(ArtifactErrorKind::OutOfRange));
  }
}

TEST_CASE("work items, state homes and state copies must fit the values they name", "[artifact][errors]") {
  auto refused = [](format::ArtifactContents c) { return refusal(format::write_artifact(c)); };
  const format::ArtifactContents good = small_artifact();
  auto kernel_step = [](format::ArtifactContents& c, format::StepKind kind) {
    for (auto& s : c.steps)
      if (s.kind == kind) return &s;
    FAIL("no step of that kind");
    return &c.steps[0];
  };
  for (auto kind : {format::StepKind::Loop, format::StepKind::Reduction}) {
    auto c = good;
    kernel_step(c, kind)->work_items += 1;  // one past what its outputs hold
    Error e = refused(c);
    CHECK(e.code == static_cast<int>(ArtifactErrorKind::ShapeMismatch));
    CHECK(e.message.find(" work items, which its outputs do not hold") != std::string::npos);
  }
  {
    auto c = good;
    kernel_step(c, format::StepKind::Loop)->outputs.clear();
    CHECK(refused(c).code == static_cast<int>(ArtifactErrorKind::MalformedMetadata));
  }
  {
    auto c = good;
    kernel_step(c, format::StepKind::Loop)->flops = -1;
    Error e = refused(c);
    CHECK(e.code == static_cast<int>(ArtifactErrorKind::OutOfRange));
    CHECK(e.message.find(" does -1 flops") != std::string::npos);
  }
  uint32_t state = 0;
  for (const auto& a : good.args)
    if (a.kind == format::ArgKind::State) state = a.value;
  {
    auto c = good;  // the state's update homed in a param instead
    for (auto& b : c.buffers)
      if (b.home == format::Home::State && b.state >= 0) b.state = static_cast<int32_t>(c.args[0].value);
    Error e = refused(c);
    CHECK(e.code == static_cast<int>(ArtifactErrorKind::BadMemoryPlan));
    CHECK(e.message.find("which is no state argument of its size") != std::string::npos);
  }
  {
    auto c = good;  // a state copy into an input
    c.state_copies.emplace_back(c.args[0].value, state);
    CHECK(refused(c).code == static_cast<int>(ArtifactErrorKind::BadMemoryPlan));
  }
  {
    auto c = good;  // the same value as two arguments
    c.args.push_back(c.args[0]);
    CHECK(refused(c).message.find(" is two arguments") != std::string::npos);
  }
}

TEST_CASE("golden messages for the refusals users meet most", "[artifact][errors]") {
  std::vector<uint8_t> bytes = format::write_artifact(small_artifact());
  CHECK(refusal(bytes, "cuda-sm_90").message ==
        "artifact: wrong target: compiled for cpu-x86_64, but this runtime runs cuda-sm_90");
  std::vector<uint8_t> text = {'g', 'r', 'a', 'p', 'h', ' ', '@', 'g'};
  CHECK(refusal(text).message == "artifact: bad magic: this is not a .kiln artifact");
  std::vector<uint8_t> newer = bytes;
  newer[10] = 22;  // minor version 22
  CHECK(refusal(newer).message == "artifact: unsupported version: format 1.22 (this runtime reads 1.0 to 1.21)");
  std::vector<uint8_t> corrupt = bytes;
  corrupt[200] ^= 0x10;
  Error e = refusal(corrupt);
  CHECK(e.code == static_cast<int>(ArtifactErrorKind::ChecksumMismatch));
  CHECK(e.message.rfind("artifact: checksum mismatch: ", 0) == 0);
  std::vector<uint8_t> shorter(bytes.begin(), bytes.end() - 1);
  CHECK(refusal(shorter).message ==
        fmt::format("artifact: truncated: the file is {} bytes, its header says {}", bytes.size() - 1, bytes.size()));
  std::vector<uint8_t> longer = bytes;
  longer.resize(bytes.size() + 64, 0);
  CHECK(refusal(longer).message == fmt::format("artifact: trailing bytes: the file is {} bytes, its header says {}",
                                               bytes.size() + 64, bytes.size()));
}

TEST_CASE("a batch leads every input and result, in a model without state", "[artifact][errors]") {
  Model m("classifier", 3);
  nn::Sequential net = nn::mlp(m, "fc", {6, 8, 3});
  m.output(net(m.input("x", {4, 6})), "logits");
  format::ArtifactContents c = contents_of(m);
  c.batch = 4;
  const std::vector<uint8_t> bytes = format::write_artifact(c);  // the view points into them
  auto view = format::read_artifact(bytes);
  REQUIRE(view.ok());
  CHECK(view->metadata().batch() == 4);
  c.batch = 3;
  Error e = refusal(format::write_artifact(c));
  CHECK(e.code == static_cast<int>(ArtifactErrorKind::ShapeMismatch));
  CHECK(e.message == "artifact: shape mismatch: input %x does not lead with the batch of 3");
  c.batch = -2;
  CHECK(refusal(format::write_artifact(c)).message == "artifact: out of range: the batch is -2");
  format::ArtifactContents with_state = small_artifact();
  with_state.batch = 4;
  CHECK(refusal(format::write_artifact(with_state)).message ==
        "artifact: shape mismatch: a model with state has no batch, but the batch is 4");
}

TEST_CASE("a state's initial value is a weights section of its size; an input has none", "[artifact][errors]") {
  format::ArtifactContents c = small_artifact();
  auto state =
      std::find_if(c.args.begin(), c.args.end(), [](const auto& a) { return a.kind == format::ArgKind::State; });
  REQUIRE(state != c.args.end());
  REQUIRE(state->weight == 4);
  CHECK(c.weights[4].size() == 4);  // f32[] steps, zero
  c.weights[4].push_back(0);
  Error e = refusal(format::write_artifact(c));
  CHECK(e.code == static_cast<int>(ArtifactErrorKind::ShapeMismatch));
  CHECK(e.message.find(" needs 4 bytes of weights, its section has 5") != std::string::npos);
  c = small_artifact();
  auto input =
      std::find_if(c.args.begin(), c.args.end(), [](const auto& a) { return a.kind == format::ArgKind::Input; });
  input->weight = 0;
  CHECK(refusal(format::write_artifact(c)).code == static_cast<int>(ArtifactErrorKind::OutOfRange));
}

TEST_CASE("a param without weights is an error naming it", "[artifact][errors]") {
  ir::Graph g =
      kiln::testing::parse_ok("graph @g(%x: f32[2], param %w: f32[2]) {\n  %y: f32[2] = mul(%x, %w)\n  return %y\n}\n");
  auto p = passes::pipeline_from_text("fusion,memory-plan");
  REQUIRE(p.ok());
  REQUIRE(p->run(g).ok());
  auto c = artifact_contents(g, {}, "cpu-x86_64", "");
  REQUIRE(!c.ok());
  CHECK(c.error().message ==
        "param %w: f32[2] has no value; give it in the weights (a safetensors file with a tensor named \"w\")");
  auto wrong = artifact_contents(g, {{"w", kiln::testing::tensor(ir::DType::F32, {3}, {1, 2, 3})}}, "cpu-x86_64", "");
  REQUIRE(!wrong.ok());
  CHECK(wrong.error().message == "param %w is f32[2], but its weights are f32[3]");
}

TEST_CASE("a library convolution's parameters must agree with each other and its operands", "[artifact][errors]") {
  Model m("conv", 1);
  Tensor x = m.input("x", {2, 3, 8, 8});
  m.output(conv(x, m.param("w", {4, 3, 3, 3}, Init::uniform(-1, 1)), {{2, 2}, {1, 1, 1, 1}, {}, 1}), "y");
  const format::ArtifactContents good = contents_of(m);
  REQUIRE(good.steps.size() == 1);
  REQUIRE(good.steps[0].conv);
  CHECK(format::read_artifact(format::write_artifact(good)).ok());
  auto refused = [](format::ArtifactContents c) { return refusal(format::write_artifact(c)); };
  {
    auto c = good;
    c.steps[0].conv->strides = {1, 1};  // 8 + 2 - 3 over stride 1 gives 8 positions, y has 4
    CHECK(refused(c).message ==
          "artifact: shape mismatch: the convolution of step 0 gives an output extent its input does not");
  }
  {
    auto c = good;
    c.steps[0].conv->groups = 2;
    CHECK(refused(c).message ==
          "artifact: shape mismatch: the convolution of step 0 has channels or groups that do not fit");
  }
  {
    auto c = good;
    c.steps[0].conv->pads_lo = {1, -1};
    CHECK(refused(c).message ==
          "artifact: shape mismatch: the convolution of step 0 has a stride, dilation or pad out of range");
  }
  {
    auto c = good;
    c.steps[0].conv->x = {2, 3, 8, 8, 1};
    CHECK(refused(c).message == "artifact: shape mismatch: the convolution of step 0 has shapes of the wrong ranks");
  }
  {
    auto c = good;
    c.steps[0].conv->kind = format::ConvKind::BackwardData;  // its operands are then (dy, w) -> dx
    CHECK(refused(c).message ==
          "artifact: shape mismatch: the convolution of step 0: operand 0 is not a tensor of the shape the "
          "convolution gives it");
  }
}

TEST_CASE("a convolution's post-ops must fit it: kinds, order, operands and bounds", "[artifact][errors]") {
  Model m("conv_epilogue", 1);
  Tensor x = m.input("x", {2, 3, 8, 8});
  Tensor y = conv(x, m.param("w", {4, 3, 3, 3}, Init::uniform(-1, 1)), {{2, 2}, {1, 1, 1, 1}, {}, 1});
  Tensor r = m.input("r", {2, 4, 4, 4});
  // y.shape() is a copy, so adding the param (which grows the value table) leaves it whole.
  m.output(relu(y + broadcast(m.param("b", {4}, Init::uniform(-1, 1)), y.shape(), {1}) + r), "y");
  const format::ArtifactContents good = contents_of(m);
  REQUIRE(good.steps.size() == 1);
  REQUIRE(good.steps[0].conv);
  using Kind = format::PostOpKind;
  REQUIRE(good.steps[0].conv->post_ops.size() == 3);
  CHECK(good.steps[0].conv->post_ops[0].kind == Kind::Bias);
  CHECK(good.steps[0].conv->post_ops[1].kind == Kind::Add);
  CHECK(good.steps[0].conv->post_ops[2].kind == Kind::Relu);
  CHECK(good.steps[0].inputs.size() == 4);
  CHECK(format::read_artifact(format::write_artifact(good)).ok());
  auto refused = [](format::ArtifactContents c) { return refusal(format::write_artifact(c)).message; };
  const std::string prefix = "artifact: shape mismatch: the convolution of step 0 ";
  {
    auto c = good;
    std::swap(c.steps[0].conv->post_ops[0], c.steps[0].conv->post_ops[2]);
    CHECK(refused(c) == prefix + "has a post-op reading the wrong input");
  }
  {
    auto c = good;
    c.steps[0].conv->post_ops.insert(c.steps[0].conv->post_ops.begin(), {Kind::Relu, -1, 0, 0});
    CHECK(refused(c) == prefix + "adds its bias after another post-op");
  }
  {
    auto c = good;
    c.steps[0].conv->post_ops.push_back({Kind::Clip, -1, 6, 0});
    CHECK(refused(c) == prefix + "clips to bounds out of order");
  }
  {
    auto c = good;
    std::swap(c.steps[0].inputs[2], c.steps[0].inputs[3]);  // the bias where the added tensor goes
    CHECK(refused(c) == prefix + "has a bias or per-channel operand that is not one value per output channel");
  }
  {
    auto c = good;
    c.steps[0].conv->kind = format::ConvKind::BackwardWeights;
    CHECK(refused(c) == prefix + "has post-ops but is not a forward convolution");
  }
  {
    auto c = good;
    c.steps[0].conv->post_ops.pop_back();
    c.steps[0].conv->post_ops.pop_back();  // the added tensor's input is left over
    CHECK(refusal(format::write_artifact(c)).message ==
          "artifact: malformed metadata: library step 0 needs 3 inputs and one output");
  }
  {  // the activations (format 1.9) read no input: the relu's place takes any of them
    for (Kind k : {Kind::Sigmoid, Kind::Tanh, Kind::Silu, Kind::HardSwish}) {
      auto c = good;
      c.steps[0].conv->post_ops[2].kind = k;
      CHECK(format::read_artifact(format::write_artifact(c)).ok());
    }
  }
  {
    auto c = good;
    c.steps[0].conv->post_ops[2].kind = static_cast<Kind>(static_cast<int>(Kind::MAX) + 1);
    CHECK(refused(c) == prefix + "has a post-op of an unknown kind");
  }
}

TEST_CASE("a matmul's post-ops must fit it: a bias and activations on an f32 result, for the CPU",
          "[artifact][errors]") {
  Model m("linear_gelu", 1);
  Tensor x = m.input("x", {4, 8});
  m.output(gelu(linear(x, m.param("w", {8, 6}, Init::uniform(-1, 1)), m.param("b", {6}, Init::uniform(-1, 1)))), "y");
  const format::ArtifactContents good =
      contents_of(m, "decompose,canonicalize,cse,dce,fusion{matmul_epilogues=onednn},memory-plan");
  REQUIRE(good.steps.size() == 1);
  using Kind = format::PostOpKind;
  REQUIRE(good.steps[0].matmul.post_ops.size() == 2);
  CHECK(good.steps[0].matmul.post_ops[0].kind == Kind::Bias);
  CHECK(good.steps[0].matmul.post_ops[0].input == 2);
  CHECK(good.steps[0].matmul.post_ops[1].kind == Kind::GeluErf);
  CHECK(good.steps[0].inputs.size() == 3);
  CHECK(format::read_artifact(format::write_artifact(good)).ok());
  // Without the option the call has none.
  CHECK(contents_of(m).steps[0].matmul.post_ops.empty());
  auto refused = [](format::ArtifactContents c, std::string_view target = "") {
    return refusal(format::write_artifact(c), target).message;
  };
  const std::string prefix = "artifact: shape mismatch: the matmul of step 0 ";
  {
    auto c = good;
    c.steps[0].matmul.post_ops[0].kind = Kind::ChannelAdd;
    CHECK(refused(c) == prefix + "has a post-op a matmul does not apply (ChannelAdd)");
  }
  {
    auto c = good;
    std::swap(c.steps[0].matmul.post_ops[0], c.steps[0].matmul.post_ops[1]);
    CHECK(refused(c) == prefix + "adds its bias after another post-op");
  }
  {
    auto c = good;
    c.steps[0].inputs[2] = c.steps[0].inputs[0];  // x, not one value per column
    CHECK(refused(c) == prefix + "has a bias or per-channel operand that is not one value per output channel");
  }
  {
    auto c = good;
    c.steps[0].matmul.post_ops.erase(c.steps[0].matmul.post_ops.begin());  // the bias's input is left over
    CHECK(refusal(format::write_artifact(c)).message ==
          "artifact: malformed metadata: library step 0 needs 2 inputs and one output");
  }
  {
    auto c = good;  // cublasLt's GELU is the tanh form
    c.target = "cuda-sm_80";
    CHECK(refused(c, "cuda-sm_80") ==
          prefix + "has post-ops that cublasLt does not apply (a bias, then at most one of Relu and GeluTanh)");
  }
}

TEST_CASE("on CUDA a matmul's epilogue is cublasLt's: a bias, then relu or tanh GELU (format 1.13)",
          "[artifact][errors]") {
  auto build = [](bool tanh, bool relu_after) {
    Model m("linear_gelu", 1);
    Tensor x = m.input("x", {4, 8});
    Tensor h = linear(x, m.param("w", {8, 6}, Init::uniform(-1, 1)), m.param("b", {6}, Init::uniform(-1, 1)));
    h = gelu(h, tanh);
    m.output(relu_after ? relu(h) : h, "y");
    auto built = m.build();
    REQUIRE(built.ok());
    return std::pair{*built, m.initial_values()};
  };
  auto contents = [](std::pair<ir::Graph, std::map<std::string, ir::Tensor>> model, std::string_view epilogues) {
    auto& [g, weights] = model;
    const std::string text = ir::print(g);
    auto pipeline = passes::pipeline_from_text(
        fmt::format("decompose,canonicalize,cse,dce,fusion{{matmul_epilogues={}}},memory-plan", epilogues));
    REQUIRE(pipeline.ok());
    REQUIRE(pipeline->run(g).ok());
    return artifact_contents(g, weights, "cuda-sm_80", text);
  };
  using Kind = format::PostOpKind;
  auto tanh = contents(build(true, false), "cublaslt");
  REQUIRE(tanh.ok());
  REQUIRE(tanh->steps.size() == 1);
  REQUIRE(tanh->steps[0].matmul.post_ops.size() == 2);
  CHECK(tanh->steps[0].matmul.post_ops[0].kind == Kind::Bias);
  CHECK(tanh->steps[0].matmul.post_ops[1].kind == Kind::GeluTanh);
  tanh->code.push_back({"cubin", "sm_80", std::vector<uint8_t>(100, 0), {}, {}});
  CHECK(format::read_artifact(format::write_artifact(*tanh), "cuda-sm_80").ok());
  // GELU's erf form and a relu after GELU stay kernels: the call adds the bias only where
  // a library call reads the sum, so here it has no epilogue at all.
  for (auto [tanh_form, relu_after] : {std::pair{false, false}, std::pair{true, true}}) {
    auto c = contents(build(tanh_form, relu_after), "cublaslt");
    REQUIRE(c.ok());
    CHECK(c->steps.size() == 2);
    CHECK(c->steps[0].matmul.post_ops.size() == (relu_after ? 2u : 0u));
  }
  // Fusion run with oneDNN's epilogues for a CUDA artifact leaves an op in the step that
  // cublasLt does not apply: refused, never dropped.
  auto mismatched = contents(build(false, false), "onednn");
  REQUIRE(!mismatched.ok());
  CHECK(mismatched.error().message ==
        "artifact: step matmul_0 computes ops after its matmul that cublasLt does not apply");
}

TEST_CASE("a bf16 matmul's epilogue (format 1.14) writes f32 or bf16, on the CPU only", "[artifact][errors]") {
  Model m("linear", 1);
  Tensor h = matmul(m.input("x", {4, 8}), m.input("w", {8, 6}));
  m.output(relu(h + m.param("b", {6}, Init::uniform(-1, 1))), "y");
  const format::ArtifactContents good =
      contents_of(m,
                  "decompose,autocast{precision=bf16},canonicalize,cse,dce,fusion{matmul_epilogues=onednn},"
                  "memory-plan");
  // The inputs' casts, then the matmul with its bias and relu, writing the f32 result.
  REQUIRE(good.steps.size() == 3);
  const auto& step = good.steps[2];
  REQUIRE(step.matmul.post_ops.size() == 2);
  CHECK(good.values[step.inputs[0]].dtype == format::DType::BF16);
  CHECK(good.values[step.outputs[0]].dtype == format::DType::F32);
  CHECK(format::read_artifact(format::write_artifact(good)).ok());
  auto refused = [](format::ArtifactContents c, std::string_view target = "") {
    return refusal(format::write_artifact(c), target).message;
  };
  const std::string prefix = "artifact: shape mismatch: the matmul of step 2 ";
  {
    auto c = good;
    c.steps[2].matmul.post_ops.clear();  // f32 sums without post-ops: no such call
    c.steps[2].inputs.resize(2);
    CHECK(refused(c) == prefix + "writes a result of another type than its operands'");
  }
  {
    auto c = good;
    c.target = "cuda-sm_80";
    c.code = {{"cubin", "sm_80", std::vector<uint8_t>(100, 0), {}, {}}};
    for (int s : {0, 1}) {  // the casts' launches
      c.steps[s].block_threads = 256;
      c.steps[s].grid_blocks = 1;
    }
    CHECK(refused(c, "cuda-sm_80") == prefix + "has post-ops on a bf16 or f16 product, which only the CPU applies");
  }
}

TEST_CASE("a bf16 convolution (format 1.15) takes operands alike, writing f32 only for post-ops",
          "[artifact][errors]") {
  Model m("conv_block", 1);
  Tensor x = m.input("x", {2, 4, 6, 6});
  Tensor y = conv(x, m.input("w", {4, 4, 3, 3}), {{1, 1}, {1, 1, 1, 1}, {}, 1});
  m.output(relu(y + broadcast(m.param("b", {4}, Init::uniform(-1, 1)), y.shape(), {1}) + x), "y");
  const format::ArtifactContents good =
      contents_of(m,
                  "decompose,lower-conv{keep_library=true},autocast{precision=bf16},canonicalize,cse,dce,"
                  "fusion{matmul_epilogues=onednn},memory-plan");
  // The inputs' casts, then the convolution with its bias, residual and relu, writing f32.
  REQUIRE(good.steps.size() == 3);
  const auto& step = good.steps[2];
  REQUIRE(step.conv);
  REQUIRE(step.conv->post_ops.size() == 3);
  CHECK(good.values[step.inputs[0]].dtype == format::DType::BF16);
  CHECK(good.values[step.inputs[1]].dtype == format::DType::BF16);
  CHECK(good.values[step.outputs[0]].dtype == format::DType::F32);
  CHECK(format::read_artifact(format::write_artifact(good)).ok());
  auto refused = [](format::ArtifactContents c) { return refusal(format::write_artifact(c)).message; };
  const std::string prefix = "artifact: shape mismatch: the convolution of step 2";
  const std::string types = " is not of its type (f32, bf16 or f16 operands alike; an f32 result for post-ops)";
  {
    auto c = good;
    c.values[c.steps[2].inputs[1]].dtype = format::DType::F16;  // weights of another type than x
    CHECK(refused(c) == prefix + ": operand 1" + types);
  }
  {
    auto c = good;
    c.steps[2].conv->post_ops.clear();  // f32 sums without post-ops: no such call
    c.steps[2].inputs.resize(2);
    CHECK(refused(c) == prefix + ": operand 2" + types);
  }
  {
    auto c = good;
    const uint32_t y = c.steps[2].outputs[0];
    c.values[y].dtype = format::DType::BF16;  // the f32 residual added in bf16's buffer
    for (auto& b : c.buffers) b.bytes /= b.value == y ? 2 : 1;
    CHECK(refused(c) == prefix + " adds an f32 tensor to a bf16 or f16 result (its sum post-op)");
  }
}

TEST_CASE("a matmul's leading dims and offsets (format 1.11) stay inside its operands, on both targets",
          "[artifact][errors]") {
  Model m("linear", 1);
  m.output(matmul(m.input("x", {4, 8}), m.param("w", {8, 6}, Init::uniform(-1, 1))), "y");
  const format::ArtifactContents good = contents_of(m);
  REQUIRE(good.steps.size() == 1);
  CHECK(good.steps[0].matmul.lda == 0);  // packed: written as 0
  auto refused = [](format::ArtifactContents c, std::string_view target = "") {
    return refusal(format::write_artifact(c), target).message;
  };
  const std::string prefix = "artifact: shape mismatch: the matmul of step 0 ";
  {
    auto c = good;
    c.steps[0].matmul.m = 2;
    c.steps[0].matmul.lda = 16;  // every other row of x
    CHECK(format::read_artifact(format::write_artifact(c)).ok());
  }
  {
    auto c = good;
    c.steps[0].matmul.lda = 7;
    CHECK(refused(c) == prefix + "has a leading dim below its operand's columns");
  }
  {
    auto c = good;
    c.steps[0].matmul.lda = 9;  // the last row ends past x
    CHECK(refused(c) == prefix + "reaches past operand 0");
  }
  {
    auto c = good;
    c.steps[0].matmul.b_offset = 1;
    CHECK(refused(c) == prefix + "reaches past operand 1");
  }
  {
    auto c = good;
    c.steps[0].matmul.n = 3;
    c.steps[0].matmul.ldb = 6;
    c.steps[0].matmul.b_offset = 3;  // w's last three columns: inside it
    CHECK(format::read_artifact(format::write_artifact(c)).ok());
    c.target = "cuda-sm_80";  // cuBLAS takes the same leading dims and offsets
    CHECK(format::read_artifact(format::write_artifact(c)).ok());
  }
}

TEST_CASE(
    "an attention backward step (format 1.18) reads dO inside its input, writes three f32 gradients; on CUDA "
    "(1.19) with its first kernel and scratch, in f32 only (bf16 and f16 on the CPU since 1.20)",
    "[artifact][errors]") {
  Model m("attention_backward", 1);
  Tensor q = m.input("q", {2, 3, 8, 4});
  Tensor k = m.input("k", {2, 3, 8, 4});
  Tensor v = m.input("v", {2, 3, 8, 4});
  Tensor y = attention(q, k, v, 0, true);
  m.output(reduce_sum(y * y, {0, 1, 2, 3}), "loss");
  const format::ArtifactContents good =
      contents_of(m, "autodiff{wrt=q,k,v},decompose,canonicalize,cse,dce,fusion{attention=cpu},memory-plan");
  size_t s = 0;
  while (s < good.steps.size() && !(good.steps[s].attention && good.steps[s].attention->gradient)) ++s;
  REQUIRE(s < good.steps.size());
  CHECK(good.steps[s].inputs.size() == 4);  // q, k, v, dO
  CHECK(good.steps[s].outputs.size() == 3);
  CHECK(format::read_artifact(format::write_artifact(good)).ok());
  auto refused = [](format::ArtifactContents c, std::string_view target = "") {
    return refusal(format::write_artifact(c), target).message;
  };
  const std::string prefix = "artifact: shape mismatch: the attention of step " + std::to_string(s) + " ";
  const std::string d_out =
      "reads dO past its input, from one neither f32 nor of its precision, or as a matrix with neither its rows "
      "nor its columns adjacent";
  {
    auto c = good;
    c.steps[s].attention->d_out_offset = 1;
    CHECK(refused(c) == prefix + d_out);
    c.steps[s].attention->d_out_offset = 0;
    c.steps[s].attention->d_out_strides = {96, 32, 2, 2};
    CHECK(refused(c) == prefix + d_out);
    c.steps[s].attention->d_out_strides = good.steps[s].attention->d_out_strides;
    c.steps[s].attention->out_strides = {96, 32, 4, 1};
    CHECK(refused(c) == prefix + "is a backward without dO's strides or where it writes, or with out_strides");
  }
  {
    auto c = good;
    c.steps[s].inputs.pop_back();
    CHECK(refused(c) == prefix + "needs 4 inputs and one to three outputs");
  }
  // Where it writes each gradient: inside an f32 output it has, rows or columns adjacent.
  const std::string writes =
      "writes a gradient past its output, into one neither f32 nor of its precision, or with neither its rows nor its "
      "columns adjacent";
  {
    auto c = good;
    c.values[c.steps[s].outputs[1]].dtype = format::DType::I32;
    CHECK(refused(c) == prefix + writes);
  }
  {
    auto c = good;
    c.steps[s].attention->gradient_offsets[2] = 1;
    CHECK(refused(c) == prefix + writes);
    c.steps[s].attention->gradient_offsets[2] = 0;
    c.steps[s].attention->gradient_strides[7] = 3;  // d(kᵀ)'s last stride: neither adjacent
    CHECK(refused(c) == prefix + writes);
  }
  {
    auto c = good;
    c.steps[s].attention->gradient_outputs[0] = 3;
    CHECK(refused(c) == prefix + "writes a gradient into an output it does not have");
    c.steps[s].attention->gradient_outputs.pop_back();
    CHECK(refused(c) == prefix + "writes other than three gradients");
  }
  {
    auto c = good;
    c.steps[s].attention->precision = format::DType::BF16;  // q, k, v and dO f32, rounded as read
    CHECK(format::read_artifact(format::write_artifact(c)).ok());
  }
  {
    auto c = good;
    c.target = "cuda-sm_80";
    for (auto& step : c.steps) {
      step.block_threads = 128;
      step.grid_blocks = 6;
    }
    const std::string no_kernel = prefix + "is a backward without its first kernel for CUDA or the scratch it writes";
    CHECK(refused(c, "cuda-sm_80") == no_kernel);
    // With them (1.19): three f32 values for each of its 2·3·8 query rows, past the buffers.
    auto& step = c.steps[s];
    step.partial_symbol = step.symbol + "_partial";
    step.partial_items = 48;
    step.partial_block_threads = 128;
    step.partial_grid_blocks = 6;
    step.partial_shared_bytes = 60000;
    step.scratch_offset = static_cast<int64_t>((c.arena_bytes + c.alignment - 1) / c.alignment * c.alignment);
    step.scratch_bytes = 48 * 12;
    c.arena_bytes = static_cast<uint64_t>(step.scratch_offset + step.scratch_bytes);
    CHECK(format::read_artifact(format::write_artifact(c), "cuda-sm_80").ok());
    // In bf16 or f16 too since 1.21 (its values stay f32 or of the precision).
    for (format::DType half : {format::DType::BF16, format::DType::F16}) {
      step.attention->precision = half;
      CHECK(format::read_artifact(format::write_artifact(c), "cuda-sm_80").ok());
    }
    step.attention->precision = format::DType::F32;
    step.scratch_bytes = 47 * 12;
    CHECK(refused(c, "cuda-sm_80") == no_kernel);
    step.scratch_bytes = 48 * 12;
    step.partial_shared_bytes = 300000;
    CHECK(refused(c, "cuda-sm_80") == "artifact: out of range: step " + std::to_string(s) +
                                          " takes 300000 bytes of dynamic shared memory (at most 232448)");
    // The CPU's runtime runs it in one call: no partial kernel.
    c = good;
    c.steps[s].partial_symbol = "kiln_attention_partial";
    CHECK(refused(c).starts_with("artifact: malformed metadata: step " + std::to_string(s) +
                                 " has scratch or a partial kernel, which only a split reduction step or a CUDA "
                                 "attention backward has"));
  }
}

TEST_CASE("an attention step (format 1.12) reads inside its operands, f32 and bool masks; on CUDA in half precision",
          "[artifact][errors]") {
  Model m("attention", 1);
  Tensor q = m.input("q", {2, 3, 8, 4});
  Tensor k = m.input("k", {2, 3, 8, 4});
  Tensor v = m.input("v", {2, 3, 8, 4});
  m.output(attention(q, k, v, 0, true), "y");
  std::string pipeline(passes::kDefaultPipeline);
  pipeline.replace(pipeline.find("fusion"), 6, "fusion{attention=cpu}");
  const format::ArtifactContents good = contents_of(m, pipeline);
  REQUIRE(good.steps.size() == 1);
  REQUIRE(good.steps[0].attention);
  CHECK(good.steps[0].attention->transforms.size() == 2);  // the scale, then the causal mask
  CHECK(format::read_artifact(format::write_artifact(good)).ok());
  auto refused = [](format::ArtifactContents c, std::string_view target = "") {
    return refusal(format::write_artifact(c), target).message;
  };
  const std::string prefix = "artifact: shape mismatch: the attention of step 0 ";
  {
    auto c = good;
    c.steps[0].attention->k_offset = 1;
    CHECK(refused(c) == prefix + "reads q, k or v past its input or from one that is neither f32 nor of its precision");
  }
  {
    auto c = good;
    c.steps[0].attention->v_strides = {96, 32, 1, 9};  // v's rows adjacent, its columns 9 apart: past its end
    CHECK(refused(c) == prefix + "reads q, k or v past its input or from one that is neither f32 nor of its precision");
  }
  {
    auto c = good;
    c.steps[0].attention->q_strides = {96, 32, 2, 2};
    CHECK(refused(c) == prefix + "reads q, k or v as a matrix with neither its rows nor its columns adjacent");
  }
  {
    auto c = good;
    c.steps[0].attention->transforms[1].input = 3;
    CHECK(refused(c) == prefix + "has a transform reading the wrong input");
  }
  {
    auto c = good;
    c.steps[0].attention->transforms[0].kind = format::ScoreTransformKind::Add;
    c.steps[0].attention->transforms[0].input = 3;
    CHECK(refused(c) == prefix + "needs 4 inputs and one output");
    c.steps[0].inputs.push_back(c.steps[0].inputs[0]);  // q as the mask: f32 [2,3,8,4], not [.., 8, 8]
    c.steps[0].attention->transforms[0].strides = {96, 32, 8, 1};
    CHECK(refused(c) == prefix + "reads a mask past its input or of the wrong element type");
  }
  {
    auto c = good;
    c.steps[0].attention->queries = 0;
    CHECK(refused(c) == prefix + "has a dim out of range");
  }
  {
    // Format 1.14: a half precision takes q, k, v and the result in it or in f32.
    auto c = good;
    c.steps[0].attention->precision = format::DType::BF16;
    CHECK(format::read_artifact(format::write_artifact(c)).ok());
    c.values[c.steps[0].inputs[1]].dtype = format::DType::I32;  // k: neither f32 nor bf16 (of f32's size)
    CHECK(refused(c) == prefix + "reads q, k or v past its input or from one that is neither f32 nor of its precision");
    c.steps[0].attention->precision = format::DType::I32;
    CHECK(refused(c) == prefix + "computes in a type other than f32, bf16 and f16");
  }
  {
    auto c = good;
    c.values[c.steps[0].outputs[0]].dtype = format::DType::I32;  // an f32 attention's result
    CHECK(refused(c) == prefix + "writes a result that is not [batch.., T, Dv] of f32 or its precision");
  }
  {
    auto c = good;
    c.steps[0].attention->out_strides = {96, 4, 12, 1};  // [2, 8, 3·4] with the heads merged
    CHECK(format::read_artifact(format::write_artifact(c)).ok());
    c.steps[0].attention->out_strides = {96, 4, 12, 2};
    CHECK(refused(c) == prefix + "writes past its result");
    c.steps[0].attention->out_strides = {96, 32, 1, 8};
    CHECK(refused(c) == prefix + "writes rows whose elements are not adjacent");
  }
  {
    // CUDA runs bf16 and f16 attentions (format 1.16) and f32 ones (1.17) with the kernel
    // the compiler wrote.
    auto c = good;
    c.target = "cuda-sm_80";
    CHECK(refused(c, "cuda-sm_80") == prefix + "has no kernel launch for CUDA");
    c.steps[0].block_threads = 128;
    c.steps[0].grid_blocks = 6;
    CHECK(format::read_artifact(format::write_artifact(c), "cuda-sm_80").ok());
    c.steps[0].attention->precision = format::DType::BF16;
    CHECK(format::read_artifact(format::write_artifact(c), "cuda-sm_80").ok());
    // Dynamic shared memory (format 1.17): up to sm_90's 227 KB a block, none on the CPU.
    c.steps[0].shared_bytes = 78336;
    CHECK(format::read_artifact(format::write_artifact(c), "cuda-sm_80").ok());
    c.steps[0].shared_bytes = 232449;
    CHECK(refusal(format::write_artifact(c), "cuda-sm_80").message ==
          "artifact: out of range: step 0 takes 232449 bytes of dynamic shared memory (at most 232448)");
    c.steps[0].shared_bytes = -1;
    CHECK(refusal(format::write_artifact(c), "cuda-sm_80").message ==
          "artifact: out of range: step 0 takes -1 bytes of dynamic shared memory (at most 232448)");
    auto cpu = good;
    cpu.steps[0].shared_bytes = 16;
    CHECK(refusal(format::write_artifact(cpu)).message ==
          "artifact: out of range: step 0 takes 16 bytes of dynamic shared memory on the CPU");
  }
}

TEST_CASE("kernels in oneDNN's layouts belong to CPU loop steps over activations", "[artifact][errors]") {
  Model m("layouts", 1);
  Tensor a = conv(m.input("x", {1, 16, 8, 8}), m.param("w1", {16, 16, 1, 1}, Init::uniform(-1, 1)));
  Tensor p = max_pool(a, {2, 2}, {{2, 2}, {}, {}, false});
  m.output(conv(p, m.param("w2", {16, 16, 1, 1}, Init::uniform(-1, 1))), "y");
  const format::ArtifactContents good = contents_of(m);
  REQUIRE(good.steps.size() == 3);
  CHECK(good.steps[1].channel_layouts == std::vector<int32_t>{0, 8, 16});
  const std::vector<uint8_t> bytes = format::write_artifact(good);  // the view points into them
  auto read = format::read_artifact(bytes);
  if (!read.ok()) FAIL(read.error().message);
  const auto* layouts = read->metadata().steps()->Get(1)->channel_layouts();
  REQUIRE(layouts);
  CHECK(std::vector<int32_t>(layouts->begin(), layouts->end()) == std::vector<int32_t>{0, 8, 16});
  auto refused = [](format::ArtifactContents c) { return refusal(format::write_artifact(c)); };
  for (int32_t layout : {12, 4, -1}) {  // none of oneDNN's
    auto c = good;
    c.steps[1].channel_layouts = {8, layout};
    Error e = refused(c);
    CHECK(e.code == static_cast<int>(ArtifactErrorKind::MalformedMetadata));
    CHECK(e.message == fmt::format("artifact: malformed metadata: step 1 has a kernel in layout {} (oneDNN's are 0, "
                                   "channels-last, and blocks of 8 and 16)",
                                   layout));
  }
  {
    Model odd("odd", 1);  // 24 channels: channels-last and blocks of 8, not of 16
    Tensor b = conv(odd.input("x", {1, 16, 8, 8}), odd.param("w1", {24, 16, 1, 1}, Init::uniform(-1, 1)));
    Tensor q = max_pool(b, {2, 2}, {{2, 2}, {}, {}, false});
    odd.output(conv(q, odd.param("w2", {16, 24, 1, 1}, Init::uniform(-1, 1))), "y");
    format::ArtifactContents c = contents_of(odd);
    REQUIRE(c.steps[1].channel_layouts == std::vector<int32_t>{0, 8});
    c.steps[1].channel_layouts = {0, 16};
    CHECK(refused(c).message == fmt::format("artifact: malformed metadata: step 1 has a kernel over blocks of 16 "
                                            "channels, which value {} does not split into",
                                            c.steps[1].inputs[0]));
  }
  {
    Model se("se", 1);  // a global average pool between convolutions: a reduction, channels-last only
    Tensor b = conv(se.input("x", {1, 16, 8, 8}), se.param("w1", {16, 16, 1, 1}, Init::uniform(-1, 1)));
    se.output(conv(reduce_sum(b, {2, 3}, true), se.param("w2", {16, 16, 1, 1}, Init::uniform(-1, 1))), "y");
    format::ArtifactContents c = contents_of(se);
    REQUIRE(c.steps[1].kind == format::StepKind::Reduction);
    REQUIRE(c.steps[1].channel_layouts == std::vector<int32_t>{0});
    c.steps[1].channel_layouts = {0, 8};
    CHECK(refused(c).message ==
          "artifact: malformed metadata: step 1 has a kernel in layout 8 (a reduction step's is 0, channels-last)");
  }
  {
    format::ArtifactContents c = small_artifact();  // an MLP's loop step: its values are no activations
    for (auto& step : c.steps)
      if (step.kind == format::StepKind::Loop) {
        step.channel_layouts = {0};
        break;
      }
    CHECK(refused(c).message.find(" has kernels in oneDNN's layouts, but its output ") != std::string::npos);
  }
  auto c = good;
  c.steps[0].channel_layouts = {16};  // a library step
  CHECK(refused(c).message ==
        "artifact: malformed metadata: step 0 has kernels in oneDNN's layouts, which only a CPU loop or reduction step "
        "has");
}
