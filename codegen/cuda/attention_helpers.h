// The attention kernel's device helpers as CUDA C++ text (attention_kernel.cc writes them
// ahead of each attention kernel). Internal to codegen/cuda.
#pragma once

#include <string>

#include "ir/graph.h"

namespace kiln::codegen::cuda {

/// Once per program (guard KILN_ATTENTION): shared-memory fragment loads (ldmatrix), exp2
/// and cp.async's copy, commit and wait. Once per precision, bf16 or f16 (guard
/// KILN_ATTENTION_bf16 or _f16): two f32 values rounded to it and packed into a
/// register, a pair rounded in place, and its mma.sync. The CUDA emulator defines the
/// guards and its own versions (tests/cuda_emulator/device_header.cc).
std::string attention_helpers(ir::DType precision);

}  // namespace kiln::codegen::cuda
