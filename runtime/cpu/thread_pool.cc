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
  struct Region {
    const std::function<void(int64_t, int64_t)>* fn;
    int64_t n, chunk;
    std::atomic<int64_t> next{0};
  } region{&fn, n, std::max(grain, (n + team_threads_ * 4 - 1) / (team_threads_ * 4))};
  team_(
      [](void* data) {
        auto* r = static_cast<Region*>(data);
        for (int64_t begin = r->next.fetch_add(r->chunk); begin < r->n; begin = r->next.fetch_add(r->chunk))
          (*r->fn)(begin, std::min(r->n, begin + r->chunk));
      },
      &region, static_cast<unsigned>(team_threads_), 0);
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
