#include "compiler/timing.h"

#include <algorithm>
#include <chrono>
#include <vector>

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

Timing time_runs(int runs, const std::function<void()>& fn) {
  fn();
  std::vector<double> ms;
  for (int i = 0; i < std::max(runs, 1); ++i) ms.push_back(elapsed_ms(fn));
  return summary(ms);
}

PairedTiming time_paired(int runs, const std::function<void()>& a, const std::function<void()>& b) {
  a();
  b();
  std::vector<double> ta, tb, ratio;
  for (int i = 0; i < std::max(runs, 1); ++i) {
    ta.push_back(elapsed_ms(a));
    tb.push_back(elapsed_ms(b));
    ratio.push_back(tb.back() / ta.back());
  }
  return {summary(ta), summary(tb), median(ratio)};
}

}  // namespace kiln::bench
