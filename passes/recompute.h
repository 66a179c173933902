// Fusion's second look: values a kernel can recompute from what it reads anyway.
#pragma once

#include <set>
#include <vector>

#include "ir/graph.h"

namespace kiln::passes {

/// Which ops a kernel recomputes: none, only those the CPU computes inline (arithmetic,
/// compares, selects, casts: a CPU core's exp or tanh costs more than reading the value
/// back), or every elementwise op (CUDA's, where memory is the cost).
enum class RecomputeOps { kNone, kInline, kAll };

/// A kernel step as fusion's first partition formed it: its nodes (constants and iota
/// may be in several) and whether it is a kernel (a loop or reduction step).
struct KernelGroup {
  std::vector<int> members;
  bool kernel = false;
  int ops = 0;  ///< members that are not sources
};

/// The copies one kernel took: the kernel (an index of the groups given), the copies'
/// nodes in the changed graph, and the values of the other kernels it now computes itself.
struct KernelCopies {
  int group = -1;
  std::vector<int> nodes;
  std::vector<ir::ValueId> values;
};

/// Where kernel G reads a value v that another kernel P computes by elementwise ops of
/// v's shape and broadcasts, from values in memory, constants and P's reductions (which P
/// then writes too: a softmax's row maximum and sum), gives G copies of those ops,
/// inserted before G's first reader of v, and has G read the copies: P then writes v only
/// if something else reads it. G may read values it did not read before (those P is to
/// write counted twice) only where they are fewer bytes than G saves: its read of v, and
/// v's write where G is v's only other reader (a mask of [T, S] for its broadcast over
/// every batch and head, a matmul's result and a bias for their sum), within
/// `max_inputs` values in all. A training step's kernels read back what the forward
/// kernels computed on the way (GELU's tanh and its factors, a softmax's P), where a few
/// values and a few flops an element give them all. Ops that no longer have users are
/// removed. A kernel takes copies only while it stays within `max_ops` ops. `exclude`
/// (values, indexed by ValueId, or empty) are never copied. Returns each kernel's copies
/// (none when nothing changed) and what undo_recompute takes to put the graph back.
struct RecomputedReads {
  std::vector<KernelCopies> kernels;
  std::vector<ir::Node> nodes_before;  ///< the graph's nodes before the copies
  size_t values_before = 0;            ///< and how many values it had (copies only add)
};
RecomputedReads recompute_kernel_reads(ir::Graph& g, const std::vector<KernelGroup>& groups, int max_ops,
                                       int max_inputs, RecomputeOps ops, const std::vector<char>& exclude);

/// Removes the nodes `candidates` (indices) whose values nothing reads or returns, and
/// then those of them that only removed nodes read.
void remove_unread_nodes(ir::Graph& g, const std::set<int>& candidates);

/// Puts `g` back as it was before recompute_kernel_reads returned `r`.
void undo_recompute(ir::Graph& g, RecomputedReads& r);

}  // namespace kiln::passes
