#include "serving/metrics.h"

#include <algorithm>
#include <charconv>

namespace kiln::serving {

namespace {

constexpr std::string_view kCauseNames[kFailureCauses] = {"bad_request", "not_found", "too_large", "run_failed",
                                                          "unavailable"};

std::vector<double> seconds_bounds() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

std::vector<double> rows_bounds() { return {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}; }

std::string number(double v) {
  char text[32];
  auto [end, ec] = std::to_chars(text, text + sizeof(text), v);
  return std::string(text, end);
}

// Prometheus label values escape backslash, quote and newline.
std::string label_value(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string_view failure_cause_name(FailureCause cause) { return kCauseNames[static_cast<int>(cause)]; }

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i] = 0;
}

void Histogram::observe(double value) {
  const size_t bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  double sum = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(sum, sum + value, std::memory_order_relaxed)) {
  }
}

void Histogram::write(std::string& out, std::string_view name, std::string_view labels) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i].load(std::memory_order_relaxed);
    const std::string le = i < bounds_.size() ? number(bounds_[i]) : "+Inf";
    out += std::string(name) + "_bucket{" + std::string(labels) + ",le=\"" + le + "\"} " + std::to_string(cumulative) +
           "\n";
  }
  out += std::string(name) + "_sum{" + std::string(labels) + "} " + number(sum_.load()) + "\n";
  out += std::string(name) + "_count{" + std::string(labels) + "} " + std::to_string(count_.load()) + "\n";
}

ModelMetrics::ModelMetrics()
    : request_seconds(seconds_bounds()),
      queue_seconds(seconds_bounds()),
      run_seconds(seconds_bounds()),
      batch_rows(rows_bounds()) {}

Metrics::Metrics(const std::vector<std::string>& model_names) {
  models_.emplace("", std::make_unique<ModelMetrics>());
  for (const std::string& name : model_names) models_.emplace(name, std::make_unique<ModelMetrics>());
}

ModelMetrics& Metrics::of(std::string_view model) {
  auto it = models_.find(model);
  return *(it == models_.end() ? models_.find("")->second : it->second);
}

std::string Metrics::text() const {
  std::string out;
  auto header = [&](std::string_view name, std::string_view type, std::string_view help) {
    out += "# HELP " + std::string(name) + " " + std::string(help) + "\n# TYPE " + std::string(name) + " " +
           std::string(type) + "\n";
  };
  auto labels = [](const std::string& model) { return "model=\"" + label_value(model) + "\""; };
  header("kiln_requests_total", "counter", "Inference requests received (model \"\": naming no served model).");
  for (const auto& [name, m] : models_)
    out += "kiln_requests_total{" + labels(name) + "} " + std::to_string(m->requests.load()) + "\n";
  header("kiln_request_failures_total", "counter", "Requests answered with an error, by cause.");
  for (const auto& [name, m] : models_)
    for (int c = 0; c < kFailureCauses; ++c)
      out += "kiln_request_failures_total{" + labels(name) + ",cause=\"" + std::string(kCauseNames[c]) + "\"} " +
             std::to_string(m->failures[static_cast<size_t>(c)].load()) + "\n";
  const struct {
    std::string_view name, help;
    Histogram ModelMetrics::*histogram;
  } histograms[] = {
      {"kiln_request_duration_seconds", "From a request's arrival to its response.", &ModelMetrics::request_seconds},
      {"kiln_queue_duration_seconds", "Time a request waited for its batch to run.", &ModelMetrics::queue_seconds},
      {"kiln_run_duration_seconds", "The runtime's run of one batch.", &ModelMetrics::run_seconds},
      {"kiln_batch_rows", "Rows per run (requests packed into one batch).", &ModelMetrics::batch_rows},
  };
  for (const auto& h : histograms) {
    header(h.name, "histogram", h.help);
    for (const auto& [name, m] : models_) ((*m).*(h.histogram)).write(out, h.name, labels(name));
  }
  return out;
}

}  // namespace kiln::serving
