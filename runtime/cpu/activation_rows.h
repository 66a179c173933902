// The activations and per-channel operands of library calls' post-ops over f32 in place, vectorized as
// score_rows.h's loops are (AVX-512, AVX2 with FMA, plain x86-64): what the runtime applies
// after a GEMM that oneDNN's primitive does not run (few rows: runtime/cpu/matmul.cc) and
// after convolutions oneDNN refuses. libm's erf, tanh and exp one element at a time ran a
// ViT's GELU after its GEMM at about 10 ns an element.
#pragma once

#include <cstdint>

namespace kiln::runtime::cpu {

/// Sigmoid: 1 / (1 + e^-x); Tanh; Silu: x·sigmoid(x); GeluErf: x·(1 + erf(x/√2))/2;
/// GeluTanh: x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))/2. Each within a few units in the last
/// place of f32 except erf's A&S 7.1.26 branch (|x| >= 1: 1.5e-7 absolute); NaN stays NaN.
enum class Activation { Sigmoid, Tanh, Silu, GeluErf, GeluTanh };

/// x[i] = activation(x[i]) for the n elements.
void activation_in_place(float* x, int64_t n, Activation activation);

/// y op= per_channel[c] over y [outer, channels, inner] (a matmul's result: inner 1, its
/// columns the channels; a convolution's: its spatial size).
enum class ChannelOp { Add, Sub, Mul };
void channel_op_in_place(float* y, const float* per_channel, int64_t outer, int64_t channels, int64_t inner,
                         ChannelOp op);

}  // namespace kiln::runtime::cpu
