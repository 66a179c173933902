#include "passes/pipeline.h"

#include <fmt/format.h>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/file.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/autocast.h"
#include "passes/autodiff.h"
#include "passes/canonicalize.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/decompose.h"
#include "passes/fusion.h"
#include "passes/lower_conv.h"
#include "passes/memory_plan.h"

namespace kiln::passes {
namespace {

// Each pass's factory reads the options it takes (reader.done() rejects the others).
struct Registration {
  std::string_view name;
  std::string_view options;  // for pass_usages(): "{wrt=NAME,...}", or empty
  Result<std::unique_ptr<Pass>> (*create)(PassOptionReader& reader);
};

template <class P>
Result<std::unique_ptr<Pass>> make(PassOptionReader&) {
  return std::unique_ptr<Pass>(std::make_unique<P>());
}

Result<std::unique_ptr<Pass>> make_fusion(PassOptionReader& reader) {
  FusionOptions o;
  KILN_ASSIGN_OR_RETURN(o.fuse, reader.flag("fuse", true));
  KILN_ASSIGN_OR_RETURN(std::string epilogues,
                        reader.choice("matmul_epilogues", {"none", "onednn", "cublaslt"}, "none"));
  o.matmul_epilogues = epilogues == "onednn"     ? ir::MatmulEpilogues::kOneDnn
                       : epilogues == "cublaslt" ? ir::MatmulEpilogues::kCublasLt
                                                 : ir::MatmulEpilogues::kNone;
  KILN_ASSIGN_OR_RETURN(o.matmul_views, reader.flag("matmul_views", false));
  KILN_ASSIGN_OR_RETURN(std::string attention_runner, reader.choice("attention", {"none", "cpu", "cuda"}, "none"));
  o.attention = attention_runner == "cpu"    ? ir::AttentionRunner::kCpu
                : attention_runner == "cuda" ? ir::AttentionRunner::kCuda
                                             : ir::AttentionRunner::kNone;
  KILN_ASSIGN_OR_RETURN(o.attention_gradient, reader.flag("attention_gradient", true));
  KILN_ASSIGN_OR_RETURN(o.single_batch_views, reader.flag("single_batch_views", false));
  KILN_ASSIGN_OR_RETURN(std::string recompute, reader.choice("recompute", {"none", "inline", "all"}, "all"));
  o.recompute = recompute == "none"     ? RecomputeOps::kNone
                : recompute == "inline" ? RecomputeOps::kInline
                                        : RecomputeOps::kAll;
  KILN_ASSIGN_OR_RETURN(std::string order, reader.choice("order", {"graph", "memory"}, "memory"));
  o.order = order == "graph" ? StepOrder::kGraph : StepOrder::kMemory;
  return std::unique_ptr<Pass>(std::make_unique<FusionPass>(o));
}

Result<std::unique_ptr<Pass>> make_lower_conv(PassOptionReader& reader) {
  KILN_ASSIGN_OR_RETURN(bool keep_library, reader.flag("keep_library", false));
  return std::unique_ptr<Pass>(std::make_unique<LowerConvPass>(keep_library));
}

Result<std::unique_ptr<Pass>> make_autodiff(PassOptionReader& reader) {
  std::vector<std::string> wrt = reader.list("wrt");
  for (std::string& name : wrt)
    if (name.starts_with('%')) name.erase(0, 1);  // wrt=%w names %w, as --input %w=... does
  KILN_RETURN_IF_ERROR(reader.done());
  if (wrt.empty())
    return make_error(
        "pass 'autodiff' needs the arguments to differentiate with respect to (autodiff{wrt=NAME,...}, or "
        "--wrt=NAME,...)");
  return std::unique_ptr<Pass>(std::make_unique<AutodiffPass>(std::move(wrt)));
}

Result<std::unique_ptr<Pass>> make_autocast(PassOptionReader& reader) {
  KILN_ASSIGN_OR_RETURN(std::string precision, reader.choice("precision", {"bf16", "f16"}));
  KILN_RETURN_IF_ERROR(reader.done());
  return std::unique_ptr<Pass>(std::make_unique<AutocastPass>(precision == "bf16" ? ir::DType::BF16 : ir::DType::F16));
}

constexpr Registration kPasses[] = {
    {"autocast", "{precision=bf16|f16}", make_autocast},
    {"autodiff", "{wrt=NAME,...}", make_autodiff},
    {"decompose", "", make<DecomposePass>},
    {"canonicalize", "", make<CanonicalizePass>},
    {"cse", "", make<CsePass>},
    {"dce", "", make<DcePass>},
    {"fusion",
     "{fuse=true|false matmul_epilogues=none|onednn|cublaslt matmul_views=true|false attention=none|cpu|cuda "
     "attention_gradient=true|false single_batch_views=true|false recompute=none|inline|all order=memory|graph}",
     make_fusion},
    {"lower-conv", "{keep_library=true|false}", make_lower_conv},
    {"memory-plan", "", make<MemoryPlanPass>},
};

}  // namespace

Result<bool> Pipeline::run(ir::Graph& graph) {
  bool changed = false;
  int index = 0;
  if (!dump_.dir.empty() && !dump_.after.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dump_.dir, ec);
    if (ec) return make_error(fmt::format("cannot create the dump directory '{}': {}", dump_.dir, ec.message()));
  }
  for (auto& pass : passes_) {
    ++index;
    KILN_ASSIGN_OR_RETURN(bool pass_changed, pass->run(graph));
    changed = changed || pass_changed;
    if (pass_changed && !pass->preserves_program()) {
      graph.program.reset();
      graph.memory.reset();
    }
    Status ok = ir::verify(graph);
    if (!ok.ok()) return make_error(fmt::format("after pass '{}': {}", pass->name(), ok.error().message));
    if (!dump_.after.count("all") && !dump_.after.count(std::string(pass->name()))) continue;
    std::string text = ir::print(graph);
    if (!dump_.dir.empty()) {
      std::string path = fmt::format("{}/{:02}-{}.kir", dump_.dir, index, pass->name());
      KILN_RETURN_IF_ERROR(write_file(path, text));
    } else if (dump_.sink) {
      dump_.sink(pass->name(), text);
    }
  }
  return changed;
}

Result<std::string> pipeline_passes(std::string_view name) {
  if (name == "default") return std::string(kDefaultPipeline);
  return make_error(fmt::format("unknown pipeline '{}' (known pipelines: default)", name));
}

Result<std::unique_ptr<Pass>> create_pass(const PassSpec& spec) {
  for (const Registration& r : kPasses) {
    if (r.name != spec.name) continue;
    PassOptionReader reader(spec);
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Pass> pass, r.create(reader));
    KILN_RETURN_IF_ERROR(reader.done());
    return pass;
  }
  return make_error(fmt::format("unknown pass '{}' (known passes: {})", spec.name, fmt::join(pass_names(), ", ")));
}

std::vector<std::string> pass_names() {
  std::vector<std::string> names;
  for (const Registration& r : kPasses) names.emplace_back(r.name);
  return names;
}

std::vector<std::string> pass_usages() {
  std::vector<std::string> usages;
  for (const Registration& r : kPasses) usages.push_back(fmt::format("{}{}", r.name, r.options));
  return usages;
}

Result<Pipeline> pipeline_from_specs(const std::vector<PassSpec>& specs) {
  Pipeline p;
  for (const PassSpec& spec : specs) {
    KILN_ASSIGN_OR_RETURN(auto pass, create_pass(spec));
    p.add(std::move(pass));
  }
  return p;
}

Result<Pipeline> pipeline_from_text(std::string_view text) {
  KILN_ASSIGN_OR_RETURN(std::vector<PassSpec> specs, parse_pipeline_text(text));
  return pipeline_from_specs(specs);
}

}  // namespace kiln::passes
