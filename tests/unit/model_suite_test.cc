// The models suite of `kiln bench` (bench/models.h): each row's arguments at both sizes,
// and each quick row compiled for the CPU, run by the runtime and checked against the
// reference interpreter.
#include "bench/models.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "bench/suite.h"
#include "tests/unit/model_rows.h"
#include "tests/unit/run_util.h"

namespace kiln::testing {
namespace {

const char* kind_name(ir::ArgKind kind) {
  return kind == ir::ArgKind::Param ? "param" : kind == ir::ArgKind::State ? "state" : "input";
}

// The plain inputs as "name: type", and every result's type, for one readable comparison.
std::vector<std::string> inputs_of(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const ir::Arg& a : g.args)
    if (a.kind == ir::ArgKind::Input) out.push_back(g.value_name(a.value) + ": " + g.type(a.value).to_string());
  return out;
}

// Every param (or state) argument has a value of its exact type in `values`, and nothing
// else is there; returns the number of elements of the args of that kind.
int64_t check_values(const ir::Graph& g, ir::ArgKind kind, const std::map<std::string, ir::Tensor>& values) {
  int64_t elements = 0;
  size_t count = 0;
  for (const ir::Arg& a : g.args) {
    if (a.kind != kind) continue;
    const std::string& name = g.value_name(a.value);
    INFO(kind_name(kind) << " %" << name);
    REQUIRE(values.count(name) == 1);
    CHECK(values.at(name).type == g.type(a.value));
    elements += g.type(a.value).num_elements();
    ++count;
  }
  CHECK(values.size() == count);
  return elements;
}

int64_t count_args(const ir::Graph& g, ir::ArgKind kind) {
  return std::count_if(g.args.begin(), g.args.end(), [&](const ir::Arg& a) { return a.kind == kind; });
}

TEST_CASE("the models suite is a suite of kiln bench, with its rows", "[bench][models]") {
  auto names = bench::suite_names();
  CHECK(std::find(names.begin(), names.end(), "models") != names.end());
  std::vector<std::string> rows;
  for (const bench::SuiteRow& row : quick_rows()) rows.push_back(row.name);
  CHECK(rows == std::vector<std::string>{"gpt2_block", "gpt2_block_train", "bert_layer", "llama_block",
                                         "llama_block_train", "mlp_train", "resnet18", "cnn_train"});
  CHECK(bench::suite_rows("nope", true).error().message == "bench: no suite 'nope' (suites: fusion, models)");
  CHECK(bench::gpt2_block({2, 16, 60, 7}, false).error().message ==
        "bench: transformer sizes B=2 T=16 C=60 H=7 need positive sizes and H dividing C");
  CHECK(bench::llama_block({2, 16, 64, 4}, {3, 128}, false).error().message ==
        "bench: LLaMA sizes H=4 KV=3 D=16 hidden=128 need KV dividing H, an even D and a positive hidden size");
}

TEST_CASE("the full-size layers have their published sizes and parameter counts", "[bench][models]") {
  auto gpt2 = bench::gpt2_block({8, 512, 768, 12}, false);
  REQUIRE(gpt2.ok());
  CHECK(inputs_of(gpt2->graph) == std::vector<std::string>{"x: f32[8,512,768]"});
  CHECK(gpt2->graph.type(gpt2->graph.results.at(0)).to_string() == "f32[8,512,768]");
  // GPT-2 small's 124M parameters are 12 of these blocks (85M) plus the embeddings.
  CHECK(check_values(gpt2->graph, ir::ArgKind::Param, gpt2->weights) == 7'087'872);
  CHECK(gpt2->description.find("x: f32[8,512,768]") != std::string::npos);

  auto bert = bench::bert_layer({16, 128, 768, 12});
  REQUIRE(bert.ok());
  CHECK(inputs_of(bert->graph) == std::vector<std::string>{"x: f32[16,128,768]", "attention_mask: i32[16,128]"});
  CHECK(check_values(bert->graph, ir::ArgKind::Param, bert->weights) == 7'087'872);

  // q and o 768x768, k and v 256x768 (4 key-value heads of 64), the SwiGLU's three
  // 768x2048, two RMSNorm scales.
  auto llama = bench::llama_block({8, 512, 768, 12}, {}, false);
  REQUIRE(llama.ok());
  CHECK(inputs_of(llama->graph) == std::vector<std::string>{"x: f32[8,512,768]"});
  CHECK(check_values(llama->graph, ir::ArgKind::Param, llama->weights) == 6'292'992);
  CHECK(llama->weights.at("self_attn.k_proj.weight").type.shape == ir::Shape{256, 768});
}

TEST_CASE("the quick rows' arguments, weights and state", "[bench][models]") {
  for (const bench::SuiteRow& row : quick_rows()) {
    INFO(row.name);
    const ir::Graph& g = row.graph;
    CHECK(g.name == row.name);
    check_values(g, ir::ArgKind::Param, row.weights);
    check_values(g, ir::ArgKind::State, row.state);
    if (row.name == "gpt2_block") {
      CHECK(inputs_of(g) == std::vector<std::string>{"x: f32[2,16,64]"});
      CHECK(count_args(g, ir::ArgKind::Param) == 12);
      CHECK(g.type(g.results.at(0)).to_string() == "f32[2,16,64]");
    } else if (row.name == "gpt2_block_train") {
      CHECK(inputs_of(g) == std::vector<std::string>{"x: f32[2,16,64]", "target: f32[2,16,64]"});
      // 12 weights, Adam's step, and its two moments per weight.
      CHECK(count_args(g, ir::ArgKind::State) == 12 + 1 + 24);
      CHECK(g.results.size() == 1 + 37);
    } else if (row.name == "bert_layer") {
      CHECK(inputs_of(g) == std::vector<std::string>{"x: f32[2,16,64]", "attention_mask: i32[2,16]"});
      CHECK(count_args(g, ir::ArgKind::Param) == 16);
    } else if (row.name == "llama_block") {
      CHECK(inputs_of(g) == std::vector<std::string>{"x: f32[2,16,64]"});
      CHECK(count_args(g, ir::ArgKind::Param) == 9);
    } else if (row.name == "llama_block_train") {
      // 9 weights, Adam's step, and its two moments per weight.
      CHECK(count_args(g, ir::ArgKind::State) == 9 + 1 + 18);
    } else if (row.name == "mlp_train") {
      CHECK(inputs_of(g) == std::vector<std::string>{"x: f32[8,784]", "labels: i32[8]"});
      CHECK(count_args(g, ir::ArgKind::State) == 6 + 1 + 12);
    }
  }
}

// Positions of x[b, t, :] for t in [from, to) of batch row b, as flat element indices.
std::vector<int64_t> positions(const ir::Shape& shape, int64_t b, int64_t from, int64_t to) {
  std::vector<int64_t> out;
  for (int64_t t = from; t < to; ++t)
    for (int64_t c = 0; c < shape[2]; ++c) out.push_back((b * shape[1] + t) * shape[2] + c);
  return out;
}

double max_change(const ir::Tensor& a, const ir::Tensor& b, const std::vector<int64_t>& at) {
  double m = 0;
  for (int64_t k : at) m = std::max(m, std::fabs(a.get(k) - b.get(k)));
  return m;
}

TEST_CASE("the masks: GPT-2's and LLaMA's blocks are causal, BERT's layer ignores padded keys", "[bench][models]") {
  auto gpt2 = bench::gpt2_block({2, 16, 64, 4}, false);
  REQUIRE(gpt2.ok());
  auto args = arguments_of(*gpt2);
  ir::Tensor before = eval_ok(gpt2->graph, args)[0];
  const ir::Shape shape = args.at("x").type.shape;
  for (int64_t k : positions(shape, 1, 10, 16)) args.at("x").floats[static_cast<size_t>(k)] = 5;
  ir::Tensor after = eval_ok(gpt2->graph, args)[0];
  CHECK(max_change(before, after, positions(shape, 1, 0, 10)) == 0);
  CHECK(max_change(before, after, positions(shape, 1, 10, 16)) > 0.1);
  CHECK(max_change(before, after, positions(shape, 0, 0, 16)) == 0);

  auto bert = bench::bert_layer({2, 16, 64, 4});
  REQUIRE(bert.ok());
  args = arguments_of(*bert);
  ir::Tensor& mask = args.at("attention_mask");
  std::fill(mask.ints.begin(), mask.ints.end(), 1);
  mask.ints[3] = 0;  // batch row 0, key 3
  before = eval_ok(bert->graph, args)[0];
  for (int64_t k : positions(shape, 0, 3, 4)) args.at("x").floats[static_cast<size_t>(k)] = 7;
  after = eval_ok(bert->graph, args)[0];
  // Key 3 is padding: no other position sees the change; position 3 itself still does.
  CHECK(max_change(before, after, positions(shape, 0, 0, 3)) == 0);
  CHECK(max_change(before, after, positions(shape, 0, 4, 16)) == 0);
  CHECK(max_change(before, after, positions(shape, 0, 3, 4)) > 0.1);

  // The LLaMA block too, through its rotary embeddings and shared key-value heads.
  auto llama = bench::llama_block({2, 16, 64, 4}, {2, 128}, false);
  REQUIRE(llama.ok());
  args = arguments_of(*llama);
  before = eval_ok(llama->graph, args)[0];
  for (int64_t k : positions(shape, 1, 10, 16)) args.at("x").floats[static_cast<size_t>(k)] = 5;
  after = eval_ok(llama->graph, args)[0];
  CHECK(max_change(before, after, positions(shape, 1, 0, 10)) == 0);
  CHECK(max_change(before, after, positions(shape, 1, 10, 16)) > 0.1);
  CHECK(max_change(before, after, positions(shape, 0, 0, 16)) == 0);
}

TEST_CASE("each quick row runs on the CPU as the interpreter computes it", "[bench][models][cpu]") {
  check_quick_rows({});
}

// What the GPU tier would run: every quick row through kiln compile for CUDA (NVRTC, no
// GPU needed), in f32 and under autocast to bf16; and a CPU run in bf16.
TEST_CASE("each quick row compiles for CUDA in f32 and bf16, and runs on the CPU in bf16", "[bench][models][cuda]") {
  for (const bench::SuiteRow& row : quick_rows()) {
    for (const char* precision : {"f32", "bf16"}) {
      INFO(row.name << " " << precision << " for CUDA");
      CompileOptions options;
      options.target = "cuda";
      options.precision = precision;
      options.weights = row.weights;
      auto artifact = compile_to_artifact(row.graph, options);
      if (!artifact.ok()) FAIL(artifact.error().message);
    }
    INFO(row.name << " bf16 on the CPU");
    CompileOptions bf16;
    bf16.precision = "bf16";
    auto got = compile_and_run(row.graph, arguments_of(row), bf16);
    if (!got.ok()) FAIL(got.error().message);
    for (const ir::Tensor& t : *got)
      for (int64_t k = 0; k < t.size(); ++k) REQUIRE(std::isfinite(t.get(k)));
  }
}

}  // namespace
}  // namespace kiln::testing
