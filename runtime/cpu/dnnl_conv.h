// Library convolutions on oneDNN's convolution primitives: forward, backward data and
// backward weights, f32, in the IR's plain layouts (NCHW activations, OIHW weights).
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "runtime/format/artifact.h"

namespace kiln::runtime::cpu {

/// Runs a convolution step: `args` are its two inputs, then its output (format::Conv says
/// which are which). The primitive of each distinct convolution is made once, on its first
/// run. Without oneDNN, or where it has no primitive for the convolution, im2col and
/// OpenBLAS (conv_gemm.h).
/// Which operands of a forward convolution step lie in oneDNN's own layout for them (a
/// blocked one such as nChw16c) rather than the IR's plain one: x as its primitive reads
/// it, the result as it writes it, the added tensor of a residual in the result's.
struct ConvLayout {
  bool x_native = false, y_native = false, added_native = false;
};

/// oneDNN's name for the kernel it runs `conv` on ("brgconv:avx512_core", "ref:any" for
/// its slow reference code), or "" where oneDNN has no primitive for it.
std::string conv_implementation(const format::Conv& conv);

/// `packed_weights`, where not null, are the weights as pack_conv_weights left them.
Status run_conv(const format::Conv& conv, uint8_t* const* args, int threads, const uint8_t* packed_weights = nullptr,
                ConvLayout layout = {});

/// Per step of an artifact, which convolution operands stay in oneDNN's layout: a value
/// that one forward convolution writes and only forward convolutions read (as x, or as
/// the tensor they add), each in the layout the writer's primitive writes, of the plain
/// layout's size (so its buffer holds it), and not pinned (`pinned` per value: inputs,
/// results, params and state, which callers see). A chain of convolutions then reorders
/// its activations once on the way in and once on the way out, not at every step.
std::vector<ConvLayout> plan_conv_layouts(const format::Artifact& a, const std::vector<char>& pinned);

/// The weights `w` of a forward convolution reordered once into the layout its oneDNN
/// primitive reads (a blocked one such as OIhw16i16o), for weights that never change: a
/// model's baked-in params. Reordering them on every run costs as much as a late ResNet
/// layer's convolution itself. Empty where the primitive reads them as they are, or where
/// the convolution does not run on oneDNN.
Result<std::vector<uint8_t>> pack_conv_weights(const format::Conv& conv, const uint8_t* w, int threads);

}  // namespace kiln::runtime::cpu
