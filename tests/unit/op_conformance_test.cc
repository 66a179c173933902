// Every op of ir/ops.def through every layer that must handle it: the model API (an
// example in tests/unit/op_examples.h, which builds the op), the reference interpreter,
// both code generators, and autodiff (a rule in passes/gradients.cc exactly when the table
// says Rule). A failure names the op and the layer that lacks it.
#include <fmt/format.h>

#include "codegen/cpu/compile.h"
#include "codegen/cuda/kernel_emitter.h"
#include "passes/autodiff.h"
#include "passes/gradients.h"
#include "passes/pipeline.h"
#include "tests/unit/op_examples.h"
#include "tests/unit/test_util.h"

using namespace kiln;

namespace {

// The example of `op` alone in a model: the graph, with its arguments.
struct Built {
  Result<ir::Graph> graph = Error{};
  std::map<std::string, ir::Tensor> args;
};

Built build(const testing::OpExample& example, bool with_loss) {
  Model m(std::string(ir::op_name(example.op)), 5);
  testing::ExampleInputs in = testing::example_inputs(m);
  Tensor y = example.build(in);
  if (with_loss) {
    std::vector<int64_t> axes;
    for (int64_t d = 0; d < y.rank(); ++d) axes.push_back(d);
    m.output(reduce_sum(y.dtype() == ir::DType::F32 ? y : cast(y, ir::DType::F32), axes), "loss");
  } else {
    m.output(y, "y");
  }
  return {m.build(), testing::example_arguments(m)};
}

std::string layer_failure(ir::Op op, std::string_view layer, const std::string& why) {
  return fmt::format("op '{}': {}: {}", ir::op_name(op), layer, why);
}

}  // namespace

TEST_CASE("every op has an example in tests/unit/op_examples.h, and it builds that op", "[ops]") {
  std::vector<testing::OpExample> examples = testing::op_examples();
  for (ir::Op op : ir::all_ops()) {
    auto it = std::find_if(examples.begin(), examples.end(), [&](const auto& e) { return e.op == op; });
    if (it == examples.end()) {
      FAIL_CHECK(fmt::format("op '{}' has no example in tests/unit/op_examples.h", ir::op_name(op)));
      continue;
    }
    Built b = build(*it, false);
    if (!b.graph.ok()) {
      FAIL_CHECK(layer_failure(op, "the model API", b.graph.error().message));
      continue;
    }
    bool found =
        std::any_of(b.graph->nodes.begin(), b.graph->nodes.end(), [&](const ir::Node& n) { return n.op == op; });
    if (!found) FAIL_CHECK(fmt::format("the example of op '{}' does not build it", ir::op_name(op)));
  }
}

TEST_CASE("every op through the interpreter and both code generators", "[ops]") {
  for (const testing::OpExample& example : testing::op_examples()) {
    Built b = build(example, false);
    REQUIRE(b.graph.ok());
    if (auto values = ir::evaluate(*b.graph, b.args); !values.ok())
      FAIL_CHECK(layer_failure(example.op, "the interpreter", values.error().message));
    ir::Graph planned = *b.graph;
    auto pipeline = passes::pipeline_from_text(passes::kDefaultPipeline);
    REQUIRE(pipeline.ok());
    if (auto ran = pipeline->run(planned); !ran.ok()) {
      FAIL_CHECK(layer_failure(example.op, "the default pipeline", ran.error().message));
      continue;
    }
    if (auto cpu = codegen::cpu::compile_kernels(planned, {}); !cpu.ok())
      FAIL_CHECK(layer_failure(example.op, "the CPU code generator (codegen/cpu)", cpu.error().message));
    if (auto cuda = codegen::cuda::emit_program(planned); !cuda.ok())
      FAIL_CHECK(layer_failure(example.op, "the CUDA code generator (codegen/cuda)", cuda.error().message));
  }
}

TEST_CASE("every op's gradient is what ir/ops.def says: a rule, its decomposition, or none", "[ops][autodiff]") {
  for (const testing::OpExample& example : testing::op_examples()) {
    const ir::Op op = example.op;
    const ir::GradientKind kind = ir::op_gradient(op);
    const bool has_rule = passes::gradient_rule(op) != nullptr;
    if (kind == ir::GradientKind::Rule && !has_rule)
      FAIL_CHECK(layer_failure(op, "passes/gradients.cc", "ir/ops.def says Rule, but the gradient table has no rule"));
    if (kind != ir::GradientKind::Rule && has_rule)
      FAIL_CHECK(
          layer_failure(op, "passes/gradients.cc", "the gradient table has a rule, but ir/ops.def does not say Rule"));
    if (kind == ir::GradientKind::None) continue;
    Built b = build(example, true);
    REQUIRE(b.graph.ok());
    ir::Graph g = *b.graph;
    if (auto ran = passes::AutodiffPass({"x", "p"}).run(g); !ran.ok())
      FAIL_CHECK(layer_failure(op, "autodiff", ran.error().message));
  }
}
