// What every benchmark needs of the machine: aligned host buffers, seeded data, the bandwidth
// of a plain copy (host or device), and the names of the CPU and BLAS it ran on.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>

#include "base/result.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/cuda/driver.h"
#include "runtime/model.h"
#include "runtime/types.h"

namespace kiln::bench {

/// The CPU's model name, from /proc/cpuinfo ("unknown" without one).
std::string cpu_model_name();
/// The BLAS library the runtime's matmuls call, with the kernels it chose for this CPU.
std::string blas_description();
/// "2026-11-23".
std::string today_utc();
/// The GPU's name, or why there is none.
Result<std::string> gpu_name(const runtime::cuda::Driver* cu);

/// Bytes on a 64-byte boundary, as PyTorch's CPU allocator gives its tensors. malloc's
/// large blocks start 16 bytes past a page, and then every 64-byte vector load of a row
/// spans two cache lines, and row kernels read well below their aligned speed
/// (docs/benchmarks.md, "The run before: aligned buffers").
class AlignedBytes {
 public:
  explicit AlignedBytes(size_t n, uint8_t fill = 0);
  uint8_t* data() const { return p_.get(); }
  size_t size() const { return n_; }
  std::span<uint8_t> span() const { return {p_.get(), n_}; }

 private:
  size_t n_;
  std::unique_ptr<uint8_t, decltype(&std::free)> p_;
};

/// Seeded data from a fast generator: floats uniform in [-scale, scale), integers in
/// [0, int_bound), bools 0 or 1.
void fill_random(const runtime::TensorInfo& info, uint64_t seed, uint8_t* data, double scale = 1,
                 int64_t int_bound = 10);

/// A loaded model's buffers for timed runs: 64-byte-aligned host buffers for every input
/// and every output but the state updates (as a training loop leaves them: the state holds
/// them) and, after to_device(), copies on the GPU of the inputs and buffers for every
/// output, so that a run touches device memory only (no host copies in what is timed).
/// Keeps a reference to the model.
class ModelBuffers {
 public:
  /// Fills input `index` (signature order) of type `info` into `bytes`, or says why not.
  using Fill = std::function<Status(const runtime::TensorInfo& info, size_t index, uint8_t* bytes)>;
  static Result<std::unique_ptr<ModelBuffers>> make(const runtime::Model& model, const Fill& fill);
  ~ModelBuffers();
  ModelBuffers(const ModelBuffers&) = delete;
  ModelBuffers& operator=(const ModelBuffers&) = delete;

  /// Uploads the inputs and allocates the outputs on the GPU; later runs use those.
  Status to_device();
  /// One run: on the device buffers after to_device(), else on the host buffers.
  Status run() const;
  /// One profiled run, on the same buffers as run().
  Result<runtime::RunProfile> profile() const;
  /// The driver, after to_device().
  const runtime::cuda::Driver* driver() const { return cu_; }

 private:
  explicit ModelBuffers(const runtime::Model& model) : model_(model) {}
  const runtime::Model& model_;
  std::vector<std::unique_ptr<AlignedBytes>> storage_;
  std::map<std::string, std::span<const uint8_t>> inputs_;
  std::map<std::string, std::span<uint8_t>> outputs_;
  const runtime::cuda::Driver* cu_ = nullptr;
  std::map<std::string, uint64_t> device_inputs_, device_outputs_;
};

/// A copy of `bytes` split across the pool's threads like a kernel: the CPU's bandwidth limit.
class HostCopy {
 public:
  HostCopy(int64_t bytes, runtime::ThreadPool& pool, int threads);
  void run();
  int64_t bytes() const { return static_cast<int64_t>(from_.size()); }

 private:
  AlignedBytes from_, to_;
  runtime::ThreadPool& pool_;
  int threads_;
};

/// A device-to-device copy of `bytes`, synchronized: the GPU's bandwidth limit.
class DeviceCopy {
 public:
  static Result<std::unique_ptr<DeviceCopy>> make(const runtime::cuda::Driver* cu, int64_t bytes);
  ~DeviceCopy();
  void run();
  int64_t bytes() const { return static_cast<int64_t>(bytes_); }

 private:
  DeviceCopy(const runtime::cuda::Driver* cu, size_t bytes) : cu_(cu), bytes_(bytes) {}
  const runtime::cuda::Driver* cu_;
  size_t bytes_;
  CUdeviceptr from_ = 0, to_ = 0;
  CUstream stream_ = nullptr;
};

/// Bytes over milliseconds, in GB/s (0 for a zero time).
inline double gbps(int64_t bytes, double ms) { return ms > 0 ? static_cast<double>(bytes) / ms / 1e6 : 0; }

}  // namespace kiln::bench
