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

/// A convolution step's arguments past its two inputs: the post-ops' operands, then the
/// result (format 1.7's ConvPostOp; null where the convolution has no such post-op).
struct PostOpOperands {
  uint8_t* bias = nullptr;            ///< f32 [O]
  uint8_t* added = nullptr;           ///< f32 of the result's shape
  std::vector<uint8_t*> per_post_op;  ///< each post-op's operand, or null
  uint8_t* result = nullptr;
};
PostOpOperands post_op_operands(const format::Conv& conv, uint8_t* const* args);

/// Applies a forward convolution's post-ops to its result, in order (the portable path;
/// oneDNN applies them inside its primitive).
void apply_post_ops(const format::Conv& conv, const PostOpOperands& operands);

}  // namespace kiln::runtime::cpu
