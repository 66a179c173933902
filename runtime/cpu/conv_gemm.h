// Library convolutions without oneDNN: im2col per image and group, and OpenBLAS's sgemm
// (the path when libdnnl.so.2 is missing, as under the ASan configuration).
#pragma once

#include <cstdint>

#include "base/result.h"
#include "runtime/format/artifact.h"

namespace kiln::runtime::cpu {

/// Runs a convolution step as dnnl_conv.h's run_conv does, on OpenBLAS.
Status run_conv_gemm(const format::Conv& conv, uint8_t* const* args);

}  // namespace kiln::runtime::cpu
