// Matmuls on oneDNN's matmul primitive, every batch dim in one call: the runtime's bf16
// ones (f32 accumulation; AVX512-BF16 dot products where the CPU has them; f32 batched
// calls ran slower than a loop of sgemm calls and stay there, docs/benchmarks.md), and
// f32 ones whose B is packed once. oneDNN is opened at run time (libdnnl.so.2, or
// $KILN_LIBDNNL), as for sgemm.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "runtime/cpu/dnnl.h"
#include "runtime/format/artifact.h"

namespace kiln::runtime::cpu {

/// Runs a matmul of `type` (dnnl_f32, dnnl_bf16, dnnl_f16) on oneDNN's matmul primitive,
/// made once per distinct call, with its post-ops (`args`: A, B, the post-ops' operands,
/// C), C of `c_type` (a half-precision matmul with post-ops may write f32: format 1.14);
/// false where oneDNN or its primitive for the call is missing (the caller then runs it
/// another way).
Result<bool> dnnl_matmul(const format::Matmul& call, dnnl_data_type_t type, dnnl_data_type_t c_type,
                         uint8_t* const* args, int threads);

/// One bf16 product C [m, n] = A [m, k] · B [k, n], f32 accumulation, C in `c_type`
/// (dnnl_f32 or dnnl_bf16, rounded to nearest even), rows `ld` elements apart; B given by
/// its rows, or where `trans_b` by its columns (Bᵀ's rows, as k's rows make kᵀ); with
/// `accumulate`, C (f32) += A · B: the attention steps' products in bf16.
struct Bf16Gemm {
  bool trans_b = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  dnnl_data_type_t c_type = dnnl_f32;
  bool accumulate = false;
  bool trans_a = false;  ///< A given by its columns (Aᵀ's rows, lda apart)
};

/// oneDNN's name for its optimized (not reference) kernel for `gemm` (its primitive made
/// once per distinct shape and kept), or "" where it has none.
std::string bf16_gemm_implementation(const Bf16Gemm& gemm);

/// Runs `gemm` on that primitive on at most `threads` OpenMP threads; an error where
/// there is none.
Status run_bf16_gemm(const Bf16Gemm& gemm, const uint16_t* a, const uint16_t* b, void* c, int threads);

/// The bytes of the B operand of a matmul without batch dims (A and B of `type`, dnnl_f32
/// or dnnl_bf16; C of `c_type`) reordered once into the layout oneDNN's matmul primitive
/// reads (blocked for its AVX-512 or AMX kernels), for a B that never changes: a model's
/// baked-in weights. dnnl_sgemm packs B on every call, which for a linear layer of a
/// transformer at 128 rows costs a tenth of the GEMM, and the bf16 primitive reorders a
/// plain B on every call too. 0 where oneDNN has no optimized primitive for the call.
size_t packed_matmul_weights_bytes(const format::Matmul& call, dnnl_data_type_t type = dnnl_f32,
                                   dnnl_data_type_t c_type = dnnl_f32);
/// Reorders B into `to`: packed_matmul_weights_bytes of them, 64-byte aligned.
Status pack_matmul_weights(const format::Matmul& call, dnnl_data_type_t type, dnnl_data_type_t c_type, const uint8_t* b,
                           uint8_t* to, int threads);
/// Runs a matmul with B as pack_matmul_weights left it, with its post-ops (`args`: A,
/// unused, the post-ops' operands, C).
Status dnnl_packed_matmul(const format::Matmul& call, dnnl_data_type_t type, dnnl_data_type_t c_type,
                          const uint8_t* packed_b, uint8_t* const* args, int threads);
}  // namespace kiln::runtime::cpu
