// Timing for benchmarks: medians of repeated runs, and paired runs that alternate two
// candidates so both see the same state of a shared, noisy machine.
#pragma once

#include <functional>

namespace kiln::bench {

/// Milliseconds over the timed runs.
struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
};

/// Runs `fn` once to warm up, then `runs` timed times.
Timing time_runs(int runs, const std::function<void()>& fn);

/// Two candidates timed in alternation (a, b, a, b, ...) after a warm-up of each.
struct PairedTiming {
  Timing a, b;
  /// The median over the pairs of b's time divided by a's.
  double median_ratio = 0;
};

/// Times `a` and `b` alternately, `runs` times each.
PairedTiming time_paired(int runs, const std::function<void()>& a, const std::function<void()>& b);

}  // namespace kiln::bench
