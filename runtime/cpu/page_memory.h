// Large buffers that a session reads on every run (its arenas, its packed weights),
// mapped from the kernel in whole pages and advised onto transparent huge pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace kiln::runtime::cpu {

/// Zeroed bytes from mmap, at least page-aligned (so 64-byte aligned, as oneDNN's kernels
/// read best). Buffers of 2 MiB or more are 2 MiB aligned, rounded up to whole 2 MiB pages
/// and advised with MADV_HUGEPAGE: a run streams a network's packed weights, 100 MB for
/// ResNet-50, and on 4 KiB pages each new page is a TLB miss, which in a virtual machine
/// is a walk of two page tables (docs/cpu.md, "Memory"). Where the system's transparent
/// huge pages are off the advice does nothing and the pages are 4 KiB.
class PageMemory {
 public:
  /// `bytes` (0 maps one page) for `what` ("the arena"); an allocation the machine cannot
  /// make is an error naming both.
  static Result<PageMemory> allocate(uint64_t bytes, std::string_view what);

  PageMemory() = default;
  ~PageMemory();
  PageMemory(PageMemory&& other) noexcept;
  PageMemory& operator=(PageMemory&& other) noexcept;
  PageMemory(const PageMemory&) = delete;
  PageMemory& operator=(const PageMemory&) = delete;

  uint8_t* data() const { return data_; }
  /// The bytes asked for (the mapping may be larger).
  uint64_t size() const { return size_; }
  /// Whether this buffer was advised onto huge pages.
  bool huge_pages_advised() const { return advised_; }

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  bool advised_ = false;
};

/// The system's transparent huge page mode ("always", "madvise" or "never", from
/// /sys/kernel/mm/transparent_hugepage/enabled), or "unknown" where it cannot be read.
std::string transparent_huge_pages();

}  // namespace kiln::runtime::cpu
