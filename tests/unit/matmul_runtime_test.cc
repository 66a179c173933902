// Matmuls through the CPU runtime: every batch pattern against the interpreter, and the
// matmul library's threads bounded by the model's.
#include <dlfcn.h>

#include <thread>

#include "compiler/compile.h"
#include "runtime/cpu/host_cpu.h"
#include "runtime/cpu/matmul.h"
#include "runtime/format/artifact.h"
#include "runtime/model.h"
#include "tests/unit/autocast_graph.h"
#include "tests/unit/run_util.h"

using namespace kiln;
using kiln::testing::check_against_interpreter;
using kiln::testing::seeded_arguments;

namespace {

// g compiled with `options`, its params from `args` baked in as weights, and run twice
// through one session: the two runs' results are the same bytes. The artifact's bytes
// and the first run's results.
struct TwoRuns {
  std::vector<uint8_t> artifact;
  std::vector<ir::Tensor> results;
};
TwoRuns check_two_runs_agree(const ir::Graph& g, const std::map<std::string, ir::Tensor>& args,
                             CompileOptions options) {
  std::map<std::string, runtime::HostTensor> inputs;
  for (const ir::Arg& a : g.args) {
    const std::string& name = g.value_name(a.value);
    if (a.kind == ir::ArgKind::Param) options.weights[name] = args.at(name);
    else inputs[name] = kiln::testing::host(args.at(name), name);
  }
  auto artifact = compile_to_artifact(g, options);
  if (!artifact.ok()) FAIL(artifact.error().message);
  auto model = runtime::Model::load_bytes(*artifact, {});
  if (!model.ok()) FAIL(model.error().message);
  auto first = (*model)->run(inputs), second = (*model)->run(inputs);
  REQUIRE((first.ok() && second.ok()));
  TwoRuns runs{std::move(*artifact), {}};
  for (size_t i = 0; i < first->size(); ++i) {
    CHECK(first->at(i).data == second->at(i).data);
    runs.results.push_back(kiln::testing::tensor_of(first->at(i)));
  }
  return runs;
}

}  // namespace

TEST_CASE("matmuls of every batch pattern, folded into fewer GEMMs where they can be, give the interpreter's values",
          "[runtime][matmul]") {
  // tests/lit/cli/gemm_shapes.test shows the GEMM each becomes.
  const char* graphs[] = {
      "graph @g(%x: f32[8,16,32], %w: f32[32,24]) {\n  %y: f32[8,16,24] = matmul(%x, %w)\n  return %y\n}\n",
      "graph @g(%x: f32[2,3,5,7], %w: f32[7,4]) {\n  %y: f32[2,3,5,4] = matmul(%x, %w)\n  return %y\n}\n",
      "graph @g(%q: f32[4,3,6,5], %k: f32[4,3,5,6]) {\n  %s: f32[4,3,6,6] = matmul(%q, %k)\n  return %s\n}\n",
      "graph @g(%x: f32[8,6,4], %w: f32[6,9]) {\n  %t: f32[8,4,6] = transpose(%x) {perm=[0,2,1]}\n"
      "  %y: f32[8,4,9] = matmul(%t, %w)\n  return %y\n}\n",
      "graph @g(%x: f32[2,3,20,7], %w: f32[1,1,7,5]) {\n  %y: f32[2,3,20,5] = matmul(%x, %w)\n  return %y\n}\n",
      "graph @g(%x: f32[16,4], %w: f32[3,4,8]) {\n  %y: f32[3,16,8] = matmul(%x, %w)\n  return %y\n}\n",
      "graph @g(%x: f32[3,1,5,4], %w: f32[2,4,6]) {\n  %y: f32[3,2,5,6] = matmul(%x, %w)\n  return %y\n}\n",
      "graph @g(%x: f64[4,5,3], %w: f64[3,2]) {\n  %y: f64[4,5,2] = matmul(%x, %w)\n  return %y\n}\n",
  };
  for (const char* text : graphs) {
    INFO(text);
    ir::Graph g = kiln::testing::parse_ok(text);
    check_against_interpreter("matmul", g, seeded_arguments(g, 5));
  }
}

TEST_CASE("matmuls by baked-in weights, packed once per session, give the interpreter's values", "[runtime][matmul]") {
  // A linear layer with its rows folded into M, a transposed weight (tied embeddings), and
  // a weight that is A (not packed); each run twice through one session.
  const char* graphs[] = {
      "graph @g(%x: f32[2,5,48], param %w: f32[48,40]) {\n  %y: f32[2,5,40] = matmul(%x, %w)\n  return %y\n}\n",
      "graph @g(%x: f32[7,24], param %e: f32[33,24]) {\n  %t: f32[24,33] = transpose(%e) {perm=[1,0]}\n"
      "  %y: f32[7,33] = matmul(%x, %t)\n  return %y\n}\n",
      "graph @g(param %w: f32[6,9], %x: f32[9,4]) {\n  %y: f32[6,4] = matmul(%w, %x)\n  return %y\n}\n",
  };
  for (const char* text : graphs) {
    INFO(text);
    ir::Graph g = kiln::testing::parse_ok(text);
    const auto args = seeded_arguments(g, 9);
    check_against_interpreter("matmul by weights", g, args);
    check_two_runs_agree(g, args, {});
  }
}

TEST_CASE("bf16 matmuls by baked-in weights are packed once per session and give the autocast graph's values",
          "[runtime][matmul][half]") {
  // The weights stored in bf16 (only matmuls read them); the first graph's result is f32
  // after its cast, the second's feeds a matmul in bf16.
  const char* graphs[] = {
      "graph @g(%x: f32[2,5,48], param %w: f32[48,40]) {\n  %y: f32[2,5,40] = matmul(%x, %w)\n  return %y\n}\n",
      "graph @g(%x: f32[7,24], param %e: f32[33,24], param %w: f32[33,16]) {\n"
      "  %t: f32[24,33] = transpose(%e) {perm=[1,0]}\n  %h: f32[7,33] = matmul(%x, %t)\n"
      "  %y: f32[7,16] = matmul(%h, %w)\n  return %y\n}\n",
  };
  for (const char* text : graphs) {
    INFO(text);
    ir::Graph g = kiln::testing::parse_ok(text);
    const auto args = seeded_arguments(g, 4);
    CompileOptions options;
    options.precision = "bf16";
    const TwoRuns runs = check_two_runs_agree(g, args, options);
    // Where the CPU has bf16 dot products, oneDNN has an optimized primitive to pack for.
    auto view = format::read_artifact(runs.artifact, "cpu-x86_64");
    REQUIRE(view.ok());
    const auto* values = view->metadata().values();
    for (const format::Step* s : *view->metadata().steps()) {
      if (!s->matmul() || !runtime::host_has_cpu_feature("avx512bf16") ||
          runtime::cpu_matmul_library().rfind("oneDNN", 0) != 0)
        continue;
      const auto type = [&](uint32_t v) { return static_cast<runtime::ElementType>(values->Get(v)->dtype()); };
      CHECK(runtime::cpu::packed_weights_bytes(*s->matmul(), type(s->inputs()->Get(1)), type(s->outputs()->Get(0))) >
            0);
    }
    // The interpreter on the autocast graph, the weights rounded to bf16 as stored: the
    // products' f32 sums in another order round at most one unit of bf16 apart.
    const auto want = kiln::testing::autocast_values(g, args, "bf16");
    kiln::testing::check_same(runs.results, want, 1.0 / 128, 1.0 / 128);
  }
}

TEST_CASE("--threads bounds oneDNN's OpenMP threads too, per calling thread", "[runtime][threads][matmul]") {
  ir::Graph g = kiln::testing::parse_ok(R"(graph @g(%a: f32[64,64], %b: f32[64,64]) {
  %c: f32[64,64] = matmul(%a, %b)
  return %c
}
)");
  auto artifact = compile_to_artifact(g, {});
  REQUIRE(artifact.ok());
  if (runtime::cpu_matmul_library().rfind("oneDNN", 0) != 0) {
    WARN("skipped (f32 matmuls are not on oneDNN here): " << runtime::cpu_matmul_library());
    return;
  }
  // oneDNN's OpenMP runtime, loaded with it.
  void* gomp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(gomp);
  auto max_threads = reinterpret_cast<int (*)()>(dlsym(gomp, "omp_get_max_threads"));
  REQUIRE(max_threads);
  auto args = kiln::testing::seeded_arguments(g, 1);
  for (int threads : {1, 3}) {
    runtime::Options load;
    load.threads = threads;
    auto model = runtime::Model::load_bytes(*artifact, load);
    REQUIRE(model.ok());
    int seen = 0;
    std::thread caller([&] {  // a fresh thread, whose OpenMP count starts at the default
      auto out =
          (*model)->run({{"a", kiln::testing::host(args.at("a"), "a")}, {"b", kiln::testing::host(args.at("b"), "b")}});
      REQUIRE(out.ok());
      seen = max_threads();
    });
    caller.join();
    CHECK(seen == threads);
  }
  dlclose(gomp);
}
