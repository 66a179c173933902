// A fixed pool of threads that splits index ranges.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::runtime {

/// Runs fn(begin, end) over chunks of [0, n) on the pool's threads and the caller's.
class ThreadPool {
 public:
  /// `threads` workers besides the caller (0: none). Throws std::system_error, with no
  /// thread left running, when the system cannot start them.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Splits [0, n) into chunks of at least `grain` items and waits for all of them.
  /// Calls from several threads at once are serialized.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void work();
  void stop();

  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // one parallel_for at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t n_ = 0, chunk_ = 0, next_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace kiln::runtime
