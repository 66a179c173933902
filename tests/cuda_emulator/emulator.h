// A host emulation of the parts of the CUDA driver, cuBLAS and cuBLASLt that kiln's
// runtime calls, built as one shared library that $KILN_LIBCUDA, $KILN_LIBCUBLAS and
// $KILN_LIBCUBLASLT can name: CUDA artifacts then run on a machine without a GPU, their
// kernels compiled from the program's CUDA C++ by the host compiler and run a thread at a
// time (each CUDA thread a fiber, switching at barriers), their matmuls by a reference
// GEMM. It checks what kernels compute, not how fast; races between threads are not
// seen. Tests only (tests/unit/cuda_emulated_test.cc).
#pragma once

#include <cuda.h>

#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::cuda_emulator {

/// The definitions a kiln CUDA program needs to compile as host C++ (device_header.cc).
std::string_view device_header();

/// A compiled kernel: its entry (cuLaunchKernel's parameters) and its parameters' sizes.
struct Kernel {
  void (*entry)(void** params) = nullptr;
  std::vector<unsigned> param_sizes;
  std::string name;
  /// The dynamic shared memory a launch may take: 48 KB unless cuFuncSetAttribute allowed
  /// more (as a GPU's).
  unsigned max_dynamic_shared = 48 * 1024;
};

/// Runs a grid of the kernel with these parameter values (copied at launch, as CUDA
/// does) and `shared_bytes` of dynamic shared memory; the error says what went wrong (a
/// deadlock at a barrier, a misaligned address), or is empty.
std::string run_grid(const Kernel& kernel, const std::vector<std::vector<char>>& params, unsigned grid[3],
                     unsigned block[3], unsigned shared_bytes);

/// The host library of the program that NVRTC compiled to `image`, compiled and bound
/// to the scheduler (once per source); null, with the reason in `error`, where it fails.
void* load_program(const void* image, std::string& error);

/// Binds a loaded program to the scheduler (its kiln_emu_bind).
void bind_program(void (*bind)(const void* api));

/// Runs `work` in stream order: now, or at each replay of the graph that `stream` is
/// capturing. One lock serializes all of the emulator's work.
void enqueue(CUstream stream, std::function<void()> work);

/// The emulator's lock, held by enqueue's work and by every entry point.
std::recursive_mutex& lock();

}  // namespace kiln::cuda_emulator
