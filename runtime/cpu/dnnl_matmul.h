// Half-precision matmuls on oneDNN's matmul primitive (bf16 or f16 operands and result,
// f32 accumulation; AVX512-BF16 dot products where the CPU has them), every batch dim in
// one call. oneDNN is opened at run time (libdnnl.so.2, or $KILN_LIBDNNL), as for sgemm.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "runtime/cpu/dnnl.h"
#include "runtime/format/artifact.h"

namespace kiln::runtime::cpu {

/// oneDNN, opened once per process for both of the runtime's paths into it (dnnl_sgemm in
/// matmul.cc, the matmul primitive here): libdnnl.so.2, or the file $KILN_LIBDNNL names.
Result<bool> dnnl_half_matmul(const format::Matmul& call, bool bf16, uint8_t* const* args, int threads);

}  // namespace kiln::runtime::cpu
