// The CUDA emulator's own semantics (tests/cuda_emulator), through the driver API as the
// runtime calls it: warp shuffles, __syncthreads_or, a kernel's parameters copied at
// launch, the source kept beside each NVRTC cache entry, and a kernel whose threads wait
// at barriers that others never reach, or that writes past its dynamic shared memory,
// failing its launch. Run by cuda_emulated_test.sh,
// which points $KILN_LIBCUDA at the emulator.
#include <catch2/catch.hpp>
#include <filesystem>

#include "codegen/cuda/kernel_emitter.h"
#include "codegen/cuda/nvrtc_compile.h"
#include "runtime/cuda/driver.h"

using namespace kiln;

namespace {

constexpr const char* kKernels = R"(
extern "C" __global__ void shuffles(int* out, int* any, int seed) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  out[t] = __shfl_xor_sync(0xffffffffu, t * 10 + seed, 5);
  any[t] = __syncthreads_or(threadIdx.x == 37 && blockIdx.x == 1);
}
// Half of each warp shuffles while the other half waits for the whole block.
extern "C" __global__ void divergent(int* out) {
  int v = threadIdx.x;
  if ((threadIdx.x & 31) < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);
  __syncthreads();
  out[threadIdx.x] = v;
}
// Writes element `at` of its dynamic shared memory.
extern "C" __global__ void write_shared(int at) {
  KILN_DYNAMIC_SHARED(float, shared);
  if (threadIdx.x == 0) shared[at] = 1.f;
}
)";

const runtime::cuda::Driver& emulated_driver() {
  auto driver = runtime::cuda::driver();
  if (!driver.ok()) FAIL(driver.error().message);
  char name[64] = {};
  (*driver)->device_get_name(name, sizeof name, 0);
  REQUIRE(std::string(name) == "kiln CUDA emulator");
  CUcontext context;
  REQUIRE((*driver)->primary_ctx_retain(&context, 0) == CUDA_SUCCESS);
  REQUIRE((*driver)->ctx_set_current(context) == CUDA_SUCCESS);
  return **driver;
}

// The kernels compiled by NVRTC into the cache the emulator reads, and loaded.
CUmodule load_kernels(const runtime::cuda::Driver& cu) {
  const std::string source = std::string(codegen::cuda::prelude()) + kKernels;
  codegen::cuda::NvrtcOptions options;
  auto objects = codegen::cuda::compile_program(source, options);
  if (!objects.ok()) FAIL(objects.error().message);
  const std::string dir = codegen::cuda::default_cache_dir();
  bool source_kept = false;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".cu") {
      auto kept = codegen::cuda::read_cache_entry(entry.path().string());
      source_kept |= kept && std::string(kept->begin(), kept->end()) == source;
    }
  CHECK(source_kept);
  CUmodule module;
  REQUIRE(cu.module_load_data_ex(&module, (*objects)[0].bytes.data(), 0, nullptr, nullptr) == CUDA_SUCCESS);
  return module;
}

}  // namespace

TEST_CASE("CUDA emulator: shuffles, __syncthreads_or and launch-time parameters", "[cuda][emulator]") {
  const runtime::cuda::Driver& cu = emulated_driver();
  CUmodule module = load_kernels(cu);
  CUfunction shuffles;
  REQUIRE(cu.module_get_function(&shuffles, module, "shuffles") == CUDA_SUCCESS);
  constexpr int kThreads = 64, kBlocks = 2, kAll = kThreads * kBlocks;
  CUdeviceptr out, any;
  REQUIRE(cu.mem_alloc(&out, kAll * sizeof(int)) == CUDA_SUCCESS);
  REQUIRE(cu.mem_alloc(&any, kAll * sizeof(int)) == CUDA_SUCCESS);
  CUstream stream;
  REQUIRE(cu.stream_create(&stream, 0) == CUDA_SUCCESS);
  // Captured with seed 3; the variable then changes, and the replay must use 3.
  int seed = 3;
  void* params[] = {&out, &any, &seed};
  REQUIRE(cu.stream_begin_capture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS);
  REQUIRE(cu.launch_kernel(shuffles, kBlocks, 1, 1, kThreads, 1, 1, 0, stream, params, nullptr) == CUDA_SUCCESS);
  CUgraph graph;
  REQUIRE(cu.stream_end_capture(stream, &graph) == CUDA_SUCCESS);
  CUgraphExec exec;
  REQUIRE(cu.graph_instantiate(&exec, graph, 0) == CUDA_SUCCESS);
  seed = 1000;
  REQUIRE(cu.graph_launch(exec, stream) == CUDA_SUCCESS);
  REQUIRE(cu.stream_synchronize(stream) == CUDA_SUCCESS);
  std::vector<int> got(kAll), got_any(kAll);
  REQUIRE(cu.memcpy_dtoh(got.data(), out, kAll * sizeof(int)) == CUDA_SUCCESS);
  REQUIRE(cu.memcpy_dtoh(got_any.data(), any, kAll * sizeof(int)) == CUDA_SUCCESS);
  for (int t = 0; t < kAll; ++t) {
    INFO("thread " << t);
    CHECK(got[t] == (t ^ 5) * 10 + 3);
    CHECK(got_any[t] == (t >= kThreads ? 1 : 0));
  }
  cu.graph_exec_destroy(exec);
  cu.graph_destroy(graph);
}

// Last: like a fault on a GPU, the failed launch fails every later wait of the process.
TEST_CASE("CUDA emulator: threads waiting at barriers the others never reach fail the launch", "[cuda][emulator]") {
  const runtime::cuda::Driver& cu = emulated_driver();
  CUmodule module = load_kernels(cu);
  CUfunction divergent;
  REQUIRE(cu.module_get_function(&divergent, module, "divergent") == CUDA_SUCCESS);
  CUdeviceptr out;
  REQUIRE(cu.mem_alloc(&out, 64 * sizeof(int)) == CUDA_SUCCESS);
  void* params[] = {&out};
  CHECK(cu.launch_kernel(divergent, 1, 1, 1, 64, 1, 1, 0, nullptr, params, nullptr) == CUDA_ERROR_LAUNCH_FAILED);
  CHECK(cu.stream_synchronize(nullptr) == CUDA_ERROR_LAUNCH_FAILED);
}

TEST_CASE("CUDA emulator: a kernel writing past its dynamic shared memory fails the launch", "[cuda][emulator]") {
  const runtime::cuda::Driver& cu = emulated_driver();
  CUmodule module = load_kernels(cu);
  CUfunction write_shared;
  REQUIRE(cu.module_get_function(&write_shared, module, "write_shared") == CUDA_SUCCESS);
  int at = 63;  // the last float of 256 bytes
  void* params[] = {&at};
  CHECK(cu.launch_kernel(write_shared, 2, 1, 1, 32, 1, 1, 256, nullptr, params, nullptr) == CUDA_SUCCESS);
  CHECK(cu.stream_synchronize(nullptr) == CUDA_SUCCESS);
  at = 64;
  CHECK(cu.launch_kernel(write_shared, 2, 1, 1, 32, 1, 1, 256, nullptr, params, nullptr) == CUDA_ERROR_LAUNCH_FAILED);
  CHECK(cu.stream_synchronize(nullptr) == CUDA_ERROR_LAUNCH_FAILED);
}
