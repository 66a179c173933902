// LLVM IR for the kernel steps of a fused program.
#pragma once

#include <llvm/IR/Module.h>

#include "base/result.h"
#include "ir/graph.h"

namespace kiln::codegen::cpu {

/// Adds to `module` one function per kernel step (loop, reduction, scatter):
///   extern "C" void kiln_STEP(uint8_t* const* args, int64_t begin, int64_t end)
/// where args are the step's inputs, then its outputs, each pointing at the value's
/// bytes; the function computes work items [begin, end). Library steps get no code.
/// A kernel whose streamed outputs total at least `streaming_store_bytes` writes them with
/// non-temporal stores where their buffers are 64-byte aligned (checked at run time).
/// `vector_bytes` is the vector width the kernels are vectorized for (32 or 64).
/// Beside each kernel, a constant `kiln_STEP_signature`: int64 words, the argument count
/// then each argument's bytes, for the runtime to check the artifact's metadata against.
/// A reduction step that ir::reduction_split splits gets two kernels: kiln_STEP_partial
/// over the split's partial_items, then kiln_STEP over the step's rows; both take the
/// scratch (split.scratch_bytes) as one more argument after the outputs, and the
/// signature ends with the scratch bytes and the partial items.
/// A kernel identical to an earlier one is an alias of it (codegen/cpu/identical_kernels.h).
Status emit_kernels(const ir::Graph& graph, llvm::Module& module, int64_t streaming_store_bytes, int vector_bytes = 32);

}  // namespace kiln::codegen::cpu
