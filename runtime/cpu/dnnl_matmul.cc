#include "runtime/cpu/dnnl_matmul.h"

#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::runtime::cpu {

const DnnlLibrary& dnnl_library() {
  static const DnnlLibrary opened = [] {
    DnnlLibrary d;
    const char* file = std::getenv("KILN_LIBDNNL");
    d.handle = dlopen(file && *file ? file : "libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!d.handle) {
      const char* error = dlerror();
      d.why_not = std::string("oneDNN not found: ") + (error ? error : "dlopen failed");
      return d;
    }
    d.omp_set_num_threads = reinterpret_cast<void (*)(int)>(dlsym(d.handle, "omp_set_num_threads"));
    return d;
  }();
  return opened;
}

namespace {

// The calls of oneDNN's C API this path makes (the header gives their types only: the
// library is opened at run time).
struct DnnlPrimitives {
  decltype(&dnnl_engine_create) engine_create = nullptr;
  decltype(&dnnl_stream_create) stream_create = nullptr;
  decltype(&dnnl_memory_desc_init_by_strides) memory_desc_init_by_strides = nullptr;
  decltype(&dnnl_matmul_desc_init) matmul_desc_init = nullptr;
  decltype(&dnnl_primitive_desc_create) primitive_desc_create = nullptr;
  decltype(&dnnl_primitive_desc_destroy) primitive_desc_destroy = nullptr;
  decltype(&dnnl_primitive_create) primitive_create = nullptr;
  decltype(&dnnl_memory_create) memory_create = nullptr;
  decltype(&dnnl_memory_destroy) memory_destroy = nullptr;
  decltype(&dnnl_primitive_execute) primitive_execute = nullptr;
  decltype(&dnnl_stream_wait) stream_wait = nullptr;
  decltype(&dnnl_stream_destroy) stream_destroy = nullptr;
  decltype(&dnnl_primitive_attr_create) attr_create = nullptr;
  decltype(&dnnl_primitive_attr_destroy) attr_destroy = nullptr;
  decltype(&dnnl_primitive_attr_set_scratchpad_mode) attr_set_scratchpad_mode = nullptr;
  decltype(&dnnl_primitive_desc_query_md) primitive_desc_query_md = nullptr;
  decltype(&dnnl_memory_desc_get_size) memory_desc_get_size = nullptr;
  dnnl_engine_t engine = nullptr;
};

const DnnlPrimitives* primitives() {
  static const DnnlPrimitives* opened = []() -> const DnnlPrimitives* {
    void* library = dnnl_library().handle;
    if (!library) return nullptr;
    static DnnlPrimitives p;
    bool all = true;
    auto bind = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library, name));
      all = all && fn;
    };
    bind(p.engine_create, "dnnl_engine_create");
    bind(p.stream_create, "dnnl_stream_create");
    bind(p.memory_desc_init_by_strides, "dnnl_memory_desc_init_by_strides");
    bind(p.matmul_desc_init, "dnnl_matmul_desc_init");
    bind(p.primitive_desc_create, "dnnl_primitive_desc_create");
    bind(p.primitive_desc_destroy, "dnnl_primitive_desc_destroy");
    bind(p.primitive_create, "dnnl_primitive_create");
    bind(p.memory_create, "dnnl_memory_create");
    bind(p.memory_destroy, "dnnl_memory_destroy");
    bind(p.primitive_execute, "dnnl_primitive_execute");
    bind(p.stream_wait, "dnnl_stream_wait");
    bind(p.stream_destroy, "dnnl_stream_destroy");
    bind(p.attr_create, "dnnl_primitive_attr_create");
    bind(p.attr_destroy, "dnnl_primitive_attr_destroy");
    bind(p.attr_set_scratchpad_mode, "dnnl_primitive_attr_set_scratchpad_mode");
    bind(p.primitive_desc_query_md, "dnnl_primitive_desc_query_md");
    bind(p.memory_desc_get_size, "dnnl_memory_desc_get_size");
    if (!all || p.engine_create(&p.engine, dnnl_cpu, 0) != dnnl_success) return nullptr;
    return &p;
  }();
  return opened;
}

// The memory descriptors of one call: A [batch..., m, k], B [batch..., k, n], C
// [batch..., m, n], transposes and batch strides as strides; an operand broadcast along a
// batch dim (stride 0) has extent 1 there, as the matmul primitive broadcasts.
struct Descs {
  dnnl_memory_desc_t a, b, c;
};

bool describe(const DnnlPrimitives& p, const format::Matmul& mm, dnnl_data_type_t t, Descs& d) {
  std::vector<dnnl_dim_t> a_dims, b_dims, c_dims, a_strides, b_strides, c_strides;
  if (mm.batch())
    for (const format::BatchDim* bd : *mm.batch()) {
      a_dims.push_back(bd->a_stride() ? bd->count() : 1);
      b_dims.push_back(bd->b_stride() ? bd->count() : 1);
      c_dims.push_back(bd->count());
      a_strides.push_back(bd->a_stride());
      b_strides.push_back(bd->b_stride());
      c_strides.push_back(bd->c_stride());
    }
  const int64_t m = mm.m(), n = mm.n(), k = mm.k();
  a_dims.insert(a_dims.end(), {m, k});
  b_dims.insert(b_dims.end(), {k, n});
  c_dims.insert(c_dims.end(), {m, n});
  a_strides.insert(a_strides.end(), {mm.trans_a() ? 1 : k, mm.trans_a() ? m : 1});
  b_strides.insert(b_strides.end(), {mm.trans_b() ? 1 : n, mm.trans_b() ? k : 1});
  c_strides.insert(c_strides.end(), {n, 1});
  const int ndims = static_cast<int>(c_dims.size());
  if (ndims > DNNL_MAX_NDIMS) return false;
  return p.memory_desc_init_by_strides(&d.a, ndims, a_dims.data(), t, a_strides.data()) == dnnl_success &&
         p.memory_desc_init_by_strides(&d.b, ndims, b_dims.data(), t, b_strides.data()) == dnnl_success &&
         p.memory_desc_init_by_strides(&d.c, ndims, c_dims.data(), t, c_strides.data()) == dnnl_success;
}

struct Prepared {
  dnnl_primitive_t primitive = nullptr;  // null: oneDNN has none for this call
  Descs descs;
  // Its scratchpad, which each call supplies: with oneDNN's own (library-managed) one, one
  // primitive run from two threads at once shared it, and results came out wrong
  // (precision_test's [threads] case) unless oneDNN was built for concurrent execution.
  dnnl_memory_desc_t scratchpad;
  size_t scratchpad_bytes = 0;
};

// The primitive of each distinct call (its shape, strides and type), created once.
const Prepared& prepared(const DnnlPrimitives& p, const format::Matmul& mm, bool bf16) {
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, Prepared> cache;
  std::vector<int64_t> key = {bf16, mm.m(), mm.n(), mm.k(), mm.trans_a(), mm.trans_b()};
  if (mm.batch())
    for (const format::BatchDim* bd : *mm.batch())
      key.insert(key.end(), {bd->count(), bd->a_stride(), bd->b_stride(), bd->c_stride()});
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] = cache.try_emplace(key);
  if (!inserted) return it->second;
  Prepared& prep = it->second;
  dnnl_matmul_desc_t desc;
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_primitive_desc_t pd = nullptr;
  if (p.attr_create(&attr) == dnnl_success &&
      p.attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success &&
      describe(p, mm, bf16 ? dnnl_bf16 : dnnl_f16, prep.descs) &&
      p.matmul_desc_init(&desc, &prep.descs.a, &prep.descs.b, nullptr, &prep.descs.c) == dnnl_success &&
      p.primitive_desc_create(&pd, &desc, attr, p.engine, nullptr) == dnnl_success) {
    const dnnl_memory_desc_t* scratchpad = p.primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (scratchpad) {
      prep.scratchpad = *scratchpad;
      prep.scratchpad_bytes = p.memory_desc_get_size(scratchpad);
    }
    if (!scratchpad || p.primitive_create(&prep.primitive, pd) != dnnl_success) prep.primitive = nullptr;
  }
  if (pd) p.primitive_desc_destroy(pd);
  if (attr) p.attr_destroy(attr);
  return prep;
}

}  // namespace

Result<bool> dnnl_half_matmul(const format::Matmul& mm, bool bf16, uint8_t* const* args, int threads) {
  const DnnlPrimitives* p = primitives();
  if (!p) return false;
  const Prepared& prep = prepared(*p, mm, bf16);
  if (!prep.primitive) return false;
  // A stream per calling thread (oneDNN's primitives run from any thread, each on its
  // own), destroyed when the thread ends.
  struct ThreadStream {
    const DnnlPrimitives* p = nullptr;
    dnnl_stream_t stream = nullptr;
    ~ThreadStream() {
      if (stream) p->stream_destroy(stream);
    }
  };
  thread_local ThreadStream mine;
  if (!mine.stream) {
    if (p->stream_create(&mine.stream, p->engine, dnnl_stream_default_flags) != dnnl_success)
      return make_error("runtime: oneDNN could not create a stream for a matmul");
    mine.p = p;
  }
  dnnl_stream_t stream = mine.stream;
  if (auto set_threads = dnnl_library().omp_set_num_threads) set_threads(threads);
  // The scratchpad: the calling thread's, 64-byte aligned, grown to the largest asked for.
  thread_local std::vector<uint8_t> scratchpad_bytes;
  if (scratchpad_bytes.size() < prep.scratchpad_bytes + 64) scratchpad_bytes.resize(prep.scratchpad_bytes + 64);
  void* scratchpad_at = scratchpad_bytes.data() + (64 - reinterpret_cast<uintptr_t>(scratchpad_bytes.data()) % 64);
  dnnl_memory_t a = nullptr, b = nullptr, c = nullptr, scratchpad = nullptr;
  auto release = [&] {
    for (dnnl_memory_t mem : {a, b, c, scratchpad})
      if (mem) p->memory_destroy(mem);
  };
  if (p->memory_create(&a, &prep.descs.a, p->engine, args[0]) != dnnl_success ||
      p->memory_create(&b, &prep.descs.b, p->engine, args[1]) != dnnl_success ||
      p->memory_create(&c, &prep.descs.c, p->engine, args[2]) != dnnl_success ||
      p->memory_create(&scratchpad, &prep.scratchpad, p->engine, scratchpad_at) != dnnl_success) {
    release();
    return make_error("runtime: oneDNN could not wrap a matmul's operands");
  }
  const dnnl_exec_arg_t exec[] = {
      {DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}, {DNNL_ARG_SCRATCHPAD, scratchpad}};
  const dnnl_status_t status = p->primitive_execute(prep.primitive, stream, 4, exec);
  const dnnl_status_t waited = status == dnnl_success ? p->stream_wait(stream) : status;
  release();
  if (waited != dnnl_success)
    return make_error("runtime: oneDNN's matmul primitive failed with status " + std::to_string(waited) + " for a " +
                      std::to_string(mm.m()) + "x" + std::to_string(mm.n()) + "x" + std::to_string(mm.k()) + " matmul");
  return true;
}

}  // namespace kiln::runtime::cpu
