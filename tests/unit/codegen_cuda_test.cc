// CUDA code generation without a GPU: every kernel of every op test (also in f16 and
// bf16), element-type test, text-test model and 30 random graphs (fused and unfused) is
// emitted as CUDA C++ and compiled by NVRTC for sm_80 and sm_90; the compile cache and
// NVRTC's errors are checked as text. Running the kernels is the GPU tier's job
// (cuda_gpu_test).
#include <fmt/format.h>
#include <algorithm>
#include <filesystem>

#include "codegen/cuda/kernel_emitter.h"
#include "codegen/cuda/nvrtc_compile.h"
#include "codegen/cuda/scalar_ops.h"
#include "ir/reduction_split.h"
#include "tests/unit/op_graphs.h"
#include "tests/unit/random_graph.h"
#include "tests/unit/split_graphs.h"

using namespace kiln;
using kiln::testing::planned;

namespace {

std::string temp_dir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(base ? base : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

// Every graph the CPU backend's tests run, planned fused and unfused.
std::vector<std::pair<std::string, ir::Graph>> all_test_graphs() {
  std::vector<std::pair<std::string, ir::Graph>> graphs;
  for (bool fuse : {true, false}) {
    std::string how = fuse ? "fused" : "unfused";
    graphs.emplace_back("all ops " + how, planned(kiln::testing::all_ops_graph().first, fuse));
    // In f16 and bf16 (each f32 value made half): 8-lane vectors in the loop kernels.
    for (ir::DType half : {ir::DType::F16, ir::DType::BF16})
      graphs.emplace_back(fmt::format("all ops {} {}", ir::dtype_name(half), how),
                          planned(kiln::testing::in_precision(kiln::testing::all_ops_graph().first, half), fuse));
    graphs.emplace_back("dtypes " + how, planned(kiln::testing::dtypes_graph(), fuse));
    graphs.emplace_back("long rows " + how, planned(kiln::testing::long_rows_graph().first, fuse));
    for (const auto& [path, g] : kiln::testing::text_test_models())
      graphs.emplace_back(path + " " + how, planned(g, fuse));
    for (uint64_t seed = 1; seed <= 30; ++seed)
      graphs.emplace_back(fmt::format("random graph {} {}", seed, how),
                          planned(kiln::testing::random_graph(seed).graph, fuse));
  }
  return graphs;
}

}  // namespace

TEST_CASE("every generated kernel compiles with NVRTC for sm_80 and sm_90", "[codegen][cuda]") {
  // All kernels in one program (prefixed per graph), as one NVRTC compile per architecture.
  std::string source(codegen::cuda::prelude());
  std::vector<std::string> symbols;
  int kernels_in_rows = 0;
  auto graphs = all_test_graphs();
  for (size_t k = 0; k < graphs.size(); ++k) {
    const auto& [name, g] = graphs[k];
    INFO(name);
    std::string prefix = fmt::format("g{}_", k);
    auto program = codegen::cuda::emit_kernels(g, prefix);
    if (!program.ok()) FAIL(program.error().message);
    REQUIRE(program->launches.size() == g.program->steps.size());
    for (size_t s = 0; s < g.program->steps.size(); ++s) {
      const ir::Step& step = g.program->steps[s];
      const codegen::cuda::Launch& launch = program->launches[s];
      if (step.kind == ir::StepKind::Library) {
        CHECK(launch.block_threads == 0);
        continue;
      }
      const std::string& symbol = program->symbols[s];
      CHECK(symbol.starts_with(prefix));
      if (std::find(symbols.begin(), symbols.end(), symbol) == symbols.end()) symbols.push_back(symbol);
      CHECK(launch.block_threads % 32 == 0);
      CHECK(launch.block_threads <= 1024);
      CHECK(launch.grid_blocks >= 1);
      kernels_in_rows += step.kind == ir::StepKind::Reduction;
    }
    source += program->kernels;
  }
  CHECK(symbols.size() > 500);
  // Each step's kernels are written under a placeholder name, replaced where they are kept.
  CHECK(source.find("KILN_STEP_KERNEL") == std::string::npos);
  CHECK(kernels_in_rows > 50);
  codegen::cuda::NvrtcOptions options;
  options.archs = {"sm_80", "sm_90"};
  options.use_cache = false;
  auto objects = codegen::cuda::compile_program(source, options);
  if (!objects.ok()) FAIL(objects.error().message.substr(0, 20000));
  REQUIRE(objects->size() == 3);
  CHECK((*objects)[0].kind == "cubin");
  CHECK((*objects)[0].arch == "sm_80");
  CHECK((*objects)[1].arch == "sm_90");
  CHECK((*objects)[2].kind == "ptx");
  CHECK((*objects)[2].arch == "compute_90");
  std::string ptx((*objects)[2].bytes.begin(), (*objects)[2].bytes.end());
  int missing = 0;
  for (const std::string& s : symbols) missing += ptx.find(".entry " + s + "(") == std::string::npos;
  CHECK(missing == 0);
}

// Kernels store a bf16 value by its top half (kiln_bf16_bits), which is its rounding only
// when the value is a bf16 already: every elementwise op with a bf16 result must round
// it, or be one that picks an operand (or zero). A new op that does neither fails here.
TEST_CASE("every elementwise op with a bf16 result rounds it, so stores move its bits", "[codegen][cuda]") {
  using ir::DType;
  using ir::Op;
  for (Op op : ir::all_ops()) {
    const ir::OperandTypes types = ir::op_operand_types(op);
    if (ir::op_kind(op) != ir::OpKind::Elementwise || types == ir::OperandTypes::Compared ||
        types == ir::OperandTypes::Bool)
      continue;  // bool results
    INFO(ir::op_name(op));
    const size_t arity = ir::op_arity(op) < 0 ? 2 : static_cast<size_t>(ir::op_arity(op));
    std::vector<std::string> operands{"x", "y", "z"};
    operands.resize(arity);
    std::vector<DType> dtypes(arity, DType::BF16);
    ir::Attrs attrs;
    if (op == Op::Select) dtypes[0] = DType::Bool;
    if (op == Op::Cast) {
      attrs.set("to", DType::BF16);
      dtypes[0] = DType::F32;
    }
    auto e = codegen::cuda::elementwise(op, attrs, operands, dtypes, DType::BF16);
    if (!e.ok()) FAIL(e.error().message);
    const bool picks_operand = op == Op::Relu || op == Op::Select;
    if (!picks_operand) CHECK(e->starts_with("kiln_round_bf16("));
  }
  CHECK(codegen::cuda::to_storage(DType::BF16, "v") == "kiln_bf16_bits(v)");
}

TEST_CASE("the NVRTC cache: a miss, then a hit with the same bytes; --no-cache bypasses it", "[codegen][cuda][cache]") {
  std::string source =
      std::string(codegen::cuda::prelude()) + "extern \"C\" __global__ void k(float* a) { a[threadIdx.x] = 1.0f; }\n";
  codegen::cuda::NvrtcOptions options;
  options.cache_dir = temp_dir("nvrtc-cache");
  codegen::cuda::NvrtcStats first, second, bypass;
  auto a = codegen::cuda::compile_program(source, options, &first);
  REQUIRE(a.ok());
  CHECK(first.cache_misses == 1);
  CHECK(first.cache_hits == 0);
  // The cubin, the PTX and the source they were compiled from.
  CHECK(std::distance(std::filesystem::directory_iterator(options.cache_dir), {}) == 3);
  auto b = codegen::cuda::compile_program(source, options, &second);
  REQUIRE(b.ok());
  CHECK(second.cache_hits == 1);
  CHECK(second.cache_misses == 0);
  CHECK((*a)[0].bytes == (*b)[0].bytes);
  CHECK((*a)[1].bytes == (*b)[1].bytes);
  options.use_cache = false;
  auto c = codegen::cuda::compile_program(source, options, &bypass);
  REQUIRE(c.ok());
  CHECK(bypass.cache_misses == 1);
  // A changed option (another architecture) is another key.
  options.use_cache = true;
  options.archs = {"sm_80"};
  codegen::cuda::NvrtcStats other;
  REQUIRE(codegen::cuda::compile_program(source, options, &other).ok());
  CHECK(other.cache_misses == 1);
}

TEST_CASE("NVRTC errors and bad architectures are reported as text", "[codegen][cuda][errors]") {
  codegen::cuda::NvrtcOptions options;
  options.use_cache = false;
  auto bad = codegen::cuda::compile_program("extern \"C\" __global__ void k() { undeclared = 1; }\n", options);
  REQUIRE(!bad.ok());
  CHECK(
      bad.error().message.rfind("cuda codegen: NVRTC could not compile the program for sm_90 "
                                "(NVRTC_ERROR_COMPILATION):\nkiln.cu(1): error: identifier \"undeclared\" is undefined",
                                0) == 0);
  options.archs = {"sm90"};
  auto malformed = codegen::cuda::compile_program("", options);
  REQUIRE(!malformed.ok());
  CHECK(malformed.error().message == "cuda codegen: 'sm90' is not a GPU architecture (expected sm_NN, such as sm_90)");
  options.archs = {"sm_20"};
  auto old = codegen::cuda::compile_program("", options);
  REQUIRE(!old.ok());
  CHECK(old.error().message.rfind(
            "cuda codegen: NVRTC " + codegen::cuda::nvrtc_version() + " cannot compile for sm_20 (it supports: ", 0) ==
        0);
  options.archs = {};
  auto none = codegen::cuda::compile_program("", options);
  REQUIRE(!none.ok());
  CHECK(none.error().message == "cuda codegen: no GPU architecture given (for example --cuda-arch=sm_90)");
}

TEST_CASE("split reductions: a partial kernel per split step, its launch, and the step's kernel taking the parts",
          "[codegen][cuda][split]") {
  // [5000,300]: columns in 45 parts of 112 rows (the last 72), two tiles of 256 columns
  // (the second 44); [3,2^20]: 32 parts per row; [1536,2048] summed whole: 96 parts, also
  // beside a full-shape output, which the partial kernel writes (in 768 parts there).
  const std::vector<std::tuple<const char*, std::string, int64_t>> expected = {
      {kiln::testing::kBiasGradient, "columns", 45 * 2},
      {kiln::testing::kLongRows, "rows", 3 * 32},
      {kiln::testing::kLongRows, "rows", 96},
      {kiln::testing::kLossBesideOutput, "rows", 768},
  };
  std::string source(codegen::cuda::prelude());
  int k = 0;
  for (const char* text : {kiln::testing::kBiasGradient, kiln::testing::kLongRows, kiln::testing::kLossBesideOutput}) {
    ir::Graph g = planned(kiln::testing::parse_ok(text), true);
    std::string prefix = fmt::format("s{}_", k++);
    auto program = codegen::cuda::emit_kernels(g, prefix);
    if (!program.ok()) FAIL(program.error().message);
    for (size_t s = 0; s < g.program->steps.size(); ++s) {
      const ir::Step& step = g.program->steps[s];
      auto split = ir::reduction_split(g, step, ir::kCudaSplit);
      const codegen::cuda::Launch& launch = program->launches[s];
      INFO(step.name);
      if (!split) {
        CHECK(launch.partial_block_threads == 0);
        continue;
      }
      bool listed = false;
      for (const auto& [graph_text, walk, blocks] : expected)
        listed = listed ||
                 (graph_text == text && (split->walk == ir::ReductionSplit::Walk::Columns) == (walk == "columns") &&
                  launch.partial_grid_blocks == blocks);
      CHECK(listed);
      CHECK(launch.partial_block_threads == 256);
      const std::string& symbol = program->symbols[s];
      CHECK(program->kernels.find(symbol + "_partial(") != std::string::npos);
      CHECK(program->kernels.find("double* __restrict__ parts_scratch) {\n", program->kernels.find(symbol + "(")) !=
            std::string::npos);
    }
    source += program->kernels;
  }
  codegen::cuda::NvrtcOptions options;
  options.archs = {"sm_90"};
  options.use_cache = false;
  auto objects = codegen::cuda::compile_program(source, options);
  if (!objects.ok()) FAIL(objects.error().message.substr(0, 20000));
  std::string ptx((*objects).back().bytes.begin(), (*objects).back().bytes.end());
  int partial_entries = 0;
  for (size_t at = ptx.find(".entry "); at != std::string::npos; at = ptx.find(".entry ", at + 1))
    partial_entries += ptx.compare(ptx.find('(', at) - 8, 8, "_partial") == 0;
  CHECK(partial_entries == 4);
}
