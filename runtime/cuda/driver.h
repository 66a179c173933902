// libcuda and cuBLAS, opened at run time through symbol tables: the runtime links neither,
// so it starts (and runs CPU artifacts) on machines with no NVIDIA driver.
#pragma once

#include <cuda.h>
#include <string>
#include <utility>

#include "base/result.h"

namespace kiln::runtime::cuda {

/// The driver API entry points the runtime uses.
struct Driver {
  decltype(&::cuInit) init;
  decltype(&::cuDriverGetVersion) driver_get_version;
  decltype(&::cuGetErrorName) get_error_name;
  decltype(&::cuGetErrorString) get_error_string;
  decltype(&::cuDeviceGetCount) device_get_count;
  decltype(&::cuDeviceGet) device_get;
  decltype(&::cuDeviceGetName) device_get_name;
  decltype(&::cuDeviceGetAttribute) device_get_attribute;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain;
  decltype(&::cuDevicePrimaryCtxRelease) primary_ctx_release;
  decltype(&::cuCtxSetCurrent) ctx_set_current;
  decltype(&::cuModuleLoadDataEx) module_load_data_ex;
  decltype(&::cuModuleUnload) module_unload;
  decltype(&::cuModuleGetFunction) module_get_function;
  decltype(&::cuMemAlloc) mem_alloc;
  decltype(&::cuMemFree) mem_free;
  decltype(&::cuMemGetInfo) mem_get_info;
  decltype(&::cuMemsetD8) memset_d8;
  decltype(&::cuMemcpyHtoD) memcpy_htod;
  decltype(&::cuMemcpyDtoH) memcpy_dtoh;
  decltype(&::cuMemcpyHtoDAsync) memcpy_htod_async;
  decltype(&::cuMemcpyDtoHAsync) memcpy_dtoh_async;
  decltype(&::cuMemcpyDtoDAsync) memcpy_dtod_async;
  decltype(&::cuStreamCreate) stream_create;
  decltype(&::cuStreamDestroy) stream_destroy;
  decltype(&::cuStreamSynchronize) stream_synchronize;
  decltype(&::cuStreamBeginCapture) stream_begin_capture;
  decltype(&::cuStreamEndCapture) stream_end_capture;
  decltype(&::cuGraphInstantiate) graph_instantiate;
  decltype(&::cuGraphLaunch) graph_launch;
  decltype(&::cuGraphDestroy) graph_destroy;
  decltype(&::cuGraphExecDestroy) graph_exec_destroy;
  decltype(&::cuLaunchKernel) launch_kernel;
  decltype(&::cuFuncSetAttribute) func_set_attribute;
  decltype(&::cuEventCreate) event_create;
  decltype(&::cuEventDestroy) event_destroy;
  decltype(&::cuEventRecord) event_record;
  decltype(&::cuEventElapsedTime) event_elapsed_time;
  decltype(&::cuOccupancyMaxActiveBlocksPerMultiprocessor) occupancy_max_active_blocks;

  /// What profiled runs need that this driver lacks (empty: nothing); the event entry
  /// points above are then null.
  std::string missing_for_profiles;

  /// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
  std::string describe(CUresult result) const;
};

/// The enum name of a CUresult ("CUDA_ERROR_NO_DEVICE"), from cuda.h, whatever the
/// driver can say; "CUDA error N" for a code cuda.h does not name.
std::string error_name(CUresult result);

/// Opens libcuda (once per process; $KILN_LIBCUDA names another file) and calls cuInit.
/// The error says why there is no usable driver: "no NVIDIA driver was found (...)".
Result<const Driver*> driver();

/// cuBLAS, declared here rather than through its headers (only the calls kiln makes).
struct Blas {
  using Handle = struct cublasContext*;
  using Status = int;  ///< cublasStatus_t; 0 is success
  enum Operation : int { kNoTranspose = 0, kTranspose = 1 };
  Status (*create)(Handle*);
  Status (*destroy)(Handle);
  Status (*set_stream)(Handle, CUstream);
  Status (*set_workspace)(Handle, void*, size_t);
  enum MathMode : int { kDefaultMath = 0, kTf32TensorOpMath = 3 };  ///< cublasMath_t
  Status (*set_math_mode)(Handle, MathMode);
  Status (*sgemm_strided_batched)(Handle, Operation, Operation, int, int, int, const float*, const float*, int,
                                  long long, const float*, int, long long, const float*, float*, int, long long, int);
  Status (*dgemm_strided_batched)(Handle, Operation, Operation, int, int, int, const double*, const double*, int,
                                  long long, const double*, int, long long, const double*, double*, int, long long,
                                  int);
  // f16 and bf16 matmuls: cublasGemmStridedBatchedEx with f32 compute.
  enum DataType : int { kR32F = 0, kR16F = 2, kR16BF = 14 };  ///< cudaDataType
  enum ComputeType : int { kCompute32F = 68 };                ///< cublasComputeType_t
  Status (*gemm_strided_batched_ex)(Handle, Operation, Operation, int, int, int, const void*, const void*, DataType,
                                    int, long long, const void*, DataType, int, long long, const void*, void*, DataType,
                                    int, long long, int, ComputeType, int /* cublasGemmAlgo_t */);
  const char* (*status_string)(Status);
};

/// Opens cuBLAS (once per process; $KILN_LIBCUBLAS names another file).
Result<const Blas*> blas();

/// dlopen of $`variable`'s file where it is set, else `soname`, else `fallback` (the
/// unversioned name); the library and the file opened, or "WHAT was not found (...)".
Result<std::pair<void*, std::string>> open_library(const char* variable, const char* soname, const char* fallback,
                                                   const char* what);

/// dlsym of `name` in `library`; null, with the name appended to `missing` (comma
/// separated), where the library lacks it.
void* find_symbol(void* library, const char* name, std::string& missing);
template <class F>
void bind_symbol(void* library, F& slot, const char* name, std::string& missing) {
  slot = reinterpret_cast<F>(find_symbol(library, name, missing));
}

}  // namespace kiln::runtime::cuda
