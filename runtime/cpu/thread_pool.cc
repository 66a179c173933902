#include "runtime/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>

namespace kiln::runtime {

ThreadPool::ThreadPool(int threads) {
  try {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  } catch (...) {
    // The threads already started must be joined before the exception leaves: a joinable
    // std::thread destroyed would terminate the process.
    stop();
    throw;
  }
}

ThreadPool::~ThreadPool() { stop(); }

void ThreadPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::parallel_for_team(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  // Part t of [0, n) is team thread t's home: its chunks go in order from `next[t]`.
  // Chunks assigned by one shared counter went to the threads alternately, and a step
  // after a convolution then read half of its input from the other core's cache
  // (docs/cpu.md has the measurements). No part is shorter than a grain; where there are
  // fewer parts than threads, thread t starts on part t mod parts.
  struct Region {
    const std::function<void(int64_t, int64_t)>* fn;
    int64_t n, chunk;
    int parts;
    std::vector<std::atomic<int64_t>> next;
    int64_t part_begin(int t) const { return n * t / parts; }
    // Runs part t's chunks that no thread has taken yet.
    void drain(int t) {
      const int64_t past = part_begin(t + 1);
      for (int64_t begin = next[t].fetch_add(chunk); begin < past; begin = next[t].fetch_add(chunk))
        (*fn)(begin, std::min(past, begin + chunk));
    }
  } region{&fn, n, std::max(grain, (n + team_threads_ * 4 - 1) / (team_threads_ * 4)),
           static_cast<int>(std::clamp<int64_t>(n / std::max<int64_t>(grain, 1), 1, team_threads_)),
           std::vector<std::atomic<int64_t>>(static_cast<size_t>(team_threads_))};
  for (int t = 0; t < region.parts; ++t) region.next[static_cast<size_t>(t)] = region.part_begin(t);
  struct Call {
    Region* region;
    OpenMpThreadNumber thread_number;
  } call{&region, thread_number_};
  team_(
      [](void* data) {
        auto* c = static_cast<Call*>(data);
        Region& r = *c->region;
        const int home = std::max(c->thread_number(), 0) % r.parts;
        for (int k = 0; k < r.parts; ++k) r.drain((home + k) % r.parts);
      },
      &call, static_cast<unsigned>(team_threads_), 0);
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (team_) {
    if (n <= grain || team_threads_ == 1) fn(0, n);
    else parallel_for_team(n, grain, fn);
    return;
  }
  int64_t parts = static_cast<int64_t>(workers_.size()) + 1;
  if (workers_.empty() || n <= grain) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> call(call_mutex_);
  int64_t chunk = std::max(grain, (n + parts * 4 - 1) / (parts * 4));
  std::unique_lock<std::mutex> lock(mutex_);
  job_ = &fn;
  n_ = n;
  chunk_ = chunk;
  next_ = 0;
  pending_ = (n + chunk - 1) / chunk;
  ++generation_;
  wake_.notify_all();
  // The caller takes chunks too.
  while (next_ < n_) {
    int64_t begin = next_;
    next_ = std::min(n_, next_ + chunk_);
    int64_t end = next_;
    lock.unlock();
    fn(begin, end);
    lock.lock();
    --pending_;
  }
  done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::work() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wake_.wait(lock, [&] { return stop_ || (generation_ != seen && job_ && next_ < n_); });
    if (stop_) return;
    seen = generation_;
    while (job_ && next_ < n_) {
      int64_t begin = next_;
      next_ = std::min(n_, next_ + chunk_);
      int64_t end = next_;
      const auto* job = job_;
      lock.unlock();
      (*job)(begin, end);
      lock.lock();
      if (--pending_ == 0) done_.notify_all();
    }
  }
}

}  // namespace kiln::runtime
