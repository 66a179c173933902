// Library convolutions without oneDNN: im2col per image and group, and OpenBLAS's sgemm
// (the path when libdnnl.so.2 is missing, as under the ASan configuration).
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "runtime/format/artifact.h"

namespace kiln::runtime::cpu {

/// Runs a convolution as dnnl_conv.h's run_conv does, on OpenBLAS, without its post-ops:
/// `args` are its two inputs, then its output.
Status run_conv_gemm(const format::Conv& conv, uint8_t* const* args);

}  // namespace kiln::runtime::cpu
