#include "passes/pipeline.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>

#include "base/file.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/autodiff.h"
#include "passes/canonicalize.h"
#include "passes/cse.h"
#include "passes/dce.h"
#include "passes/fusion.h"
#include "passes/memory_plan.h"
#include "passes/decompose.h"

namespace kiln::passes {
namespace {

struct Registration {
  std::string_view name;
  Result<std::unique_ptr<Pass>> (*create)(const PassOptions&);
};

template <class P>
Result<std::unique_ptr<Pass>> make(const PassOptions&) { return std::unique_ptr<Pass>(std::make_unique<P>()); }

Result<std::unique_ptr<Pass>> make_fusion(const PassOptions& options) {
  return std::unique_ptr<Pass>(std::make_unique<FusionPass>(options.fuse));
}

Result<std::unique_ptr<Pass>> make_autodiff(const PassOptions& options) {
  if (options.wrt.empty()) return make_error("pass 'autodiff' needs the arguments to differentiate with respect to (--wrt=NAME,...)");
  return std::unique_ptr<Pass>(std::make_unique<AutodiffPass>(options.wrt));
}

constexpr Registration kPasses[] = {
    {"autodiff", make_autodiff},
    {"decompose", make<DecomposePass>},
    {"canonicalize", make<CanonicalizePass>},
    {"cse", make<CsePass>},
    {"dce", make<DcePass>},
    {"fusion", make_fusion},
    {"memory-plan", make<MemoryPlanPass>},
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

Result<std::unique_ptr<Pass>> create_pass(std::string_view name, const PassOptions& options) {
  for (const Registration& r : kPasses)
    if (r.name == name) return r.create(options);
  return make_error(fmt::format("unknown pass '{}' (known passes: {})", name, fmt::join(pass_names(), ", ")));
}

std::vector<std::string> pass_names() {
  std::vector<std::string> names;
  for (const Registration& r : kPasses) names.emplace_back(r.name);
  return names;
}

Result<Pipeline> pipeline_from_names(std::string_view list, const PassOptions& options) {
  Pipeline p;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view name = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (name.empty()) continue;
    KILN_ASSIGN_OR_RETURN(auto pass, create_pass(name, options));
    p.add(std::move(pass));
  }
  return p;
}

}  // namespace kiln::passes
