// A library matmul step on the CPU, per batch index, with the transposes folded into the
// call: f32 on oneDNN's sgemm, opened at run time, where it is installed (it ran the models
// suite's GEMMs 1.07-20x faster than OpenBLAS: docs/benchmarks.md), else OpenBLAS's; bf16 on
// oneDNN's matmul primitive (dnnl_matmul.h) where it has one; f16 (and bf16 without it)
// widened to f32 for the f32 call (with its post-ops) and the result rounded to nearest
// even once (f32 accumulation, as cuBLAS gives on the GPU); f64 on OpenBLAS's dgemm;
// integer matmuls in a plain loop.
#pragma once

#include <cstdint>

#include "base/result.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/format/artifact.h"
#include "runtime/types.h"

namespace kiln::runtime::cpu {

/// C = op(A) op(B) for every batch index of `call` (verified to stay inside its operands),
/// with A, B, the post-ops' operands and C in `args`, in element type `type`, then the
/// post-ops. C is of `c_type`: `type`, or (format 1.14, with post-ops) f32 where A and B
/// are bf16 or f16, whose post-ops then apply to the f32 sums before any rounding. oneDNN runs on at most `threads`
/// OpenMP threads (set for the calling thread before each call: OpenMP keeps the count per thread, so models with
/// different counts do not disturb each other). With a `pool`, f32 batches may split across its threads.
Status run_matmul(const format::Matmul& call, ElementType type, ElementType c_type, uint8_t* const* args, int threads,
                  ThreadPool* pool = nullptr);

/// Baked-in B packed once, at load, into the layout oneDNN's matmul primitive reads
/// (dnnl_matmul.h): for f32 and bf16 matmuls (C of `c_type`), and f16 ones, whose B is
/// widened first to f32 (A then on every run, and C rounded after). 0 bytes where the call
/// is not packed.
size_t packed_weights_bytes(const format::Matmul& call, ElementType type, ElementType c_type);
Status pack_weights(const format::Matmul& call, ElementType type, ElementType c_type, const uint8_t* b, uint8_t* to,
                    int threads);
/// run_matmul for a call whose B pack_weights packed.
Status run_packed_matmul(const format::Matmul& call, ElementType type, ElementType c_type, const uint8_t* packed_b,
                         uint8_t* const* args, int threads, ThreadPool* pool = nullptr);

/// f32 C = alpha·op(A)·op(B) + beta·C (row-major, C's rows ldc apart) on oneDNN's sgemm
/// where it is open, else OpenBLAS's, on at most `threads` OpenMP threads.
Status sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
             const float* b, int64_t ldb, float* c, int64_t ldc, int threads, float beta = 0.0f);

/// Which libraries run the matmuls, with the kernels they chose for this CPU, and whether
/// those are generic ones on a CPU with AVX2 (a library that does not know the CPU falls
/// back to them, several times slower): "oneDNN 2.6.3 (avx512_core kernels) for f32;
/// OpenBLAS 0.3.21 (Cooperlake kernels) for f64". Opens oneDNN ($KILN_LIBDNNL names
/// another file than libdnnl.so.2) once per process; without it, says why.
std::string matmul_library();

}  // namespace kiln::runtime::cpu
