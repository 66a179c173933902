// What this machine's CPU can run: the features of runtime/format/cpu_features.h, read
// with CPUID (and XGETBV for the register state the OS saves).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

/// Whether this CPU has a feature of format::kCpuFeatureBits and the OS saves the
/// registers it needs; false for any other name.
bool host_has_cpu_feature(std::string_view name);

/// The features in `needed` this CPU lacks (names the runtime does not know count as
/// lacking: a newer compiler's code is not run on trust).
std::vector<std::string> missing_cpu_features(const std::vector<std::string>& needed);

}  // namespace kiln::runtime
