#include "runtime/cpu/dnnl.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
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
    d.gomp_parallel =
        reinterpret_cast<void (*)(void (*)(void*), void*, unsigned, unsigned)>(dlsym(d.handle, "GOMP_parallel"));
    d.omp_get_thread_num = reinterpret_cast<int (*)()>(dlsym(d.handle, "omp_get_thread_num"));
    return d;
  }();
  return opened;
}

const DnnlApi* dnnl_api() {
  static const DnnlApi* opened = []() -> const DnnlApi* {
    void* library = dnnl_library().handle;
    if (!library) return nullptr;
    static DnnlApi p;
    bool all = true;
    auto bind = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library, name));
      all = all && fn;
    };
    bind(p.engine_create, "dnnl_engine_create");
    bind(p.stream_create, "dnnl_stream_create");
    bind(p.memory_desc_init_by_strides, "dnnl_memory_desc_init_by_strides");
    bind(p.memory_desc_init_by_tag, "dnnl_memory_desc_init_by_tag");
    bind(p.matmul_desc_init, "dnnl_matmul_desc_init");
    bind(p.conv_forward_desc_init, "dnnl_dilated_convolution_forward_desc_init");
    bind(p.conv_backward_data_desc_init, "dnnl_dilated_convolution_backward_data_desc_init");
    bind(p.conv_backward_weights_desc_init, "dnnl_dilated_convolution_backward_weights_desc_init");
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
    bind(p.primitive_desc_query, "dnnl_primitive_desc_query");
    bind(p.memory_desc_get_size, "dnnl_memory_desc_get_size");
    bind(p.memory_desc_equal, "dnnl_memory_desc_equal");
    bind(p.reorder_desc_create, "dnnl_reorder_primitive_desc_create");
    bind(p.post_ops_create, "dnnl_post_ops_create");
    bind(p.post_ops_destroy, "dnnl_post_ops_destroy");
    bind(p.post_ops_append_eltwise, "dnnl_post_ops_append_eltwise");
    bind(p.post_ops_append_sum, "dnnl_post_ops_append_sum");
    bind(p.post_ops_append_binary, "dnnl_post_ops_append_binary");
    bind(p.attr_set_post_ops, "dnnl_primitive_attr_set_post_ops");
    if (!all || p.engine_create(&p.engine, dnnl_cpu, 0) != dnnl_success) return nullptr;
    return &p;
  }();
  return opened;
}

dnnl_primitive_desc_t dnnl_describe(const DnnlApi& api, const void* op_desc, const_dnnl_primitive_desc_t hint,
                                    const_dnnl_post_ops_t post_ops) {
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_primitive_desc_t pd = nullptr;
  if (api.attr_create(&attr) != dnnl_success) return nullptr;
  if (api.attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) != dnnl_success ||
      (post_ops && api.attr_set_post_ops(attr, post_ops) != dnnl_success) ||
      api.primitive_desc_create(&pd, op_desc, attr, api.engine, hint) != dnnl_success)
    pd = nullptr;
  api.attr_destroy(attr);
  return pd;
}

DnnlPrimitive dnnl_reorder(const DnnlApi& api, const dnnl_memory_desc_t& from, const dnnl_memory_desc_t& to) {
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_primitive_desc_t pd = nullptr;
  if (api.attr_create(&attr) != dnnl_success) return {};
  if (api.attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) != dnnl_success ||
      api.reorder_desc_create(&pd, &from, api.engine, &to, api.engine, attr) != dnnl_success)
    pd = nullptr;
  api.attr_destroy(attr);
  DnnlPrimitive made = dnnl_create(api, pd);
  if (pd) api.primitive_desc_destroy(pd);
  return made;
}

DnnlPrimitive dnnl_create(const DnnlApi& api, const_dnnl_primitive_desc_t pd) {
  DnnlPrimitive made;
  if (!pd) return made;
  const dnnl_memory_desc_t* scratchpad = api.primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  if (!scratchpad || api.primitive_create(&made.primitive, pd) != dnnl_success) {
    made.primitive = nullptr;
    return made;
  }
  made.scratchpad = *scratchpad;
  made.scratchpad_bytes = api.memory_desc_get_size(scratchpad);
  return made;
}

std::string dnnl_implementation(const DnnlApi& api, const_dnnl_primitive_desc_t pd) {
  const char* impl = nullptr;
  return api.primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl ? impl : "";
}

uint8_t* aligned_in(std::vector<uint8_t>& buffer, size_t bytes) {
  if (buffer.size() < bytes + 64) buffer.resize(bytes + 64);
  return buffer.data() + (64 - reinterpret_cast<uintptr_t>(buffer.data()) % 64) % 64;
}

Status dnnl_run(const DnnlApi& api, const DnnlPrimitive& primitive, std::span<const DnnlArg> args, int threads,
                std::string_view what) {
  // A stream per calling thread (oneDNN's primitives run from any thread, each on its
  // own), destroyed when the thread ends.
  struct ThreadStream {
    const DnnlApi* api = nullptr;
    dnnl_stream_t stream = nullptr;
    ~ThreadStream() {
      if (stream) api->stream_destroy(stream);
    }
  };
  thread_local ThreadStream mine;
  if (!mine.stream) {
    if (api.stream_create(&mine.stream, api.engine, dnnl_stream_default_flags) != dnnl_success)
      return make_error("runtime: oneDNN could not create a stream for " + std::string(what));
    mine.api = &api;
  }
  if (auto set_threads = dnnl_library().omp_set_num_threads) set_threads(threads);
  // The scratchpad: the calling thread's, grown to the largest asked for.
  thread_local std::vector<uint8_t> scratchpad_bytes;
  void* scratchpad_at = aligned_in(scratchpad_bytes, primitive.scratchpad_bytes);
  std::vector<dnnl_memory_t> memories;
  std::vector<dnnl_exec_arg_t> exec;
  auto release = [&] {
    for (dnnl_memory_t m : memories) api.memory_destroy(m);
  };
  auto wrap = [&](int kind, const dnnl_memory_desc_t* desc, void* data) {
    dnnl_memory_t m = nullptr;
    if (api.memory_create(&m, desc, api.engine, data) != dnnl_success) return false;
    memories.push_back(m);
    exec.push_back({kind, m});
    return true;
  };
  for (const DnnlArg& a : args)
    if (!wrap(a.kind, a.desc, a.data)) {
      release();
      return make_error("runtime: oneDNN could not wrap the operands of " + std::string(what));
    }
  if (!wrap(DNNL_ARG_SCRATCHPAD, &primitive.scratchpad, scratchpad_at)) {
    release();
    return make_error("runtime: oneDNN could not wrap the scratchpad of " + std::string(what));
  }
  const dnnl_status_t status =
      api.primitive_execute(primitive.primitive, mine.stream, static_cast<int>(exec.size()), exec.data());
  const dnnl_status_t waited = status == dnnl_success ? api.stream_wait(mine.stream) : status;
  release();
  if (waited != dnnl_success)
    return make_error("runtime: oneDNN failed with status " + std::to_string(waited) + " in " + std::string(what));
  return Status::Ok();
}

}  // namespace kiln::runtime::cpu
