// Library convolutions on oneDNN's convolution primitives: forward, backward data and
// backward weights, f32, bf16 or f16, in the IR's plain layouts (NCHW activations, OIHW
// weights).
#pragma once

#include <oneapi/dnnl/dnnl.h>

#include <cstdint>
#include <optional>
#include <string>

#include "base/result.h"
#include "runtime/cpu/layout_plan.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/format/artifact.h"

namespace kiln::runtime::cpu {

/// The element types of a convolution step: its two inputs' (alike), and its result's:
/// theirs, or f32 where post-ops apply to the f32 sums of bf16 or f16 inputs (format 1.15).
struct ConvTypes {
  format::DType in = format::DType::F32, out = format::DType::F32;
};
ConvTypes conv_types(const format::Step& step, const flatbuffers::Vector<flatbuffers::Offset<format::Value>>& values);

/// Each function below takes the convolution's ConvTypes. A bf16 or f16 convolution for
/// which oneDNN has no optimized primitive (f16 on CPUs without AVX512-FP16, bf16 without
/// AVX512-BF16, or no oneDNN at all) runs as the f32 one on its inputs widened to f32
/// (exactly), its result rounded to its type once after the post-ops.

/// Runs a convolution step: `args` are its two inputs, then its output (format::Conv says
/// which are which). The primitive of each distinct convolution is made once, on its first
/// run. Without oneDNN, or where it has no primitive for the convolution, im2col and
/// OpenBLAS (conv_gemm.h). `packed_weights`, where not null, are the weights as
/// pack_conv_weights left them; `layout` says which operands lie in the primitive's
/// layouts (plan_layouts). A 3x3 convolution of stride 1 with packed weights and x and y
/// channels-last may run as Winograd's F(4x4, 3x3) or F(2x2, 3x3) (winograd.h), its
/// transforms on `pool`.
Status run_conv(const format::Conv& conv, ConvTypes types, uint8_t* const* args, int threads,
                const uint8_t* packed_weights = nullptr, StepLayout layout = {}, ThreadPool* pool = nullptr);

/// oneDNN's name for the kernel it runs `conv` on ("brgconv:avx512_core", "ref:any" for
/// its slow reference code; "winograd_4x4_3x3 + " or "winograd_2x2_3x3 + " its matmul's
/// where the convolution runs as Winograd, with `packed_weights`; "widened to f32 + " the
/// f32 one's where a half-precision one widens), or "" where oneDNN has no primitive for
/// it. `few_channels_blocked` as StepLayout::y_blocked.
std::string conv_implementation(const format::Conv& conv, ConvTypes types, bool few_channels_blocked = false,
                                bool packed_weights = true);

/// The layouts a forward convolution's oneDNN primitive reads x in and writes y in, and
/// whether y's takes its plain layout's bytes (no padding of channels to whole blocks);
/// none where the convolution does not run on oneDNN (or widens).
struct ConvNativeLayouts {
  dnnl_memory_desc_t x, y;
  bool y_fits = false;
};
std::optional<ConvNativeLayouts> conv_native_layouts(const format::Conv& conv, ConvTypes types,
                                                     bool few_channels_blocked = false);

/// The step input a convolution's residual add (its Add post-op) reads, or -1.
int conv_added_input(const format::Conv& conv);

/// The bytes of a forward convolution's weights reordered once into the layout its oneDNN
/// primitive reads (a blocked one such as OIhw16i16o), for weights that never change: a
/// model's baked-in params. Reordering them on every run costs as much as a late ResNet
/// layer's convolution itself. 0 where the primitive reads them as they are, or where the
/// convolution does not run on oneDNN. A widened convolution's are the f32 one's, widened
/// once here rather than on every run.
/// `few_channels_blocked` as StepLayout::y_blocked (the two primitives may read the
/// weights in different layouts).
size_t packed_conv_weights_bytes(const format::Conv& conv, ConvTypes types, bool few_channels_blocked = false);

/// Reorders the weights `w` into `to`: packed_conv_weights_bytes of them, 64-byte aligned.
Status pack_conv_weights(const format::Conv& conv, ConvTypes types, const uint8_t* w, uint8_t* to, int threads,
                         bool few_channels_blocked = false);

}  // namespace kiln::runtime::cpu
