// Memory-plan figures of kiln's example models: arena bytes against the live lower bound
// and against every value in its own buffer. Sizes, not timings: deterministic.
// Run with `bazel run //bench:memory_report`.
#include <fmt/format.h>

#include "compiler/nn.h"
#include "compiler/train.h"
#include "passes/pipeline.h"

namespace {

void report(const std::string& name, kiln::Result<kiln::ir::Graph> graph) {
  if (!graph.ok()) {
    fmt::print("{}: {}\n", name, graph.error().message);
    return;
  }
  auto pipeline = kiln::passes::pipeline_from_text(kiln::passes::kDefaultPipeline);
  if (!pipeline.ok() || !pipeline->run(*graph).ok()) {
    fmt::print("{}: planning failed\n", name);
    return;
  }
  const kiln::ir::MemoryPlan& plan = *graph->memory;
  int kernels = 0, library = 0;
  for (const kiln::ir::Step& s : graph->program->steps) (s.kind == kiln::ir::StepKind::Library ? library : kernels)++;
  fmt::print("| {} | {} | {} | {:.1f} KiB | {:.1f} KiB | {:.1f} KiB | {:.3f} | {:.3f} |\n", name, kernels, library,
             plan.arena_bytes / 1024.0, plan.live_lower_bound_bytes / 1024.0, plan.naive_bytes / 1024.0,
             static_cast<double>(plan.arena_bytes) / plan.live_lower_bound_bytes,
             static_cast<double>(plan.arena_bytes) / plan.naive_bytes);
}

// The MLP of the goals: batch 256, 784-512-512-10, cross-entropy.
void mlp(kiln::Model& m) {
  kiln::Tensor x = m.input("x", {256, 784});
  kiln::Tensor labels = m.input("labels", {256}, kiln::ir::DType::I32);
  kiln::nn::Sequential net = kiln::nn::mlp(m, "fc", {784, 512, 512, 10});
  m.output(kiln::cross_entropy(net(x), labels), "loss");
}

}  // namespace

int main() {
  fmt::print(
      "| model | kernels | library calls | arena | live lower bound | naive | arena / bound | arena / naive |\n");
  fmt::print("|---|---|---|---|---|---|---|---|\n");
  {
    kiln::Model m("quickstart_mlp", 42);
    auto net = kiln::nn::mlp(m, "mlp", {8, 16, 16, 3}, kiln::nn::Activation::Gelu);
    m.output(kiln::softmax(net(m.input("x", {4, 8}))), "probs");
    report("quickstart MLP 8-16-16-3, batch 4", m.build());
  }
  {
    kiln::Model m("mlp", 1);
    mlp(m);
    report("MLP forward + loss, 256 x 784-512-512-10", m.build());
    auto adam = kiln::build_train_step(m, kiln::Adam{});
    report("MLP training step, Adam", adam.ok() ? kiln::Result<kiln::ir::Graph>(adam->graph) : adam.error());
    auto sgd = kiln::build_train_step(m, kiln::Sgd{0.01, 0.9});
    report("MLP training step, SGD + momentum", sgd.ok() ? kiln::Result<kiln::ir::Graph>(sgd->graph) : sgd.error());
  }
  {
    kiln::Model m("block", 1);
    kiln::Tensor x = m.input("x", {128, 1024});
    kiln::nn::LayerNorm norm(m, "ln", {1024});
    kiln::nn::Linear up(m, "up", 1024, 4096), down(m, "down", 4096, 1024);
    kiln::Tensor h = x + down(kiln::gelu(up(norm(x))));
    m.output(kiln::softmax(h), "y");
    report("residual MLP block 128 x 1024-4096-1024 + softmax", m.build());
  }
  return 0;
}
