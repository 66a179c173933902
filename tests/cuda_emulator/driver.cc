// The driver API entry points kiln's runtime binds (runtime/cuda/driver.cc), on the
// host: device memory is host memory, every call runs at once under one lock (a stream
// is already in order), and a captured stream records its work for its graph to replay.
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

#include "tests/cuda_emulator/emulator.h"

namespace kiln::cuda_emulator {
namespace {

struct Stream {
  bool capturing = false;
  std::vector<std::function<void()>> captured;
};
struct Graph {
  std::vector<std::function<void()>> work;
};
struct Event {
  std::chrono::steady_clock::time_point at;
};
struct Module {
  void* library = nullptr;
  std::map<std::string, std::unique_ptr<Kernel>> kernels;
};

// A kernel that failed (a deadlock at a barrier) fails every later call that waits on
// the device, as CUDA's launch errors do.
bool g_launch_failed = false;

}  // namespace

std::recursive_mutex& lock() {
  static std::recursive_mutex m;
  return m;
}

void enqueue(CUstream stream, std::function<void()> work) {
  std::lock_guard<std::recursive_mutex> hold(lock());
  auto* s = reinterpret_cast<Stream*>(stream);
  if (s && s->capturing) s->captured.push_back(std::move(work));
  else work();
}

}  // namespace kiln::cuda_emulator

using namespace kiln::cuda_emulator;

#define KILN_EMU_LOCK std::lock_guard<std::recursive_mutex> hold(lock())

extern "C" {

CUresult cuInit(unsigned int) { return CUDA_SUCCESS; }
CUresult cuDriverGetVersion(int* version) {
  *version = 13000;
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char** name) {
  switch (error) {
    case CUDA_SUCCESS: *name = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_INVALID_IMAGE: *name = "CUDA_ERROR_INVALID_IMAGE"; break;
    case CUDA_ERROR_NOT_FOUND: *name = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_LAUNCH_FAILED: *name = "CUDA_ERROR_LAUNCH_FAILED"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *name = "CUDA_ERROR_NOT_SUPPORTED"; break;
    case CUDA_ERROR_INVALID_DEVICE: *name = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_ILLEGAL_STATE: *name = "CUDA_ERROR_ILLEGAL_STATE"; break;
    default: *name = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
CUresult cuGetErrorString(CUresult error, const char** text) {
  if (cuGetErrorName(error, text) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
  *text = "reported by kiln's CUDA emulator (its stderr says more)";
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  *count = 1;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char* name, int length, CUdevice) {
  std::snprintf(name, static_cast<size_t>(length), "%s", "kiln CUDA emulator");
  return CUDA_SUCCESS;
}
// An sm_90 of two multiprocessors, each holding one block: grids are small, so kernels
// walk their grid-stride loops.
CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice) {
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 2; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *value = 2048; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; break;
    default:
      std::fprintf(stderr, "kiln CUDA emulator: no device attribute %d\n", attribute);
      return CUDA_ERROR_NOT_SUPPORTED;
  }
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice) {
  static int the_context;
  *context = reinterpret_cast<CUcontext>(&the_context);
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }

CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int count, CUjit_option* options,
                            void** values) {
  KILN_EMU_LOCK;
  std::string error;
  void* library = load_program(image, error);
  if (!library) {
    std::fprintf(stderr, "kiln CUDA emulator: %s\n", error.c_str());
    for (unsigned i = 0; i < count; ++i)
      if (options[i] == CU_JIT_ERROR_LOG_BUFFER)
        for (unsigned j = 0; j < count; ++j)
          if (options[j] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
            const size_t size = reinterpret_cast<uintptr_t>(values[j]);
            if (size > 0) std::snprintf(static_cast<char*>(values[i]), size, "%s", error.c_str());
          }
    return CUDA_ERROR_INVALID_IMAGE;
  }
  auto* m = new Module;
  m->library = library;
  *module = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}
CUresult cuModuleUnload(CUmodule module) {
  KILN_EMU_LOCK;
  delete reinterpret_cast<Module*>(module);  // the library stays: other modules may share it
  return CUDA_SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  KILN_EMU_LOCK;
  Module& m = *reinterpret_cast<Module*>(module);
  std::unique_ptr<Kernel>& k = m.kernels[name];
  if (!k) {
    auto entry = reinterpret_cast<void (*)(void**)>(dlsym(m.library, ("kiln_emu_entry_" + std::string(name)).c_str()));
    auto sizes =
        reinterpret_cast<unsigned (*)(unsigned*)>(dlsym(m.library, ("kiln_emu_sizes_" + std::string(name)).c_str()));
    if (!entry || !sizes) {
      m.kernels.erase(name);
      return CUDA_ERROR_NOT_FOUND;
    }
    k = std::make_unique<Kernel>();
    k->entry = entry;
    k->name = name;
    unsigned s[64];
    k->param_sizes.assign(s, s + sizes(s));
  }
  *function = reinterpret_cast<CUfunction>(k.get());
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc(CUdeviceptr* pointer, size_t bytes) {
  void* p = std::aligned_alloc(256, (std::max<size_t>(bytes, 1) + 255) / 256 * 256);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}
CUresult cuMemFree(CUdeviceptr pointer) {
  std::free(reinterpret_cast<void*>(pointer));
  return CUDA_SUCCESS;
}
CUresult cuMemGetInfo(size_t* free, size_t* total) {
  *free = *total = size_t{16} << 30;
  return CUDA_SUCCESS;
}
CUresult cuMemsetD8(CUdeviceptr pointer, unsigned char value, size_t bytes) {
  KILN_EMU_LOCK;
  std::memset(reinterpret_cast<void*>(pointer), value, bytes);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoD(CUdeviceptr to, const void* from, size_t bytes) {
  KILN_EMU_LOCK;
  std::memcpy(reinterpret_cast<void*>(to), from, bytes);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH(void* to, CUdeviceptr from, size_t bytes) {
  KILN_EMU_LOCK;
  std::memcpy(to, reinterpret_cast<const void*>(from), bytes);
  return g_launch_failed ? CUDA_ERROR_LAUNCH_FAILED : CUDA_SUCCESS;
}
CUresult cuMemcpyHtoDAsync(CUdeviceptr to, const void* from, size_t bytes, CUstream stream) {
  enqueue(stream, [=] { std::memcpy(reinterpret_cast<void*>(to), from, bytes); });
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoHAsync(void* to, CUdeviceptr from, size_t bytes, CUstream stream) {
  enqueue(stream, [=] { std::memcpy(to, reinterpret_cast<const void*>(from), bytes); });
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoDAsync(CUdeviceptr to, CUdeviceptr from, size_t bytes, CUstream stream) {
  enqueue(stream, [=] { std::memmove(reinterpret_cast<void*>(to), reinterpret_cast<const void*>(from), bytes); });
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream* stream, unsigned int) {
  *stream = reinterpret_cast<CUstream>(new Stream);
  return CUDA_SUCCESS;
}
CUresult cuStreamDestroy(CUstream stream) {
  KILN_EMU_LOCK;
  delete reinterpret_cast<Stream*>(stream);
  return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream) {
  KILN_EMU_LOCK;
  return g_launch_failed ? CUDA_ERROR_LAUNCH_FAILED : CUDA_SUCCESS;
}
CUresult cuStreamBeginCapture(CUstream stream, CUstreamCaptureMode) {
  KILN_EMU_LOCK;
  auto* s = reinterpret_cast<Stream*>(stream);
  if (!s || s->capturing) return CUDA_ERROR_ILLEGAL_STATE;
  s->capturing = true;
  s->captured.clear();
  return CUDA_SUCCESS;
}
CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  KILN_EMU_LOCK;
  auto* s = reinterpret_cast<Stream*>(stream);
  if (!s || !s->capturing) return CUDA_ERROR_ILLEGAL_STATE;
  s->capturing = false;
  *graph = reinterpret_cast<CUgraph>(new Graph{std::move(s->captured)});
  s->captured.clear();
  return CUDA_SUCCESS;
}
CUresult cuGraphInstantiate(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  KILN_EMU_LOCK;
  *exec = reinterpret_cast<CUgraphExec>(new Graph(*reinterpret_cast<Graph*>(graph)));
  return CUDA_SUCCESS;
}
CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  const Graph* g = reinterpret_cast<Graph*>(exec);
  enqueue(stream, [g] {
    for (const auto& work : g->work) work();
  });
  return CUDA_SUCCESS;
}
CUresult cuGraphDestroy(CUgraph graph) {
  KILN_EMU_LOCK;
  delete reinterpret_cast<Graph*>(graph);
  return CUDA_SUCCESS;
}
CUresult cuGraphExecDestroy(CUgraphExec exec) {
  KILN_EMU_LOCK;
  delete reinterpret_cast<Graph*>(exec);
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction function, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                        unsigned int by, unsigned int bz, unsigned int shared_bytes, CUstream stream, void** params,
                        void** extra) {
  const Kernel* kernel = reinterpret_cast<const Kernel*>(function);
  if (shared_bytes > kernel->max_dynamic_shared || extra != nullptr || bx * by * bz == 0 || bx * by * bz > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::vector<char>> values;
  for (size_t i = 0; i < kernel->param_sizes.size(); ++i) {
    const char* p = static_cast<const char*>(params[i]);
    values.emplace_back(p, p + kernel->param_sizes[i]);
  }
  auto launch = [kernel, values, gx, gy, gz, bx, by, bz, shared_bytes] {
    unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    const std::string error = run_grid(*kernel, values, grid, block, shared_bytes);
    if (!error.empty()) {
      std::fprintf(stderr, "kiln CUDA emulator: %s\n", error.c_str());
      g_launch_failed = true;
    }
  };
  enqueue(stream, launch);
  KILN_EMU_LOCK;
  return g_launch_failed ? CUDA_ERROR_LAUNCH_FAILED : CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent* event, unsigned int) {
  *event = reinterpret_cast<CUevent>(new Event);
  return CUDA_SUCCESS;
}
CUresult cuEventDestroy(CUevent event) {
  delete reinterpret_cast<Event*>(event);
  return CUDA_SUCCESS;
}
CUresult cuEventRecord(CUevent event, CUstream stream) {
  auto* e = reinterpret_cast<Event*>(event);
  enqueue(stream, [e] { e->at = std::chrono::steady_clock::now(); });
  return CUDA_SUCCESS;
}
CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  *ms =
      std::chrono::duration<float, std::milli>(reinterpret_cast<Event*>(end)->at - reinterpret_cast<Event*>(start)->at)
          .count();
  return CUDA_SUCCESS;
}
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, CUfunction function, int, size_t shared_bytes) {
  if (shared_bytes > reinterpret_cast<const Kernel*>(function)->max_dynamic_shared) return CUDA_ERROR_INVALID_VALUE;
  *blocks = 1;
  return CUDA_SUCCESS;
}
// Only the dynamic shared memory a function may take (up to sm_90's 227 KB).
CUresult cuFuncSetAttribute(CUfunction function, CUfunction_attribute attribute, int value) {
  KILN_EMU_LOCK;
  if (attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) return CUDA_ERROR_NOT_SUPPORTED;
  if (value < 0 || value > 232448) return CUDA_ERROR_INVALID_VALUE;
  reinterpret_cast<Kernel*>(function)->max_dynamic_shared = static_cast<unsigned>(value);
  return CUDA_SUCCESS;
}

}  // extern "C"
