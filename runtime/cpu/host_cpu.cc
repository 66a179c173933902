#include "runtime/cpu/host_cpu.h"

#include <cpuid.h>
#include <cstdint>

#include "runtime/format/cpu_features.h"

namespace kiln::runtime {
namespace {

// XCR0, the register state the OS saves on a context switch (0 without OSXSAVE).
uint64_t os_saved_state() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27))) return 0;
  uint32_t low = 0, high = 0;
  __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
  return (uint64_t{high} << 32) | low;
}

bool os_saves(format::OsState state) {
  static const uint64_t xcr0 = os_saved_state();
  constexpr uint64_t kSse = 1 << 1, kAvx = 1 << 2, kOpmask = 1 << 5, kZmmHigh256 = 1 << 6, kHighZmm = 1 << 7;
  switch (state) {
    case format::OsState::None: return true;
    case format::OsState::Avx: return (xcr0 & (kSse | kAvx)) == (kSse | kAvx);
    case format::OsState::Avx512: {
      constexpr uint64_t all = kSse | kAvx | kOpmask | kZmmHigh256 | kHighZmm;
      return (xcr0 & all) == all;
    }
  }
  return false;
}

}  // namespace

bool host_has_cpu_feature(std::string_view name) {
  const format::CpuFeatureBit* f = format::find_cpu_feature(name);
  if (!f) return false;
  unsigned regs[4] = {};
  if (!__get_cpuid_count(f->leaf, f->subleaf, &regs[0], &regs[1], &regs[2], &regs[3])) return false;
  return (regs[static_cast<int>(f->reg)] >> f->bit & 1u) && os_saves(f->os);
}

std::vector<std::string> missing_cpu_features(const std::vector<std::string>& needed) {
  std::vector<std::string> missing;
  for (const std::string& name : needed)
    if (!host_has_cpu_feature(name)) missing.push_back(name);
  return missing;
}

}  // namespace kiln::runtime
