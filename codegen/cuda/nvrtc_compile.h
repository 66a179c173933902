// Compiling a CUDA C++ program with NVRTC to cubin per architecture plus PTX, through an
// on-disk cache.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace kiln::codegen::cuda {

/// How to compile.
struct NvrtcOptions {
  /// Architectures to compile cubin for ("sm_80", "sm_90"); PTX comes from the newest.
  std::vector<std::string> archs = {"sm_90"};
  /// Reuse and fill the compile cache.
  bool use_cache = true;
  /// The cache directory; empty means default_cache_dir().
  std::string cache_dir;
  /// Prints each compile's cache hit or miss and NVRTC's time on stderr.
  bool verbose = false;
};

/// A compiled code object: "cubin" for an architecture ("sm_90"), or "ptx" for a virtual
/// one ("compute_90").
struct CodeObject {
  std::string kind, arch;
  std::vector<uint8_t> bytes;
};

/// What compiling cost.
struct NvrtcStats {
  int cache_hits = 0, cache_misses = 0;
  double nvrtc_ms = 0;
};

/// NVRTC's version, "13.0".
std::string nvrtc_version();

/// $KILN_CACHE_DIR/nvrtc if set, else $XDG_CACHE_HOME/kiln/nvrtc, else ~/.cache/kiln/nvrtc.
std::string default_cache_dir();

/// A cache entry's bytes: the code (or source) and, after it, the xxh64 of the code (8
/// bytes). One that cannot be read (missing, a directory, absurdly large) or whose hash
/// does not match its code (cut short, overwritten) is none: a miss, which the compile
/// that follows replaces. Beside each entry's `KEY-ARCH.cubin` and `.ptx` is the source
/// compiled, `KEY-ARCH.cu`, in the same form.
std::optional<std::vector<uint8_t>> read_cache_entry(const std::string& path);

/// Checks an architecture list: each "sm_NN" that this NVRTC can compile for.
Status check_archs(const std::vector<std::string>& archs);

/// Compiles `source` for every architecture in options.archs, returning a cubin per
/// architecture (in the order given) and then the PTX of the newest. Each compile is
/// cached under a key of the source, the options and NVRTC's version; a cache that cannot
/// be read or written only costs time. Errors carry NVRTC's log.
Result<std::vector<CodeObject>> compile_program(const std::string& source, const NvrtcOptions& options,
                                                NvrtcStats* stats = nullptr);

}  // namespace kiln::codegen::cuda
