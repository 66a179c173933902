// Element types and one-element arithmetic in LLVM IR, with the reference interpreter's
// semantics (wrapping integers, division by zero giving 0, saturating float-to-int
// casts, NaN-propagating maximum and minimum, f16/bf16 rounded after every op).
#pragma once

#include <llvm/IR/IRBuilder.h>

#include "base/result.h"
#include "ir/attributes.h"
#include "ir/ops.h"
#include "ir/types.h"

namespace kiln::codegen::cpu {

/// Marks `module` as code for CPUs with AVX512-BF16 (and AVX512-VL): bf16 values then
/// round from float in its conversion (vcvtneps2bf16) instead of integer ops. Unlike
/// those (and the interpreter), it takes float denormals (below 2^-126) as zero
/// (docs/precision.md).
void use_bf16_instructions(llvm::Module& module);
/// Whether use_bf16_instructions marked `module`.
bool uses_bf16_instructions(const llvm::Module& module);

/// Widens every compare of f16 values in `module` to a compare of floats. LLVM's
/// instcombine turns a compare of widened f16 values (a NaN test of one) into a compare
/// of the f16 values, which x86 without AVX512-FP16 makes an element at a time; run
/// after the optimizer, this makes it one vcvtph2ps a vector again (docs/cpu.md).
void widen_half_compares(llvm::Module& module);

/// The type elements are computed in: float for f32, f16 and bf16; double; i32; i64; i1.
llvm::Type* compute_type(llvm::LLVMContext& ctx, ir::DType dtype);
/// The type elements are stored in: float, double, half, i16 (bf16 bits), i32, i64, i8.
llvm::Type* storage_type(llvm::LLVMContext& ctx, ir::DType dtype);
/// Loads element `index` of an array of `dtype` at `base`, in the compute type.
llvm::Value* load_element(llvm::IRBuilder<>& b, ir::DType dtype, llvm::Value* base, llvm::Value* index);
/// Stores a compute-type value as element `index` of an array of `dtype` at `base`.
void store_element(llvm::IRBuilder<>& b, ir::DType dtype, llvm::Value* base, llvm::Value* index, llvm::Value* value);
/// Rounds a float compute value to f16 or bf16 precision (identity for other types).
llvm::Value* round_to(llvm::IRBuilder<>& b, ir::DType dtype, llvm::Value* value);
/// A compute-type constant.
llvm::Value* constant(llvm::IRBuilder<>& b, ir::DType dtype, double value, int64_t int_value);
/// One elementwise op on compute-type operands; `operand_dtypes` are the operands'
/// element types. Errors name ops the CPU backend does not support.
Result<llvm::Value*> elementwise(llvm::IRBuilder<>& b, llvm::Module& m, ir::Op op, const ir::Attrs& attrs,
                                 std::span<llvm::Value* const> operands, std::span<const ir::DType> operand_dtypes,
                                 ir::DType result_dtype);

/// Whether elementwise() computes `op` on `dtype` with a call to the math library (libm,
/// vectorized to libmvec), rather than with instructions inline.
bool calls_math_library(ir::Op op, ir::DType dtype);

}  // namespace kiln::codegen::cpu
