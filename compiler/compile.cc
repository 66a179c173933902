#include "compiler/compile.h"

#include <fmt/format.h>

#include "codegen/cpu/compile.h"
#include "codegen/cpu/kernel_emitter.h"
#include "compiler/artifact.h"
#include "ir/printer.h"
#include "passes/pipeline.h"

namespace kiln {

Result<std::vector<uint8_t>> compile_to_artifact(const ir::Graph& graph, const CompileOptions& options) {
  if (options.target != "cpu")
    return make_error(fmt::format("compile: target '{}' is not available (this build compiles for: cpu)", options.target));
  ir::Graph g = graph;
  passes::PassOptions pass_options;
  pass_options.fuse = options.fuse;
  KILN_ASSIGN_OR_RETURN(passes::Pipeline pipeline, passes::pipeline_from_names("decompose,canonicalize,cse,dce,fusion,memory-plan", pass_options));
  auto ran = pipeline.run(g);
  if (!ran.ok()) return ran.error();
  KILN_ASSIGN_OR_RETURN(format::ArtifactContents contents, artifact_contents(g, options.weights, "cpu-x86_64", ir::print(graph)));
  for (size_t s = 0; s < g.program->steps.size(); ++s) contents.steps[s].work_items = codegen::cpu::work_items(g, g.program->steps[s]);
  codegen::cpu::CompileOptions cpu;
  cpu.cpu = options.cpu;
  cpu.streaming_store_bytes = options.streaming_store_bytes;
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> elf, codegen::cpu::compile_kernels(g, cpu));
  contents.code.push_back({"elf", "x86_64", std::move(elf)});
  contents.flags = {"--target=cpu", "--cpu=" + options.cpu};
  if (!options.fuse) contents.flags.push_back("--no-fusion");
  if (options.streaming_store_bytes != CompileOptions{}.streaming_store_bytes)
    contents.flags.push_back(fmt::format("--streaming-stores-above={}", options.streaming_store_bytes));
  return format::write_artifact(contents);
}

}  // namespace kiln
