// Library convolutions on oneDNN's convolution primitives: forward, backward data and
// backward weights, f32, in the IR's plain layouts (NCHW activations, OIHW weights).
#pragma once

#include <cstdint>

#include "base/result.h"
#include "runtime/format/artifact.h"

namespace kiln::runtime::cpu {

/// Runs a convolution step: `args` are its two inputs, then its output (format::Conv says
/// which are which). The primitive of each distinct convolution is made once, on its first
/// run. Without oneDNN, or where it has no primitive for the convolution, im2col and
/// OpenBLAS (conv_gemm.h).
Status run_conv(const format::Conv& conv, uint8_t* const* args, int threads);

}  // namespace kiln::runtime::cpu
