// exp, erf and tanh of f32 as straight-line LLVM IR (no calls), so that loops using them
// vectorize without a libmvec call spilling every vector register per 16 elements.
#pragma once

#include <llvm/IR/IRBuilder.h>

namespace kiln::codegen::cpu {

/// e^x of a float: within 1 ulp of the exact value over the whole range (tested),
/// with gradual underflow, +inf above 88.72, and NaN kept.
llvm::Value* exp_f32(llvm::IRBuilder<>& b, llvm::Value* x);
/// erf(x) of a float: absolute error under 2e-7 everywhere (tested); erf(±inf) = ±1, NaN kept.
llvm::Value* erf_f32(llvm::IRBuilder<>& b, llvm::Value* x);
/// tanh(x) of a float: within 2 ulp of the exact value everywhere (tested); tanh(±inf) =
/// ±1, -0 kept, NaN kept.
llvm::Value* tanh_f32(llvm::IRBuilder<>& b, llvm::Value* x);

}  // namespace kiln::codegen::cpu
