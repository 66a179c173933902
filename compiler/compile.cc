#include "compiler/compile.h"

#include <fmt/format.h>
#include <algorithm>
#include <cstdlib>
#include <future>
#include <optional>
#include <set>
#include <utility>

#include "codegen/cpu/compile.h"
#include "codegen/cpu/cpu_target.h"
#include "codegen/cuda/kernel_emitter.h"
#include "codegen/cuda/nvrtc_compile.h"
#include "compiler/artifact_contents.h"
#include "compiler/batch_norm_folding.h"
#include "compiler/param_folding.h"
#include "compiler/weights.h"
#include "ir/printer.h"
#include "ir/row_class.h"
#include "passes/autocast.h"
#include "passes/pipeline.h"
#include "runtime/format/target.h"

namespace kiln {
namespace {

struct CompileTarget;
Result<const CompileTarget*> find_target(std::string_view name);
// compile_to_artifact after weights are folded (where they are).
Result<std::vector<uint8_t>> compile_folded(const ir::Graph& graph, const CompileOptions& options);

// The graph and options with computations on params alone done (compiler/param_folding.h)
// and inference batch norms folded into their convolutions (compiler/batch_norm_folding.h),
// or none where there is neither.
std::optional<std::pair<ir::Graph, CompileOptions>> with_weights_folded(const ir::Graph& graph,
                                                                        const CompileOptions& options) {
  const bool batch_norms =
      std::any_of(graph.nodes.begin(), graph.nodes.end(), [](const ir::Node& n) { return n.op == ir::Op::BatchNorm; });
  if (options.weights.empty() || (!batch_norms && !computes_on_params(graph, options.weights))) return std::nullopt;
  std::pair<ir::Graph, CompileOptions> folded{graph, options};
  const int computations = fold_param_computations(folded.first, folded.second.weights);
  if (fold_batch_norms(folded.first, folded.second.weights) == 0 && computations == 0) return std::nullopt;
  return folded;
}

// The lowest architecture: the least a GPU needs to run the artifact's cubin.
std::string lowest_arch(const std::vector<std::string>& archs) {
  return *std::min_element(archs.begin(), archs.end(), [](const auto& a, const auto& b) {
    return format::cuda_arch_number(a) < format::cuda_arch_number(b);
  });
}

// Gives back each result its name where the passes before fusion merged it into a value
// of another name (canonicalize made `add(x, 0)` the argument x; cse made two equal
// results one): a copy of the value (a reshape to its own shape, a loop kernel) carries
// the result's name, since runtimes name their outputs after the results' values (`kiln
// run --output` files, `kiln serve`'s outputs). Results that had no name keep whatever
// they have.
void keep_result_names(ir::Graph& g, const std::vector<std::string>& names) {
  std::set<std::string> taken;  // names of the values still there (merged ones are not)
  for (const ir::Arg& a : g.args) taken.insert(g.value_name(a.value));
  for (const ir::Node& n : g.nodes) taken.insert(g.value_name(n.result));
  for (size_t i = 0; i < g.results.size(); ++i) {
    const ir::ValueId r = g.results[i];
    if (names[i].empty() || g.value_name(r) == names[i] || taken.count(names[i])) continue;
    ir::Node copy;
    copy.op = ir::Op::Reshape;
    copy.operands = {r};
    copy.attrs.set("shape", g.type(r).shape);
    copy.result = g.add_value(g.type(r), names[i]);
    taken.insert(names[i]);
    g.results[i] = copy.result;
    g.nodes.push_back(std::move(copy));
  }
}

// The graph through the default pipeline: fused (unless not asked) and planned.
Result<ir::Graph> planned(const ir::Graph& graph, const CompileOptions& options) {
  KILN_RETURN_IF_ERROR(find_target(options.target));
  ir::Graph g = graph;
  KILN_RETURN_IF_ERROR(check_precision(options.precision));
  // After decompose, so matmuls inside composites and called functions are cast too.
  std::string pipeline_text(passes::kDefaultPipeline);
  if (options.precision != "f32")
    pipeline_text.replace(pipeline_text.find("decompose,"), 10,
                          fmt::format("decompose,autocast{{precision={}}},", options.precision));
  // Convolutions run on oneDNN on the CPU (autocast casts them as it casts matmuls);
  // elsewhere, as im2col and matmuls (before autocast, which then casts those matmuls).
  pipeline_text.replace(pipeline_text.find("decompose,"), 10,
                        options.target == "cpu" ? "decompose,lower-conv{keep_library=true}," : "decompose,lower-conv,");
  KILN_ASSIGN_OR_RETURN(std::vector<passes::PassSpec> specs, passes::parse_pipeline_text(pipeline_text));
  if (!options.fuse) passes::set_option_default(specs, "fusion", "fuse", "false");
  // Both runtimes read a matmul's operands through transposes and slices by strides; CUDA
  // only where the batch dims still fold into one strided-batched call (a loop of cuBLAS
  // calls over an outer batch dim ran attention's matmuls at a third of PyTorch's rate).
  // Each runtime applies a matmul's bias and activation in its library's call (oneDNN's
  // post-ops, cublasLt's epilogues); the CPU's also runs attention as one step.
  passes::set_option_default(specs, "fusion", "matmul_views", "true");
  passes::set_option_default(specs, "fusion", "matmul_epilogues", options.target == "cuda" ? "cublaslt" : "onednn");
  if (options.target == "cuda") passes::set_option_default(specs, "fusion", "single_batch_views", "true");
  // Kernels recompute what they would read back; on the CPU only arithmetic, where an exp
  // or tanh again cost more than the read (GPT-2's bf16 softmax gradient took 14.0 ms
  // recomputing P against 5.4 reading it on the 2-core VM: docs/benchmarks.md).
  passes::set_option_default(specs, "fusion", "recompute", options.target == "cpu" ? "inline" : "all");
  // Attention is one step on the CPU; on CUDA where the half-precision kernel's tensor-core
  // products (mma.sync in bf16 or f16) run on every architecture compiled for (sm_80 and
  // later), in f32 too (one rule for the step's kinds).
  if (options.target == "cpu") passes::set_option_default(specs, "fusion", "attention", "cpu");
  if (options.target == "cuda" && !options.cuda_archs.empty() &&
      format::cuda_arch_number(lowest_arch(options.cuda_archs)) >= 80)
    passes::set_option_default(specs, "fusion", "attention", "cuda");
  // Its backward on CUDA as the matmuls and softmax kernels autodiff wrote (the library's
  // GEMMs, which beat CUDA's two kernels at GPT-2's shape on an H200: docs/benchmarks.md),
  // or on those kernels, to weigh them again on a GPU.
  if (options.target == "cuda") {
    const char* backward = std::getenv("KILN_CUDA_ATTENTION_BACKWARD");
    const std::string setting = backward ? backward : "";
    if (setting.empty() || setting == "matmuls")
      passes::set_option_default(specs, "fusion", "attention_gradient", "false");
    else if (setting != "kernels")
      return make_error("compile: KILN_CUDA_ATTENTION_BACKWARD is '" + setting +
                        "'; it takes matmuls (the default) or kernels");
  }
  std::vector<std::string> result_names;
  for (ir::ValueId r : g.results) result_names.push_back(g.value_name(r));
  const auto fusion = std::find_if(specs.begin(), specs.end(), [](const auto& spec) { return spec.name == "fusion"; });
  KILN_ASSIGN_OR_RETURN(passes::Pipeline before_fusion,
                        passes::pipeline_from_specs(std::vector<passes::PassSpec>(specs.begin(), fusion)));
  KILN_ASSIGN_OR_RETURN(passes::Pipeline from_fusion,
                        passes::pipeline_from_specs(std::vector<passes::PassSpec>(fusion, specs.end())));
  if (auto ran = before_fusion.run(g); !ran.ok()) return ran.error();
  keep_result_names(g, result_names);
  if (auto ran = from_fusion.run(g); !ran.ok()) return ran.error();
  return g;
}

Result<std::string> cuda_artifact_target(const CompileOptions& options) {
  KILN_RETURN_IF_ERROR(codegen::cuda::check_archs(options.cuda_archs));
  return std::string(format::kCudaTargetPrefix) + lowest_arch(options.cuda_archs);
}

Result<std::string> cpu_artifact_target(const CompileOptions& options) {
  if (options.allow_tf32)
    return make_error(
        "compile: --allow-tf32 lets CUDA matmuls use TF32 tensor cores; the CPU has none (its f32 "
        "matmuls stay f32), so it needs --target=cuda");
  KILN_RETURN_IF_ERROR(cpu_list(options.cpu));
  return std::string(format::kCpuTarget);
}

Status add_cuda_code(const ir::Graph& g, const CompileOptions& options, format::ArtifactContents& contents) {
  KILN_ASSIGN_OR_RETURN(codegen::cuda::ProgramSource program, codegen::cuda::emit_program(g));
  for (size_t s = 0; s < contents.steps.size(); ++s) {
    contents.steps[s].block_threads = program.launches[s].block_threads;
    contents.steps[s].grid_blocks = program.launches[s].grid_blocks;
    contents.steps[s].shared_bytes = program.launches[s].shared_bytes;
    contents.steps[s].partial_shared_bytes = program.launches[s].partial_shared_bytes;
    contents.steps[s].partial_block_threads = program.launches[s].partial_block_threads;
    contents.steps[s].partial_grid_blocks = program.launches[s].partial_grid_blocks;
    // The split the kernels were written for is the one the metadata records.
    if ((program.launches[s].partial_block_threads > 0) != !contents.steps[s].partial_symbol.empty())
      return make_error("cuda codegen: step " + contents.steps[s].name +
                        " is split in the kernels but not the "
                        "metadata, or the other way round");
    // A step may launch an earlier step's kernels (the same code: codegen shares them).
    if (!program.symbols[s].empty()) {
      contents.steps[s].symbol = program.symbols[s];
      if (!contents.steps[s].partial_symbol.empty())
        contents.steps[s].partial_symbol = format::partial_kernel_symbol(program.symbols[s]);
    }
  }
  codegen::cuda::NvrtcOptions nvrtc;
  nvrtc.archs = options.cuda_archs;
  nvrtc.use_cache = options.use_compile_cache;
  nvrtc.verbose = options.verbose;
  KILN_ASSIGN_OR_RETURN(std::vector<codegen::cuda::CodeObject> objects,
                        codegen::cuda::compile_program(program.kernels, nvrtc));
  for (auto& o : objects) contents.code.push_back({o.kind, o.arch, std::move(o.bytes), {}, {}});
  std::string archs;
  for (const std::string& a : options.cuda_archs) archs += (archs.empty() ? "" : ",") + a;
  contents.flags = {"--target=cuda", "--cuda-arch=" + archs};
  if (options.allow_tf32) contents.flags.push_back("--allow-tf32");
  contents.allow_tf32 = options.allow_tf32;
  return Status::Ok();
}

// Whether a kernel step computes a bf16 value: only there does AVX512-BF16 change the code
// (its conversion rounds to bf16; widening bf16 is a shift either way).
bool kernels_round_to_bf16(const ir::Graph& g) {
  for (const ir::Step& step : g.program->steps)
    if (step.kind != ir::StepKind::Library)
      for (int n : step.nodes)
        if (g.type(g.nodes[n].result).dtype == ir::DType::BF16) return true;
  return false;
}

// Whether `name` is another CPU of `cpus` plus features that would not change the code
// ("x86-64-v4+avx512bf16" beside "x86-64-v4" for a program that never rounds to bf16).
bool same_code_as_listed(const ir::Graph& g, const std::string& name, const std::vector<std::string>& cpus) {
  const size_t plus = name.find('+');
  if (plus == std::string::npos || std::find(cpus.begin(), cpus.end(), name.substr(0, plus)) == cpus.end())
    return false;
  return name.substr(plus) == "+avx512bf16" && !kernels_round_to_bf16(g);
}

// One kernel library per CPU of the list, each with the features its code needs. The CPUs
// compile at once, each on a thread of its own (LLVM compiles in separate contexts
// independently); the libraries keep the list's order.
Status add_cpu_code(const ir::Graph& g, const CompileOptions& options, format::ArtifactContents& contents) {
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> cpus, cpu_list(options.cpu));
  std::vector<std::pair<std::string, std::future<Result<codegen::cpu::KernelLibrary>>>> compiles;
  for (const std::string& name : cpus) {
    if (same_code_as_listed(g, name, cpus)) continue;
    codegen::cpu::CompileOptions cpu;
    cpu.cpu = name;
    cpu.streaming_store_bytes = options.streaming_store_bytes;
    compiles.emplace_back(name,
                          std::async(std::launch::async, [&g, cpu] { return codegen::cpu::compile_kernels(g, cpu); }));
  }
  for (auto& [name, compile] : compiles) {
    KILN_ASSIGN_OR_RETURN(codegen::cpu::KernelLibrary library, compile.get());
    contents.code.push_back({"elf", "x86_64", std::move(library.elf), std::move(library.cpu_features), name});
  }
  contents.flags = {"--target=cpu", "--cpu=" + options.cpu};
  if (options.streaming_store_bytes != CompileOptions{}.streaming_store_bytes)
    contents.flags.push_back(fmt::format("--streaming-stores-above={}", options.streaming_store_bytes));
  return Status::Ok();
}

// The rows of the batch `--batch` marks: the first dim of every input and result, the
// same for all of them, in a graph without state.
Result<int64_t> batch_rows(const ir::Graph& graph) {
  int64_t rows = -1;
  std::string first;
  auto check = [&](ir::ValueId v, std::string_view what) -> Status {
    const std::string name = fmt::format("{} %{} ({})", what, graph.value_name(v), graph.type(v).to_string());
    if (graph.type(v).rank() == 0)
      return make_error(
          fmt::format("compile: --batch: {} is a scalar; every input and output must lead with the batch dim", name));
    const int64_t dim = graph.type(v).shape[0];
    if (rows >= 0 && dim != rows)
      return make_error(fmt::format("compile: --batch: {} leads with {} rows, but {} with {}", name, dim, first, rows));
    if (rows < 0) rows = dim, first = name;
    return Status::Ok();
  };
  for (const ir::Arg& a : graph.args) {
    if (a.kind == ir::ArgKind::State)
      return make_error(fmt::format(
          "compile: --batch: the graph has state (%{}); a batched model carries nothing from one run to the next",
          graph.value_name(a.value)));
    if (a.kind == ir::ArgKind::Input) KILN_RETURN_IF_ERROR(check(a.value, "input"));
  }
  for (ir::ValueId r : graph.results) KILN_RETURN_IF_ERROR(check(r, "output"));
  if (rows < 1) return make_error("compile: --batch: the graph has no inputs and outputs with rows");
  return rows;
}

// The targets `kiln compile --target` takes. A new one is a row here (and a code
// generator of its own, and an executor in the runtime: docs/architecture.md).
struct CompileTarget {
  std::string_view name;
  // The artifact's target ("cpu-x86_64", "cuda-sm_80"), or why the options do not fit.
  Result<std::string> (*artifact_target)(const CompileOptions& options);
  // Generates the code of a fused, planned graph into the artifact: code objects, launch
  // shapes, flags.
  Status (*add_code)(const ir::Graph& planned, const CompileOptions& options, format::ArtifactContents& contents);
};

constexpr CompileTarget kTargets[] = {
    {"cpu", cpu_artifact_target, add_cpu_code},
    {"cuda", cuda_artifact_target, add_cuda_code},
};

}  // namespace

namespace {

Result<const CompileTarget*> find_target(std::string_view name) {
  std::string names;
  for (const CompileTarget& t : kTargets) {
    if (t.name == name) return &t;
    names += (names.empty() ? "" : " or ") + std::string(t.name);
  }
  return make_error(fmt::format("compile: unknown target '{}' (expected {})", name, names));
}

}  // namespace

Status check_target(std::string_view target) {
  KILN_RETURN_IF_ERROR(find_target(target));
  return Status::Ok();
}

Status check_precision(std::string_view precision) {
  if (precision != "f32" && precision != "bf16" && precision != "f16")
    return make_error(fmt::format("compile: unknown precision '{}' (expected f32, bf16 or f16)", precision));
  return Status::Ok();
}

std::vector<std::string> known_cpus() { return codegen::cpu::known_cpus(); }
std::vector<std::string> known_cpu_features() { return codegen::cpu::known_cpu_features(); }
std::string llvm_version() { return codegen::cpu::llvm_version(); }
std::string nvrtc_version() { return "NVRTC " + codegen::cuda::nvrtc_version(); }

Result<std::vector<std::string>> cpu_list(const std::string& cpus) {
  std::vector<std::string> names;
  for (size_t start = 0; start <= cpus.size();) {
    size_t comma = std::min(cpus.find(',', start), cpus.size());
    std::string name = cpus.substr(start, comma - start);
    if (name.empty()) return make_error(fmt::format("compile: --cpu '{}' has an empty name in its list", cpus));
    if (std::find(names.begin(), names.end(), name) != names.end())
      return make_error(fmt::format("compile: --cpu '{}' names {} twice", cpus, name));
    KILN_RETURN_IF_ERROR(codegen::cpu::resolve_cpu(name));
    names.push_back(std::move(name));
    start = comma + 1;
  }
  return names;
}

// The element types each runtime multiplies matrices in (runtime/cpu/matmul.cc,
// runtime/cuda/executor.cc): a matmul of another type is refused here, not by the runtime
// when the artifact loads.
Status check_matmul_types(const ir::Graph& g, const std::string& target) {
  using ir::DType;
  for (const ir::Node& n : g.nodes) {
    if (n.op != ir::Op::Matmul) continue;
    const DType t = g.type(n.operands[0]).dtype;
    const bool floats = t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16;
    if (floats || (target == "cpu" && (t == DType::I32 || t == DType::I64))) continue;
    const char* types = target == "cpu" ? "CPU target multiplies matrices of f32, f64, f16, bf16, i32 and i64"
                                        : "CUDA target multiplies matrices of f32, f64, f16 and bf16 (the CPU's "
                                          "also of i32 and i64)";
    return make_error(fmt::format("compile: %{} = matmul of {} operands: the {}", ir::display_names(g)[n.result],
                                  ir::dtype_name(t), types));
  }
  return Status::Ok();
}

Result<std::vector<uint8_t>> compile_to_artifact(const ir::Graph& graph, const CompileOptions& options) {
  if (auto folded = with_weights_folded(graph, options)) return compile_folded(folded->first, folded->second);
  return compile_folded(graph, options);
}

namespace {

Result<std::vector<uint8_t>> compile_folded(const ir::Graph& graph, const CompileOptions& options) {
  int64_t batch = 0;
  if (options.batch) {
    KILN_ASSIGN_OR_RETURN(batch, batch_rows(graph));
  }
  KILN_ASSIGN_OR_RETURN(ir::Graph g, planned(graph, options));
  KILN_RETURN_IF_ERROR(check_matmul_types(g, options.target));
  KILN_ASSIGN_OR_RETURN(const CompileTarget* compile_target, find_target(options.target));
  KILN_ASSIGN_OR_RETURN(std::string target, compile_target->artifact_target(options));
  KILN_ASSIGN_OR_RETURN(auto weights, match_weights(graph, options.weights,
                                                    {options.convert_weight_dtypes, options.allow_unused_weights}));
  // Params autocast stored in half precision: their weights rounded to it. (A missing
  // one is named with the type the graph gave it.)
  for (const ir::Arg& a : graph.args)
    if (a.kind == ir::ArgKind::Param && !weights.count(graph.value_name(a.value)))
      return missing_param_weights(graph.value_name(a.value), graph.type(a.value));
  // Copies autocast made of params it left f32 (passes/autocast.h): their source's weights.
  for (const ir::Arg& a : g.args) {
    const std::string& name = g.value_name(a.value);
    const auto source = weights.find(passes::derived_param_source(name));
    if (a.kind == ir::ArgKind::Param && !weights.count(name) && source != weights.end() &&
        source->second.type.shape == g.type(a.value).shape)
      weights[name] = source->second;
  }
  for (const ir::Arg& a : g.args)
    if (auto it = weights.find(g.value_name(a.value)); it != weights.end() && it->second.type != g.type(a.value))
      it->second = ir::Tensor::from_doubles(g.type(a.value), it->second.floats);
  KILN_ASSIGN_OR_RETURN(format::ArtifactContents contents, artifact_contents(g, weights, target, ir::print(graph)));
  KILN_RETURN_IF_ERROR(compile_target->add_code(g, options, contents));
  for (format::ArtifactContents::ValueInfo& v : contents.values)
    if (auto source = options.source_names.find(v.name); source != options.source_names.end())
      v.source_name = source->second;
  if (!options.fuse) contents.flags.push_back("--no-fusion");
  if (options.precision != "f32") contents.flags.push_back("--precision=" + options.precision);
  if (options.batch) {
    contents.batch = batch;
    contents.flags.push_back("--batch");
  }
  return format::write_artifact(contents);
}

}  // namespace

Result<std::string> cuda_source(const ir::Graph& graph, const CompileOptions& options) {
  const auto folded = with_weights_folded(graph, options);
  KILN_ASSIGN_OR_RETURN(ir::Graph g, folded ? planned(folded->first, folded->second) : planned(graph, options));
  KILN_ASSIGN_OR_RETURN(codegen::cuda::ProgramSource program, codegen::cuda::emit_program(g));
  return program.kernels;
}

}  // namespace kiln
