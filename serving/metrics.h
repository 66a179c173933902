// The server's counters and histograms, written in Prometheus' text exposition format
// (https://prometheus.io/docs/instrumenting/exposition_formats/). Thread-safe: counting
// takes no lock.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::serving {

/// Why a request failed, as the `cause` label names it.
enum class FailureCause { BadRequest, NotFound, TooLarge, RunFailed, Unavailable };
inline constexpr int kFailureCauses = 5;
std::string_view failure_cause_name(FailureCause cause);

/// A histogram with fixed upper bounds (and +Inf).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  /// The `_bucket`, `_sum` and `_count` lines of `name` with `labels` ("model=\"m\"").
  void write(std::string& out, std::string_view name, std::string_view labels) const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // per bound, then +Inf; not cumulative
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

/// The figures of one model ("" gathers requests that name no known model).
struct ModelMetrics {
  ModelMetrics();
  std::atomic<uint64_t> requests{0};
  std::array<std::atomic<uint64_t>, kFailureCauses> failures{};
  Histogram request_seconds;  ///< from the whole body's arrival to the response
  Histogram queue_seconds;    ///< waiting for a batch to form and run
  Histogram run_seconds;      ///< the runtime's run of a batch (or request)
  Histogram batch_rows;       ///< rows per run
};

/// Every model's figures, created up front so that counting never takes a lock.
class Metrics {
 public:
  explicit Metrics(const std::vector<std::string>& model_names);
  /// The figures of a model, or of "" for a name the server does not serve.
  ModelMetrics& of(std::string_view model);
  /// The whole exposition: HELP and TYPE lines, then every model's series.
  std::string text() const;

 private:
  std::map<std::string, std::unique_ptr<ModelMetrics>, std::less<>> models_;
};

}  // namespace kiln::serving
