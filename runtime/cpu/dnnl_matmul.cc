#include "runtime/cpu/dnnl_matmul.h"

#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::runtime::cpu {
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
  void (*omp_set_num_threads)(int) = nullptr;
  dnnl_engine_t engine = nullptr;
};

const DnnlPrimitives* primitives() {
  static const DnnlPrimitives* opened = []() -> const DnnlPrimitives* {
    const char* file = std::getenv("KILN_LIBDNNL");
    void* library = dlopen(file && *file ? file : "libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
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
    p.omp_set_num_threads = reinterpret_cast<void (*)(int)>(dlsym(library, "omp_set_num_threads"));
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
  dnnl_primitive_desc_t pd = nullptr;
  if (describe(p, mm, bf16 ? dnnl_bf16 : dnnl_f16, prep.descs) &&
      p.matmul_desc_init(&desc, &prep.descs.a, &prep.descs.b, nullptr, &prep.descs.c) == dnnl_success &&
      p.primitive_desc_create(&pd, &desc, nullptr, p.engine, nullptr) == dnnl_success) {
    if (p.primitive_create(&prep.primitive, pd) != dnnl_success) prep.primitive = nullptr;
  }
  if (pd) p.primitive_desc_destroy(pd);
  return prep;
}

}  // namespace

Result<bool> dnnl_half_matmul(const format::Matmul& mm, bool bf16, uint8_t* const* args, int threads) {
  const DnnlPrimitives* p = primitives();
  if (!p) return false;
  const Prepared& prep = prepared(*p, mm, bf16);
  if (!prep.primitive) return false;
  // A stream per calling thread: oneDNN's primitives run from any thread, each on its own.
  thread_local dnnl_stream_t stream = nullptr;
  if (!stream && p->stream_create(&stream, p->engine, dnnl_stream_default_flags) != dnnl_success)
    return make_error("runtime: oneDNN could not create a stream for a matmul");
  if (p->omp_set_num_threads) p->omp_set_num_threads(threads);
  dnnl_memory_t a = nullptr, b = nullptr, c = nullptr;
  auto release = [&] {
    for (dnnl_memory_t mem : {a, b, c})
      if (mem) p->memory_destroy(mem);
  };
  if (p->memory_create(&a, &prep.descs.a, p->engine, args[0]) != dnnl_success ||
      p->memory_create(&b, &prep.descs.b, p->engine, args[1]) != dnnl_success ||
      p->memory_create(&c, &prep.descs.c, p->engine, args[2]) != dnnl_success) {
    release();
    return make_error("runtime: oneDNN could not wrap a matmul's operands");
  }
  const dnnl_exec_arg_t exec[] = {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
  const dnnl_status_t status = p->primitive_execute(prep.primitive, stream, 3, exec);
  const dnnl_status_t waited = status == dnnl_success ? p->stream_wait(stream) : status;
  release();
  if (waited != dnnl_success)
    return make_error("runtime: oneDNN's matmul primitive failed with status " + std::to_string(waited) + " for a " +
                      std::to_string(mm.m()) + "x" + std::to_string(mm.n()) + "x" + std::to_string(mm.k()) + " matmul");
  return true;
}

}  // namespace kiln::runtime::cpu
