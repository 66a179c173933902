#include "runtime/model.h"

#include <cblas.h>
#include <algorithm>
#include <cstring>
#include <dlfcn.h>
#include <mutex>
#include <sys/mman.h>
#include <system_error>
#include <thread>
#include <unistd.h>

#include "base/allocation.h"
#include "base/version.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/executor.h"
#include "runtime/format/artifact.h"
#include "runtime/format/target.h"
#include "runtime/host_cpu.h"
#include "runtime/thread_pool.h"

namespace kiln::runtime {

// The runtime's element types are the artifact's, in the same order.
#define KILN_SAME_DTYPE(name) static_assert(static_cast<int>(ElementType::name) == static_cast<int>(format::DType::name));
KILN_SAME_DTYPE(F32)
KILN_SAME_DTYPE(F64)
KILN_SAME_DTYPE(F16)
KILN_SAME_DTYPE(BF16)
KILN_SAME_DTYPE(I32)
KILN_SAME_DTYPE(I64)
KILN_SAME_DTYPE(Bool)
#undef KILN_SAME_DTYPE
static_assert(static_cast<int>(format::DType::MAX) == static_cast<int>(ElementType::Bool), "an element type the runtime lacks");

std::string_view element_type_name(ElementType t) {
  constexpr std::string_view names[] = {"f32", "f64", "f16", "bf16", "i32", "i64", "bool"};
  return names[static_cast<int>(t)];
}

int element_bytes(ElementType t) {
  constexpr int sizes[] = {4, 8, 2, 2, 4, 8, 1};
  return sizes[static_cast<int>(t)];
}

int64_t TensorInfo::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorInfo::type_string() const {
  std::string s = std::string(element_type_name(type)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string_view runtime_version() { return kVersion; }

std::string artifact_format_versions() {
  return std::to_string(format::kFormatMajor) + ".0 to " + std::to_string(format::kFormatMajor) + "." + std::to_string(format::kFormatMinor);
}

Result<std::string> cuda_driver_version() {
  KILN_ASSIGN_OR_RETURN(const cuda::Driver* cu, cuda::driver());
  int version = 0;
  if (CUresult r = cu->driver_get_version(&version); r != CUDA_SUCCESS) return make_error("cuDriverGetVersion: " + cu->describe(r));
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

namespace {

using Kernel = void (*)(uint8_t* const*, int64_t, int64_t);

struct StepPlan {
  format::StepKind kind;
  Kernel kernel = nullptr;
  int64_t work_items = 0;
  std::vector<uint32_t> args;  // inputs then outputs (value indices)
  const format::Matmul* matmul = nullptr;
  std::string name;
};

// Matmul for element types BLAS does not cover, in the accumulation the interpreter uses.
template <class T, class Acc>
void matmul_loop(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      Acc acc = 0;
      for (int64_t q = 0; q < k; ++q)
        acc += static_cast<Acc>(a[ta ? q * m + i : i * k + q]) * static_cast<Acc>(b[tb ? j * k + q : q * n + j]);
      c[i * n + j] = static_cast<T>(acc);
    }
}

}  // namespace

struct AlignedDelete {
  void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t(64)); }
};
using Arena = std::unique_ptr<uint8_t[], AlignedDelete>;

class ModelImpl {
 public:
  // Arenas of finished runs, reused: a fresh one would fault in its pages on every run.
  mutable std::mutex arena_mutex;
  mutable std::vector<Arena> free_arenas;
  std::vector<uint8_t> bytes;
  format::ArtifactView view;
  std::vector<TensorInfo> values, inputs, outputs, state;
  std::vector<uint32_t> input_values, output_values, state_values;
  std::vector<const uint8_t*> weights;  // per value: param bytes
  std::vector<int> buffer_of;           // per value
  std::vector<StepPlan> steps;
  void* library = nullptr;
  std::unique_ptr<ThreadPool> pool;
  mutable std::mutex state_mutex;
  std::map<uint32_t, std::vector<uint8_t>> state_bytes;  // per state value
  std::vector<const uint8_t*> state_initial;             // per state position: initial bytes, or null for zeros

  int code_fd = -1;  // the memfd the kernels were loaded from
  std::unique_ptr<cuda::Executor> cuda;  // set for CUDA artifacts

  ~ModelImpl() {
    if (library) dlclose(library);
    if (code_fd >= 0) close(code_fd);
  }

  Status load_code() {
    const format::Artifact& a = view.metadata();
    bool needs_code = false;
    for (const StepPlan& s : steps) needs_code = needs_code || s.kind != format::StepKind::Library;
    if (!needs_code) return Status::Ok();
    KILN_ASSIGN_OR_RETURN(const format::CodeObject* elf, runnable_elf(a));
    // From memory: an anonymous file no other process can swap, opened through /proc.
    int fd = memfd_create("kiln-kernels", MFD_CLOEXEC);
    if (fd < 0) return make_error(std::string("runtime: memfd_create failed: ") + std::strerror(errno));
    auto code = view.section(*elf->section());
    size_t written = 0;
    while (written < code.size()) {
      ssize_t w = write(fd, code.data() + written, code.size() - written);
      if (w <= 0) {
        close(fd);
        return make_error("runtime: cannot write the kernels to memory");
      }
      written += static_cast<size_t>(w);
    }
    std::string path = "/proc/self/fd/" + std::to_string(fd);
    library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    // The descriptor stays open while the library is loaded: dlopen treats a path it has
    // loaded before as the same library, so a second model must not get this fd number.
    if (library) code_fd = fd;
    else close(fd);
    if (!library) return make_error(std::string("runtime: cannot load the kernels: ") + dlerror());
    for (StepPlan& s : steps) {
      if (s.kind == format::StepKind::Library) continue;
      const format::Step* step = a.steps()->Get(static_cast<uint32_t>(&s - steps.data()));
      s.kernel = reinterpret_cast<Kernel>(dlsym(library, step->symbol()->c_str()));
      if (!s.kernel) return make_error("runtime: the kernels have no entry point " + step->symbol()->str());
      if (view.format_minor() >= 2) KILN_RETURN_IF_ERROR(check_signature(s, step->symbol()->str()));
    }
    return Status::Ok();
  }

  // A kernel of format 1.2 or later carries the bytes of each argument it was compiled
  // for: metadata that gives it others would have it run off the end of a buffer.
  Status check_signature(const StepPlan& s, const std::string& symbol) const {
    const auto* words = static_cast<const int64_t*>(dlsym(library, format::kernel_signature_symbol(symbol).c_str()));
    auto refuse = [&](const std::string& why) {
      return Error{"artifact: shape mismatch: step " + s.name + ": " + why, static_cast<int>(format::ArtifactErrorKind::ShapeMismatch)};
    };
    if (!words) return refuse("its kernel " + symbol + " has no signature");
    if (words[0] != static_cast<int64_t>(s.args.size()))
      return refuse("its kernel takes " + std::to_string(words[0]) + " arguments, the metadata gives it " + std::to_string(s.args.size()));
    for (size_t i = 0; i < s.args.size(); ++i)
      if (words[i + 1] != values[s.args[i]].bytes())
        return refuse("argument " + std::to_string(i) + " of its kernel is " + std::to_string(words[i + 1]) + " bytes, the metadata's %" +
                      values[s.args[i]].name + " " + std::to_string(values[s.args[i]].bytes()));
    return Status::Ok();
  }

  // The ELF object with the most CPU features that this CPU all has (objects from before
  // format 1.2 record none and run anywhere, as they did).
  static Result<const format::CodeObject*> runnable_elf(const format::Artifact& a) {
    const format::CodeObject* best = nullptr;
    std::vector<std::string> fewest_missing;
    std::string fewest_cpu;
    bool any = false;
    if (a.code())
      for (const format::CodeObject* c : *a.code()) {
        if (!c->kind() || c->kind()->string_view() != "elf") continue;
        std::vector<std::string> needed;
        if (c->cpu_features())
          for (const auto* f : *c->cpu_features()) needed.push_back(f->str());
        std::vector<std::string> missing = missing_cpu_features(needed);
        if (missing.empty()) {
          if (!best || needed.size() > (best->cpu_features() ? best->cpu_features()->size() : 0)) best = c;
        } else if (!any || missing.size() < fewest_missing.size()) {
          fewest_missing = missing;
          fewest_cpu = c->cpu() ? c->cpu()->str() : "?";
        }
        any = true;
      }
    if (best) return best;
    if (!any) return make_error("runtime: the artifact has no CPU code (an 'elf' code object)");
    std::string names;
    for (const std::string& f : fewest_missing) names += (names.empty() ? "" : ", ") + f;
    return Error{"artifact: missing CPU features: its kernels were compiled for --cpu=" + fewest_cpu + " and need " + names +
                     ", which this CPU lacks; compile for this machine with --cpu=x86-64-v3 or --cpu=native",
                 static_cast<int>(format::ArtifactErrorKind::MissingCpuFeatures)};
  }

  Status matmul(const StepPlan& s, uint8_t* const* ptr) const {
    const format::Matmul& mm = *s.matmul;
    ElementType t = values[s.args[0]].type;
    int64_t m = mm.m(), n = mm.n(), k = mm.k();
    // Batch dims as an odometer over per-dim strides (0 where an operand broadcasts).
    std::vector<const format::BatchDim*> dims;
    if (mm.batch())
      for (const format::BatchDim* d : *mm.batch()) dims.push_back(d);
    std::vector<int64_t> at(dims.size(), 0);
    int64_t count = 1;
    for (const auto* d : dims) count *= d->count();
    int size = element_bytes(t);
    for (int64_t p = 0; p < count; ++p) {
      int64_t ao = 0, bo = 0, co = 0;
      for (size_t i = 0; i < dims.size(); ++i) {
        ao += at[i] * dims[i]->a_stride();
        bo += at[i] * dims[i]->b_stride();
        co += at[i] * dims[i]->c_stride();
      }
      const uint8_t* a = ptr[0] + ao * size;
      const uint8_t* b = ptr[1] + bo * size;
      uint8_t* c = ptr[2] + co * size;
      CBLAS_TRANSPOSE ta = mm.trans_a() ? CblasTrans : CblasNoTrans, tb = mm.trans_b() ? CblasTrans : CblasNoTrans;
      int lda = static_cast<int>(mm.trans_a() ? m : k), ldb = static_cast<int>(mm.trans_b() ? k : n);
      switch (t) {
        case ElementType::F32:
          cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f,
                      reinterpret_cast<const float*>(a), lda, reinterpret_cast<const float*>(b), ldb, 0.0f, reinterpret_cast<float*>(c),
                      static_cast<int>(n));
          break;
        case ElementType::F64:
          cblas_dgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0,
                      reinterpret_cast<const double*>(a), lda, reinterpret_cast<const double*>(b), ldb, 0.0, reinterpret_cast<double*>(c),
                      static_cast<int>(n));
          break;
        case ElementType::I32:
          matmul_loop<int32_t, int64_t>(reinterpret_cast<const int32_t*>(a), reinterpret_cast<const int32_t*>(b), reinterpret_cast<int32_t*>(c), m, n, k,
                                        mm.trans_a(), mm.trans_b());
          break;
        case ElementType::I64:
          matmul_loop<int64_t, int64_t>(reinterpret_cast<const int64_t*>(a), reinterpret_cast<const int64_t*>(b), reinterpret_cast<int64_t*>(c), m, n, k,
                                        mm.trans_a(), mm.trans_b());
          break;
        default: return make_error("runtime: matmul on " + std::string(element_type_name(t)) + " is not supported");
      }
      for (size_t i = dims.size(); i-- > 0;) {
        if (++at[i] < dims[i]->count()) break;
        at[i] = 0;
      }
    }
    return Status::Ok();
  }
};

namespace {

// A run's arena (64-byte aligned), taken from the model's pool and given back at the end.
// The first one is made at load, so that an arena larger than memory is a load error.
Result<Arena> new_arena(uint64_t bytes) {
  KILN_RETURN_IF_ERROR(check_allocation(bytes, "the arena"));
  Arena arena(new (std::align_val_t(64), std::nothrow) uint8_t[bytes + 1]);
  if (!arena) return allocation_error(bytes, "the arena");
  return arena;
}

class ArenaLease {
 public:
  static Result<ArenaLease> take(const ModelImpl& m) {
    {
      std::lock_guard<std::mutex> lock(m.arena_mutex);
      if (!m.free_arenas.empty()) {
        Arena arena = std::move(m.free_arenas.back());
        m.free_arenas.pop_back();
        return ArenaLease(m, std::move(arena));
      }
    }
    KILN_ASSIGN_OR_RETURN(Arena arena, new_arena(m.view.metadata().arena_bytes()));
    return ArenaLease(m, std::move(arena));
  }
  ArenaLease(ArenaLease&&) = default;
  ~ArenaLease() {
    if (!arena_) return;
    std::lock_guard<std::mutex> lock(model_->arena_mutex);
    model_->free_arenas.push_back(std::move(arena_));
  }
  uint8_t* get() const { return arena_.get(); }

 private:
  ArenaLease(const ModelImpl& m, Arena arena) : model_(&m), arena_(std::move(arena)) {}
  const ModelImpl* model_;
  Arena arena_;
};

}  // namespace

Model::Model(std::unique_ptr<ModelImpl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

Result<std::shared_ptr<Model>> Model::load_file(const std::string& path, const Options& options) {
  auto bytes = format::read_artifact_file(path);
  if (!bytes.ok()) return make_error((bytes.error().code ? path + ": " : std::string("runtime: ")) + bytes.error().message);
  auto model = load_bytes(std::move(*bytes), options);
  if (!model.ok()) return make_error(path + ": " + model.error().message);
  return model;
}

Result<std::shared_ptr<Model>> Model::load_bytes(std::vector<uint8_t> bytes, const Options& options) {
  if (options.threads < 0 || options.threads > kMaxThreads)
    return make_error("runtime: threads must be from 1 to " + std::to_string(kMaxThreads) + ", or 0 for one per hardware thread; got " +
                      std::to_string(options.threads));
  auto impl = std::make_unique<ModelImpl>();
  impl->bytes = std::move(bytes);
  auto view = format::read_artifact(impl->bytes);
  if (!view.ok()) return view.error();
  const std::string_view target = view->metadata().target()->string_view();
  const bool is_cuda = target.starts_with("cuda-");
  if (!is_cuda && target != "cpu-x86_64")
    return Error{"artifact: wrong target: compiled for " + std::string(target) + ", but this runtime runs cpu-x86_64 and cuda-sm_XX",
                 static_cast<int>(format::ArtifactErrorKind::WrongTarget)};
  impl->view = *view;
  const format::Artifact& a = impl->view.metadata();
  for (const format::Value* v : *a.values())
    impl->values.push_back({v->name() ? v->name()->str() : "", static_cast<ElementType>(v->dtype()),
                            v->shape() ? std::vector<int64_t>(v->shape()->begin(), v->shape()->end()) : std::vector<int64_t>()});
  impl->weights.assign(impl->values.size(), nullptr);
  for (const format::Argument* arg : *a.args()) {
    uint32_t v = arg->value();
    if (arg->kind() == format::ArgKind::Input) {
      impl->inputs.push_back(impl->values[v]);
      impl->input_values.push_back(v);
    } else if (arg->kind() == format::ArgKind::Param) {
      impl->weights[v] = impl->view.section(*a.weights()->Get(static_cast<uint32_t>(arg->weight()))).data();
    } else {
      impl->state.push_back(impl->values[v]);
      impl->state_values.push_back(v);
      KILN_RETURN_IF_ERROR(resize_or_error(impl->state_bytes[v], static_cast<uint64_t>(impl->values[v].bytes()), "state %" + impl->values[v].name));
      const uint8_t* initial = arg->weight() >= 0 ? impl->view.section(*a.weights()->Get(static_cast<uint32_t>(arg->weight()))).data() : nullptr;
      if (initial) std::memcpy(impl->state_bytes[v].data(), initial, impl->state_bytes[v].size());
      impl->state_initial.push_back(initial);
    }
  }
  for (uint32_t v : *a.results()) {
    impl->outputs.push_back(impl->values[v]);
    impl->output_values.push_back(v);
  }
  impl->buffer_of.assign(impl->values.size(), -1);
  for (uint32_t i = 0; i < a.buffers()->size(); ++i) impl->buffer_of[a.buffers()->Get(i)->value()] = static_cast<int>(i);
  for (const format::Step* step : *a.steps()) {
    StepPlan s;
    s.kind = step->kind();
    s.work_items = step->work_items();
    s.matmul = step->matmul();
    s.name = step->name() ? step->name()->str() : "";
    for (uint32_t v : *step->inputs()) s.args.push_back(v);
    for (uint32_t v : *step->outputs()) s.args.push_back(v);
    impl->steps.push_back(std::move(s));
  }
  if (is_cuda) {
    cuda::Signature sig{{}, impl->input_values, impl->output_values, impl->state_values, impl->weights, impl->state_initial};
    for (const TensorInfo& v : impl->values) sig.value_bytes.push_back(v.bytes());
    KILN_ASSIGN_OR_RETURN(impl->cuda, cuda::Executor::load(impl->view, std::move(sig), {options.cuda_device, options.cuda_graphs}));
    return std::shared_ptr<Model>(new Model(std::move(impl)));
  }
  KILN_RETURN_IF_ERROR(impl->load_code());
  KILN_ASSIGN_OR_RETURN(Arena first_arena, new_arena(a.arena_bytes()));
  impl->free_arenas.push_back(std::move(first_arena));
  int threads = options.threads > 0 ? options.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  try {
    impl->pool = std::make_unique<ThreadPool>(threads - 1);
  } catch (const std::system_error& e) {
    return make_error("runtime: cannot start " + std::to_string(threads) + " threads: " + e.code().message());
  }
  return std::shared_ptr<Model>(new Model(std::move(impl)));
}

const std::vector<TensorInfo>& Model::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& Model::outputs() const { return impl_->outputs; }
const std::vector<TensorInfo>& Model::state() const { return impl_->state; }

namespace {

bool names(const std::vector<TensorInfo>& infos, const std::string& name) {
  return std::any_of(infos.begin(), infos.end(), [&](const TensorInfo& info) { return info.name == name; });
}

// An error for the first name in `given` that is not one of the model's plain inputs.
template <class Buffer>
Status no_unknown_inputs(const std::vector<TensorInfo>& inputs, const std::vector<TensorInfo>& state, const std::map<std::string, Buffer>& given) {
  for (const auto& [name, buffer] : given) {
    if (names(inputs, name)) continue;
    if (names(state, name))
      return make_error("run: the model has no input %" + name + "; %" + name + " is state, which the model keeps: set it with write_state (kiln run: --state-in)");
    return make_error("run: the model has no input %" + name);
  }
  return Status::Ok();
}

// The data of each input in order, each checked for its type, shape and size.
Result<std::vector<const uint8_t*>> input_data(const std::vector<TensorInfo>& inputs, const std::vector<TensorInfo>& state,
                                               const std::map<std::string, HostTensor>& given) {
  std::vector<const uint8_t*> data;
  for (const TensorInfo& want : inputs) {
    auto it = given.find(want.name);
    if (it == given.end()) return make_error("run: missing input %" + want.name + ": " + want.type_string());
    const HostTensor& t = it->second;
    if (t.info.type != want.type || t.info.shape != want.shape)
      return make_error("run: input %" + want.name + " must be " + want.type_string() + ", got " + t.info.type_string());
    if (static_cast<int64_t>(t.data.size()) != want.bytes())
      return make_error("run: input %" + want.name + " holds " + std::to_string(t.data.size()) + " bytes, not " + std::to_string(want.bytes()));
    data.push_back(t.data.data());
  }
  KILN_RETURN_IF_ERROR(no_unknown_inputs(inputs, state, given));
  return data;
}

}  // namespace

Result<std::vector<HostTensor>> Model::run(const std::map<std::string, HostTensor>& inputs) const {
  KILN_ASSIGN_OR_RETURN(std::vector<const uint8_t*> in, input_data(impl_->inputs, impl_->state, inputs));
  std::vector<HostTensor> results;
  std::vector<uint8_t*> buffers;
  for (const TensorInfo& info : impl_->outputs) {
    results.push_back({info, {}});
    KILN_RETURN_IF_ERROR(resize_or_error(results.back().data, static_cast<uint64_t>(info.bytes()), "output %" + info.name));
  }
  for (HostTensor& t : results) buffers.push_back(t.data.data());
  KILN_RETURN_IF_ERROR(run_into(in, buffers));
  return results;
}

Result<std::vector<uint8_t*>> Model::output_buffers(const std::map<std::string, std::span<uint8_t>>& outputs) const {
  std::vector<uint8_t*> buffers;
  for (const TensorInfo& info : impl_->outputs) {
    auto it = outputs.find(info.name);
    if (it == outputs.end()) return make_error("run: no buffer for output %" + info.name + ": " + info.type_string());
    if (static_cast<int64_t>(it->second.size()) != info.bytes())
      return make_error("run: the buffer for output %" + info.name + " has " + std::to_string(it->second.size()) + " bytes, not " +
                        std::to_string(info.bytes()));
    buffers.push_back(it->second.data());
  }
  for (const auto& [name, buffer] : outputs)
    if (std::none_of(impl_->outputs.begin(), impl_->outputs.end(), [&](const TensorInfo& info) { return info.name == name; }))
      return make_error("run: the model has no output %" + name);
  return buffers;
}

Status Model::run(const std::map<std::string, HostTensor>& inputs, const std::map<std::string, std::span<uint8_t>>& outputs) const {
  KILN_ASSIGN_OR_RETURN(std::vector<const uint8_t*> in, input_data(impl_->inputs, impl_->state, inputs));
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t*> out, output_buffers(outputs));
  return run_into(in, out);
}

Status Model::run(const std::map<std::string, std::span<const uint8_t>>& inputs, const std::map<std::string, std::span<uint8_t>>& outputs) const {
  std::vector<const uint8_t*> in;
  for (const TensorInfo& want : impl_->inputs) {
    auto it = inputs.find(want.name);
    if (it == inputs.end()) return make_error("run: missing input %" + want.name + ": " + want.type_string());
    if (static_cast<int64_t>(it->second.size()) != want.bytes())
      return make_error("run: the buffer for input %" + want.name + " has " + std::to_string(it->second.size()) + " bytes, not " +
                        std::to_string(want.bytes()) + " (" + want.type_string() + ")");
    in.push_back(it->second.data());
  }
  KILN_RETURN_IF_ERROR(no_unknown_inputs(impl_->inputs, impl_->state, inputs));
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t*> out, output_buffers(outputs));
  return run_into(in, out);
}

Status Model::run_into(const std::vector<const uint8_t*>& inputs, const std::vector<uint8_t*>& outputs) const {
  const ModelImpl& m = *impl_;
  if (m.cuda) return m.cuda->run_host(inputs, outputs);
  const format::Artifact& a = m.view.metadata();
  std::vector<uint8_t*> where(m.values.size(), nullptr);
  for (size_t i = 0; i < m.inputs.size(); ++i) where[m.input_values[i]] = const_cast<uint8_t*>(inputs[i]);  // kernels only read inputs
  std::unique_lock<std::mutex> state_lock(m.state_mutex, std::defer_lock);
  if (!m.state_values.empty()) state_lock.lock();
  auto& state = const_cast<std::map<uint32_t, std::vector<uint8_t>>&>(m.state_bytes);
  KILN_ASSIGN_OR_RETURN(ArenaLease lease, ArenaLease::take(m));
  uint8_t* arena = lease.get();
  for (uint32_t v = 0; v < m.values.size(); ++v) {
    if (m.weights[v]) where[v] = const_cast<uint8_t*>(m.weights[v]);
    if (state.count(v)) where[v] = state[v].data();
    int b = m.buffer_of[v];
    if (b < 0) continue;
    const format::Buffer* buffer = a.buffers()->Get(static_cast<uint32_t>(b));
    if (buffer->home() == format::Home::Arena) where[v] = arena + buffer->offset();
    if (buffer->home() == format::Home::State && buffer->state() >= 0) where[v] = state[static_cast<uint32_t>(buffer->state())].data();
  }
  // Results in the arena are written straight into the caller's buffers: they live to
  // the end, so no other arena value uses their bytes. (A value returned twice, an
  // argument or a state update is copied at the end instead.)
  std::vector<char> redirected(m.values.size(), 0);
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    uint32_t v = m.output_values[i];
    int b = m.buffer_of[v];
    if (b < 0 || a.buffers()->Get(static_cast<uint32_t>(b))->home() != format::Home::Arena || redirected[v]) continue;
    where[v] = outputs[i];
    redirected[v] = 1;
  }
  std::vector<uint8_t*> ptrs;
  for (const StepPlan& s : m.steps) {
    ptrs.clear();
    for (uint32_t v : s.args) ptrs.push_back(where[v]);
    if (s.kind == format::StepKind::Library) {
      KILN_RETURN_IF_ERROR(m.matmul(s, ptrs.data()));
    } else if (s.kind == format::StepKind::Scatter) {
      s.kernel(ptrs.data(), 0, s.work_items);
    } else {
      Kernel kernel = s.kernel;
      uint8_t* const* args = ptrs.data();
      m.pool->parallel_for(s.work_items, s.kind == format::StepKind::Loop ? 16384 : 16,
                           [&](int64_t begin, int64_t end) { kernel(args, begin, end); });
    }
  }
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    uint8_t* to = outputs[i];
    const uint8_t* from = where[m.output_values[i]];
    if (to != from) std::memcpy(to, from, static_cast<size_t>(m.outputs[i].bytes()));
  }
  if (a.state_copies())
    for (const format::StateCopy* c : *a.state_copies())
      std::memcpy(state[c->state()].data(), where[c->value()], state[c->state()].size());
  return Status::Ok();
}

Status Model::run_device(const std::map<std::string, uint64_t>& inputs, const std::map<std::string, uint64_t>& outputs) const {
  const ModelImpl& m = *impl_;
  if (!m.cuda) return make_error("run: device pointers need a CUDA artifact; this one targets " + target());
  auto in_order = [](const std::vector<TensorInfo>& infos, const std::map<std::string, uint64_t>& given, const char* what) -> Result<std::vector<uint64_t>> {
    std::vector<uint64_t> ptrs;
    for (const TensorInfo& info : infos) {
      auto it = given.find(info.name);
      if (it == given.end()) return make_error(std::string("run: no device pointer for ") + what + " %" + info.name + ": " + info.type_string());
      ptrs.push_back(it->second);
    }
    for (const auto& [name, ptr] : given)
      if (std::none_of(infos.begin(), infos.end(), [&](const TensorInfo& i) { return i.name == name; }))
        return make_error(std::string("run: the model has no ") + what + " %" + name);
    return ptrs;
  };
  KILN_ASSIGN_OR_RETURN(std::vector<uint64_t> in, in_order(m.inputs, inputs, "input"));
  KILN_ASSIGN_OR_RETURN(std::vector<uint64_t> out, in_order(m.outputs, outputs, "output"));
  return m.cuda->run_device(in, out);
}

std::string Model::target() const { return impl_->view.metadata().target()->str(); }

Result<HostTensor> Model::read_state(const std::string& name) const {
  std::lock_guard<std::mutex> lock(impl_->state_mutex);
  for (size_t i = 0; i < impl_->state.size(); ++i) {
    if (impl_->state[i].name != name) continue;
    if (impl_->cuda) {
      HostTensor t{impl_->state[i], {}};
      KILN_RETURN_IF_ERROR(resize_or_error(t.data, static_cast<uint64_t>(impl_->state[i].bytes()), "state %" + name));
      KILN_RETURN_IF_ERROR(impl_->cuda->read_state(i, t.data.data()));
      return t;
    }
    return HostTensor{impl_->state[i], impl_->state_bytes.at(impl_->state_values[i])};
  }
  return make_error("runtime: the model has no state %" + name);
}

Status Model::write_state(const std::string& name, const HostTensor& value) {
  std::lock_guard<std::mutex> lock(impl_->state_mutex);
  for (size_t i = 0; i < impl_->state.size(); ++i) {
    if (impl_->state[i].name != name) continue;
    if (value.info.type != impl_->state[i].type || value.info.shape != impl_->state[i].shape ||
        static_cast<int64_t>(value.data.size()) != impl_->state[i].bytes())
      return make_error("runtime: state %" + name + " is " + impl_->state[i].type_string() + ", got " + value.info.type_string());
    if (impl_->cuda) return impl_->cuda->write_state(i, value.data.data());
    impl_->state_bytes[impl_->state_values[i]] = value.data;
    return Status::Ok();
  }
  return make_error("runtime: the model has no state %" + name);
}

}  // namespace kiln::runtime
