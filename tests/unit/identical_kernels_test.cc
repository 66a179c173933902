// Identical kernels compiled once (codegen/cpu/identical_kernels.h): a later kernel with
// the same code is an alias of the first, one that differs in anything (a constant) keeps
// its own code, and a model whose steps share code computes what the interpreter does.
#include <llvm/IR/GlobalAlias.h>
#include <llvm/IR/LLVMContext.h>

#include <map>

#include "codegen/cpu/compile.h"
#include "codegen/cpu/kernel_emitter.h"
#include "compiler/compile.h"
#include "runtime/model.h"
#include "tests/unit/random_graph.h"
#include "tests/unit/run_util.h"

using namespace kiln;

namespace {

// A layer (a matmul, then exp and a product) three times, then once with another constant:
// the loops of the first two layers are the same code over different buffers.
constexpr const char* kRepeatedLayers = R"(graph @g(%x: f32[64,32], %w: f32[32,32]) {
  %m0: f32[64,32] = matmul(%x, %w)
  %e0: f32[64,32] = exp(%m0)
  %s0: f32[64,32] = mul(%e0, %x)
  %m1: f32[64,32] = matmul(%s0, %w)
  %e1: f32[64,32] = exp(%m1)
  %s1: f32[64,32] = mul(%e1, %x)
  %two: f32[] = constant {value=0.5}
  %m2: f32[64,32] = matmul(%s1, %w)
  %e2: f32[64,32] = exp(%m2)
  %s2: f32[64,32] = mul(%e2, %two)
  %three: f32[] = constant {value=0.25}
  %m3: f32[64,32] = matmul(%s2, %w)
  %e3: f32[64,32] = exp(%m3)
  %s3: f32[64,32] = mul(%e3, %three)
  return %s3
}
)";

std::vector<std::string> loop_kernels(const ir::Graph& g) {
  std::vector<std::string> symbols;
  for (const ir::Step& step : g.program->steps)
    if (step.kind == ir::StepKind::Loop) symbols.push_back("kiln_" + step.name);
  return symbols;
}

}  // namespace

TEST_CASE("a kernel identical to an earlier one is an alias of it; one that differs in a constant is not",
          "[codegen][cpu]") {
  ir::Graph g = kiln::testing::planned(kiln::testing::parse_ok(kRepeatedLayers), true);
  const std::vector<std::string> kernels = loop_kernels(g);
  REQUIRE(kernels.size() == 4);
  llvm::LLVMContext ctx;
  llvm::Module m("test", ctx);
  REQUIRE(codegen::cpu::emit_kernels(g, m, int64_t{16} << 20, 32).ok());
  std::vector<std::string> defined;
  for (llvm::Function& f : m)
    if (!f.isDeclaration()) defined.push_back(f.getName().str());
  CHECK(defined == std::vector<std::string>{kernels[0], kernels[2], kernels[3]});
  llvm::GlobalAlias* alias = m.getNamedAlias(kernels[1]);
  REQUIRE(alias != nullptr);
  CHECK(alias->getAliasee() == m.getFunction(kernels[0]));
  CHECK(alias->hasExternalLinkage());
  // Every kernel keeps a signature of its own, for the runtime to check.
  for (const std::string& k : kernels) CHECK(m.getNamedGlobal(k + "_signature") != nullptr);
}

TEST_CASE("unfused, ops of one kind and shape share a kernel, constants of different values do not", "[codegen][cpu]") {
  ir::Graph g = kiln::testing::planned(kiln::testing::parse_ok(kRepeatedLayers), false);
  const std::vector<std::string> kernels = loop_kernels(g);
  llvm::LLVMContext ctx;
  llvm::Module m("test", ctx);
  REQUIRE(codegen::cpu::emit_kernels(g, m, int64_t{16} << 20, 32).ok());
  int functions = 0, aliases = 0;
  for (llvm::Function& f : m) functions += f.isDeclaration() ? 0 : 1;
  for (llvm::GlobalAlias& a : m.aliases()) aliases += a.getAliasee() != nullptr ? 1 : 0;
  // Unfused, each constant is a step of its own, and a product reads its scalar from a
  // buffer: the four exps are one kernel, the two products by %x one, the two products by
  // a scalar one, and each constant one of its own (their values differ).
  CHECK(kernels.size() == 10);
  CHECK(functions == 5);
  CHECK(aliases == 5);
  for (const std::string& k : kernels) CHECK(m.getNamedValue(k) != nullptr);
}

TEST_CASE("a model whose steps share kernels computes what the interpreter does, fused and unfused", "[codegen][cpu]") {
  ir::Graph parsed = kiln::testing::parse_ok(kRepeatedLayers);
  auto args = kiln::testing::seeded_arguments(parsed, 7, 0.3);
  auto expected = kiln::testing::eval_ok(parsed, args);
  for (bool fuse : {true, false}) {
    INFO((fuse ? "fused" : "unfused"));
    CompileOptions options;
    options.fuse = fuse;
    auto got = kiln::testing::compile_and_run(parsed, args, options);
    if (!got.ok()) FAIL(got.error().message);
    REQUIRE(got->size() == 1);
    std::vector<double> want;
    for (int64_t k = 0; k < expected[0].size(); ++k) want.push_back(expected[0].get(k));
    kiln::testing::check_close((*got)[0], "f32[64,32]", want, 1e-4, 1e-6);
  }
}
