#include "bench/timing.h"

#include <algorithm>
#include <chrono>

namespace kiln::bench {
namespace {

double elapsed_ms(const std::function<void()>& fn) {
  auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

Timing summary(const std::vector<double>& ms) {
  return {median(ms), *std::min_element(ms.begin(), ms.end()), *std::max_element(ms.begin(), ms.end())};
}

}  // namespace

Timing time_runs(int runs, const std::function<void()>& fn) { return time_interleaved(runs, {fn}).timings[0]; }

double Interleaved::median_ratio(size_t num, size_t den) const {
  std::vector<double> ratio;
  for (size_t r = 0; r < ms[num].size(); ++r) ratio.push_back(ms[num][r] / ms[den][r]);
  return median(ratio);
}

Interleaved time_interleaved(int runs, const std::vector<std::function<void()>>& candidates) {
  Interleaved result;
  result.ms.resize(candidates.size());
  for (const auto& fn : candidates) fn();
  for (int r = 0; r < std::max(runs, 1); ++r)
    for (size_t c = 0; c < candidates.size(); ++c) result.ms[c].push_back(elapsed_ms(candidates[c]));
  for (const auto& ms : result.ms) result.timings.push_back(summary(ms));
  return result;
}

PairedTiming time_paired(int runs, const std::function<void()>& a, const std::function<void()>& b) {
  Interleaved t = time_interleaved(runs, {a, b});
  return {t.timings[0], t.timings[1], t.median_ratio(1, 0)};
}

}  // namespace kiln::bench
