// CPU targets: names checked before LLVM sees them, the features each artifact's code
// needs recorded, and the runtime's refusal to load code this CPU cannot run.
#include <algorithm>

#include "codegen/cpu/compile.h"
#include "codegen/cpu/cpu_target.h"
#include "compiler/artifact_contents.h"
#include "compiler/compile.h"
#include "ir/row_class.h"
#include "passes/pipeline.h"
#include "runtime/cpu/host_cpu.h"
#include "runtime/format/cpu_features.h"
#include "runtime/model.h"
#include "tests/unit/run_util.h"

using namespace kiln;

namespace {

const char* kExp = "graph @g(%x: f32[64]) {\n  %y: f32[64] = exp(%x)\n  return %y\n}";

bool holds(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

TEST_CASE("CPU names: unknown and 32-bit CPUs are errors before LLVM sees them", "[cpu]") {
  auto bogus = codegen::cpu::resolve_cpu("bogus");
  REQUIRE(!bogus.ok());
  CHECK(bogus.error().message ==
        "cpu codegen: unknown CPU 'bogus' (expected native, x86-64, x86-64-v2, x86-64-v3, x86-64-v4, or an x86-64 CPU "
        "LLVM knows, such as "
        "skylake-avx512 or znver4; 'kiln compile --cpu=help' lists them)");
  auto i386 = codegen::cpu::resolve_cpu("i386");
  REQUIRE(!i386.ok());
  CHECK(i386.error().message == "cpu codegen: 'i386' is a 32-bit CPU; kiln compiles 64-bit code (x86-64 or newer)");
  CHECK(!codegen::cpu::resolve_cpu("").ok());
  CHECK(cpu_list("x86-64-v3,,x86-64-v4").error().message ==
        "compile: --cpu 'x86-64-v3,,x86-64-v4' has an empty name in its list");
  CHECK(cpu_list("x86-64,x86-64").error().message == "compile: --cpu 'x86-64,x86-64' names x86-64 twice");
}

TEST_CASE("CPU features: the levels need what they define, and only what the runtime can check", "[cpu]") {
  auto base = codegen::cpu::resolve_cpu("x86-64");
  REQUIRE(base.ok());
  CHECK(base->required.empty());
  auto v3 = codegen::cpu::resolve_cpu("x86-64-v3");
  REQUIRE(v3.ok());
  CHECK(v3->required == std::vector<std::string>{"avx", "avx2", "bmi", "bmi2", "crc32", "cx16", "f16c", "fma", "lzcnt",
                                                 "movbe", "popcnt", "sahf", "sse3", "sse4.1", "sse4.2", "ssse3",
                                                 "xsave"});
  auto v4 = codegen::cpu::resolve_cpu("x86-64-v4");
  REQUIRE(v4.ok());
  for (const char* f : {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl", "evex512"})
    CHECK(holds(v4->required, f));
  // Every CPU LLVM knows resolves; what it enables beyond the table is turned off.
  for (const std::string& name : codegen::cpu::known_cpus()) {
    INFO(name);
    auto cpu = codegen::cpu::resolve_cpu(name);
    REQUIRE(cpu.ok());
    for (const std::string& f : cpu->required) CHECK(format::find_cpu_feature(f) != nullptr);
  }
  auto sapphire = codegen::cpu::resolve_cpu("sapphirerapids");
  REQUIRE(sapphire.ok());
  CHECK(holds(sapphire->required, "avx512fp16"));
  CHECK(sapphire->llvm_features.find("-amx-tile") != std::string::npos);
  CHECK(sapphire->llvm_features.find("+avx512fp16") != std::string::npos);
}

TEST_CASE("CPU features: kernels compile for every level and for the newest CPUs, with no feature LLVM drops",
          "[cpu]") {
  ir::Graph g = kiln::testing::parse_ok(kExp);
  for (const char* cpu : {"x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "skylake-avx512", "sapphirerapids",
                          "graniterapids", "znver4", "znver5", "arrowlake", "native"}) {
    INFO(cpu);
    CompileOptions options;
    options.cpu = cpu;
    auto artifact = compile_to_artifact(g, options);
    if (!artifact.ok()) FAIL(artifact.error().message);
  }
  CHECK(runtime::host_has_cpu_feature("sse3"));  // every x86-64 CPU made since 2005
  CHECK(!runtime::host_has_cpu_feature("not-a-feature"));
}

TEST_CASE("the runtime loads the kernels with the most features this CPU has, and refuses code it cannot run",
          "[cpu][runtime]") {
  ir::Graph g = kiln::testing::parse_ok(kExp);
  CompileOptions options;
  options.cpu = "x86-64,native";
  auto artifact = compile_to_artifact(g, options);
  REQUIRE(artifact.ok());
  auto view = format::read_artifact(*artifact);
  REQUIRE(view.ok());
  REQUIRE(view->metadata().code()->size() == 2);
  CHECK(view->metadata().code()->Get(0)->cpu()->str() == "x86-64");
  CHECK(view->metadata().code()->Get(0)->cpu_features()->size() == 0);
  CHECK(view->metadata().code()->Get(1)->cpu()->str() == "native");
  auto model = runtime::Model::load_bytes(*artifact);
  REQUIRE(model.ok());
  CHECK((*model)->code() == "native");  // this CPU has every feature of its own code

  // The same kernels, recorded as needing a feature no CPU has: refused, with its name.
  auto planned = passes::pipeline_from_text(kiln::passes::kDefaultPipeline);
  REQUIRE(planned.ok());
  ir::Graph p = g;
  REQUIRE(planned->run(p).ok());
  auto contents = artifact_contents(p, {}, "cpu-x86_64", kExp);
  REQUIRE(contents.ok());
  const auto* elf = view->metadata().code()->Get(1);
  auto code = view->section(*elf->section());
  contents->code.push_back(
      {"elf", "x86_64", std::vector<uint8_t>(code.begin(), code.end()), {"avx2", "kiln-test-feature"}, "future-cpu"});
  auto refused = runtime::Model::load_bytes(format::write_artifact(*contents));
  REQUIRE(!refused.ok());
  CHECK(refused.error().code == static_cast<int>(format::ArtifactErrorKind::MissingCpuFeatures));
  CHECK(refused.error().message.rfind(
            "artifact: missing CPU features: its kernels were compiled for --cpu=future-cpu and need ", 0) == 0);
  CHECK(refused.error().message.find("kiln-test-feature") != std::string::npos);
  CHECK(refused.error().message.ends_with(
      ", which this CPU lacks; compile for this machine with --cpu=x86-64-v3 or --cpu=native"));
  // With a runnable library beside it, that one is loaded.
  contents->code.push_back({"elf", "x86_64", std::vector<uint8_t>(code.begin(), code.end()), {}, "x86-64"});
  auto fallback = runtime::Model::load_bytes(format::write_artifact(*contents));
  REQUIRE(fallback.ok());
  auto out = (*fallback)->run(
      {{"x",
        kiln::testing::host(ir::Tensor::from_doubles({ir::DType::F32, {64}}, std::vector<double>(64, 1.0)), "x")}});
  REQUIRE(out.ok());
  float first = 0;
  std::memcpy(&first, (*out)[0].data.data(), 4);
  CHECK(first == Approx(2.718281828f));
}

TEST_CASE("each kernel's signature is checked against the metadata before the kernel runs", "[cpu][runtime]") {
  ir::Graph g =
      kiln::testing::parse_ok("graph @g(%x: f32[64], %z: f32[8]) {\n  %y: f32[64] = exp(%x)\n  return %y, %z\n}");
  auto planned = passes::pipeline_from_text(kiln::passes::kDefaultPipeline);
  REQUIRE(planned.ok());
  REQUIRE(planned->run(g).ok());
  auto contents = artifact_contents(g, {}, "cpu-x86_64", "");
  REQUIRE(contents.ok());
  auto library = codegen::cpu::compile_kernels(g, {});
  REQUIRE(library.ok());
  contents->code.push_back({"elf", "x86_64", library->elf, library->cpu_features, "native"});
  REQUIRE(runtime::Model::load_bytes(format::write_artifact(*contents)).ok());
  auto kernel = std::find_if(contents->steps.begin(), contents->steps.end(),
                             [](const auto& s) { return s.kind == format::StepKind::Loop; });
  REQUIRE(kernel != contents->steps.end());
  REQUIRE(kernel->inputs.size() == 1);
  uint32_t z = 0;
  for (uint32_t v = 0; v < contents->values.size(); ++v)
    if (contents->values[v].name == "z") z = v;
  {
    auto c = *contents;  // the kernel's input taken away: it would read args[0] as its output
    auto& step =
        *std::find_if(c.steps.begin(), c.steps.end(), [](const auto& s) { return s.kind == format::StepKind::Loop; });
    step.inputs.clear();
    auto refused = runtime::Model::load_bytes(format::write_artifact(c));
    REQUIRE(!refused.ok());
    CHECK(refused.error().message ==
          "artifact: shape mismatch: step " + step.name + ": its kernel takes 2 arguments, the metadata gives it 1");
  }
  {
    auto c = *contents;  // an input of another size: the kernel would read 256 bytes of a 32-byte value
    auto& step =
        *std::find_if(c.steps.begin(), c.steps.end(), [](const auto& s) { return s.kind == format::StepKind::Loop; });
    step.inputs[0] = z;
    auto refused = runtime::Model::load_bytes(format::write_artifact(c));
    REQUIRE(!refused.ok());
    CHECK(refused.error().code == static_cast<int>(format::ArtifactErrorKind::ShapeMismatch));
    CHECK(refused.error().message.ends_with("argument 0 of its kernel is 256 bytes, the metadata's %z 32"));
  }
}
