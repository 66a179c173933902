// Attention as one library step: softmax(f(q·kᵀ))·v, where f scales the scores and masks
// them, found in the graph however it was written (the attention op's decomposition, a
// model's own ops, an ONNX export), so that the CPU computes it a block of query rows at
// a time with the scores in cache, never storing the [.., T, S] matrix.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "ir/graph.h"
#include "ir/matmul_views.h"
#include "ir/program.h"

namespace kiln::ir {

/// One step of f, applied to every score in graph order.
struct ScoreTransform {
  /// Scale: s·value. Add: s + operand. Keep: operand ? s : value. Causal: key j <= query i
  /// ? s : value (the attention op's upper-left alignment).
  enum class Kind { Scale, Add, Keep, Causal };
  Kind kind = Kind::Scale;
  double value = 0;
  /// Add: an f32 value, Keep: a bool value, read through `view` as the scores' shape
  /// (broadcast dims have stride 0).
  ValueId operand = kNoValue;
  StridedView view;
  /// Add and Keep: the op's own operand, which `operand` and `view` read through.
  ValueId read = kNoValue;
};

struct AttentionMatch {
  /// The matmuls' type: f32, or (autocast's form) bf16 or f16, where q, k and v are cast
  /// to it (by the step where it reads f32 values), q·kᵀ rounds to it before f runs in
  /// f32, P is cast to it and P·v rounds to it; `result` is then of it or f32.
  DType precision = DType::F32;
  int scores_call = -1;  ///< the matmul q·kᵀ
  int values_call = -1;  ///< the matmul P·v
  /// Every node the step computes: both matmuls, f's ops, the softmax's, the movement ops
  /// its operands are read through, and the constants only they read. Sorted.
  std::vector<int> nodes;
  /// q [B.., T, D], k [B.., S, D] and v [B.., S, Dv] as views of stored values, each with
  /// the result's batch dims B.. (stride 0 where a matmul broadcasts) and one of its last
  /// two strides 1 (or extent 1), as a BLAS call reads a matrix.
  ValueId q = kNoValue, k = kNoValue, v = kNoValue;
  StridedView q_view, k_view, v_view;
  std::vector<ScoreTransform> transforms;
  /// What the step writes: P·v's result, or the value that the single-use transposes and
  /// reshapes after it make of it (the heads merged back, [B, T, H·Dv]), which the call
  /// then writes in place through `out_view` ([B.., T, Dv] of it, its last stride 1).
  ValueId result = kNoValue;
  StridedView out_view;
};

/// The backward of an f32 attention as autodiff writes it from the decomposition, over a
/// copy of the forward's scores and softmax of its own (passes/attention_split.h gives it
/// one), so that it is one step that never stores P: with dO its result's gradient,
///   dP = dO·vᵀ, dv = Pᵀ·dO, dS = f'(P ∘ (dP − Σ_keys dP ∘ P)), dq = dS·k, d(kᵀ) = qᵀ·dS,
/// where f' zeroes what f's masks replaced and multiplies by its scalings. P is read by
/// nothing else; every value between is read once. In bf16 or f16 (scores.precision),
/// autocast's form: dv's product reads P cast to the precision, each product is of the
/// precision cast to f32 (q, k, v and dO read through one cast from f32 each, or stored in
/// it), dS is cast to it for dq's and d(kᵀ)'s products, and what the step writes is f32.
struct AttentionGradientMatch {
  /// The recomputed scores: q, k (as [B.., S, D]), f's transforms and scores_call; v
  /// [B.., S, Dv] read by dP's product (values_call and result unset).
  AttentionMatch scores;
  ValueId d_out = kNoValue;  ///< dO [B.., T, Dv], read through `d_out_view`
  StridedView d_out_view;
  /// The products: dP = dO·vᵀ, dv = Pᵀ·dO, dq = dS·k and d(kᵀ) = qᵀ·dS.
  int probabilities_call = -1, values_call = -1, queries_call = -1, keys_call = -1;
  /// The gradients: dq [B.., T, D], d(kᵀ) [B.., D, S], dv [B.., S, Dv] (the products' results).
  ValueId d_query = kNoValue, d_key = kNoValue, d_value = kNoValue;
  /// Where the step writes dq, d(kᵀ) and dv, in that order: each into the value that the
  /// single-use transposes and reshapes after it make of it (GPT-2's heads merged back),
  /// or, where those three then meet in one concat that alone reads them (GPT-2's qkv
  /// gradient), into the concat's result; through a view of its shape with its rows or
  /// its columns adjacent (a BLAS result, or one's transpose).
  std::array<ValueId, 3> written{kNoValue, kNoValue, kNoValue};
  std::array<StridedView, 3> written_views;
  /// Every node the step computes, sorted.
  std::vector<int> nodes;
};

/// The nodes from q·kᵀ to the f32 softmax ending in node `div` (f's ops, the softmax's,
/// and the movement ops and constants only they read), however many read its result P;
/// none where `div` ends no such softmax. What a backward's copy of them takes.
std::optional<std::vector<int>> attention_scores_nodes(const Graph& g, int div);

/// Every such backward, in graph order.
std::vector<AttentionGradientMatch> attention_gradient_matches(const Graph& g);

/// The backward of `matches` that library step `step` computes, or null.
const AttentionGradientMatch* attention_gradient_of(const std::vector<AttentionGradientMatch>& matches,
                                                    const Step& step);

/// Every f32 softmax over the last axis (decomposed: reduce_max, sub, exp, reduce_sum,
/// div) whose operand is q·kᵀ followed by a chain of scalings (mul or div by a scalar
/// constant), adds of tensors, selects of bool tensors with a
/// scalar constant and at most one causal select (a select whose condition is j <= i
/// from iotas, as the attention op and GPT-2 build it), every value in between read once
/// and no result, and whose only reader is a matmul of it by v. In half precision, the
/// same between autocast's casts: q·kᵀ in bf16 or f16 cast to f32, P cast back, P·v in
/// the same type. In graph order.
std::vector<AttentionMatch> attention_matches(const Graph& g);

/// Which runtime runs attentions as one step, and so which matches fusion makes steps of.
enum class AttentionRunner {
  kNone,
  kCpu,   ///< every match (runtime/cpu/attention.h)
  kCuda,  ///< a tensor-core kernel (codegen/cuda/attention_kernel.h): see cuda_runs_attention
};

/// Limits of CUDA's attention kernels: bf16 or f16 products (mma.sync, sm_80 and later)
/// with head dims D and Dv multiples of 8 up to 128 (the kernel keeps a block's q and
/// output rows in registers, padded with zeros to the mma's 16), or f32 products with head dims multiples of 4 up to
/// 128 (the f32 kernel keeps a block's q rows, a tile of k, v and P in up to 77 KB of dynamic shared memory, and its 4
/// rows of output, Dv/2 floats, in registers); q, k, v and the result read along contiguous rows. Other matches stay
/// the matmuls and softmax kernels they were written as.
constexpr int64_t kCudaAttentionMaxHeadDim = 128;
constexpr int64_t kCudaF32AttentionMaxHeadDim = 128;
bool cuda_runs_attention(const AttentionMatch& m);

/// The matches `runner` runs as one step, in graph order.
std::vector<AttentionMatch> attention_matches(const Graph& g, AttentionRunner runner);

/// Limits of CUDA's attention backward (codegen/cuda/attention_gradient_kernel.h): f32 with
/// head dims D and Dv up to kCudaF32AttentionMaxHeadDim, or bf16 and f16 (tensor-core
/// products) with head dims up to kCudaAttentionMaxHeadDim; any strides (its kernels read
/// and write element by element).
bool cuda_runs_attention_gradient(const AttentionGradientMatch& m);

/// The backward matches `runner` runs as one step, in graph order.
std::vector<AttentionGradientMatch> attention_gradient_matches(const Graph& g, AttentionRunner runner);

/// The arena scratch of CUDA's attention backward: each query row's maximum, 1 / sum and
/// Σ P∘dP, three f32 values, per batch index, which its first kernel writes for its second.
int64_t cuda_attention_gradient_scratch_bytes(const AttentionGradientMatch& m);
constexpr int kCudaAttentionGradientRowValues = 3;

/// The match of `matches` that library step `step` computes (fusion made the step of its
/// two calls), or null.
const AttentionMatch* attention_of(const std::vector<AttentionMatch>& matches, const Step& step);

}  // namespace kiln::ir
