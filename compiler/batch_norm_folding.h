// Inference batch norms folded into the convolution before them, where both read params
// (whose weights the compiler bakes into the artifact): the scale joins the convolution's
// weights and the shift becomes a per-channel bias, which the convolution's library call
// applies on the way out, where a batch norm's three per-channel post-ops were.
#pragma once

#include <map>
#include <string>

#include "ir/graph.h"
#include "ir/tensor.h"

namespace kiln {

/// Each batch_norm(conv(x, W), γ, β, μ, σ²) {epsilon=ε} that alone reads its convolution's
/// result, where W, γ, β, μ and σ² are f32 params with weights in `weights`, becomes
/// add(conv(x, W'), broadcast(b')): with s = γ / sqrt(σ² + ε), W'[o, ..] = W[o, ..]·s[o]
/// and b'[o] = β[o] − μ[o]·s[o], computed in f64 and rounded once to f32 (the
/// decomposition rounds s and multiplies the rounded sums: the two differ by a few units of
/// f32). W' and b' are new params, named after W and β with ".folded" (and a number where
/// that is taken), their weights added to `weights`; params that no node reads any more
/// leave the graph and `weights`. Returns how many batch norms it folded.
int fold_batch_norms(ir::Graph& g, std::map<std::string, ir::Tensor>& weights);

}  // namespace kiln
