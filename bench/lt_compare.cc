// A matmul through a CUDA artifact against the same GEMM as one direct cublasLtMatmul,
// timed in alternation on one GPU: issue 23's goal (an artifact's matmul at least 0.97 of
// a direct call with the heuristic's choice) and issue 24's (0.95 in bf16 at 4096^3), at
// 4096^3 and at the models suite's GEMM shapes (bench/gemm_shapes_torch.py's list).
//
//   bazel run -c opt //bench:lt_compare -- [--dtype=f32|bf16|f16] [--repeat=N] [--filter=TEXT]
//                                           [--compile-only]
//
// --compile-only compiles each artifact and checks that it is one GEMM of its shape, with
// no GPU.
// The artifact is a one-matmul graph in the dtype (transposed operands as transposes,
// which the GEMM folds), run as `kiln bench` runs one: its CUDA Graph replayed on device
// buffers, then a synchronize. The direct call builds its own descriptors from the shape
// (row-major C = op(A) op(B) is cuBLASLt's column-major C^T = op(B)^T op(A)^T), takes
// the first algorithm cublasLtMatmulAlgoGetHeuristic gives with the runtime's 32 MiB
// workspace, f32 accumulation (no TF32), and runs once on its own stream, then a
// synchronize. "of direct" is the median over the rounds of direct time / artifact time.
#include <cublasLt.h>
#include <fmt/format.h>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/machine.h"
#include "bench/timing.h"
#include "compiler/compile.h"
#include "ir/parser.h"
#include "runtime/cuda/driver.h"
#include "runtime/format/artifact.h"
#include "runtime/model.h"

namespace {

using kiln::Result;
using kiln::Status;

// One GEMM: C[batch][m,n] = op(A)[m,k] op(B)[k,n], A stored [k,m] where trans_a, B [n,k]
// where trans_b (bench/gemm_shapes_torch.py's rows).
struct Gemm {
  const char* what;
  int64_t batch, m, k, n;
  bool trans_a, trans_b;
};

constexpr Gemm kGemms[] = {
    {"square 4096", 1, 4096, 4096, 4096, false, false}, {"gpt2 qkv", 1, 4096, 768, 2304, false, false},
    {"gpt2 proj", 1, 4096, 768, 768, false, false},     {"gpt2 fc", 1, 4096, 768, 3072, false, false},
    {"gpt2 fc2", 1, 4096, 3072, 768, false, false},     {"gpt2 q.kT", 96, 512, 64, 512, false, true},
    {"gpt2 p.v", 96, 512, 512, 64, false, false},       {"gpt2 dW fc2 (xT.dy)", 1, 3072, 4096, 768, true, false},
    {"gpt2 dW fc", 1, 768, 4096, 3072, true, false},    {"gpt2 dx fc2 (dy.WT)", 1, 4096, 768, 3072, false, true},
    {"gpt2 dx fc", 1, 4096, 3072, 768, false, true},    {"bert q/k/v/o", 1, 2048, 768, 768, false, false},
    {"bert fc", 1, 2048, 768, 3072, false, false},      {"bert fc2", 1, 2048, 3072, 768, false, false},
    {"bert q.kT", 192, 128, 64, 128, false, true},      {"bert p.v", 192, 128, 128, 64, false, false},
};

constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // the runtime's (runtime/cuda/executor.cc)

std::string dims(const Gemm& g, int64_t rows, int64_t cols) {
  return g.batch > 1 ? fmt::format("{},{},{}", g.batch, rows, cols) : fmt::format("{},{}", rows, cols);
}

std::string perm(const Gemm& g) { return g.batch > 1 ? "[0,2,1]" : "[1,0]"; }

// The one-matmul graph of `g` in `dtype`.
std::string graph_text(const Gemm& g, const std::string& dtype) {
  const std::string a = g.trans_a ? dims(g, g.k, g.m) : dims(g, g.m, g.k);
  const std::string b = g.trans_b ? dims(g, g.n, g.k) : dims(g, g.k, g.n);
  std::string text = fmt::format("graph @gemm(%a: {0}[{1}], %b: {0}[{2}]) {{\n", dtype, a, b);
  if (g.trans_a) text += fmt::format("  %at: {}[{}] = transpose(%a) {{perm={}}}\n", dtype, dims(g, g.m, g.k), perm(g));
  if (g.trans_b) text += fmt::format("  %bt: {}[{}] = transpose(%b) {{perm={}}}\n", dtype, dims(g, g.k, g.n), perm(g));
  text += fmt::format("  %c: {}[{}] = matmul(%{}, %{})\n  return %c\n}}\n", dtype, dims(g, g.m, g.n),
                      g.trans_a ? "at" : "a", g.trans_b ? "bt" : "b");
  return text;
}

// The cuBLASLt entry points the direct call makes.
struct Lt {
  decltype(&::cublasLtCreate) create;
  decltype(&::cublasLtMatmulDescCreate) desc_create;
  decltype(&::cublasLtMatmulDescSetAttribute) desc_set;
  decltype(&::cublasLtMatrixLayoutCreate) layout_create;
  decltype(&::cublasLtMatrixLayoutSetAttribute) layout_set;
  decltype(&::cublasLtMatmulPreferenceCreate) preference_create;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) preference_set;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) heuristic;
  decltype(&::cublasLtMatmul) matmul;
};

Result<Lt> open_lt() {
  KILN_ASSIGN_OR_RETURN(auto opened, kiln::runtime::cuda::open_library("KILN_LIBCUBLASLT", "libcublasLt.so.13",
                                                                       "libcublasLt.so", "cuBLASLt"));
  void* library = opened.first;
  Lt lt;
  std::string missing;
  using kiln::runtime::cuda::bind_symbol;
  bind_symbol(library, lt.create, "cublasLtCreate", missing);
  bind_symbol(library, lt.desc_create, "cublasLtMatmulDescCreate", missing);
  bind_symbol(library, lt.desc_set, "cublasLtMatmulDescSetAttribute", missing);
  bind_symbol(library, lt.layout_create, "cublasLtMatrixLayoutCreate", missing);
  bind_symbol(library, lt.layout_set, "cublasLtMatrixLayoutSetAttribute", missing);
  bind_symbol(library, lt.preference_create, "cublasLtMatmulPreferenceCreate", missing);
  bind_symbol(library, lt.preference_set, "cublasLtMatmulPreferenceSetAttribute", missing);
  bind_symbol(library, lt.heuristic, "cublasLtMatmulAlgoGetHeuristic", missing);
  bind_symbol(library, lt.matmul, "cublasLtMatmul", missing);
  if (!missing.empty()) return kiln::make_error("cuBLASLt in " + opened.second + " lacks " + missing);
  return lt;
}

Status check(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return kiln::make_error(fmt::format("{} failed: cuBLAS status {}", call, static_cast<int>(status)));
}

// The GEMM as one direct cublasLtMatmul on buffers of its own (descriptors leak with the
// process: this program makes a few dozen).
class DirectGemm {
 public:
  static Result<DirectGemm> make(const Lt& lt, const kiln::runtime::cuda::Driver* cu, const Gemm& g,
                                 cudaDataType_t type, size_t element_bytes) {
    DirectGemm d;
    d.lt_ = &lt;
    d.cu_ = cu;
    KILN_RETURN_IF_ERROR(check(lt.create(&d.handle_), "cublasLtCreate"));
    if (cu->stream_create(&d.stream_, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
      return kiln::make_error("cannot create a stream");
    for (auto [pointer, elements] : {std::pair{&d.a_, g.batch * g.m * g.k}, std::pair{&d.b_, g.batch * g.k * g.n},
                                     std::pair{&d.c_, g.batch * g.m * g.n}}) {
      const size_t bytes = static_cast<size_t>(elements) * element_bytes;
      if (cu->mem_alloc(pointer, bytes) != CUDA_SUCCESS || cu->memset_d8(*pointer, 0x3c, bytes) != CUDA_SUCCESS)
        return kiln::make_error("cannot allocate the GEMM's operands");
    }
    if (cu->mem_alloc(&d.workspace_, kWorkspaceBytes) != CUDA_SUCCESS)
      return kiln::make_error("cannot allocate the workspace");
    KILN_RETURN_IF_ERROR(check(lt.desc_create(&d.desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate"));
    // Column-major: C^T[n,m] = op(B^T)[n,k] op(A^T)[k,m]; B^T is B as stored, transposed
    // again where B is stored [n,k].
    const cublasOperation_t first_op = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t second_op = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    KILN_RETURN_IF_ERROR(check(lt.desc_set(d.desc_, CUBLASLT_MATMUL_DESC_TRANSA, &first_op, sizeof first_op),
                               "cublasLtMatmulDescSetAttribute"));
    KILN_RETURN_IF_ERROR(check(lt.desc_set(d.desc_, CUBLASLT_MATMUL_DESC_TRANSB, &second_op, sizeof second_op),
                               "cublasLtMatmulDescSetAttribute"));
    struct Layout {
      cublasLtMatrixLayout_t* layout;
      int64_t rows, cols, stride;
    };
    const Layout layouts[] = {
        {&d.first_, g.trans_b ? g.k : g.n, g.trans_b ? g.n : g.k, g.k * g.n},
        {&d.second_, g.trans_a ? g.m : g.k, g.trans_a ? g.k : g.m, g.m * g.k},
        {&d.result_, g.n, g.m, g.m * g.n},
    };
    for (const Layout& l : layouts) {
      KILN_RETURN_IF_ERROR(
          check(lt.layout_create(l.layout, type, static_cast<uint64_t>(l.rows), static_cast<uint64_t>(l.cols), l.rows),
                "cublasLtMatrixLayoutCreate"));
      if (g.batch > 1) {
        const int32_t count = static_cast<int32_t>(g.batch);
        KILN_RETURN_IF_ERROR(check(lt.layout_set(*l.layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                                   "cublasLtMatrixLayoutSetAttribute"));
        KILN_RETURN_IF_ERROR(
            check(lt.layout_set(*l.layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &l.stride, sizeof l.stride),
                  "cublasLtMatrixLayoutSetAttribute"));
      }
    }
    cublasLtMatmulPreference_t preference = nullptr;
    KILN_RETURN_IF_ERROR(check(lt.preference_create(&preference), "cublasLtMatmulPreferenceCreate"));
    const size_t workspace = kWorkspaceBytes;
    KILN_RETURN_IF_ERROR(
        check(lt.preference_set(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace),
              "cublasLtMatmulPreferenceSetAttribute"));
    cublasLtMatmulHeuristicResult_t found{};
    int count = 0;
    KILN_RETURN_IF_ERROR(check(
        lt.heuristic(d.handle_, d.desc_, d.first_, d.second_, d.result_, d.result_, preference, 1, &found, &count),
        "cublasLtMatmulAlgoGetHeuristic"));
    if (count < 1) return kiln::make_error("cublasLtMatmulAlgoGetHeuristic found no algorithm");
    d.algorithm_ = found.algo;
    return d;
  }

  Status run() const {
    const float one = 1, zero = 0;
    KILN_RETURN_IF_ERROR(check(
        lt_->matmul(handle_, desc_, &one, reinterpret_cast<const void*>(b_), first_, reinterpret_cast<const void*>(a_),
                    second_, &zero, reinterpret_cast<void*>(c_), result_, reinterpret_cast<void*>(c_), result_,
                    &algorithm_, reinterpret_cast<void*>(workspace_), kWorkspaceBytes, stream_),
        "cublasLtMatmul"));
    if (cu_->stream_synchronize(stream_) != CUDA_SUCCESS) return kiln::make_error("cuStreamSynchronize failed");
    return Status::Ok();
  }

 private:
  const Lt* lt_ = nullptr;
  const kiln::runtime::cuda::Driver* cu_ = nullptr;
  cublasLtHandle_t handle_ = nullptr;
  CUstream stream_ = nullptr;
  CUdeviceptr a_ = 0, b_ = 0, c_ = 0, workspace_ = 0;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t first_ = nullptr, second_ = nullptr, result_ = nullptr;
  cublasLtMatmulAlgo_t algorithm_{};
};

// The artifact's one step, the GEMM of `g` with its transposes folded: what the
// comparison assumes. Anything else (a transpose kernel, a loop of calls) is an error.
Status check_one_gemm(const std::vector<uint8_t>& artifact, const Gemm& g) {
  KILN_ASSIGN_OR_RETURN(kiln::format::ArtifactView view, kiln::format::read_artifact(artifact));
  const auto* steps = view.metadata().steps();
  const kiln::format::Matmul* mm = steps && steps->size() == 1 ? steps->Get(0)->matmul() : nullptr;
  const int64_t batch = mm && mm->batch() && mm->batch()->size() == 1 ? mm->batch()->Get(0)->count() : 1;
  const bool batches = !mm || !mm->batch() || mm->batch()->size() <= 1;
  if (!mm || !batches || batch != g.batch || mm->m() != g.m || mm->n() != g.n || mm->k() != g.k ||
      mm->trans_a() != g.trans_a || mm->trans_b() != g.trans_b)
    return kiln::make_error(fmt::format("the artifact of '{}' is not one GEMM of its shape", g.what));
  return Status::Ok();
}

struct Options {
  std::string dtype = "f32", filter;
  int repeat = 50;
  bool compile_only = false;
};

Result<Options> parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const size_t n = std::strlen(flag);
      return arg.compare(0, n, flag) == 0 && arg.size() > n && arg[n] == '=' ? arg.c_str() + n + 1 : nullptr;
    };
    if (const char* v = value("--dtype")) o.dtype = v;
    else if (const char* v = value("--repeat")) o.repeat = std::atoi(v);
    else if (const char* v = value("--filter")) o.filter = v;
    else if (arg == "--compile-only") o.compile_only = true;
    else
      return kiln::make_error("unknown argument '" + arg +
                              "' (expected --dtype=, --repeat=, --filter=, --compile-only)");
  }
  if (o.dtype != "f32" && o.dtype != "bf16" && o.dtype != "f16")
    return kiln::make_error("--dtype expects f32, bf16 or f16, got '" + o.dtype + "'");
  if (o.repeat < 1) return kiln::make_error("--repeat must be at least 1");
  return o;
}

Status compare(const Options& o) {
  const cudaDataType_t type = o.dtype == "f32" ? CUDA_R_32F : o.dtype == "bf16" ? CUDA_R_16BF : CUDA_R_16F;
  const size_t element_bytes = o.dtype == "f32" ? 4 : 2;
  auto selected = [&](const Gemm& g) {
    return o.filter.empty() || std::string(g.what).find(o.filter) != std::string::npos;
  };
  auto compiled = [&](const Gemm& g) -> Result<std::vector<uint8_t>> {
    KILN_ASSIGN_OR_RETURN(kiln::ir::Graph graph, kiln::ir::parse(graph_text(g, o.dtype), "gemm.kir"));
    kiln::CompileOptions options;
    options.target = "cuda";
    KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> artifact, kiln::compile_to_artifact(graph, options));
    KILN_RETURN_IF_ERROR(check_one_gemm(artifact, g));
    return artifact;
  };
  if (o.compile_only) {
    for (const Gemm& g : kGemms)
      if (selected(g)) {
        if (auto artifact = compiled(g); !artifact.ok()) return artifact.error();
        fmt::print("{}: one GEMM, b={} m={} k={} n={}{}{}\n", g.what, g.batch, g.m, g.k, g.n,
                   g.trans_a ? " trans_a" : "", g.trans_b ? " trans_b" : "");
      }
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(const kiln::runtime::cuda::Driver* cu, kiln::runtime::cuda::driver());
  KILN_ASSIGN_OR_RETURN(Lt lt, open_lt());
  KILN_ASSIGN_OR_RETURN(std::string gpu, kiln::bench::gpu_name(cu));
  fmt::print("lt_compare: {} matmuls on {}, {} alternating rounds each (artifact, direct cublasLtMatmul)\n\n", o.dtype,
             gpu, o.repeat);
  fmt::print("{:<22} {:>4} {:>5} {:>5} {:>5} {:>11} {:>10} {:>10} {:>10}\n", "gemm", "b", "m", "k", "n", "artifact ms",
             "direct ms", "of direct", "TFLOP/s");
  for (const Gemm& g : kGemms) {
    if (!selected(g)) continue;
    KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> artifact, compiled(g));
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<kiln::runtime::Model> model,
                          kiln::runtime::Model::load_bytes(std::move(artifact)));
    KILN_ASSIGN_OR_RETURN(
        auto buffers,
        kiln::bench::ModelBuffers::make(*model, [](const kiln::runtime::TensorInfo& info, size_t i, uint8_t* bytes) {
          kiln::bench::fill_random(info, i + 1, bytes);
          return Status::Ok();
        }));
    KILN_RETURN_IF_ERROR(buffers->to_device());
    KILN_ASSIGN_OR_RETURN(DirectGemm direct, DirectGemm::make(lt, cu, g, type, element_bytes));
    KILN_RETURN_IF_ERROR(buffers->run());
    KILN_RETURN_IF_ERROR(direct.run());
    Status last = Status::Ok();
    auto keep = [&](Status s) {
      if (last.ok()) last = std::move(s);
    };
    kiln::bench::Interleaved t =
        kiln::bench::time_interleaved(o.repeat, {[&] { keep(buffers->run()); }, [&] { keep(direct.run()); }});
    KILN_RETURN_IF_ERROR(last);
    const double flops = 2.0 * static_cast<double>(g.batch * g.m * g.n * g.k);
    fmt::print("{:<22} {:>4} {:>5} {:>5} {:>5} {:>11.4f} {:>10.4f} {:>10.3f} {:>10.1f}\n", g.what, g.batch, g.m, g.k,
               g.n, t.timings[0].median_ms, t.timings[1].median_ms, t.median_ratio(1, 0),
               flops / t.timings[0].median_ms / 1e9);
  }
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  auto options = parse(argc, argv);
  Status done = options.ok() ? compare(*options) : Status(options.error());
  if (done.ok()) return 0;
  fmt::print(stderr, "lt_compare: error: {}\n", done.error().message);
  return 1;
}
