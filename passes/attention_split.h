// A training graph's attentions as two steps, neither of which stores the probabilities.
#pragma once

#include "ir/attention_match.h"
#include "ir/graph.h"

namespace kiln::passes {

/// Where an f32 softmax's probabilities P are read by P·v and by the backward autodiff
/// wrote from them (ir/attention_match.h, AttentionGradientMatch), gives the backward a
/// copy of its own of the scores and the softmax (q·kᵀ, f, softmax), and of the movement
/// ops, masks' conditions and constants that its products and selects read, so that the
/// forward (P read by P·v alone) and the backward each match as one step reading q, k,
/// v and dO in place: the backward computes P again, a block of query rows at a time,
/// rather than reading the [.., T, S] matrix back. A softmax whose other readers are not
/// such a backward, or whose backward `runner` does not run as one step, is left as it
/// was. Returns how many it split.
int split_attention_gradients(ir::Graph& g, ir::AttentionRunner runner);

}  // namespace kiln::passes
