// kiln compile: a .kir graph to a .kiln artifact.
#include <fmt/format.h>
#include <algorithm>

#include "base/file.h"
#include "compiler/compile.h"
#include "compiler/safetensors.h"
#include "tools/kiln/cli.h"

namespace kiln::cli {

constexpr std::string_view kCompileHelp =
    R"(usage: kiln compile FILE.kir|FILE.onnx [--target=cpu|cuda] [--weights W.safetensors] [--cpu=NAME]
                    [--cuda-arch=sm_80,sm_90] [--no-cache] [-v] [--no-fusion] [--allow-tf32]
                    [--precision=f32|bf16|f16] -o M.kiln
       kiln compile FILE.kir --target=cuda --emit=source [-o FILE.cu]

Compiles FILE.kir (or an ONNX model, imported with its initializers as the weights; see
'kiln import') through the default pipeline (decompose, canonicalize, cse, dce, fusion,
memory-plan) and code generation into the artifact M.kiln, which the runtime (`kiln run`,
`kiln-run`, runtime/model.h) loads without the compiler. The CPU target generates LLVM
(O3); the CUDA target generates CUDA C++, compiled by NVRTC to cubin for each --cuda-arch
plus PTX of the newest (which newer GPUs compile when they load the artifact).

  --target=cpu|cuda   the target (default: cpu)
  --cpu=LIST          the CPUs to compile for, comma-separated: native (this machine's),
                      x86-64-v2, x86-64-v3, x86-64-v4, or an x86-64 CPU LLVM knows, each
                      with features it adds if any (x86-64-v4+avx512bf16; --cpu=help lists
                      CPUs and features); the artifact holds kernels for each and the
                      runtime loads those with the most features its CPU has (default:
                      x86-64-v3,x86-64-v4,x86-64-v4+avx512bf16: any CPU with AVX2, AVX-512
                      where there is one, and AVX512-BF16's conversion where a kernel
                      rounds to bf16)
  --cuda-arch=LIST    GPU architectures, comma-separated (default: sm_90)
  --no-cache          CUDA: compile with NVRTC even when the compile cache has the result
                      (the cache: $KILN_CACHE_DIR/nvrtc, else ~/.cache/kiln/nvrtc)
  -v, --verbose       CUDA: print cache hits and misses and NVRTC's time on stderr
  --emit=source       write the CUDA C++ program instead of an artifact (stdout without -o)
  --no-fusion         one kernel per op (the unfused baseline)
  --precision=P       f32 (default: the graph's own types), bf16 or f16: matmuls take
                      half-precision operands (f32 accumulation), everything else computes
                      in f32, and params only matmuls read are stored in P (the autocast
                      pass: kiln opt --passes='autocast{precision=bf16}' shows it)
  --allow-tf32        CUDA: f32 matmuls may use TF32 tensor cores (inputs rounded to 10
                      mantissa bits), as torch.set_float32_matmul_precision("high") does;
                      off by default (docs/cuda.md gives the tolerance it costs)
  --batch             mark the first dim of every input and output as a batch of
                      independent rows, so 'kiln serve' packs concurrent requests into
                      one run (the graph must have no state)
  -o, --output=FILE   the artifact to write
  -h, --help          this help
)";

int run_compile(std::span<char* const> argv) {
  constexpr std::string_view cmd = "kiln compile";
  std::vector<char*> args(argv.begin(), argv.end());
  for (char*& a : args) {
    if (std::string_view(a) == "-o") a = const_cast<char*>("--output");
    if (std::string_view(a) == "-v") a = const_cast<char*>("--verbose");
  }
  std::vector<FlagSpec> specs = {{"target", true}, {"cpu", true},       {"cuda-arch", true}, {"no-cache"},
                                 {"verbose"},      {"emit", true},      {"no-fusion"},       {"output", true},
                                 {"allow-tf32"},   {"precision", true}, {"batch"},           {"shape", true, true}};
  specs.insert(specs.end(), std::begin(kWeightsFlags), std::end(kWeightsFlags));
  auto parsed = parse_args(cmd, args, specs);
  if (!parsed.ok()) return fail_located(parsed.error());
  if (parsed->help) {
    fmt::print("{}{}{}", kCompileHelp, kWeightsHelp, kShapeHelp);
    return 0;
  }
  if (parsed->get("cpu") == "help") {
    fmt::print("native (this machine's CPU)\n");
    for (const std::string& name : known_cpus()) fmt::print("{}\n", name);
    fmt::print("\nfeatures a name may add, as in x86-64-v4+avx512bf16:\n");
    for (const std::string& feature : known_cpu_features()) fmt::print("{}\n", feature);
    return 0;
  }
  if (parsed->positional.size() != 1) return fail(cmd, "expected one input file; see 'kiln compile --help'");
  const std::string emit = parsed->get("emit", "artifact");
  if (emit != "artifact" && emit != "source")
    return fail(cmd, fmt::format("--emit expects artifact or source, got '{}'", emit));
  if (emit == "source" && parsed->get("target", "cpu") != "cuda")
    return fail(cmd, "--emit=source writes CUDA C++; it needs --target=cuda");
  if (emit == "artifact" && !parsed->has("output")) return fail(cmd, "no output file; give one with -o M.kiln");
  if (parsed->has("output") && same_file(parsed->get("output"), parsed->positional[0]))
    return fail(cmd, fmt::format("-o '{}' is the input file; it would be overwritten", parsed->get("output")));
  auto shapes = shape_flags(*parsed);
  if (!shapes.ok()) return fail(cmd, shapes.error().message);
  std::map<std::string, ir::Tensor> onnx_weights;
  std::map<std::string, std::string> source_names;
  auto graph = load_graph(cmd, parsed->positional[0], &onnx_weights, *shapes, &source_names);
  if (!graph.ok()) return fail_located(graph.error());
  CompileOptions options;
  options.source_names = std::move(source_names);
  options.target = parsed->get("target", "cpu");
  options.cpu = parsed->get("cpu", std::string(kDefaultCpus));
  options.fuse = !parsed->has("no-fusion");
  options.use_compile_cache = !parsed->has("no-cache");
  options.verbose = parsed->has("verbose");
  options.allow_tf32 = parsed->has("allow-tf32");
  options.precision = parsed->get("precision", "f32");
  options.batch = parsed->has("batch");
  if (parsed->has("cuda-arch")) {
    options.cuda_archs.clear();
    std::string list = parsed->get("cuda-arch");
    for (size_t start = 0; start <= list.size();) {
      size_t comma = std::min(list.find(',', start), list.size());
      options.cuda_archs.push_back(list.substr(start, comma - start));
      start = comma + 1;
    }
  }
  auto weights = read_weights_flag(*parsed);
  if (!weights.ok()) return fail(cmd, weights.error().message);
  options.weights = std::move(*weights);
  // An .onnx file's initializers, unless --weights gives the same names.
  options.weights.merge(onnx_weights);
  auto matching = weights_options(*parsed);
  if (!matching.ok()) return fail(cmd, matching.error().message);
  options.convert_weight_dtypes = matching->convert_dtypes;
  options.allow_unused_weights = matching->allow_unused;
  if (emit == "source") {
    auto source = cuda_source(*graph, options);
    if (!source.ok()) return fail(cmd, source.error().message);
    if (!parsed->has("output") || parsed->get("output") == "-") {
      fmt::print("{}", *source);
      return 0;
    }
    Status written = write_file(parsed->get("output"), *source);
    if (!written.ok()) return fail(cmd, written.error().message);
    return 0;
  }
  auto artifact = compile_to_artifact(*graph, options);
  if (!artifact.ok()) return fail(cmd, artifact.error().message);
  std::string out = parsed->get("output");
  Status written = write_file(out, std::string_view(reinterpret_cast<const char*>(artifact->data()), artifact->size()));
  if (!written.ok()) return fail(cmd, written.error().message);
  fmt::print("wrote {} ({} bytes)\n", out, artifact->size());
  return 0;
}

}  // namespace kiln::cli
