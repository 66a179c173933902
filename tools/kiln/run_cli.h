// `kiln run` and `kiln-run`: load an artifact with the runtime and run it on .npy
// inputs. Runtime only: no compiler, LLVM or NVRTC.
#pragma once

#include <span>
#include <string_view>

namespace kiln::cli {

/// Runs `M.kiln --input NAME=PATH.npy ... [--output DIR] [--threads N]` as `command`.
int run_artifact(std::string_view command, std::span<char* const> argv);

}  // namespace kiln::cli
