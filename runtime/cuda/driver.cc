#include "runtime/cuda/driver.h"

#include <dlfcn.h>
#include <cstdlib>
#include <mutex>

namespace kiln::runtime::cuda {
namespace {

// The exported name behind a cuda.h name (cuMemAlloc is cuMemAlloc_v2).
#define KILN_CUDA_STRING(x) #x
#define KILN_CUDA_SYMBOL(x) KILN_CUDA_STRING(x)

Result<const Driver*> open_driver() {
  const char* path = std::getenv("KILN_LIBCUDA");
  const std::string file = path && *path ? path : "libcuda.so.1";
  void* library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) return make_error("no NVIDIA driver was found (" + std::string(dlerror()) + ")");
  static Driver d;
  std::string missing;
#define KILN_BIND(field, fn) bind_symbol(library, d.field, KILN_CUDA_SYMBOL(fn), missing)
  KILN_BIND(init, cuInit);
  KILN_BIND(driver_get_version, cuDriverGetVersion);
  KILN_BIND(get_error_name, cuGetErrorName);
  KILN_BIND(get_error_string, cuGetErrorString);
  KILN_BIND(device_get_count, cuDeviceGetCount);
  KILN_BIND(device_get, cuDeviceGet);
  KILN_BIND(device_get_name, cuDeviceGetName);
  KILN_BIND(device_get_attribute, cuDeviceGetAttribute);
  KILN_BIND(primary_ctx_retain, cuDevicePrimaryCtxRetain);
  KILN_BIND(primary_ctx_release, cuDevicePrimaryCtxRelease);
  KILN_BIND(ctx_set_current, cuCtxSetCurrent);
  KILN_BIND(module_load_data_ex, cuModuleLoadDataEx);
  KILN_BIND(module_unload, cuModuleUnload);
  KILN_BIND(module_get_function, cuModuleGetFunction);
  KILN_BIND(mem_alloc, cuMemAlloc);
  KILN_BIND(mem_free, cuMemFree);
  KILN_BIND(mem_get_info, cuMemGetInfo);
  KILN_BIND(memset_d8, cuMemsetD8);
  KILN_BIND(memcpy_htod, cuMemcpyHtoD);
  KILN_BIND(memcpy_dtoh, cuMemcpyDtoH);
  KILN_BIND(memcpy_htod_async, cuMemcpyHtoDAsync);
  KILN_BIND(memcpy_dtoh_async, cuMemcpyDtoHAsync);
  KILN_BIND(memcpy_dtod_async, cuMemcpyDtoDAsync);
  KILN_BIND(stream_create, cuStreamCreate);
  KILN_BIND(stream_destroy, cuStreamDestroy);
  KILN_BIND(stream_synchronize, cuStreamSynchronize);
  KILN_BIND(stream_begin_capture, cuStreamBeginCapture);
  KILN_BIND(stream_end_capture, cuStreamEndCapture);
  KILN_BIND(graph_instantiate, cuGraphInstantiate);
  KILN_BIND(graph_launch, cuGraphLaunch);
  KILN_BIND(graph_destroy, cuGraphDestroy);
  KILN_BIND(graph_exec_destroy, cuGraphExecDestroy);
  KILN_BIND(launch_kernel, cuLaunchKernel);
  KILN_BIND(func_set_attribute, cuFuncSetAttribute);
  // Only profiled runs need events (cuEventElapsedTime_v2 is from CUDA 12.8's drivers on):
  // an older driver still runs models, and a profile says what it lacks.
  std::string no_events;
  bind_symbol(library, d.event_create, KILN_CUDA_SYMBOL(cuEventCreate), no_events);
  bind_symbol(library, d.event_destroy, KILN_CUDA_SYMBOL(cuEventDestroy), no_events);
  bind_symbol(library, d.event_record, KILN_CUDA_SYMBOL(cuEventRecord), no_events);
  bind_symbol(library, d.event_elapsed_time, KILN_CUDA_SYMBOL(cuEventElapsedTime), no_events);
  if (!no_events.empty()) d.missing_for_profiles = no_events;
  KILN_BIND(occupancy_max_active_blocks, cuOccupancyMaxActiveBlocksPerMultiprocessor);
#undef KILN_BIND
  if (!missing.empty()) return make_error("the NVIDIA driver in " + file + " is too old: it lacks " + missing);
  if (CUresult r = d.init(0); r != CUDA_SUCCESS)
    return make_error("the NVIDIA driver found no usable GPU (cuInit: " + d.describe(r) + ")");
  return &d;
}

Result<const Blas*> open_blas() {
  KILN_ASSIGN_OR_RETURN(auto opened, open_library("KILN_LIBCUBLAS", "libcublas.so.13", "libcublas.so", "cuBLAS"));
  auto [library, file] = opened;
  static Blas b;
  std::string missing;
  bind_symbol(library, b.create, "cublasCreate_v2", missing);
  bind_symbol(library, b.destroy, "cublasDestroy_v2", missing);
  bind_symbol(library, b.set_stream, "cublasSetStream_v2", missing);
  bind_symbol(library, b.set_workspace, "cublasSetWorkspace_v2", missing);
  bind_symbol(library, b.set_math_mode, "cublasSetMathMode", missing);
  bind_symbol(library, b.sgemm_strided_batched, "cublasSgemmStridedBatched", missing);
  bind_symbol(library, b.dgemm_strided_batched, "cublasDgemmStridedBatched", missing);
  bind_symbol(library, b.gemm_strided_batched_ex, "cublasGemmStridedBatchedEx", missing);
  bind_symbol(library, b.status_string, "cublasGetStatusString", missing);
  if (!missing.empty()) return make_error("cuBLAS in " + file + " lacks " + missing);
  return &b;
}

}  // namespace

Result<std::pair<void*, std::string>> open_library(const char* variable, const char* soname, const char* fallback,
                                                   const char* what) {
  const char* path = std::getenv(variable);
  std::string file = path && *path ? path : soname;
  void* library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library && !(path && *path)) library = dlopen((file = fallback).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) return make_error(std::string(what) + " was not found (" + dlerror() + ")");
  return std::pair{library, file};
}

void* find_symbol(void* library, const char* name, std::string& missing) {
  void* symbol = dlsym(library, name);
  if (!symbol) missing += std::string(missing.empty() ? "" : ", ") + name;
  return symbol;
}

std::string error_name(CUresult result) {
  switch (static_cast<int>(result)) {
#define X(name) \
  case name:    \
    return #name;
#include "cuda_error_names.inc"
#undef X
  }
  return "CUDA error " + std::to_string(static_cast<int>(result));
}

std::string Driver::describe(CUresult result) const {
  const char* text = nullptr;
  if (get_error_string) get_error_string(result, &text);
  return error_name(result) + (text ? " (" + std::string(text) + ")" : "");
}

Result<const Driver*> driver() {
  static std::once_flag once;
  static Result<const Driver*> opened = Error{};
  std::call_once(once, [] { opened = open_driver(); });
  return opened;
}

Result<const Blas*> blas() {
  static std::once_flag once;
  static Result<const Blas*> opened = Error{};
  std::call_once(once, [] { opened = open_blas(); });
  return opened;
}

}  // namespace kiln::runtime::cuda
