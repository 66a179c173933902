// CPU code generation: kernels compiled with LLVM into a shared object, run step by step
// through the planned arena, compute what the reference interpreter computes (f32:
// rtol 1e-5 / atol 1e-6 elementwise, 1e-4 with reductions and matmul).
#include <dlfcn.h>
#include <fmt/format.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LLVMContext.h>
#include <algorithm>
#include <fstream>
#include <set>

#include "codegen/cpu/compile.h"
#include "codegen/cpu/kernel_emitter.h"
#include "ir/reduction_split.h"
#include "ir/row_class.h"
#include "passes/pipeline.h"
#include "tests/unit/kernel_run.h"
#include "tests/unit/random_graph.h"

using namespace kiln;

namespace {

using kiln::testing::check_same;
using kiln::testing::planned;
using kiln::testing::run_compiled;

}  // namespace

TEST_CASE("compiled kernels agree with the interpreter on 100 random graphs, fused and unfused", "[codegen][cpu]") {
  for (uint64_t seed = 1; seed <= 100; ++seed) {
    kiln::testing::RandomGraph rg = kiln::testing::random_graph(seed);
    auto expected = kiln::testing::eval_ok(rg.graph, rg.inputs);
    for (bool fuse : {true, false}) {
      ir::Graph g = planned(rg.graph, fuse);
      INFO("seed " << seed << (fuse ? " fused" : " unfused") << "\n" << ir::print(g));
      auto got = run_compiled(g, rg.inputs, std::to_string(seed) + (fuse ? "f" : "u"));
      if (!got.ok()) FAIL(got.error().message);
      check_same(*got, expected, rg.elementwise_only ? 1e-5 : 1e-4, rg.elementwise_only ? 1e-6 : 1e-5);
    }
  }
}

TEST_CASE("every text-test model compiles and agrees with the interpreter", "[codegen][cpu]") {
  auto models = kiln::testing::text_test_models();
  for (size_t k = 0; k < models.size(); ++k) {
    const auto& [path, parsed] = models[k];
    INFO(path);
    auto inputs = kiln::testing::seeded_arguments(parsed, kiln::testing::model_seed(path));
    auto expected = kiln::testing::eval_ok(parsed, inputs);
    ir::Graph g = planned(parsed, true);
    auto got = run_compiled(g, inputs, "model" + std::to_string(k));
    if (!got.ok()) FAIL(got.error().message);
    check_same(*got, expected, 1e-4, 1e-5, /*half_ulp=*/true);
  }
  CHECK(models.size() >= 20);
}

// Emits the kernels of `g` into a fresh module and calls visit(f) on each one.
template <typename Visit>
void for_each_kernel(const ir::Graph& g, int64_t streaming_bytes, int vector_bytes, Visit visit) {
  llvm::LLVMContext ctx;
  llvm::Module m("test", ctx);
  REQUIRE(codegen::cpu::emit_kernels(g, m, streaming_bytes, vector_bytes).ok());
  for (llvm::Function& f : m)
    if (!f.isDeclaration()) visit(f);
}

// The loop hints named `name` (llvm.loop.* metadata nodes) on the loops of `f`.
std::vector<llvm::MDNode*> loop_hints(llvm::Function& f, llvm::StringRef name) {
  std::vector<llvm::MDNode*> hints;
  for (llvm::BasicBlock& block : f)
    if (llvm::MDNode* loop = block.getTerminator()->getMetadata(llvm::LLVMContext::MD_loop))
      for (const llvm::MDOperand& op : loop->operands())
        if (auto* node = llvm::dyn_cast_or_null<llvm::MDNode>(op.get()))
          if (auto* hint = llvm::dyn_cast_or_null<llvm::MDString>(node->getOperand(0).get());
              hint && hint->getString() == name)
            hints.push_back(node);
  return hints;
}

TEST_CASE("a loop kernel's loops say their iterations are independent; reductions' and scatters' do not",
          "[codegen][cpu]") {
  // An optimizer-like state update, written in place over %m: without the hint the
  // vectorizer checks the in-place pointers for overlap at run time, finds it, and runs
  // the kernel scalar.
  ir::Graph g = planned(kiln::testing::parse_ok(R"(graph @g(%g: f32[4096], state %m: f32[4096], %r: f32[64,64],
                          %i: i64[8], %u: f32[8,64]) {
  %c: f32[] = constant {value=0.9}
  %mc: f32[4096] = mul(%m, %c)
  %m.next: f32[4096] = add(%mc, %g)
  %s: f32[64] = reduce_sum(%r) {axes=[1]}
  %sc: f32[64,64] = scatter_add(%r, %i, %u) {axis=0}
  return %m.next, %s, %sc
}
)"),
                        true);
  std::map<std::string, size_t> parallel_loops;  // per kernel
  for_each_kernel(g, int64_t{16} << 20, 32, [&](llvm::Function& f) {
    parallel_loops[f.getName().str()] = loop_hints(f, "llvm.loop.parallel_accesses").size();
  });
  CHECK(parallel_loops.size() == 3);
  for (const ir::Step& step : g.program->steps) {
    INFO(step.name);
    const size_t hints = parallel_loops["kiln_" + step.name];
    if (step.kind == ir::StepKind::Loop) CHECK(hints >= 1);  // the state update
    else CHECK(hints == 0);
  }
}

TEST_CASE("sums over leading dims walk rows of their operand, a block of columns at a time, over any work split",
          "[codegen][cpu][columns]") {
  // A bias gradient with an Adam-like epilogue and a full-shape output computed on the way
  // (GELU's backward in a training step); 1300 columns leave a partial block of 276.
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 1300}, {300, 3}, {1, 600}}) {
    ir::Graph parsed = kiln::testing::parse_ok(fmt::format(R"(graph @g(%x: f32[{0},{1}], %b: f32[{1}], %m: f32[{1}]) {{
  %bb: f32[{0},{1}] = broadcast(%b) {{shape=[{0},{1}], dims=[1]}}
  %h: f32[{0},{1}] = add(%x, %bb)
  %t: f32[{0},{1}] = tanh(%h)
  %d: f32[{0},{1}] = mul(%t, %x)
  %s: f32[{1}] = reduce_sum(%d) {{axes=[0]}}
  %c: f32[] = constant {{value=0.9}}
  %mc: f32[{1}] = mul(%m, %c)
  %m2: f32[{1}] = add(%mc, %s)
  %r: f32[{1}] = sqrt(%m2)
  return %d, %m2, %r
}}
)",
                                                           rows, cols));
    auto inputs = kiln::testing::seeded_arguments(parsed, static_cast<uint64_t>(cols), 3);
    inputs["m"] = ir::Tensor::from_doubles(ir::TensorType{ir::DType::F32, {cols}}, std::vector<double>(cols, 50.0));
    auto expected = kiln::testing::eval_ok(parsed, inputs);
    ir::Graph g = planned(parsed, true);
    std::map<std::string, size_t> parallel_loops;
    for_each_kernel(g, int64_t{16} << 20, 32, [&](llvm::Function& f) {
      parallel_loops[f.getName().str()] = loop_hints(f, "llvm.loop.parallel_accesses").size();
    });
    REQUIRE(g.program->steps.size() == 1);
    CHECK(parallel_loops["kiln_" + g.program->steps[0].name] >= 2);  // zeroing and adding the columns' sums
    for (int64_t chunk : {int64_t{0}, int64_t{1}, int64_t{13}, int64_t{512}, int64_t{700}}) {
      INFO(rows << "x" << cols << ", chunks of " << chunk);
      auto got = run_compiled(g, inputs, fmt::format("columns-{}-{}-{}", rows, cols, chunk), chunk);
      REQUIRE(got.ok());
      check_same(*got, expected, 1e-5, 1e-6);
    }
  }
  // Several leading dims kept with keepdims, in f64; and bf16, rounded as the row walk does.
  ir::Graph other = kiln::testing::parse_ok(R"(graph @g(%x: f64[3,5,4,30], %y: bf16[6,2,70]) {
  %s: f64[1,1,4,30] = reduce_sum(%x) {axes=[0,1], keepdims=true}
  %t: bf16[2,70] = reduce_sum(%y) {axes=[0]}
  return %s, %t
}
)");
  auto other_inputs = kiln::testing::seeded_arguments(other, 11, 3);
  auto other_expected = kiln::testing::eval_ok(other, other_inputs);
  ir::Graph other_planned = planned(other, true);
  for_each_kernel(other_planned, int64_t{16} << 20, 32, [&](llvm::Function& f) {
    INFO(f.getName().str());
    CHECK(loop_hints(f, "llvm.loop.parallel_accesses").size() >= 2);
  });
  for (int64_t chunk : {int64_t{0}, int64_t{7}}) {
    auto got = run_compiled(other_planned, other_inputs, fmt::format("columns-other-{}", chunk), chunk);
    REQUIRE(got.ok());
    check_same({(*got)[0]}, {other_expected[0]}, 1e-12, 1e-13);  // f64: double sums either way
    check_same({(*got)[1]}, {other_expected[1]}, 1e-2, 1e-3);    // bf16's 8 bits
  }
  // A sum over trailing dims keeps walking rows.
  ir::Graph rows_sum = planned(kiln::testing::parse_ok(R"(graph @g(%x: f32[64,64]) {
  %s: f32[64] = reduce_sum(%x) {axes=[1]}
  return %s
}
)"),
                               true);
  for_each_kernel(rows_sum, int64_t{16} << 20, 32,
                  [&](llvm::Function& f) { CHECK(loop_hints(f, "llvm.loop.parallel_accesses").empty()); });
}

TEST_CASE("outputs at or above the streaming size are written with non-temporal stores", "[codegen][cpu][streaming]") {
  ir::Graph g = planned(kiln::testing::parse_ok(R"(graph @g(%x: f32[4096], %r: f32[8,128]) {
  %y: f32[4096] = exp(%x)
  %s: f32[8,128] = softmax(%r) {axis=-1}
  return %y, %s
}
)"),
                        true);
  auto streamed_kernels = [&](int64_t threshold) {
    std::set<std::string> streamed;
    for_each_kernel(g, threshold, 32, [&](llvm::Function& f) {
      for (llvm::BasicBlock& block : f)
        for (llvm::Instruction& i : block)
          if (llvm::isa<llvm::StoreInst>(i) && i.getMetadata(llvm::LLVMContext::MD_nontemporal))
            streamed.insert(f.getName().str());
    });
    return streamed;
  };
  CHECK(streamed_kernels(16384).size() == 1);  // the 16 KiB loop's output; the 4 KiB softmax's is below
  CHECK(streamed_kernels(4096).size() == 2);
  CHECK(streamed_kernels(int64_t{16} << 20).empty());
}

TEST_CASE("512-bit vectors go to row kernels and exp loops only; light sum passes stay rolled", "[codegen][cpu]") {
  ir::Graph g = planned(kiln::testing::parse_ok(R"(graph @g(%x: f32[64,4096], %s: f32[4096], %b: f32[4096]) {
  %y: f32[64,4096] = layer_norm(%x, %s, %b) {axis=-1, eps=1e-5}
  %t: f32[64,4096] = cos(%x)
  %p: f32[64,4096] = add(%t, %t)
  return %y, %p
}
)"),
                        true);
  auto widths = [&](int vector_bytes) {
    std::map<std::string, std::pair<std::string, int>> kernels;  // width, rolled loops
    for_each_kernel(g, int64_t{16} << 20, vector_bytes, [&](llvm::Function& f) {
      int rolled = static_cast<int>(loop_hints(f, "llvm.loop.unroll.disable").size());
      kernels[f.getName().str()] = {f.getFnAttribute("prefer-vector-width").getValueAsString().str(), rolled};
    });
    return kernels;
  };
  auto wide = widths(64), narrow = widths(32);
  REQUIRE(wide.size() == 2);
  int row_kernels = 0;
  for (auto& [name, info] : wide) {
    INFO(name);
    bool row = info.second > 0;  // the layer_norm kernel: its mean and variance passes
    row_kernels += row;
    CHECK(info.first == (row ? "512" : "256"));
    CHECK(narrow[name].first == "256");
    if (row) CHECK(info.second >= 2);
  }
  CHECK(row_kernels == 1);
}

TEST_CASE("streamed rows whose last pass sums exps are pipelined; layer_norm's and short rows are not",
          "[codegen][cpu][streaming]") {
  ir::Graph g =
      planned(kiln::testing::parse_ok(R"(graph @g(%x: f32[64,4096], %s: f32[4096], %b: f32[4096], %q: f32[64,100]) {
  %y: f32[64,4096] = layer_norm(%x, %s, %b) {axis=-1, eps=1e-5}
  %t: f32[64,4096] = softmax(%x) {axis=-1}
  %u: f32[64,100] = softmax(%q) {axis=-1}
  return %y, %t, %u
}
)"),
              true);
  auto pipelined = [&](int64_t streaming_bytes) {
    std::map<std::string, bool> kernels;
    for_each_kernel(g, streaming_bytes, 32, [&](llvm::Function& f) {
      kernels[f.getName().str()] = std::any_of(
          f.begin(), f.end(), [](llvm::BasicBlock& b) { return b.getName().starts_with("rows.pipelined"); });
    });
    return kernels;
  };
  auto streamed = pipelined(1), not_streamed = pipelined(int64_t{16} << 20);
  REQUIRE(streamed.size() == 3);
  CHECK(std::count_if(streamed.begin(), streamed.end(), [](auto& k) { return k.second; }) ==
        1);  // the softmax over rows of 4096
  CHECK(std::none_of(not_streamed.begin(), not_streamed.end(), [](auto& k) { return k.second; }));
}

TEST_CASE("row passes over whole vectors interleave a count that divides them; a partial vector is masked (AVX-512)",
          "[codegen][cpu]") {
  // Rows of 208 floats are 13 vectors of 16 (interleaved by 1, no scalar remainder), 192
  // are 12 (by 4), 176 are 11 (by 1); 197 and 5 end in a partial vector of 5 lanes
  // (masked), 49 in one of 1 (left to a scalar remainder).
  ir::Graph parsed = kiln::testing::parse_ok(
      R"(graph @g(%a: f32[6,208], %b: f32[6,192], %c: f32[6,176], %d: f32[6,197], %e: f32[6,5], %s: f32[197], %o: f32[197], %f: f32[6,49]) {
  %ya: f32[6,208] = softmax(%a) {axis=-1}
  %yb: f32[6,192] = log_softmax(%b) {axis=-1}
  %yc: f32[6,176] = softmax(%c) {axis=-1}
  %yd: f32[6,197] = softmax(%d) {axis=-1}
  %ld: f32[6,197] = layer_norm(%d, %s, %o) {axis=-1, eps=1e-5}
  %md: f32[6] = reduce_max(%d) {axes=[1], keepdims=false}
  %ad: i64[6] = argmax(%d) {axis=1}
  %ye: f32[6,5] = softmax(%e) {axis=-1}
  %yf: f32[6,49] = softmax(%f) {axis=-1}
  return %ya, %yb, %yc, %yd, %ld, %md, %ad, %ye, %yf
}
)");
  ir::Graph g = planned(parsed, true);
  auto hints = [&](int vector_bytes) {
    std::map<int64_t, std::set<int64_t>> interleave;  // per row length: the counts asked for
    std::map<int64_t, int> masked;                    // per row length: loops with masked tails
    for_each_kernel(g, int64_t{16} << 20, vector_bytes, [&](llvm::Function& f) {
      const ir::Step* step = nullptr;
      for (const ir::Step& s : g.program->steps)
        if ("kiln_" + s.name == f.getName().str()) step = &s;
      REQUIRE(step);
      const int64_t row = g.type(step->inputs[0]).shape.back();
      for (llvm::MDNode* hint : loop_hints(f, "llvm.loop.interleave.count"))
        interleave[row].insert(llvm::mdconst::extract<llvm::ConstantInt>(hint->getOperand(1))->getSExtValue());
      masked[row] += static_cast<int>(loop_hints(f, "llvm.loop.vectorize.predicate.enable").size());
    });
    return std::pair{interleave, masked};
  };
  auto [wide_interleave, wide_masked] = hints(64);
  CHECK(wide_interleave[208] == std::set<int64_t>{1});
  CHECK(wide_interleave[192] == std::set<int64_t>{4});
  CHECK(wide_interleave[176] == std::set<int64_t>{1});
  CHECK(wide_masked[197] >= 3);  // softmax's max, sum and output passes at least
  CHECK(wide_masked[5] >= 3);
  CHECK(wide_masked[208] + wide_masked[192] + wide_masked[176] + wide_masked[49] == 0);
  auto [narrow_interleave, narrow_masked] = hints(32);  // 8 lanes, no masks
  CHECK(narrow_interleave[208] == std::set<int64_t>{2});
  CHECK(narrow_interleave[176] == std::set<int64_t>{2});
  for (auto [row, count] : narrow_masked) CHECK(count == 0);
  auto inputs = kiln::testing::seeded_arguments(parsed, 11, 4);
  auto expected = kiln::testing::eval_ok(parsed, inputs);
  for (int64_t chunk : {int64_t{0}, int64_t{1}, int64_t{5}}) {
    INFO("chunks of " << chunk);
    auto got = run_compiled(g, inputs, fmt::format("rows-{}", chunk), chunk);
    REQUIRE(got.ok());
    check_same(*got, expected, 1e-5, 1e-6);
  }
}

TEST_CASE("loops that make more than one math library call interleave four vectors, and agree over split work ranges",
          "[codegen][cpu][streaming]") {
  ir::Graph parsed = kiln::testing::parse_ok(R"(graph @g(%x: f32[5000], %w: f64[3000], %v: f32[700]) {
  %a: f32[5000] = cos(%x)
  %y: f32[5000] = sin(%a)
  %b: f64[3000] = cos(%w)
  %z: f64[3000] = sin(%b)
  %t: f32[700] = tanh(%v)
  return %y, %z, %t
}
)");
  ir::Graph g = planned(parsed, true);
  for (int64_t streaming : {int64_t{1}, int64_t{16} << 20}) {
    INFO("streaming from " << streaming << " bytes");
    std::vector<int> interleaved;  // per kernel: its loops that ask for four vectors
    for_each_kernel(g, streaming, 32, [&](llvm::Function& f) {
      int four = 0;
      for (llvm::MDNode* hint : loop_hints(f, "llvm.loop.interleave.count"))
        four += llvm::mdconst::extract<llvm::ConstantInt>(hint->getOperand(1))->getSExtValue() == 4;
      interleaved.push_back(four);
    });
    REQUIRE(interleaved.size() == 3);
    CHECK(std::count_if(interleaved.begin(), interleaved.end(), [](int n) { return n > 0; }) ==
          2);  // cos then sin, f32 and f64; not tanh
  }
  auto inputs = kiln::testing::seeded_arguments(parsed, 7);
  auto expected = kiln::testing::eval_ok(parsed, inputs);
  for (int64_t chunk : {int64_t{0}, int64_t{1}, int64_t{13}, int64_t{999}, int64_t{1777}}) {
    for (int64_t streaming : {int64_t{1}, int64_t{16} << 20}) {
      INFO("chunks of " << chunk << ", streaming from " << streaming << " bytes");
      auto got = run_compiled(g, inputs, fmt::format("calls-{}-{}", chunk, streaming), chunk, streaming);
      REQUIRE(got.ok());
      check_same(*got, expected, 1e-5, 1e-6);
    }
  }
}

TEST_CASE("inlined f32 exp, erf and tanh: ulp error over a sweep, and the special values", "[codegen][cpu][math]") {
  // 200001 points over [-110, 95], past both ends of exp's range, plus the specials.
  std::vector<double> xs;
  for (int i = 0; i <= 200000; ++i) xs.push_back(-110.0 + 205.0 * i / 200000);
  for (double v : {0.0, -0.0, 1e-30, -1e-30, 0.99999994, 1.0, -1.0, 88.72, 88.73, -87.3, -103.9, 1e30, -1e30})
    xs.push_back(v);
  // tanh around its switch from polynomial to exp at 0.8, and small values.
  for (int i = 0; i <= 20000; ++i) {
    xs.push_back(0.7 + 0.2 * i / 20000);
    xs.push_back(-std::ldexp(1.0, -i / 500));
  }
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (double v : {inf, -inf, nan}) xs.push_back(v);
  const auto n = static_cast<int64_t>(xs.size());
  ir::Graph g = planned(kiln::testing::parse_ok(fmt::format(R"(graph @g(%x: f32[{0}]) {{
  %e: f32[{0}] = exp(%x)
  %r: f32[{0}] = erf(%x)
  %t: f32[{0}] = tanh(%x)
  return %e, %r, %t
}}
)",
                                                            n)),
                        true);
  ir::Tensor x = ir::Tensor::from_doubles(ir::TensorType{ir::DType::F32, {n}}, xs);
  auto got = run_compiled(g, {{"x", x}}, "math");
  REQUIRE(got.ok());
  auto ulps = [](float got_value, double want) {
    float w = static_cast<float>(want);
    if (std::isnan(w)) return std::isnan(got_value) ? 0.0 : 1e9;
    if (got_value == w) return 0.0;
    if (std::isinf(w) || std::isinf(got_value)) return 1e9;
    // An ulp of the wanted value, with denormals' ulp as the floor.
    double ulp =
        std::max(std::nextafter(std::fabs(w), INFINITY) - std::fabs(w), std::numeric_limits<float>::denorm_min());
    return std::fabs(got_value - want) / ulp;
  };
  double worst_exp = 0, worst_erf_abs = 0, worst_tanh = 0;
  for (int64_t i = 0; i < n; ++i) {
    double xi = static_cast<float>(xs[static_cast<size_t>(i)]);
    INFO("x = " << xi);
    // exp flushes results below the smallest normal float to 0.
    const bool flushed = std::exp(xi) < std::numeric_limits<float>::min();
    double e = flushed ? ((*got)[0].get(i) == 0 ? 0.0 : 1e9) : ulps(static_cast<float>((*got)[0].get(i)), std::exp(xi));
    CHECK(e <= 1.0);
    worst_exp = std::max(worst_exp, e);
    double r = (*got)[1].get(i);
    if (std::isnan(xi)) CHECK(std::isnan(r));
    else CHECK(std::fabs(r - std::erf(xi)) <= 2e-7);
    if (!std::isnan(xi)) worst_erf_abs = std::max(worst_erf_abs, std::fabs(r - std::erf(xi)));
    const float t = static_cast<float>((*got)[2].get(i));
    double tu = ulps(t, std::tanh(xi));
    CHECK(tu <= 2.0);
    worst_tanh = std::max(worst_tanh, tu);
    if (xi == 0) CHECK(std::signbit(t) == std::signbit(xi));  // tanh(-0) = -0
  }
  WARN("worst exp error " << worst_exp << " ulp; worst erf error " << worst_erf_abs << "; worst tanh error "
                          << worst_tanh << " ulp");
}

TEST_CASE("elementwise kernels with broadcasts, walked row by row, agree over work ranges that split rows",
          "[codegen][cpu]") {
  // Rows of 37 (not a multiple of any vector width) and of 1000 (streamed below 16 KiB).
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 37}, {7, 1000}}) {
    ir::Graph parsed =
        kiln::testing::parse_ok(fmt::format(R"(graph @g(%x: f32[{0},{1}], %b: f32[{1}], %c: f32[{0},1]) {{
  %bb: f32[{0},{1}] = broadcast(%b) {{shape=[{0},{1}], dims=[1]}}
  %cc: f32[{0},{1}] = broadcast(%c) {{shape=[{0},{1}], dims=[0,1]}}
  %h: f32[{0},{1}] = add(%x, %bb)
  %m: f32[{0},{1}] = mul(%h, %cc)
  %y: f32[{0},{1}] = gelu(%m)
  return %y
}}
)",
                                            rows, cols));
    auto inputs = kiln::testing::seeded_arguments(parsed, static_cast<uint64_t>(cols), 3);
    auto expected = kiln::testing::eval_ok(parsed, inputs);
    ir::Graph g = planned(parsed, true);
    for (int64_t chunk : {int64_t{0}, int64_t{1}, int64_t{13}, cols - 1, cols + 5, int64_t{3} * cols}) {
      for (int64_t streaming : {int64_t{1}, int64_t{16} << 20}) {
        INFO(rows << "x" << cols << " in chunks of " << chunk << ", streaming from " << streaming << " bytes");
        auto got = run_compiled(g, inputs, fmt::format("rows{}-{}-{}", cols, chunk, streaming), chunk, streaming);
        REQUIRE(got.ok());
        check_same(*got, expected, 1e-5, 1e-6);
      }
    }
  }
}

TEST_CASE("pow with a constant whole exponent is multiplications, without libm's pow; others call it",
          "[codegen][cpu]") {
  // GELU's tanh form raises to the 3rd power: a scalar libm call per element kept the
  // loop from vectorizing (an imported GPT-2 spent a fifth of its time there).
  for (const char* exponent : {"1.0", "2.0", "3.0", "4.0", "0.5", "%e"}) {
    const bool constant = exponent[0] != '%';
    ir::Graph parsed = kiln::testing::parse_ok(fmt::format(R"(graph @g(%x: f32[4,37], %e: f32[4,37]) {{
  %k: f32[] = constant {{value={0}}}
  %kk: f32[4,37] = broadcast(%k) {{shape=[4,37], dims=[]}}
  %y: f32[4,37] = pow(%x, {1})
  return %y
}}
)",
                                                           constant ? exponent : "0.0", constant ? "%kk" : exponent));
    ir::Graph g = planned(parsed, true);
    int pow_calls = 0;
    for_each_kernel(g, int64_t{16} << 20, 32, [&](llvm::Function& f) {
      for (llvm::BasicBlock& block : f)
        for (llvm::Instruction& inst : block)
          if (auto* call = llvm::dyn_cast<llvm::CallInst>(&inst))
            pow_calls += call->getCalledFunction() && call->getCalledFunction()->getName().starts_with("llvm.pow");
    });
    INFO("exponent " << exponent);
    const bool whole = constant && std::string(exponent) != "0.5";
    CHECK((pow_calls == 0) == whole);
    // Negative bases, zero and fractions: the products agree with pow within an ulp each.
    auto inputs = kiln::testing::seeded_arguments(parsed, 7, 3);
    auto got = run_compiled(g, inputs, std::string("pow") + (constant ? exponent : "e"));
    REQUIRE(got.ok());
    check_same(*got, kiln::testing::eval_ok(parsed, inputs), 1e-5, 1e-6);
  }
}

TEST_CASE("reshapes through extent-1 dims around a transpose agree with the interpreter over any work split",
          "[codegen][cpu]") {
  // Extent-1 dims join no block of a reshape's index (an exporter's [1,197,1,3,768]).
  const char* graphs[] = {
      R"(graph @g(%x: f32[5,24]) {
  %a: f32[1,5,1,3,8] = reshape(%x) {shape=[1,5,1,3,8]}
  %b: f32[3,5,1,1,8] = transpose(%a) {perm=[3,1,2,0,4]}
  %y: f32[3,5,1,8] = reshape(%b) {shape=[3,5,1,8]}
  return %y
}
)",
      R"(graph @g(%x: f32[3,5,1,8]) {
  %a: f32[1,3,40,1] = reshape(%x) {shape=[1,3,40,1]}
  %b: f32[40,1,3,1] = transpose(%a) {perm=[2,0,1,3]}
  %y: f32[120] = reshape(%b) {shape=[120]}
  return %y
}
)",
      R"(graph @g(%x: f32[1,1,6,1]) {
  %a: f32[2,1,3] = reshape(%x) {shape=[2,1,3]}
  %b: f32[3,2,1] = transpose(%a) {perm=[2,0,1]}
  %y: f32[3,2,1,1] = reshape(%b) {shape=[3,2,1,1]}
  return %y
}
)",
  };
  for (const char* text : graphs) {
    INFO(text);
    ir::Graph parsed = kiln::testing::parse_ok(text);
    ir::Graph g = planned(parsed, true);
    auto inputs = kiln::testing::seeded_arguments(parsed, 11);
    for (int64_t chunk : {int64_t{0}, int64_t{1}, int64_t{7}}) {
      auto got = run_compiled(g, inputs, "reshape1-" + std::to_string(chunk), chunk);
      REQUIRE(got.ok());
      check_same(*got, kiln::testing::eval_ok(parsed, inputs), 1e-7, 1e-8);
    }
  }
}

TEST_CASE("a concat of values along the rows is walked a run of columns per operand, over any work split",
          "[codegen][cpu]") {
  // Channels-last activations joined along their channels (a dense block's concat): each
  // operand's run of columns is a loop of its own that reads it directly. Runs of 3, 16,
  // 1, 20 and 7 columns (rows of 47), and a second concat whose runs end elsewhere.
  ir::Graph parsed = kiln::testing::parse_ok(
      R"(graph @g(%a: f32[6,3], %b: f32[6,16], %c: f32[6,1], %d: f32[6,20], %e: f32[6,7], %f: f32[6,47]) {
  %j: f32[6,47] = concat(%a, %b, %c, %d, %e) {axis=1}
  %fl: f32[6,40] = slice(%f) {starts=[0,0], ends=[6,40]}
  %fr: f32[6,7] = slice(%f) {starts=[0,40], ends=[6,47]}
  %fe: f32[6,7] = exp(%fr)
  %k: f32[6,47] = concat(%fe, %fl) {axis=1}
  %y: f32[6,47] = mul(%j, %k)
  return %y, %j
}
)");
  auto inputs = kiln::testing::seeded_arguments(parsed, 11, 3);
  auto expected = kiln::testing::eval_ok(parsed, inputs);
  ir::Graph g = planned(parsed, true);
  // No operand is chosen per element: no branch blocks of the concat are left.
  int branches = 0;
  for_each_kernel(g, int64_t{16} << 20, 32, [&](llvm::Function& f) {
    for (llvm::BasicBlock& block : f) branches += block.getName().starts_with("concat.take");
  });
  CHECK(branches == 0);
  for (int64_t chunk : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{46}, int64_t{52}, int64_t{141}}) {
    INFO("chunks of " << chunk);
    auto got = run_compiled(g, inputs, fmt::format("joined{}", chunk), chunk);
    REQUIRE(got.ok());
    check_same(*got, expected, 1e-6, 1e-7);
  }
}
