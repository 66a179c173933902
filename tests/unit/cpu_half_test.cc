// Half precision in the CPU kernels. AVX512-BF16: kernels for a CPU with it round to bf16
// in its conversion instruction, one per stored value, in loops of 16 lanes, and still
// stream their stores; they compute what the interpreter computes (denormal floats taken
// as zero, as the instruction does); the default CPU list holds such kernels only where a
// kernel rounds to bf16. f16: loops that convert take 16 lanes too, but for those that
// keep a float sum in order; compares of f16 values widen back to float after the
// optimizer.
#include <fmt/format.h>
#include <llvm/Analysis/LoopInfo.h>
#include <llvm/IR/Dominators.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LLVMContext.h>
#include <cmath>
#include <cstring>

#include "codegen/cpu/kernel_emitter.h"
#include "codegen/cpu/scalar_ops.h"
#include "compiler/compile.h"
#include "runtime/cpu/host_cpu.h"
#include "runtime/format/artifact.h"
#include "tests/unit/op_graphs.h"
#include "tests/unit/random_graph.h"
#include "tests/unit/run_util.h"

using namespace kiln;

namespace {

constexpr const char* kBf16Cpu = "x86-64-v4+avx512bf16";

// A chain computed in f32 between casts (stored once as bf16), an op computed in bf16
// (rounded after each op), and a sum over rows of bf16 values (an accumulator).
constexpr const char* kBf16Graph = R"(graph @g(%x: bf16[64,256], %w: f32[64,256]) {
  %xf: f32[64,256] = cast(%x) {to=f32}
  %h: f32[64,256] = mul(%xf, %w)
  %y: bf16[64,256] = cast(%h) {to=bf16}
  %e: bf16[64,256] = exp(%x)
  %s: bf16[64] = reduce_sum(%e) {axes=[1], keepdims=false}
  return %y, %s
}
)";

// The width a loop's metadata (its llvm.loop node, or null) asks the vectorizer for; 0 for none.
int64_t vectorize_width(const llvm::MDNode* loop) {
  if (!loop) return 0;
  for (const llvm::MDOperand& op : loop->operands())
    if (auto* node = llvm::dyn_cast_or_null<llvm::MDNode>(op.get()))
      if (auto* name = llvm::dyn_cast_or_null<llvm::MDString>(node->getOperand(0).get());
          name && name->getString() == "llvm.loop.vectorize.width")
        return llvm::mdconst::extract<llvm::ConstantInt>(node->getOperand(1))->getSExtValue();
  return 0;
}

struct Emitted {
  int bf16_conversions = 0;   // fptrunc float -> bfloat
  int integer_roundings = 0;  // the integer rounding's NaN test (fcmp uno)
  int width16_loops = 0, loops = 0;
  int streamed_bf16_stores = 0, laundered_stores = 0;  // nontemporal stores of bf16 bits; through asm
};

// What emit_kernels writes for `g` (planned), in a module marked for AVX512-BF16 or not.
Emitted emit(const ir::Graph& g, bool bf16_instructions, int64_t streaming_bytes) {
  llvm::LLVMContext ctx;
  llvm::Module m("test", ctx);
  if (bf16_instructions) codegen::cpu::use_bf16_instructions(m);
  REQUIRE(codegen::cpu::emit_kernels(g, m, streaming_bytes, 64).ok());
  Emitted e;
  for (llvm::Function& f : m)
    for (llvm::BasicBlock& block : f) {
      if (llvm::MDNode* loop = block.getTerminator()->getMetadata(llvm::LLVMContext::MD_loop)) {
        ++e.loops;
        e.width16_loops += vectorize_width(loop) == 16;
      }
      for (llvm::Instruction& i : block) {
        if (i.getOpcode() == llvm::Instruction::FPTrunc && i.getType()->isBFloatTy()) ++e.bf16_conversions;
        if (auto* cmp = llvm::dyn_cast<llvm::FCmpInst>(&i); cmp && cmp->getPredicate() == llvm::FCmpInst::FCMP_UNO)
          ++e.integer_roundings;
        if (auto* store = llvm::dyn_cast<llvm::StoreInst>(&i);
            store && store->getMetadata(llvm::LLVMContext::MD_nontemporal)) {
          auto* call = llvm::dyn_cast<llvm::CallInst>(store->getValueOperand());
          e.laundered_stores += call && llvm::isa<llvm::InlineAsm>(call->getCalledOperand());
          e.streamed_bf16_stores += 1;
        }
      }
    }
  return e;
}

// Per innermost loop of `g`'s kernels (planned): whether it asks for 16 lanes, converts
// between float and f16, and adds doubles in order (an fadd without reassoc).
struct LoopFacts {
  bool width16 = false, converts_f16 = false, ordered_double_sum = false;
};

std::vector<LoopFacts> loops_of(const ir::Graph& g) {
  llvm::LLVMContext ctx;
  llvm::Module m("test", ctx);
  REQUIRE(codegen::cpu::emit_kernels(g, m, int64_t{1} << 40, 64).ok());
  std::vector<LoopFacts> facts;
  for (llvm::Function& f : m) {
    if (f.isDeclaration()) continue;
    llvm::DominatorTree tree(f);
    llvm::LoopInfo loops(tree);
    for (llvm::Loop* loop : loops.getLoopsInPreorder()) {
      if (!loop->isInnermost()) continue;  // only innermost loops are vectorized
      LoopFacts l;
      l.width16 = vectorize_width(loop->getLoopID()) == 16;
      for (llvm::BasicBlock* block : loop->blocks())
        for (llvm::Instruction& i : *block) {
          l.converts_f16 = l.converts_f16 ||
                           (i.getOpcode() == llvm::Instruction::FPExt && i.getOperand(0)->getType()->isHalfTy()) ||
                           (i.getOpcode() == llvm::Instruction::FPTrunc && i.getType()->isHalfTy());
          l.ordered_double_sum = l.ordered_double_sum || (i.getOpcode() == llvm::Instruction::FAdd &&
                                                          i.getType()->isDoubleTy() && !i.hasAllowReassoc());
        }
      facts.push_back(l);
    }
  }
  return facts;
}

// Whether this machine runs AVX512-BF16 code; where it does not, the tests compile only.
bool host_runs_bf16() {
  const bool runs = runtime::missing_cpu_features({"avx512bf16", "avx512vl"}).empty();
  if (!runs) WARN("this CPU has no AVX512-BF16: its kernels are compiled, not run");
  return runs;
}

}  // namespace

TEST_CASE("AVX512-BF16: one conversion per stored value, loops of 16 lanes", "[cpu][bf16]") {
  ir::Graph g = kiln::testing::planned(kiln::testing::parse_ok(kBf16Graph), true);
  const int64_t never_stream = int64_t{1} << 40;
  const Emitted integer = emit(g, false, never_stream), instruction = emit(g, true, never_stream);
  // The cast's rounding and the store's are one: %y, each exp and the sum rounded once,
  // and nothing else. (The exp's max-free rows read no NaN test of their own.)
  CHECK(integer.bf16_conversions == 0);
  CHECK(instruction.integer_roundings == 0);
  CHECK(instruction.bf16_conversions == integer.integer_roundings);
  CHECK(instruction.bf16_conversions >= 3);
  // The elementwise loop and the sum's (its accumulator reassociable) get 16 lanes.
  CHECK(integer.width16_loops == 0);
  CHECK(instruction.width16_loops >= 2);
}

TEST_CASE("AVX512-BF16: streamed bf16 results reach their non-temporal stores as bits", "[cpu][bf16][streaming]") {
  ir::Graph g = kiln::testing::planned(kiln::testing::parse_ok(R"(graph @g(%x: bf16[4096], %w: f32[4096]) {
  %xf: f32[4096] = cast(%x) {to=f32}
  %h: f32[4096] = mul(%xf, %w)
  %y: bf16[4096] = cast(%h) {to=bf16}
  return %y, %h
}
)"),
                                       true);
  const Emitted integer = emit(g, false, 1), instruction = emit(g, true, 1);
  REQUIRE(instruction.streamed_bf16_stores > 0);
  CHECK(integer.laundered_stores == 0);
  // %y's stores only, not %h's (f32).
  CHECK(instruction.laundered_stores > 0);
  CHECK(instruction.laundered_stores < instruction.streamed_bf16_stores);
}

TEST_CASE("AVX512-BF16: f32 to bf16 rounds to nearest even at every edge, denormal floats to zero", "[cpu][bf16]") {
  const float cases[] = {0.0f,         -0.0f,          1.0f,          1.00390625f,   1.005859375f, 1.0078125f,
                         -3.14159265f, 1e30f,          3.3895314e38f, 3.4028235e38f, INFINITY,     -INFINITY,
                         NAN,          1.1754944e-38f, 1e-40f,        -1e-40f,       -1.4e-45f,    65504.0f};
  const int64_t n = std::size(cases);
  ir::Graph g = kiln::testing::parse_ok(
      fmt::format("graph @g(%x: f32[{0}]) {{\n  %y: bf16[{0}] = cast(%x) {{to=bf16}}\n  return %y\n}}\n", n));
  std::vector<double> values(cases, cases + n);
  const std::map<std::string, ir::Tensor> args = {{"x", ir::Tensor::from_doubles({ir::DType::F32, {n}}, values)}};
  const ir::Tensor want = kiln::testing::eval_ok(g, args)[0];
  CompileOptions options;
  options.cpu = kBf16Cpu;
  if (!host_runs_bf16()) {
    REQUIRE(compile_to_artifact(g, options).ok());
    return;
  }
  auto got = kiln::testing::compile_and_run(g, args, options);
  if (!got.ok()) FAIL(got.error().message);
  for (int64_t k = 0; k < n; ++k) {
    INFO(cases[k]);
    const double expected = want.get(k), actual = (*got)[0].get(k);
    if (std::isnan(cases[k])) {
      CHECK(std::isnan(actual));
    } else if (std::fpclassify(cases[k]) == FP_SUBNORMAL) {
      CHECK(actual == 0.0);
      CHECK(std::signbit(actual) == std::signbit(cases[k]));
    } else {
      CHECK(actual == expected);
    }
  }
}

TEST_CASE("AVX512-BF16: every op in bf16, fused and unfused, against the interpreter's rounding of each op",
          "[cpu][bf16][ops]") {
  auto [f32_graph, f32_args] = kiln::testing::all_ops_graph();
  ir::Graph g = kiln::testing::in_precision(f32_graph, ir::DType::BF16);
  auto args = kiln::testing::in_precision(f32_args, ir::DType::BF16);
  auto want = kiln::testing::eval_ok(g, args);
  const double ulps = 4 * std::ldexp(1.0, 1 - 8);  // as precision_test's, for bf16's 8 bits
  const bool runs = host_runs_bf16();
  for (bool fuse : {true, false}) {
    INFO(fuse);
    CompileOptions options;
    options.cpu = kBf16Cpu;
    options.fuse = fuse;
    if (!runs) {
      REQUIRE(compile_to_artifact(g, options).ok());
      continue;
    }
    auto got = kiln::testing::compile_and_run(g, args, options);
    if (!got.ok()) FAIL(got.error().message);
    kiln::testing::check_same(*got, want, ulps, ulps);
  }
}

TEST_CASE("the default CPUs add x86-64-v4+avx512bf16 only where a kernel rounds to bf16", "[cpu][bf16]") {
  auto libraries = [](const char* text, const std::string& cpus) {
    CompileOptions options;
    options.cpu = cpus;
    auto artifact = compile_to_artifact(kiln::testing::parse_ok(text), options);
    if (!artifact.ok()) FAIL(artifact.error().message);
    auto view = format::read_artifact(*artifact);
    REQUIRE(view.ok());
    std::vector<std::string> names;
    for (const auto* code : *view->metadata().code()) names.push_back(code->cpu()->str());
    return names;
  };
  const char* f32 = "graph @g(%x: f32[64]) {\n  %y: f32[64] = exp(%x)\n  return %y\n}\n";
  const char* widens = "graph @g(%x: bf16[64]) {\n  %y: f32[64] = cast(%x) {to=f32}\n  return %y\n}\n";
  const char* rounds = "graph @g(%x: f32[64]) {\n  %y: bf16[64] = cast(%x) {to=bf16}\n  return %y\n}\n";
  const std::string defaults(kDefaultCpus);
  CHECK(libraries(f32, defaults) == std::vector<std::string>{"x86-64-v3", "x86-64-v4"});
  CHECK(libraries(widens, defaults) == std::vector<std::string>{"x86-64-v3", "x86-64-v4"});
  CHECK(libraries(rounds, defaults) == std::vector<std::string>{"x86-64-v3", "x86-64-v4", kBf16Cpu});
  // The runtime loads it where the CPU has AVX512-BF16, and says so.
  auto artifact = compile_to_artifact(kiln::testing::parse_ok(rounds), CompileOptions{});
  REQUIRE(artifact.ok());
  auto model = runtime::Model::load_bytes(std::move(*artifact));
  REQUIRE(model.ok());
  const bool avx512 = runtime::missing_cpu_features({"avx512f"}).empty();
  CHECK((*model)->code() == (host_runs_bf16() ? kBf16Cpu : avx512 ? "x86-64-v4" : "x86-64-v3"));
  // Alone, or beside a CPU that is not its base, it is compiled.
  CHECK(libraries(f32, kBf16Cpu) == std::vector<std::string>{kBf16Cpu});
  CHECK(libraries(f32, std::string("x86-64-v3,") + kBf16Cpu) == std::vector<std::string>{"x86-64-v3", kBf16Cpu});
}

TEST_CASE("f16: loops that convert take 16 lanes, reductions too, but not a sum kept in order", "[cpu][half]") {
  // Softmax over f16 rows (its max pass widens, its output pass rounds); a column sum's
  // double sums are in order (LLVM 19 picked 4 lanes for every loop that converts f16).
  ir::Graph rows = kiln::testing::planned(kiln::testing::parse_ok(R"(graph @g(%x: f16[64,256]) {
  %xf: f32[64,256] = cast(%x) {to=f32}
  %yf: f32[64,256] = softmax(%xf) {axis=-1}
  %y: f16[64,256] = cast(%yf) {to=f16}
  return %y
}
)"),
                                          true);
  int converting = 0;
  for (const LoopFacts& l : loops_of(rows))
    if (l.converts_f16 && !l.ordered_double_sum) {
      ++converting;
      CHECK(l.width16);
    }
  CHECK(converting >= 2);  // the max pass (loads) and the output pass (rounds)
  ir::Graph columns = kiln::testing::planned(kiln::testing::parse_ok(R"(graph @g(%x: f16[512,256]) {
  %s: f16[256] = reduce_sum(%x) {axes=[0], keepdims=false}
  return %s
}
)"),
                                             true);
  int ordered = 0;
  for (const LoopFacts& l : loops_of(columns))
    if (l.ordered_double_sum) {
      ++ordered;
      CHECK(!l.width16);
    }
  CHECK(ordered >= 1);
}

TEST_CASE("f16 compares widen back to float compares after the optimizer", "[cpu][half]") {
  llvm::LLVMContext ctx;
  llvm::Module m("test", ctx);
  auto* half16 = llvm::FixedVectorType::get(llvm::Type::getHalfTy(ctx), 16);
  auto* fn = llvm::Function::Create(
      llvm::FunctionType::get(llvm::FixedVectorType::get(llvm::Type::getInt1Ty(ctx), 16), {half16, half16}, false),
      llvm::Function::ExternalLinkage, "f", m);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  auto* compare = llvm::cast<llvm::FCmpInst>(b.CreateFCmpUNO(fn->getArg(0), fn->getArg(1)));
  b.CreateRet(compare);
  codegen::cpu::widen_half_compares(m);
  for (unsigned k = 0; k < 2; ++k) {
    auto* widened = llvm::dyn_cast<llvm::FPExtInst>(compare->getOperand(k));
    REQUIRE(widened);
    CHECK(widened->getOperand(0) == fn->getArg(k));
    CHECK(widened->getType() == llvm::FixedVectorType::get(llvm::Type::getFloatTy(ctx), 16));
  }
  CHECK(compare->getPredicate() == llvm::FCmpInst::FCMP_UNO);
}
