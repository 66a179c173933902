// The x86 CPU features CPU code may use beyond the x86-64 baseline, with the CPUID bit
// that says a CPU has each. The compiler lets LLVM use only these (and turns every other
// feature of the chosen CPU off), records the ones it used in the artifact, and the
// runtime checks them with CPUID before it loads the code: an artifact built for a newer
// CPU is refused with the names of what is missing, never run into SIGILL.
#pragma once

#include <cstdint>
#include <string_view>

namespace kiln::format {

/// Which register of a CPUID leaf holds a feature's bit.
enum class CpuidRegister : uint8_t { Eax, Ebx, Ecx, Edx };
/// The register state the OS must save (XCR0) for a feature's instructions to run.
enum class OsState : uint8_t { None, Avx, Avx512 };

struct CpuFeatureBit {
  std::string_view name;  ///< LLVM's name, which the artifact records
  uint32_t leaf, subleaf;
  CpuidRegister reg;
  uint8_t bit;
  OsState os;
};

/// Features every x86-64 CPU has: never recorded, never checked.
inline constexpr std::string_view kBaselineCpuFeatures[] = {"64bit", "cmov", "cx8",  "fxsr",
                                                            "mmx",   "sse",  "sse2", "x87"};

/// The features code may use, sorted by name. Sources: the Intel SDM, vol. 2A, CPUID
/// (leaf 1, leaf 7 subleaves 0 and 1, leaf 0x80000001), and AMD's APM vol. 3, appendix E.
inline constexpr CpuFeatureBit kCpuFeatureBits[] = {
    {"avx", 1, 0, CpuidRegister::Ecx, 28, OsState::Avx},
    {"avx2", 7, 0, CpuidRegister::Ebx, 5, OsState::Avx},
    {"avx512bf16", 7, 1, CpuidRegister::Eax, 5, OsState::Avx512},
    {"avx512bitalg", 7, 0, CpuidRegister::Ecx, 12, OsState::Avx512},
    {"avx512bw", 7, 0, CpuidRegister::Ebx, 30, OsState::Avx512},
    {"avx512cd", 7, 0, CpuidRegister::Ebx, 28, OsState::Avx512},
    {"avx512dq", 7, 0, CpuidRegister::Ebx, 17, OsState::Avx512},
    {"avx512f", 7, 0, CpuidRegister::Ebx, 16, OsState::Avx512},
    {"avx512fp16", 7, 0, CpuidRegister::Edx, 23, OsState::Avx512},
    {"avx512ifma", 7, 0, CpuidRegister::Ebx, 21, OsState::Avx512},
    {"avx512vbmi", 7, 0, CpuidRegister::Ecx, 1, OsState::Avx512},
    {"avx512vbmi2", 7, 0, CpuidRegister::Ecx, 6, OsState::Avx512},
    {"avx512vl", 7, 0, CpuidRegister::Ebx, 31, OsState::Avx512},
    {"avx512vnni", 7, 0, CpuidRegister::Ecx, 11, OsState::Avx512},
    {"avx512vpopcntdq", 7, 0, CpuidRegister::Ecx, 14, OsState::Avx512},
    {"avxvnni", 7, 1, CpuidRegister::Eax, 4, OsState::Avx},
    {"bmi", 7, 0, CpuidRegister::Ebx, 3, OsState::None},
    {"bmi2", 7, 0, CpuidRegister::Ebx, 8, OsState::None},
    {"crc32", 1, 0, CpuidRegister::Ecx, 20, OsState::None},  // with SSE4.2
    {"cx16", 1, 0, CpuidRegister::Ecx, 13, OsState::None},
    {"evex512", 7, 0, CpuidRegister::Ebx, 16, OsState::Avx512},  // 512-bit AVX-512: every AVX-512F CPU
    {"f16c", 1, 0, CpuidRegister::Ecx, 29, OsState::Avx},
    {"fma", 1, 0, CpuidRegister::Ecx, 12, OsState::Avx},
    {"gfni", 7, 0, CpuidRegister::Ecx, 8, OsState::None},
    {"lzcnt", 0x80000001, 0, CpuidRegister::Ecx, 5, OsState::None},
    {"movbe", 1, 0, CpuidRegister::Ecx, 22, OsState::None},
    {"pclmul", 1, 0, CpuidRegister::Ecx, 1, OsState::None},
    {"popcnt", 1, 0, CpuidRegister::Ecx, 23, OsState::None},
    {"prfchw", 0x80000001, 0, CpuidRegister::Ecx, 8, OsState::None},
    {"sahf", 0x80000001, 0, CpuidRegister::Ecx, 0, OsState::None},
    {"sse3", 1, 0, CpuidRegister::Ecx, 0, OsState::None},
    {"sse4.1", 1, 0, CpuidRegister::Ecx, 19, OsState::None},
    {"sse4.2", 1, 0, CpuidRegister::Ecx, 20, OsState::None},
    {"ssse3", 1, 0, CpuidRegister::Ecx, 9, OsState::None},
    {"vpclmulqdq", 7, 0, CpuidRegister::Ecx, 10, OsState::Avx},
    {"xsave", 1, 0, CpuidRegister::Ecx, 26, OsState::None},
};

/// The CPUID bit of a feature the runtime can check, or null.
inline const CpuFeatureBit* find_cpu_feature(std::string_view name) {
  for (const CpuFeatureBit& f : kCpuFeatureBits)
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace kiln::format
