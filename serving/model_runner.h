// One served model: checks requests against its signature and runs them, packing the rows
// of concurrent requests into one run where the artifact has a batch (kiln compile --batch).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "runtime/model.h"
#include "serving/metrics.h"
#include "serving/protocol.h"

namespace kiln::serving {

/// A request's outputs: every output of the model in signature order, each `rows` rows
/// where the model is batched (else its whole shape).
struct InferResult {
  int64_t rows = 0;
  std::vector<std::vector<uint8_t>> outputs;
};

class ModelRunner {
 public:
  /// `max_batch_delay`: how long the first request of a batch waits for more rows (0 runs
  /// what has queued, which fills up while the previous batch runs). A model without a
  /// batch, or with a batch of one row, runs each request on its own, on the caller's
  /// thread, many at once. A batched model runs one batch at a time, on the thread of a
  /// request in it (no thread of its own: a lone request runs at once, on its own thread).
  ModelRunner(std::string name, std::shared_ptr<const runtime::Model> model, std::chrono::microseconds max_batch_delay,
              ModelMetrics& metrics);
  /// Waits for the batch running, if any.
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  const std::string& name() const { return name_; }
  const runtime::Model& model() const { return *model_; }
  /// Rows of the model's batch (0 without one).
  int64_t batch() const { return model_->batch(); }

  /// Checks the request's inputs against the signature (errors with code kBadRequest name
  /// the input and what is wrong) and runs them; a failed run is an error with code
  /// kInternalError and the runtime's message.
  Result<InferResult> infer(const InferRequest& request);

 private:
  struct Pending;
  // The rows a request gives (1 to the batch; for an unbatched model, 0), checked.
  Result<int64_t> check_inputs(const InferRequest& request, std::vector<const RequestInput*>& ordered) const;
  Status run_whole(const std::vector<const RequestInput*>& inputs, InferResult& result);
  Status run_batched(const std::vector<const RequestInput*>& inputs, InferResult& result);
  // Runs batches from the queue, holding `lock`, until one holds `own`; then hands the
  // lead to the next request queued, if any.
  void lead(std::unique_lock<std::mutex>& lock, Pending& own);
  // Runs the requests of one batch, packed in queue order, and hands out their rows.
  void run_batch(const std::vector<Pending*>& batch);

  std::string name_;
  std::shared_ptr<const runtime::Model> model_;
  std::chrono::microseconds max_batch_delay_;
  int64_t batch_ = 0;  // rows a batch packs; 0 when requests run on their own
  ModelMetrics& metrics_;
  std::vector<int64_t> input_row_bytes_, output_row_bytes_;

  // The batch queue, and its buffers of one batch per input and output (used by the
  // leading request's thread only).
  std::mutex mutex_;
  std::condition_variable arrived_;  // a request queued, or the lead is given up
  std::deque<Pending*> queue_;
  int64_t queued_rows_ = 0;
  bool leading_ = false;  // a request's thread is running batches
  bool stopping_ = false;
  std::vector<std::vector<uint8_t>> batch_storage_;
  std::vector<std::span<uint8_t>> batch_in_, batch_out_;  // 64-byte aligned parts of it
};

}  // namespace kiln::serving
