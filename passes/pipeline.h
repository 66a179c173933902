// A sequence of passes that verifies between passes and dumps where asked.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "passes/pass.h"
#include "passes/pass_options.h"

namespace kiln::passes {

/// Where and after which passes to dump the IR.
struct DumpOptions {
  /// Pass names to dump after; "all" dumps after every pass.
  std::set<std::string> after;
  /// When set, each dump goes to DIR/NN-passname.kir instead of the sink (DIR is created
  /// if missing).
  std::string dir;
  /// Receives (pass name, text) when no directory is set.
  std::function<void(std::string_view, std::string_view)> sink;
};

/// Runs passes in order, verifying the graph after each one.
class Pipeline {
 public:
  void add(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }
  void set_dump(DumpOptions options) { dump_ = std::move(options); }
  /// Runs every pass; returns whether any changed the graph. A pass that leaves an
  /// invalid graph is reported as "after pass 'NAME': <verifier error>".
  Result<bool> run(ir::Graph& graph);
  const std::vector<std::unique_ptr<Pass>>& passes() const { return passes_; }

 private:
  std::vector<std::unique_ptr<Pass>> passes_;
  DumpOptions dump_;
};

/// The standard pipeline, from a graph to a fused program with its memory plan: what
/// `kiln compile` runs and `--pipeline=default` names.
inline constexpr std::string_view kDefaultPipeline = "decompose,canonicalize,cse,dce,fusion,memory-plan";

/// The passes of a named pipeline ("default": kDefaultPipeline), comma-separated; the
/// error lists the known pipelines.
Result<std::string> pipeline_passes(std::string_view name);

/// Creates a pass from its name and options; the error lists the known names, or the
/// options the pass takes.
Result<std::unique_ptr<Pass>> create_pass(const PassSpec& spec);
/// Every registered pass name.
std::vector<std::string> pass_names();
/// Every registered pass with its options ("autodiff{wrt=NAME,...}", "cse").
std::vector<std::string> pass_usages();
/// A pipeline of the given passes.
Result<Pipeline> pipeline_from_specs(const std::vector<PassSpec>& specs);
/// A pipeline from its text (passes/pass_options.h): "decompose,cse,fusion{fuse=false}".
Result<Pipeline> pipeline_from_text(std::string_view text);

}  // namespace kiln::passes
