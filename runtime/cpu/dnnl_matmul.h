// Half-precision matmuls on oneDNN's matmul primitive (bf16 or f16 operands and result,
// f32 accumulation; AVX512-BF16 dot products where the CPU has them), every batch dim in
// one call. oneDNN is opened at run time (libdnnl.so.2, or $KILN_LIBDNNL), as for sgemm.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "runtime/format/artifact.h"

namespace kiln::runtime::cpu {

/// oneDNN, opened once per process for both of the runtime's paths into it (dnnl_sgemm in
/// matmul.cc, the matmul primitive here): libdnnl.so.2, or the file $KILN_LIBDNNL names.
struct DnnlLibrary {
  void* handle = nullptr;  ///< null when it could not be opened, and why_not says why
  std::string why_not;
  /// The OpenMP runtime oneDNN's threads come from (found through oneDNN's dependencies);
  /// null where it threads otherwise, when --threads cannot bound it.
  void (*omp_set_num_threads)(int) = nullptr;
};
const DnnlLibrary& dnnl_library();

/// C = op(A) op(B) for every batch index of `call`, A, B and C at args[0..2] in bf16
/// (else f16), on at most `threads` OpenMP threads. False, not an error, where oneDNN is
/// not there or has no primitive for it: the caller then widens to f32 itself. The
/// primitive for each distinct call is created once and kept for the process. (The
/// runtime calls it for bf16 only: on the development VM oneDNN 2.6's f16 primitive was
/// slower than widening, docs/benchmarks.md.)
Result<bool> dnnl_half_matmul(const format::Matmul& call, bool bf16, uint8_t* const* args, int threads);

}  // namespace kiln::runtime::cpu
