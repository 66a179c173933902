// Timing for benchmarks: medians of repeated runs, and interleaved runs that alternate
// candidates so all of them see the same state of a shared, noisy machine.
#pragma once

#include <functional>
#include <vector>

namespace kiln::bench {

/// Milliseconds over the timed runs.
struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
};

/// Runs `fn` once to warm up, then `runs` timed times.
Timing time_runs(int runs, const std::function<void()>& fn);

/// Candidates timed in turn (a, b, c, a, b, c, ...) after a warm-up of each.
struct Interleaved {
  std::vector<Timing> timings;          ///< per candidate
  std::vector<std::vector<double>> ms;  ///< per candidate, per round
  /// The median over the rounds of candidate `num`'s time divided by candidate `den`'s.
  double median_ratio(size_t num, size_t den) const;
};

/// Times the candidates in turn, `runs` rounds.
Interleaved time_interleaved(int runs, const std::vector<std::function<void()>>& candidates);

/// Two candidates timed alternately.
struct PairedTiming {
  Timing a, b;
  /// The median over the pairs of b's time divided by a's.
  double median_ratio = 0;
};

/// Times `a` and `b` alternately, `runs` times each.
PairedTiming time_paired(int runs, const std::function<void()>& a, const std::function<void()>& b);

}  // namespace kiln::bench
