// A CPU artifact's kernels, loaded from memory: the ELF object this CPU can run (the one
// with the most of its recorded features this CPU has), opened with dlopen through a
// memfd, each kernel's entry point, and, from format 1.2, each kernel's signature checked
// against the artifact's metadata.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "runtime/executor.h"

namespace kiln::runtime::cpu {

/// A kernel's entry point: kiln_STEP(args, begin, end) over work items [begin, end).
using Kernel = void (*)(uint8_t* const* args, int64_t begin, int64_t end);

class KernelLibrary {
 public:
  /// Loads the kernels of a verified artifact, one entry point per step (null for library
  /// steps). `signature` names the values for the signature checks' messages.
  static Result<KernelLibrary> load(const format::ArtifactView& view, const Signature& signature);
  KernelLibrary(KernelLibrary&& other) noexcept;
  KernelLibrary& operator=(KernelLibrary&&) = delete;
  ~KernelLibrary();

  /// The CPU of `kiln compile --cpu` the loaded kernels were compiled for
  /// ("x86-64-v4+avx512bf16"); empty where the program has no kernels.
  const std::string& cpu() const { return cpu_; }
  /// The entry point of step `s`, or null for a library step.
  Kernel kernel(size_t s) const { return kernels_[s]; }
  /// The kernel that sums the parts of split reduction step `s` (format 1.4), or null.
  Kernel partial_kernel(size_t s) const { return partial_kernels_[s]; }
  /// Step `s`'s kernel in one of oneDNN's layouts (format 1.10, Step.channel_layouts:
  /// 0 channels-last, 8 or 16 channels a block), or null.
  Kernel layout_kernel(size_t s, int layout) const {
    for (auto [l, kernel] : layout_kernels_[s])
      if (l == layout) return kernel;
    return nullptr;
  }

 private:
  KernelLibrary() = default;
  void* library_ = nullptr;
  int fd_ = -1;  // the memfd the kernels were loaded from
  std::string cpu_;
  std::vector<Kernel> kernels_, partial_kernels_;
  std::vector<std::vector<std::pair<int, Kernel>>> layout_kernels_;  // per step: (layout, kernel)
};

}  // namespace kiln::runtime::cpu
