// The CUDA C++ bodies of an attention backward's two kernels (attention_gradient_kernel.h),
// after the constants the writer declares before them (the tiles R, KT, KB and QT; T, S,
// D, DV, DP = D rounded up to 32, DVP, DC = DP / 32, VC, BATCH, STATS = the values a query
// row keeps in the scratch, the strides QRS, QCS, ... of each view, CAUSAL, FILL, SCALE)
// and the gradients' pointers (dq_out, dk_out, dv_out); $OFFSETS, $TRANSFORMS and $KEPT
// stand for the batch offsets, f's transforms and its masks' conditions. Internal to
// codegen/cuda.
#pragma once

namespace kiln::codegen::cuda {

// Device helpers the bodies call (guard KILN_ATTENTION_GRADIENT), ahead of the kernels.
extern const char* const kAttentionGradientHelpers;
extern const char* const kAttentionGradientRowsKernel;
extern const char* const kAttentionGradientKeysKernel;

// The bf16 and f16 backward's (attention_gradient_half_source.cc): helpers once per
// precision ($P its name, guard KILN_ATTENTION_GRADIENT_$P, after attention_helpers) and
// the two bodies, whose products are mma.sync's on tiles of the precision in shared
// memory (D16 and DV16: D and DV rounded up to 16).
extern const char* const kAttentionGradientHalfHelpers;
extern const char* const kAttentionGradientHalfRowsKernel;
extern const char* const kAttentionGradientHalfKeysKernel;

}  // namespace kiln::codegen::cuda
