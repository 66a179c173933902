// kiln serve: compiled models behind HTTP (serving/). Runtime and serving only.
#pragma once

#include <span>

namespace kiln::cli {

/// `kiln serve MODEL.kiln [NAME=MODEL.kiln ...] [flags]`; returns the exit code.
int run_serve(std::span<char* const> argv);

}  // namespace kiln::cli
