// The CPU target: an artifact's kernels run from memory across a thread pool, its library
// steps on OpenBLAS, through one arena per concurrent run.
#pragma once

#include <memory>

#include "runtime/executor.h"

namespace kiln::runtime::cpu {

/// Loads a verified cpu-x86_64 artifact: its kernels (refusing code this CPU cannot run),
/// the first arena (refusing one larger than memory), the state, and `options.threads`
/// threads.
Result<std::unique_ptr<Executor>> load_executor(const format::ArtifactView& view, Signature signature,
                                                const Options& options);

}  // namespace kiln::runtime::cpu
