#include "codegen/cpu/cpu_target.h"

#include <fmt/format.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/X86TargetParser.h>
#include <algorithm>

#include "runtime/format/cpu_features.h"

namespace kiln::codegen::cpu {
namespace {

bool is_baseline(std::string_view feature) {
  return std::find(std::begin(format::kBaselineCpuFeatures), std::end(format::kBaselineCpuFeatures), feature) !=
         std::end(format::kBaselineCpuFeatures);
}

}  // namespace

std::string llvm_version() { return "LLVM " LLVM_VERSION_STRING; }

std::vector<std::string> known_cpus() {
  llvm::SmallVector<llvm::StringRef, 128> names;
  llvm::X86::fillValidCPUArchList(names, /*Only64Bit=*/true);
  std::vector<std::string> out;
  for (llvm::StringRef n : names) out.push_back(n.str());
  return out;
}

std::vector<std::string> known_cpu_features() {
  std::vector<std::string> out;
  for (const format::CpuFeatureBit& f : format::kCpuFeatureBits) out.emplace_back(f.name);
  return out;
}

Result<CpuTarget> resolve_cpu(std::string_view spelled) {
  CpuTarget target;
  target.name = std::string(spelled);
  // "x86-64-v4+avx512bf16": a CPU, then features it adds.
  const std::string_view name = spelled.substr(0, spelled.find('+'));
  std::vector<std::string> added;
  for (size_t plus = spelled.find('+'); plus != std::string_view::npos;) {
    const size_t next = spelled.find('+', plus + 1);
    const std::string feature(spelled.substr(plus + 1, next == std::string_view::npos ? next : next - plus - 1));
    if (!format::find_cpu_feature(feature) || is_baseline(feature))
      return make_error(fmt::format(
          "cpu codegen: '{}' adds '{}', which is not a CPU feature kiln's runtime checks (such as avx512bf16 or "
          "avx512fp16; 'kiln compile --cpu=help' lists them)",
          spelled, feature));
    added.push_back(feature);
    plus = next;
  }
  // The CPU's ISA features, each on or off.
  llvm::StringMap<bool> features;
  if (name == "native") {
    target.llvm_cpu = llvm::sys::getHostCPUName().str();
    features = llvm::sys::getHostCPUFeatures();
  } else {
    if (llvm::X86::parseArchX86(name, /*Only64Bit=*/true) == llvm::X86::CK_None) {
      if (llvm::X86::parseArchX86(name, /*Only64Bit=*/false) != llvm::X86::CK_None)
        return make_error(
            fmt::format("cpu codegen: '{}' is a 32-bit CPU; kiln compiles 64-bit code (x86-64 or newer)", name));
      return make_error(fmt::format(
          "cpu codegen: unknown CPU '{}' (expected native, x86-64, x86-64-v2, x86-64-v3, x86-64-v4, or an x86-64 CPU "
          "LLVM knows, such as skylake-avx512 or znver4; 'kiln compile --cpu=help' lists them)",
          name));
    }
    target.llvm_cpu = std::string(name);
    llvm::SmallVector<llvm::StringRef, 64> enabled;
    llvm::X86::getFeaturesForCPU(name, enabled, /*NeedPlus=*/false);
    for (llvm::StringRef f : enabled) features[f] = true;
  }
  for (const std::string& f : added) features[f] = true;
  // getFeaturesForCPU lists a CPU's own features, not those they imply (avx2 implies avx):
  // the code may use those too, so they are recorded and checked as well.
  std::vector<std::string> listed;
  for (const auto& entry : features)
    if (entry.second) listed.push_back(entry.first().str());
  for (const std::string& f : listed) llvm::X86::updateImpliedFeatures(f, true, features);
  // Every CPU with AVX-512 before AVX10 runs its 512-bit form.
  if (features.lookup("avx512f")) features["evex512"] = true;
  std::vector<std::string> flags;
  for (const auto& entry : features) {
    const std::string feature = entry.first().str();
    if (!entry.second || is_baseline(feature)) continue;
    if (format::find_cpu_feature(feature)) {
      target.required.push_back(feature);
      flags.push_back("+" + feature);
    } else {
      flags.push_back("-" + feature);  // an instruction the runtime cannot check: never emitted
    }
  }
  std::sort(target.required.begin(), target.required.end());
  std::sort(flags.begin(), flags.end());
  for (const std::string& f : flags) target.llvm_features += (target.llvm_features.empty() ? "" : ",") + f;
  return target;
}

}  // namespace kiln::codegen::cpu
