// Library steps of bf16 or f16 operands that run as their f32 calls: oneDNN has no
// optimized kernel for their types (f16 convolutions and matmuls with oneDNN 2.6, bf16 on
// CPUs without AVX512-BF16), or oneDNN is missing.
#pragma once

#include <cstdint>
#include <functional>

#include "base/result.h"
#include "runtime/cpu/score_rows.h"
#include "runtime/cpu/thread_pool.h"

namespace kiln::runtime::cpu {

/// Runs `f32_call` on a library step's arguments `args` (two inputs, the post-ops' operands,
/// the result at `result`) with the two inputs widened to f32 (exactly, `elements[i]` of
/// each, element by element: any layout) in the calling thread's buffers, the second left
/// as it is where `second_widened` (weights packed widened at load), and the result in an
/// f32 buffer of `elements[2]`, rounded to `type` into the step's result after, or written
/// in place where `result_f32`. The conversions split across `pool`'s threads (one thread
/// took as long as the convolution itself on MobileNetV2's 112x112 layers).
Status run_widened(uint8_t* const* args, uint32_t result, const int64_t (&elements)[3], bool second_widened,
                   bool result_f32, Half type, ThreadPool* pool, int threads,
                   const std::function<Status(uint8_t* const*)>& f32_call);

}  // namespace kiln::runtime::cpu
