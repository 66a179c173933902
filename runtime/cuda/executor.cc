#include "runtime/cuda/executor.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string_view>

#include "runtime/cuda/blas_lt.h"
#include "runtime/cuda/driver.h"
#include "runtime/format/target.h"

namespace kiln::runtime::cuda {
namespace {

std::string mib(uint64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

// cuBLAS's and cuBLASLt's workspace per session: with one set, cuBLAS allocates nothing
// while a graph is captured (NVIDIA recommends 32 MiB on Hopper).
constexpr size_t kBlasWorkspaceBytes = size_t{32} << 20;

struct Step {
  format::StepKind kind;
  std::string name;
  CUfunction function = nullptr;
  unsigned grid = 1, block = 1;
  unsigned shared = 0;  // dynamic shared memory per block, in bytes
  // A split reduction step's first kernel (or an attention backward's), and the arena
  // offset of the scratch both take.
  CUfunction partial = nullptr;
  unsigned partial_grid = 1, partial_block = 1, partial_shared = 0;
  uint64_t scratch_offset = 0;
  std::vector<uint32_t> args;  // inputs then outputs
  size_t inputs = 0;           // how many of args are inputs
  const format::Matmul* matmul = nullptr;
  format::DType dtype = format::DType::F32;  // a matmul's element type
  bool lt = false;                           // a matmul run by cublasLtMatmul (else cuBLAS)
  int bias_arg = -1;                         // its epilogue's bias, in args
};

struct Session {
  CUstream stream = nullptr;
  CUdeviceptr arena = 0, workspace = 0;
  std::vector<CUdeviceptr> inputs;  // per input position (host runs)
  Blas::Handle blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  std::vector<std::unique_ptr<LtMatmul>> lt_steps;  // per step: its cuBLASLt call, if one
  CUgraphExec graph = nullptr;
  std::vector<CUdeviceptr> graph_where;  // the pointers `graph` was captured with
};

// How to run: on which device, with CUDA Graphs or a launch per step.
struct ExecutorOptions {
  int device = 0;
  bool graphs = true;
};

// The events of one profiled run, destroyed with it.
struct StepEvents {
  const Driver* cu;
  std::vector<CUevent> events;
  explicit StepEvents(const Driver* driver) : cu(driver) {}
  StepEvents(const StepEvents&) = delete;
  StepEvents& operator=(const StepEvents&) = delete;
  ~StepEvents() {
    for (CUevent e : events) cu->event_destroy(e);
  }
  CUresult create(size_t count) {
    for (size_t i = 0; i < count; ++i) {
      CUevent e = nullptr;
      if (CUresult r = cu->event_create(&e, CU_EVENT_DEFAULT); r != CUDA_SUCCESS) return r;
      events.push_back(e);
    }
    return CUDA_SUCCESS;
  }
};

// What a loaded CUDA artifact holds on the GPU, and how it runs.
struct Impl {
  const Driver* cu = nullptr;
  const Blas* blas = nullptr;  // only when a step is an f64 matmul (or KILN_CUDA_MATMUL=cublas)
  const BlasLt* lt = nullptr;  // only when a step is an f32, f16 or bf16 matmul
  Signature sig;
  ExecutorOptions options;
  const format::Artifact* artifact = nullptr;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  std::string description;
  int sms = 0, threads_per_sm = 0;
  std::vector<Step> steps;
  std::vector<CUdeviceptr> weights;  // per value (0 unless a param)
  std::vector<CUdeviceptr> state;    // per state position
  std::vector<std::pair<uint32_t, uint32_t>> state_copies;
  mutable std::mutex sessions_mutex;
  mutable std::vector<std::unique_ptr<Session>> free_sessions;
  mutable std::mutex state_mutex;

  Status check(CUresult r, const std::string& what) const {
    if (r == CUDA_SUCCESS) return Status::Ok();
    return make_error("runtime: CUDA error in " + what + ": " + cu->describe(r));
  }

  Result<CUdeviceptr> allocate(uint64_t bytes, const std::string& what) const {
    CUdeviceptr p = 0;
    CUresult r = cu->mem_alloc(&p, std::max<uint64_t>(bytes, 1));
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      size_t free = 0, total = 0;
      cu->mem_get_info(&free, &total);
      return make_error("runtime: out of GPU memory: " + what + " needs " + std::to_string(bytes) + " bytes, and " +
                        mib(free) + " of " + mib(total) + " are free");
    }
    KILN_RETURN_IF_ERROR(check(r, "cuMemAlloc for " + what));
    return p;
  }

  ~Impl() {
    if (!cu) return;
    if (context) cu->ctx_set_current(context);
    for (auto& s : free_sessions) destroy(*s);
    for (CUdeviceptr w : weights)
      if (w) cu->mem_free(w);
    for (CUdeviceptr s : state) cu->mem_free(s);
    if (module) cu->module_unload(module);
    if (context) cu->primary_ctx_release(device);
  }

  void destroy(Session& s) const {
    if (s.graph) cu->graph_exec_destroy(s.graph);
    if (s.blas) blas->destroy(s.blas);
    s.lt_steps.clear();
    if (s.lt) lt->destroy(s.lt);
    for (CUdeviceptr p : s.inputs) cu->mem_free(p);
    if (s.arena) cu->mem_free(s.arena);
    if (s.workspace) cu->mem_free(s.workspace);
    if (s.stream) cu->stream_destroy(s.stream);
  }

  Status load_module(const format::ArtifactView& view) {
    int major = 0, minor = 0;
    cu->device_get_attribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    cu->device_get_attribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
    cu->device_get_attribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
    cu->device_get_attribute(&threads_per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, device);
    char name[256] = {};
    cu->device_get_name(name, sizeof name, device);
    const int cc = major * 10 + minor;
    description = std::string(name) + " (sm_" + std::to_string(cc) + ", " + std::to_string(sms) + " SMs)";
    // A cubin for this architecture, else one of the same major and a lower minor (binary
    // compatible), else PTX of a lower architecture, which the driver compiles.
    const format::CodeObject* best = nullptr;
    int best_score = -1;
    std::string offered;
    for (const format::CodeObject* c : *artifact->code()) {
      std::string kind = c->kind() ? c->kind()->str() : "", arch = c->arch() ? c->arch()->str() : "";
      offered += std::string(offered.empty() ? "" : ", ") + (kind == "ptx" ? "PTX " : "") + arch;
      int a = format::cuda_arch_number(arch), score = -1;
      if (kind == "cubin" && a == cc) score = 3000;
      else if (kind == "cubin" && a / 10 == major && a <= cc) score = 2000 + a;
      else if (kind == "ptx" && a <= cc) score = 1000 + a;
      if (score > best_score) best = c, best_score = score;
    }
    if (!best)
      return make_error("runtime: this artifact has code for " + offered + ", which this GPU (" + description +
                        ") cannot run");
    std::span<const uint8_t> code = view.section(*best->section());
    std::string image(code.begin(), code.end());
    image.push_back('\0');  // PTX is text; the driver reads it to its end
    char log[4096] = {};
    CUjit_option keys[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {log, reinterpret_cast<void*>(sizeof log)};
    CUresult r = cu->module_load_data_ex(&module, image.data(), 2, keys, values);
    if (r != CUDA_SUCCESS)
      return make_error("runtime: cannot load the artifact's " + best->kind()->str() + " for " + best->arch()->str() +
                        " on " + description + ": " + cu->describe(r) + (log[0] ? std::string("\n") + log : ""));
    return Status::Ok();
  }

  // How many blocks of the kernel the GPU holds at once. A grid of exactly that many runs
  // in one wave, each block looping over its share. A larger one leaves a second wave:
  // layernorm's kernel (40 registers a thread) fits 3 blocks of 512 on an SM, not the 4
  // that threads alone allow, and the grid sized for 4 ran its last quarter of blocks one
  // to an SM, well below softmax over the same rows (docs/cuda.md).
  int64_t resident_blocks(CUfunction function, int64_t block_threads, size_t shared_bytes = 0) const {
    int per_sm = 0;
    if (cu->occupancy_max_active_blocks(&per_sm, function, static_cast<int>(block_threads), shared_bytes) !=
            CUDA_SUCCESS ||
        per_sm < 1)
      per_sm = static_cast<int>(std::max<int64_t>(1, threads_per_sm / block_threads));
    return int64_t{sms} * per_sm;
  }

  // A kernel step's function and launch (with its split's first kernel, if any).
  Status load_kernel(Step& step, const format::Step& s) {
    KILN_RETURN_IF_ERROR(check(cu->module_get_function(&step.function, module, s.symbol()->c_str()),
                               "cuModuleGetFunction " + s.symbol()->str()));
    step.block = static_cast<unsigned>(s.block_threads());
    step.shared = static_cast<unsigned>(s.shared_bytes());
    // Past 48 KB a function takes dynamic shared memory only once allowed it.
    if (step.shared > 0)
      KILN_RETURN_IF_ERROR(check(cu->func_set_attribute(step.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                        static_cast<int>(step.shared)),
                                 "cuFuncSetAttribute " + s.symbol()->str() + " (" + std::to_string(step.shared) +
                                     " bytes of dynamic shared memory)"));
    step.grid = static_cast<unsigned>(
        std::min<int64_t>(s.grid_blocks(), resident_blocks(step.function, s.block_threads(), step.shared)));
    if (s.partial_symbol() && s.partial_symbol()->size() > 0) {
      KILN_RETURN_IF_ERROR(check(cu->module_get_function(&step.partial, module, s.partial_symbol()->c_str()),
                                 "cuModuleGetFunction " + s.partial_symbol()->str()));
      step.partial_block = static_cast<unsigned>(s.partial_block_threads());
      step.partial_shared = static_cast<unsigned>(s.partial_shared_bytes());
      if (step.partial_shared > 0)
        KILN_RETURN_IF_ERROR(check(cu->func_set_attribute(step.partial, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                          static_cast<int>(step.partial_shared)),
                                   "cuFuncSetAttribute " + s.partial_symbol()->str() + " (" +
                                       std::to_string(step.partial_shared) + " bytes of dynamic shared memory)"));
      step.partial_grid = static_cast<unsigned>(std::min<int64_t>(
          s.partial_grid_blocks(), resident_blocks(step.partial, s.partial_block_threads(), step.partial_shared)));
      step.scratch_offset = static_cast<uint64_t>(s.scratch_offset());
    }
    return Status::Ok();
  }

  Status load_steps() {
    // cublasLtMatmul for every f32, f16 and bf16 matmul: it applies their epilogues.
    // KILN_CUDA_MATMUL=cublas runs those without one on cuBLAS's GEMMs instead (to compare
    // the two libraries); f64 always runs there.
    const char* library = std::getenv("KILN_CUDA_MATMUL");
    if (library && *library && std::string_view(library) != "cublas" && std::string_view(library) != "cublaslt")
      return make_error(std::string("runtime: KILN_CUDA_MATMUL is '") + library +
                        "'; it takes cublas or cublaslt (the default)");
    const bool cublas_asked = library && std::string_view(library) == "cublas";
    uint32_t index = 0;
    for (const format::Step* s : *artifact->steps()) {
      Step step;
      step.kind = s->kind();
      step.name = s->name() ? s->name()->str() : "step " + std::to_string(index);
      for (uint32_t v : *s->inputs()) step.args.push_back(v);
      step.inputs = step.args.size();
      for (uint32_t v : *s->outputs()) step.args.push_back(v);
      if (step.kind == format::StepKind::Library && s->conv())
        return make_error("runtime: step " + step.name +
                          " is a library convolution, which runs on the CPU's oneDNN; kiln compiles convolutions "
                          "for CUDA as im2col and matmuls, so this artifact was not written by kiln for CUDA");
      if (step.kind == format::StepKind::Library && s->attention()) {
        // An attention: the kernel the compiler wrote for it, launched as a kernel step is.
        KILN_RETURN_IF_ERROR(load_kernel(step, *s));
      } else if (step.kind == format::StepKind::Library) {
        step.matmul = s->matmul();
        const format::Value* a = artifact->values()->Get(step.args[0]);
        if (a->dtype() != format::DType::F32 && a->dtype() != format::DType::F64 && a->dtype() != format::DType::F16 &&
            a->dtype() != format::DType::BF16)
          return make_error("runtime: step " + step.name + ": matmul on " + format::EnumNameDType(a->dtype()) +
                            " is not supported on CUDA");
        step.dtype = a->dtype();
        const bool has_post_ops = step.matmul->post_ops() && step.matmul->post_ops()->size() > 0;
        step.lt = step.dtype != format::DType::F64 && (has_post_ops || !cublas_asked);
        if (has_post_ops)
          for (const format::PostOp* p : *step.matmul->post_ops())
            if (p->kind() == format::PostOpKind::Bias) step.bias_arg = p->input();
        if (step.lt && !lt) {
          KILN_ASSIGN_OR_RETURN(lt, cuda::blas_lt());
        }
        if (!step.lt && !blas) {
          KILN_ASSIGN_OR_RETURN(blas, cuda::blas());
        }
      } else {
        KILN_RETURN_IF_ERROR(load_kernel(step, *s));
      }
      steps.push_back(std::move(step));
      ++index;
    }
    if (artifact->state_copies())
      for (const format::StateCopy* c : *artifact->state_copies()) state_copies.emplace_back(c->state(), c->value());
    return Status::Ok();
  }

  Status upload() {
    weights.assign(sig.value_bytes.size(), 0);
    for (size_t v = 0; v < sig.weights.size(); ++v) {
      if (!sig.weights[v]) continue;
      KILN_ASSIGN_OR_RETURN(weights[v], allocate(static_cast<uint64_t>(sig.value_bytes[v]), "a weight"));
      KILN_RETURN_IF_ERROR(check(cu->memcpy_htod(weights[v], sig.weights[v], static_cast<size_t>(sig.value_bytes[v])),
                                 "uploading the weights"));
    }
    for (size_t i = 0; i < sig.state_values.size(); ++i) {
      const size_t bytes = static_cast<size_t>(sig.value_bytes[sig.state_values[i]]);
      KILN_ASSIGN_OR_RETURN(CUdeviceptr p, allocate(bytes, "a state tensor"));
      state.push_back(p);
      if (sig.state_initial[i])
        KILN_RETURN_IF_ERROR(check(cu->memcpy_htod(p, sig.state_initial[i], bytes), "uploading the initial state"));
      else KILN_RETURN_IF_ERROR(check(cu->memset_d8(p, 0, bytes), "clearing the state"));
    }
    return Status::Ok();
  }

  Result<std::unique_ptr<Session>> take_session() const {
    {
      std::lock_guard<std::mutex> lock(sessions_mutex);
      if (!free_sessions.empty()) {
        auto s = std::move(free_sessions.back());
        free_sessions.pop_back();
        return s;
      }
    }
    auto s = std::make_unique<Session>();
    auto fail = [&](Error e) -> Result<std::unique_ptr<Session>> {
      destroy(*s);
      return e;
    };
    if (Status st = check(cu->stream_create(&s->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"); !st.ok())
      return fail(st.error());
    auto arena = allocate(artifact->arena_bytes(), "the arena");
    if (!arena.ok()) return fail(arena.error());
    s->arena = *arena;
    for (uint32_t v : sig.input_values) {
      auto p = allocate(static_cast<uint64_t>(sig.value_bytes[v]), "an input");
      if (!p.ok()) return fail(p.error());
      s->inputs.push_back(*p);
    }
    if (blas || lt) {
      auto w = allocate(kBlasWorkspaceBytes, "cuBLAS's workspace");
      if (!w.ok()) return fail(w.error());
      s->workspace = *w;
    }
    if (lt) {
      if (cublasStatus_t b = lt->create(&s->lt); b != CUBLAS_STATUS_SUCCESS)
        return fail(make_error(std::string("runtime: cublasLtCreate failed: ") + lt->status_string(b)));
      s->lt_steps.resize(steps.size());
      for (size_t i = 0; i < steps.size(); ++i) {
        if (!steps[i].lt) continue;
        auto op = LtMatmul::create(lt, s->lt, *steps[i].matmul, steps[i].dtype, artifact->allow_tf32(),
                                   kBlasWorkspaceBytes, steps[i].name);
        if (!op.ok()) return fail(op.error());
        s->lt_steps[i] = std::move(*op);
      }
    }
    if (blas) {
      if (Blas::Status b = blas->create(&s->blas); b != 0)
        return fail(make_error(std::string("runtime: cublasCreate failed: ") + blas->status_string(b)));
      blas->set_stream(s->blas, s->stream);
      blas->set_workspace(s->blas, reinterpret_cast<void*>(s->workspace), kBlasWorkspaceBytes);
      // TF32 only where the artifact was compiled to allow it (kiln compile --allow-tf32).
      const Blas::MathMode math = artifact->allow_tf32() ? Blas::kTf32TensorOpMath : Blas::kDefaultMath;
      if (Blas::Status b = blas->set_math_mode(s->blas, math); b != 0)
        return fail(make_error(std::string("runtime: cublasSetMathMode failed: ") + blas->status_string(b)));
    }
    return s;
  }

  void give_back(std::unique_ptr<Session> s) const {
    std::lock_guard<std::mutex> lock(sessions_mutex);
    free_sessions.push_back(std::move(s));
  }

  // Where every value lives for one run.
  std::vector<CUdeviceptr> placement(const Session& s, const std::vector<CUdeviceptr>& inputs) const {
    std::vector<CUdeviceptr> where(sig.value_bytes.size(), 0);
    for (size_t i = 0; i < sig.input_values.size(); ++i) where[sig.input_values[i]] = inputs[i];
    for (size_t v = 0; v < where.size(); ++v)
      if (weights[v]) where[v] = weights[v];
    for (size_t i = 0; i < sig.state_values.size(); ++i) where[sig.state_values[i]] = state[i];
    for (const format::Buffer* b : *artifact->buffers()) {
      if (b->home() == format::Home::Arena) where[b->value()] = s.arena + b->offset();
      if (b->home() == format::Home::State && b->state() >= 0)
        where[b->value()] = where[static_cast<uint32_t>(b->state())];
    }
    return where;
  }

  // One strided-batched cuBLAS GEMM of the step over its innermost batch dim, from the
  // first batch index's elements at a, b and c.
  Status blas_gemm(const Step& step, const Session& s, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c) const {
    const format::Matmul& mm = *step.matmul;
    const int m = static_cast<int>(mm.m()), n = static_cast<int>(mm.n()), k = static_cast<int>(mm.k());
    // Operands read in place through slices and transposes (matmul views) have their own
    // leading dims and offsets; 0 means packed.
    const int lda = mm.lda()       ? static_cast<int>(mm.lda())
                    : mm.trans_a() ? m
                                   : k,
              ldb = mm.ldb()       ? static_cast<int>(mm.ldb())
                    : mm.trans_b() ? k
                                   : n;
    const Blas::Operation ta = mm.trans_a() ? Blas::kTranspose : Blas::kNoTranspose,
                          tb = mm.trans_b() ? Blas::kTranspose : Blas::kNoTranspose;
    const format::BatchDim* inner =
        mm.batch() && mm.batch()->size() ? mm.batch()->Get(mm.batch()->size() - 1) : nullptr;
    const int count = inner ? static_cast<int>(inner->count()) : 1;
    const long long sa = inner ? inner->a_stride() : 0, sb = inner ? inner->b_stride() : 0,
                    sc = inner ? inner->c_stride() : 0;
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: B first.
    Blas::Status r;
    if (step.dtype == format::DType::F16 || step.dtype == format::DType::BF16) {
      // Half-precision operands and result, f32 accumulation (cuBLAS picks tensor cores).
      const Blas::DataType t = step.dtype == format::DType::F16 ? Blas::kR16F : Blas::kR16BF;
      const float one = 1, zero = 0;
      r = blas->gemm_strided_batched_ex(s.blas, tb, ta, n, m, k, &one, reinterpret_cast<const void*>(b), t, ldb, sb,
                                        reinterpret_cast<const void*>(a), t, lda, sa, &zero, reinterpret_cast<void*>(c),
                                        t, n, sc, count, Blas::kCompute32F, -1 /* CUBLAS_GEMM_DEFAULT */);
    } else if (step.dtype == format::DType::F64) {
      const double one = 1, zero = 0;
      r = blas->dgemm_strided_batched(s.blas, tb, ta, n, m, k, &one, reinterpret_cast<const double*>(b), ldb, sb,
                                      reinterpret_cast<const double*>(a), lda, sa, &zero, reinterpret_cast<double*>(c),
                                      n, sc, count);
    } else {
      const float one = 1, zero = 0;
      r = blas->sgemm_strided_batched(s.blas, tb, ta, n, m, k, &one, reinterpret_cast<const float*>(b), ldb, sb,
                                      reinterpret_cast<const float*>(a), lda, sa, &zero, reinterpret_cast<float*>(c), n,
                                      sc, count);
    }
    if (r != 0) return make_error("runtime: cuBLAS error in step " + step.name + ": " + blas->status_string(r));
    return Status::Ok();
  }

  // A matmul step: one cuBLASLt or cuBLAS call per index of its outer batch dims (the
  // innermost is the call's strided batch). With `prepare_only`, only cuBLASLt's algorithms
  // for these pointers are chosen (before a graph capture, which records kernels only).
  Status matmul(size_t index, const Session& s, const std::vector<CUdeviceptr>& where,
                bool prepare_only = false) const {
    const Step& step = steps[index];
    const format::Matmul& mm = *step.matmul;
    if (mm.m() > INT32_MAX || mm.n() > INT32_MAX || mm.k() > INT32_MAX || mm.lda() > INT32_MAX || mm.ldb() > INT32_MAX)
      return make_error("runtime: step " + step.name + ": a matmul dim is past the 2147483647 cuBLAS takes");
    std::vector<const format::BatchDim*> dims;
    if (mm.batch())
      for (const format::BatchDim* d : *mm.batch()) dims.push_back(d);
    if (!dims.empty()) dims.pop_back();  // the call's own
    int64_t outer = 1;
    for (const auto* d : dims) outer *= d->count();
    const size_t size = static_cast<size_t>(format::element_bytes(step.dtype));
    const CUdeviceptr bias = step.bias_arg >= 0 ? where[step.args[static_cast<size_t>(step.bias_arg)]] : 0;
    std::vector<int64_t> at(dims.size(), 0);
    for (int64_t p = 0; p < outer; ++p) {
      int64_t ao = 0, bo = 0, co = 0;
      for (size_t i = 0; i < dims.size(); ++i)
        ao += at[i] * dims[i]->a_stride(), bo += at[i] * dims[i]->b_stride(), co += at[i] * dims[i]->c_stride();
      CUdeviceptr a = where[step.args[0]] + (mm.a_offset() + ao) * size,
                  b = where[step.args[1]] + (mm.b_offset() + bo) * size, c = where[step.args[step.inputs]] + co * size;
      if (prepare_only) {
        if (step.lt) KILN_RETURN_IF_ERROR(s.lt_steps[index]->prepare(a, b, c));
      } else {
        KILN_RETURN_IF_ERROR(step.lt ? s.lt_steps[index]->enqueue(a, b, c, bias, s.stream, s.workspace)
                                     : blas_gemm(step, s, a, b, c));
      }
      for (size_t i = dims.size(); i-- > 0;) {
        if (++at[i] < dims[i]->count()) break;
        at[i] = 0;
      }
    }
    return Status::Ok();
  }

  // Every step, on the session's stream; with `events` (one per step and one more), an
  // event recorded before the first step and after each.
  Status enqueue(const Session& s, const std::vector<CUdeviceptr>& where, const CUevent* events = nullptr) const {
    std::vector<CUdeviceptr> args;
    std::vector<void*> params;
    if (events) KILN_RETURN_IF_ERROR(check(cu->event_record(events[0], s.stream), "cuEventRecord"));
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& step = steps[i];
      if (step.matmul) {
        KILN_RETURN_IF_ERROR(matmul(i, s, where));
      } else {
        args.clear();
        params.clear();
        for (uint32_t v : step.args) args.push_back(where[v]);
        if (step.partial) args.push_back(s.arena + step.scratch_offset);
        for (CUdeviceptr& a : args) params.push_back(&a);
        if (step.partial)  // the first kernel (a split's parts, a backward's row values), then the step's
          KILN_RETURN_IF_ERROR(check(cu->launch_kernel(step.partial, step.partial_grid, 1, 1, step.partial_block, 1, 1,
                                                       step.partial_shared, s.stream, params.data(), nullptr),
                                     "step " + step.name + "'s parts (cuLaunchKernel)"));
        KILN_RETURN_IF_ERROR(check(cu->launch_kernel(step.function, step.grid, 1, 1, step.block, 1, 1, step.shared,
                                                     s.stream, params.data(), nullptr),
                                   "step " + step.name + " (cuLaunchKernel)"));
      }
      if (events) KILN_RETURN_IF_ERROR(check(cu->event_record(events[i + 1], s.stream), "cuEventRecord"));
    }
    return Status::Ok();
  }

  // The state updates, enqueued after the outputs are copied: a result may be a state
  // argument itself, and it returns the state from before this run.
  Status update_state(const Session& s, const std::vector<CUdeviceptr>& where) const {
    for (size_t i = 0; i < state_copies.size(); ++i) {
      auto [state_value, value] = state_copies[i];
      KILN_RETURN_IF_ERROR(check(cu->memcpy_dtod_async(where[state_value], where[value],
                                                       static_cast<size_t>(sig.value_bytes[value]), s.stream),
                                 "the state update of value " + std::to_string(state_value)));
    }
    return Status::Ok();
  }

  // Runs the steps: the session's graph, captured again when the pointers changed.
  Status execute(Session& s, const std::vector<CUdeviceptr>& where) const {
    if (!options.graphs) return enqueue(s, where);
    if (!s.graph || s.graph_where != where) {
      if (s.graph) cu->graph_exec_destroy(s.graph);
      s.graph = nullptr;
      for (size_t i = 0; i < steps.size(); ++i)
        if (steps[i].lt) KILN_RETURN_IF_ERROR(matmul(i, s, where, /*prepare_only=*/true));
      KILN_RETURN_IF_ERROR(
          check(cu->stream_begin_capture(s.stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture"));
      Status enqueued = enqueue(s, where);
      CUgraph graph = nullptr;
      CUresult ended = cu->stream_end_capture(s.stream, &graph);
      KILN_RETURN_IF_ERROR(enqueued);
      KILN_RETURN_IF_ERROR(check(ended, "cuStreamEndCapture"));
      CUresult instantiated = cu->graph_instantiate(&s.graph, graph, 0);
      cu->graph_destroy(graph);
      KILN_RETURN_IF_ERROR(check(instantiated, "cuGraphInstantiate"));
      s.graph_where = where;
    }
    return check(cu->graph_launch(s.graph, s.stream), "cuGraphLaunch");
  }

  // One run on a session; `copy_in` and `copy_out` enqueue the caller's transfers. With
  // `profile`, the steps are launched one by one (no graph) with an event between each
  // two, and the copies after them timed as one more step.
  template <class In, class Out>
  Status run(const std::vector<CUdeviceptr>* caller_inputs, const std::vector<CUdeviceptr>* caller_outputs, In copy_in,
             Out copy_out, RunProfile* profile) const {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point started = profile ? Clock::now() : Clock::time_point{};  // read only to profile
    KILN_RETURN_IF_ERROR(check(cu->ctx_set_current(context), "cuCtxSetCurrent"));
    StepEvents events(cu);
    if (profile && !cu->missing_for_profiles.empty())
      return make_error("runtime: this NVIDIA driver cannot time steps: it lacks " + cu->missing_for_profiles);
    if (profile) KILN_RETURN_IF_ERROR(check(events.create(steps.size() + 2), "cuEventCreate"));
    std::unique_lock<std::mutex> state_lock(state_mutex, std::defer_lock);
    if (!sig.state_values.empty()) state_lock.lock();
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, take_session());
    std::vector<CUdeviceptr> where = placement(*s, caller_inputs ? *caller_inputs : s->inputs);
    // Results in the arena are written straight into the caller's device buffers.
    std::vector<char> redirected(where.size(), 0);
    if (caller_outputs)
      for (const format::Buffer* b : *artifact->buffers())
        for (size_t i = 0; i < sig.output_values.size(); ++i)
          if (b->value() == sig.output_values[i] && b->home() == format::Home::Arena && !redirected[b->value()]) {
            where[b->value()] = (*caller_outputs)[i];
            redirected[b->value()] = 1;
          }
    Status status = copy_in(*s);
    double first_event_ms = 0;  // on the host clock
    if (status.ok() && profile) {
      first_event_ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
      status = enqueue(*s, where, events.events.data());
    } else if (status.ok()) {
      status = execute(*s, where);
    }
    if (status.ok()) status = copy_out(*s, where);
    if (status.ok()) status = update_state(*s, where);
    if (status.ok() && profile) status = check(cu->event_record(events.events.back(), s->stream), "cuEventRecord");
    if (status.ok()) status = check(cu->stream_synchronize(s->stream), "running the steps (cuStreamSynchronize)");
    if (status.ok() && profile) {
      *profile = {0, {}, "CUDA events between plain launches (no graph)"};
      for (size_t i = 0; i + 1 < events.events.size(); ++i) {
        float start = 0, ms = 0;
        status = check(cu->event_elapsed_time(&start, events.events[0], events.events[i]), "cuEventElapsedTime");
        if (status.ok())
          status = check(cu->event_elapsed_time(&ms, events.events[i], events.events[i + 1]), "cuEventElapsedTime");
        if (!status.ok()) break;
        profile->steps.push_back({first_event_ms + start, ms});
      }
      profile->total_ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
    }
    if (!status.ok()) {
      // The stream may hold the failure; a fresh session starts clean.
      cu->stream_synchronize(s->stream);
      destroy(*s);
      return status;
    }
    give_back(std::move(s));
    return Status::Ok();
  }
};

class CudaExecutor final : public Executor {
 public:
  explicit CudaExecutor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
  Status run_host(const std::vector<const uint8_t*>& inputs, const std::vector<uint8_t*>& outputs,
                  RunProfile* profile) const override;
  Status run_device(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs,
                    RunProfile* profile) const override;
  Status read_state(size_t index, uint8_t* to) const override;
  Status write_state(size_t index, const uint8_t* from) override;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace

Result<std::unique_ptr<Executor>> load_executor(const format::ArtifactView& view, Signature signature,
                                                const Options& load_options) {
  const ExecutorOptions options{load_options.cuda_device, load_options.cuda_graphs};
  const std::string target = view.metadata().target()->str();
  const std::string arch = target.substr(target.find('-') + 1);
  auto cu = driver();
  if (!cu.ok()) return make_error("this artifact targets CUDA (" + arch + ") but " + cu.error().message);
  auto impl = std::make_unique<Impl>();
  impl->cu = *cu;
  impl->sig = std::move(signature);
  impl->options = options;
  impl->artifact = &view.metadata();
  int devices = 0;
  (*cu)->device_get_count(&devices);
  if (options.device < 0 || options.device >= devices)
    return make_error("runtime: there is no CUDA device " + std::to_string(options.device) + " (this machine has " +
                      std::to_string(devices) + ")");
  KILN_RETURN_IF_ERROR(impl->check((*cu)->device_get(&impl->device, options.device), "cuDeviceGet"));
  KILN_RETURN_IF_ERROR(
      impl->check((*cu)->primary_ctx_retain(&impl->context, impl->device), "cuDevicePrimaryCtxRetain"));
  KILN_RETURN_IF_ERROR(impl->check((*cu)->ctx_set_current(impl->context), "cuCtxSetCurrent"));
  KILN_RETURN_IF_ERROR(impl->load_module(view));
  KILN_RETURN_IF_ERROR(impl->load_steps());
  KILN_RETURN_IF_ERROR(impl->upload());
  return std::unique_ptr<Executor>(new CudaExecutor(std::move(impl)));
}

Status CudaExecutor::run_host(const std::vector<const uint8_t*>& inputs, const std::vector<uint8_t*>& outputs,
                              RunProfile* profile) const {
  const Impl& m = *impl_;
  auto copy_in = [&](const Session& s) -> Status {
    for (size_t i = 0; i < inputs.size(); ++i)
      KILN_RETURN_IF_ERROR(
          m.check(m.cu->memcpy_htod_async(s.inputs[i], inputs[i],
                                          static_cast<size_t>(m.sig.value_bytes[m.sig.input_values[i]]), s.stream),
                  "copying the inputs to the GPU"));
    return Status::Ok();
  };
  auto copy_out = [&](const Session& s, const std::vector<CUdeviceptr>& where) -> Status {
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!outputs[i]) continue;  // a state update the caller left out: the state holds it
      uint32_t v = m.sig.output_values[i];
      KILN_RETURN_IF_ERROR(
          m.check(m.cu->memcpy_dtoh_async(outputs[i], where[v], static_cast<size_t>(m.sig.value_bytes[v]), s.stream),
                  "copying the outputs from the GPU"));
    }
    return Status::Ok();
  };
  return m.run(nullptr, nullptr, copy_in, copy_out, profile);
}

Status CudaExecutor::run_device(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs,
                                RunProfile* profile) const {
  const Impl& m = *impl_;
  std::vector<CUdeviceptr> in(inputs.begin(), inputs.end()), out(outputs.begin(), outputs.end());
  auto copy_in = [](const Session&) { return Status::Ok(); };
  auto copy_out = [&](const Session& s, const std::vector<CUdeviceptr>& where) -> Status {
    for (size_t i = 0; i < out.size(); ++i) {
      uint32_t v = m.sig.output_values[i];
      if (where[v] == out[i]) continue;  // written in place
      KILN_RETURN_IF_ERROR(
          m.check(m.cu->memcpy_dtod_async(out[i], where[v], static_cast<size_t>(m.sig.value_bytes[v]), s.stream),
                  "copying an output"));
    }
    return Status::Ok();
  };
  return m.run(&in, &out, copy_in, copy_out, profile);
}

Status CudaExecutor::read_state(size_t index, uint8_t* to) const {
  const Impl& m = *impl_;
  KILN_RETURN_IF_ERROR(m.check(m.cu->ctx_set_current(m.context), "cuCtxSetCurrent"));
  std::lock_guard<std::mutex> lock(m.state_mutex);
  return m.check(
      m.cu->memcpy_dtoh(to, m.state[index], static_cast<size_t>(m.sig.value_bytes[m.sig.state_values[index]])),
      "reading a state tensor");
}

Status CudaExecutor::write_state(size_t index, const uint8_t* from) {
  Impl& m = *impl_;
  KILN_RETURN_IF_ERROR(m.check(m.cu->ctx_set_current(m.context), "cuCtxSetCurrent"));
  std::lock_guard<std::mutex> lock(m.state_mutex);
  return m.check(
      m.cu->memcpy_htod(m.state[index], from, static_cast<size_t>(m.sig.value_bytes[m.sig.state_values[index]])),
      "writing a state tensor");
}

}  // namespace kiln::runtime::cuda
