// The order in which a CPU session runs an artifact's steps, planned once at load, and
// which of them run side by side. A step small enough to run on one thread leaves the
// other cores idle; where several such steps are independent (the two directions of a
// bidirectional RNN, each a chain of small matmuls and gate kernels), each thread of the
// pool takes ready ones of them at once.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/result.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/format/artifact.h"

namespace kiln::runtime::cpu {

/// Bytes [begin, end) of one storage that a step reads or writes. Storage -1 is the arena;
/// any other is a value's own bytes outside it (an input, a param, a state).
struct StepAccess {
  int64_t storage = -1;
  int64_t begin = 0, end = 0;
  bool write = false;
};

/// Per step (in program order), the earlier steps it must follow: the last writer of any
/// byte it reads or writes, and every step that read a byte it writes since that byte was
/// last written. Each list is sorted, without repeats.
std::vector<std::vector<uint32_t>> step_dependencies(const std::vector<std::vector<StepAccess>>& accesses);

/// What a step costs, in any one unit: on one thread, and on the whole pool.
struct StepCost {
  bool one_thread = false;  ///< it may run on one thread beside others
  double alone = 1, on_pool = 1;
};

/// The arena values that only one-thread steps write and read (StepCost::one_thread):
/// per value, the group of values it shares bytes with in place (named by one of them), or
/// -1. A group qualifies whole: none of its values is a result or a state update, or read
/// or written by a step on the pool. Given bytes of its own (StepPlan::own_offsets), a
/// group no longer orders the steps that reused its bytes in the memory plan (planned for
/// program order), so independent chains of small steps can run side by side.
std::vector<int64_t> values_of_one_thread_steps(const format::Artifact& a, const std::vector<StepCost>& costs);

/// What each step of an artifact reads and writes: its inputs and outputs where the memory
/// plan put them (values with a group in `own_bytes` in that group's storage of its own),
/// and a split step's scratch. `value_bytes` and `own_bytes` per value.
std::vector<std::vector<StepAccess>> artifact_step_accesses(const format::Artifact& a,
                                                            const std::vector<int64_t>& value_bytes,
                                                            const std::vector<int64_t>& own_bytes);

/// Steps run together: one after another on the whole pool, or side by side (each step on
/// one thread, a step starting on whichever thread is free once the steps it follows are
/// done).
struct StepPhase {
  std::vector<uint32_t> steps;  ///< ascending: a valid order to run them one after another
  bool side_by_side = false;
  /// Side by side only, per position in `steps`: the positions of the phase's steps that
  /// follow it, and how many of the phase's steps it follows.
  std::vector<std::vector<uint32_t>> followers;
  std::vector<uint32_t> follows;
};

/// A session's plan: phases in the order they run. Where no phase runs side by side, one
/// phase of every step in program order.
struct StepSchedule {
  std::vector<StepPhase> phases;
  uint32_t side_by_side_steps = 0;  ///< steps in phases that run side by side
};

/// Plans the phases: a step that uses the whole pool runs alone as soon as the steps it
/// follows are done; the one-thread steps that can run before the next such step form a
/// phase between them. A phase runs side by side where that is estimated faster: where its
/// longest chain on one thread each, and its steps' cost alone over the threads, both cost
/// less than its steps one after another on the pool. `threads` below 2 plans no
/// side-by-side phase.
StepSchedule plan_step_schedule(const std::vector<std::vector<uint32_t>>& dependencies,
                                const std::vector<StepCost>& costs, int threads);

/// A CPU session's plan: the schedule, and where each value of one-thread steps lives when
/// it has bytes of its own (after the memory plan's arena).
struct StepPlan {
  StepSchedule schedule;
  std::vector<int64_t> own_offsets;  ///< per value: its arena offset, or -1 for the memory plan's
  uint64_t arena_bytes = 0;          ///< the memory plan's and the values' own
};

/// Plans an artifact's schedule on `threads` threads. Where no phase runs side by side,
/// the program order and the memory plan's arena, unchanged.
StepPlan plan_cpu_steps(const format::Artifact& a, const std::vector<int64_t>& value_bytes,
                        const std::vector<StepCost>& costs, int threads);

/// Runs a side-by-side phase on `threads` threads of `pool`: `run(step)` once per step of
/// the phase, each after the steps it follows, on whichever thread is free. Returns the
/// first error a step returned (the steps not yet started then do not run).
Status run_side_by_side(const StepPhase& phase, ThreadPool& pool, int threads,
                        const std::function<Status(uint32_t step)>& run);

}  // namespace kiln::runtime::cpu
