// A library call's post-ops (format's PostOp): its step arguments, applying them in plain
// C++ where oneDNN is missing, and oneDNN's post-op for each activation.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/cpu/dnnl.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/format/artifact.h"

namespace kiln::runtime::cpu {

using format::PostOps;

/// A library step's arguments past its call's two inputs: the post-ops' operands, then the
/// result (null where there is no such post-op).
struct PostOpOperands {
  uint8_t* bias = nullptr;            ///< f32, one per channel
  uint8_t* added = nullptr;           ///< f32 of the result's shape
  std::vector<uint8_t*> per_post_op;  ///< each post-op's operand, or null
  uint8_t* result = nullptr;
};
PostOpOperands post_op_operands(const PostOps* post_ops, uint8_t* const* args);
/// Where the result is among a library step's arguments: after its call's two inputs and
/// the post-ops' operands.
uint32_t result_argument(const PostOps* post_ops);

/// Applies post-ops to an f32 result of `elements` values, in order, where element i is of
/// channel i / inner % channels (a convolution's: inner is its spatial size; a matmul's
/// columns: inner 1). The portable path; oneDNN applies them inside its primitive.
void apply_post_ops(const PostOps* post_ops, const PostOpOperands& operands, int64_t elements, int64_t channels,
                    int64_t inner);

/// apply_post_ops over a matmul's result of `rows` rows of `columns` (its channels), the
/// rows split across `pool`'s threads (on the calling thread alone without a pool, with one
/// thread, or where the result is small).
void apply_post_ops_to_rows(const PostOps* post_ops, const PostOpOperands& operands, int64_t rows, int64_t columns,
                            ThreadPool* pool, int threads);

/// Appends oneDNN's post-op for an activation or clip; false for another kind or where
/// oneDNN refuses.
bool append_dnnl_activation(const DnnlApi& api, dnnl_post_ops_t to, const format::PostOp& op);

}  // namespace kiln::runtime::cpu
