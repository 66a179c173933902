// The attention kernel's device helpers as CUDA C++ text (attention_kernel.cc writes them
// ahead of each attention kernel). Internal to codegen/cuda.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "ir/attention_match.h"
#include "ir/graph.h"
#include "ir/program.h"

namespace kiln::codegen::cuda {

/// Once per program (guard KILN_ATTENTION): shared-memory fragment loads (ldmatrix), exp2
/// and cp.async's copy, commit and wait. Once per precision, bf16 or f16 (guard
/// KILN_ATTENTION_bf16 or _f16): two f32 values rounded to it and packed into a
/// register, a pair rounded in place, and its mma.sync. The CUDA emulator defines the
/// guards and its own versions (tests/cuda_emulator/device_header.cc).
std::string attention_helpers(ir::DType precision);

/// Lines (each after `indent`) that set, for work item w of an attention kernel whose
/// blocks take `rows_per_block` query rows, its batch index p and first query row r0 (the
/// last query blocks first: where a causal mask leaves out the tiles past the diagonal
/// they have the most keys), and each operand's element offset for p: qo, ko, vo, oo and
/// mo{i} for transform i's operand.
std::string attention_offsets(const ir::AttentionMatch& m, int64_t rows_per_block, const std::string& indent);

/// Lines (each after `indent`) that declare each named offset as its view's and add the
/// element offset of batch index p (a variable of the lines before) over dims `batch`.
std::string attention_batch_offsets(const std::vector<int64_t>& batch,
                                    const std::vector<std::pair<std::string, const ir::StridedView*>>& views,
                                    const std::string& indent);

/// An attention kernel's parameters as the artifact lists the step's inputs and output:
/// q, k and v (each of its stored type), then each mask's operand in f's order (an f32
/// mask for Add, a bool one for Keep) as mask{i}, then out. An error names the step where
/// it writes more than its result or a mask has another type.
Result<std::vector<std::string>> attention_kernel_params(const ir::Graph& g, const ir::Step& step,
                                                         const ir::AttentionMatch& m);

/// `text` for row block i of a warp: each ` names that block's copy of a value (none for
/// block 0, so a kernel of one block a warp reads as it did before there were two).
std::string attention_row_block(const std::string& text, int i);

/// The lines (with ` for the row block, attention_row_block) of the online softmax over a
/// tile's scores s`[key_tiles][4] of one row block: each row's maximum over the quad of
/// threads that hold it, the sums l_a`/l_b` and outputs o`[value_tiles][4] so far rescaled
/// to it, exp2 of the scores. `declare_log2e`: the first row block's lines also declare
/// kLog2e.
std::vector<std::string> attention_online_softmax(int key_tiles, int value_tiles, bool declare_log2e);

/// Score transform i of `m` on the f32 score x of query `row` and key `key`, as the
/// decomposition applies it (transform i's operand is parameter mask{i}).
std::string attention_score_transform(const ir::AttentionMatch& m, size_t i);

}  // namespace kiln::codegen::cuda
