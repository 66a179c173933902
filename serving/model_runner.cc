#include "serving/model_runner.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <semaphore>
#include <span>

namespace kiln::serving {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string shape_text(const std::vector<int64_t>& shape, bool batched) {
  std::string text = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    text += (d ? "," : "") + (batched && d == 0 ? std::string("N") : std::to_string(shape[d]));
  return text + "]";
}

Error bad(std::string message) { return http_error(kBadRequest, std::move(message)); }

// Kernels read and write rows fastest in 64-byte-aligned buffers (runtime/model.h).
std::span<uint8_t> aligned_part(std::vector<uint8_t>& storage, int64_t bytes) {
  storage.assign(static_cast<size_t>(bytes) + 64, 0);
  const size_t skip = (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
  return {storage.data() + skip, static_cast<size_t>(bytes)};
}

}  // namespace

// A request waiting in the batch queue: its rows, its input bytes and where its output
// rows go, each in signature order. Its thread sleeps on `wake` until its rows are done or
// it is given the lead; only the one waking it touches it after it is queued.
struct ModelRunner::Pending {
  int64_t rows = 0;
  std::vector<const uint8_t*> inputs;
  std::vector<uint8_t*> outputs;
  Clock::time_point enqueued;
  Status status;
  bool lead = false;
  std::binary_semaphore wake{0};
};

ModelRunner::ModelRunner(std::string name, std::shared_ptr<const runtime::Model> model,
                         std::chrono::microseconds max_batch_delay, ModelMetrics& metrics)
    : name_(std::move(name)), model_(std::move(model)), max_batch_delay_(max_batch_delay), metrics_(metrics) {
  const int64_t rows = std::max<int64_t>(model_->batch(), 1);
  for (const runtime::TensorInfo& info : model_->inputs()) input_row_bytes_.push_back(info.bytes() / rows);
  for (const runtime::TensorInfo& info : model_->outputs()) output_row_bytes_.push_back(info.bytes() / rows);
  if (model_->batch() > 1) {
    batch_ = model_->batch();
    batch_storage_.resize(input_row_bytes_.size() + output_row_bytes_.size());
    for (size_t i = 0; i < input_row_bytes_.size(); ++i)
      batch_in_.push_back(aligned_part(batch_storage_[i], batch_ * input_row_bytes_[i]));
    for (size_t o = 0; o < output_row_bytes_.size(); ++o)
      batch_out_.push_back(aligned_part(batch_storage_[input_row_bytes_.size() + o], batch_ * output_row_bytes_[o]));
  }
}

ModelRunner::~ModelRunner() {
  std::unique_lock lock(mutex_);
  stopping_ = true;
  arrived_.notify_all();
  arrived_.wait(lock, [&] { return !leading_ && queue_.empty(); });
}

Result<int64_t> ModelRunner::check_inputs(const InferRequest& request,
                                          std::vector<const RequestInput*>& ordered) const {
  const std::vector<runtime::TensorInfo>& infos = model_->inputs();
  const bool batched = model_->batch() > 0;
  ordered.assign(infos.size(), nullptr);
  int64_t rows = 0;
  const RequestInput* first = nullptr;
  for (const RequestInput& in : request.inputs) {
    auto info = std::find_if(infos.begin(), infos.end(), [&](const auto& i) { return i.name == in.name; });
    if (info == infos.end()) {
      std::string names;
      for (const runtime::TensorInfo& i : infos) names += (names.empty() ? "" : ", ") + i.name;
      return bad("model '" + name_ + "' has no input '" + in.name + "' (its inputs: " + names + ")");
    }
    const std::string takes = "model '" + name_ + "' takes " + std::string(datatype_name(info->type)) + " " +
                              shape_text(info->shape, batched) +
                              (batched ? ", N from 1 to " + std::to_string(model_->batch()) : "");
    if (in.type != info->type)
      return bad("input '" + in.name + "' is " + std::string(datatype_name(in.type)) + ", but " + takes);
    const bool fits = batched ? in.shape.size() == info->shape.size() && in.shape[0] >= 1 &&
                                    in.shape[0] <= model_->batch() &&
                                    std::equal(in.shape.begin() + 1, in.shape.end(), info->shape.begin() + 1)
                              : in.shape == info->shape;
    if (!fits) return bad("input '" + in.name + "' has shape " + shape_text(in.shape, false) + ", but " + takes);
    if (batched && first && in.shape[0] != rows)
      return bad("input '" + in.name + "' has " + std::to_string(in.shape[0]) + " rows, but input '" + first->name +
                 "' has " + std::to_string(rows));
    if (batched && !first) rows = in.shape[0], first = &in;
    ordered[static_cast<size_t>(info - infos.begin())] = &in;
  }
  for (size_t i = 0; i < infos.size(); ++i)
    if (!ordered[i])
      return bad("input '" + infos[i].name + "' is missing (model '" + name_ + "' takes " +
                 std::string(datatype_name(infos[i].type)) + " " + shape_text(infos[i].shape, batched) + ")");
  return rows;
}

Result<InferResult> ModelRunner::infer(const InferRequest& request) {
  std::vector<const RequestInput*> inputs;
  InferResult result;
  KILN_ASSIGN_OR_RETURN(result.rows, check_inputs(request, inputs));
  const int64_t rows = batch_ > 0 ? result.rows : std::max<int64_t>(model_->batch(), 1);
  for (int64_t row_bytes : output_row_bytes_) result.outputs.emplace_back(static_cast<size_t>(rows * row_bytes));
  Status ran = batch_ > 0 ? run_batched(inputs, result) : run_whole(inputs, result);
  if (!ran.ok()) return ran.error();
  // A value returned twice is two outputs of one name; the runtime, given buffers by
  // name, filled the first.
  const auto& outputs = model_->outputs();
  for (size_t o = 0; o < outputs.size(); ++o)
    for (size_t first = 0; first < o; ++first)
      if (outputs[first].name == outputs[o].name) {
        result.outputs[o] = result.outputs[first];
        break;
      }
  return result;
}

Status ModelRunner::run_whole(const std::vector<const RequestInput*>& inputs, InferResult& result) {
  std::map<std::string, std::span<const uint8_t>> in;
  std::map<std::string, std::span<uint8_t>> out;
  for (size_t i = 0; i < inputs.size(); ++i) in.emplace(model_->inputs()[i].name, inputs[i]->data);
  for (size_t o = 0; o < result.outputs.size(); ++o) out.emplace(model_->outputs()[o].name, result.outputs[o]);
  const Clock::time_point start = Clock::now();
  Status ran = model_->run(in, out);
  metrics_.run_seconds.observe(seconds_since(start));
  if (!ran.ok()) return http_error(kInternalError, "model '" + name_ + "' failed to run: " + ran.error().message);
  metrics_.batch_rows.observe(static_cast<double>(std::max<int64_t>(result.rows, 1)));
  return Status::Ok();
}

Status ModelRunner::run_batched(const std::vector<const RequestInput*>& inputs, InferResult& result) {
  Pending own;
  own.rows = result.rows;
  for (const RequestInput* in : inputs) own.inputs.push_back(in->data.data());
  for (std::vector<uint8_t>& out : result.outputs) own.outputs.push_back(out.data());
  std::unique_lock lock(mutex_);
  if (stopping_) return http_error(kUnavailable, "model '" + name_ + "' is shutting down");
  own.enqueued = Clock::now();
  queue_.push_back(&own);
  queued_rows_ += own.rows;
  if (leading_) {
    // Another request's thread runs batches: wait for ours to run, or for the lead.
    arrived_.notify_all();
    lock.unlock();
    own.wake.acquire();
    if (!own.lead) return own.status;
    lock.lock();
  }
  leading_ = true;
  lead(lock, own);
  return own.status;
}

void ModelRunner::lead(std::unique_lock<std::mutex>& lock, Pending& own) {
  for (bool own_done = false; !own_done;) {
    // Wait for a full batch, or until the first request has waited max_batch_delay.
    const Clock::time_point deadline = queue_.front()->enqueued + max_batch_delay_;
    while (!stopping_ && queued_rows_ < batch_ && Clock::now() < deadline) arrived_.wait_until(lock, deadline);
    std::vector<Pending*> batch;
    int64_t rows = 0;
    while (!queue_.empty() && rows + queue_.front()->rows <= batch_) {
      rows += queue_.front()->rows;
      own_done = own_done || queue_.front() == &own;
      batch.push_back(queue_.front());
      queue_.pop_front();
    }
    queued_rows_ -= rows;
    lock.unlock();
    run_batch(batch);
    for (Pending* p : batch)
      if (p != &own) p->wake.release();  // p may be gone from here on
    lock.lock();
  }
  if (queue_.empty()) {
    leading_ = false;
    arrived_.notify_all();  // the destructor may wait for this
  } else {
    queue_.front()->lead = true;
    queue_.front()->wake.release();
  }
}

void ModelRunner::run_batch(const std::vector<Pending*>& batch) {
  std::map<std::string, std::span<const uint8_t>> in_map;
  std::map<std::string, std::span<uint8_t>> out_map;
  int64_t row = 0;
  for (Pending* p : batch) {
    metrics_.queue_seconds.observe(seconds_since(p->enqueued));
    for (size_t i = 0; i < batch_in_.size(); ++i)
      std::memcpy(batch_in_[i].data() + row * input_row_bytes_[i], p->inputs[i],
                  static_cast<size_t>(p->rows * input_row_bytes_[i]));
    row += p->rows;
  }
  // Rows past the requests' are zeros (not a previous batch's rows), so a run's result
  // never depends on what ran before.
  for (size_t i = 0; i < batch_in_.size(); ++i)
    std::memset(batch_in_[i].data() + row * input_row_bytes_[i], 0,
                static_cast<size_t>((batch_ - row) * input_row_bytes_[i]));
  for (size_t i = 0; i < batch_in_.size(); ++i) in_map.emplace(model_->inputs()[i].name, batch_in_[i]);
  for (size_t o = 0; o < batch_out_.size(); ++o) out_map.emplace(model_->outputs()[o].name, batch_out_[o]);
  const Clock::time_point start = Clock::now();
  Status ran = model_->run(in_map, out_map);
  metrics_.run_seconds.observe(seconds_since(start));
  metrics_.batch_rows.observe(static_cast<double>(row));
  row = 0;
  for (Pending* p : batch) {
    if (ran.ok())
      for (size_t o = 0; o < batch_out_.size(); ++o)
        std::memcpy(p->outputs[o], batch_out_[o].data() + row * output_row_bytes_[o],
                    static_cast<size_t>(p->rows * output_row_bytes_[o]));
    else p->status = http_error(kInternalError, "model '" + name_ + "' failed to run: " + ran.error().message);
    row += p->rows;
  }
}

}  // namespace kiln::serving
