// A training graph's attentions as two steps, neither of which stores the probabilities.
#pragma once

#include "ir/attention_match.h"
#include "ir/graph.h"

namespace kiln::passes {

/// Where an f32 softmax's probabilities P are read by P·v and by the backward autodiff
/// wrote from them (ir/attention_match.h, AttentionGradientMatch; in bf16 or f16, autocast's
/// form, P·v and dv's product read P's cast to the precision), gives the backward a copy
/// of its own of the scores and the softmax (q·kᵀ, f, softmax, P's cast), and of the
/// movement ops, masks' conditions, constants and casts of f32 operands to the precision
/// that its products and selects read, so that the
/// forward (P read by P·v alone) and the backward each match as one step reading q, k,
/// v and dO in place: the backward computes P again, a block of query rows at a time,
/// rather than reading the [.., T, S] matrix back. A softmax whose other readers are not
/// such a backward, or whose backward `runner` does not run as one step, is left as it
/// was. Returns how many it split.
int split_attention_gradients(ir::Graph& g, ir::AttentionRunner runner);

}  // namespace kiln::passes
