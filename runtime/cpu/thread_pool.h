// A fixed pool of threads that splits index ranges.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::runtime {

/// libgomp's entry point for a parallel region (GOMP_parallel): runs fn(data) on a team of
/// `threads` threads, the caller's among them.
using OpenMpTeam = void (*)(void (*fn)(void*), void* data, unsigned threads, unsigned flags);
/// The calling thread's number in its team (omp_get_thread_num): 0 for the caller.
using OpenMpThreadNumber = int (*)();

/// Runs fn(begin, end) over chunks of [0, n) on the pool's threads and the caller's.
class ThreadPool {
 public:
  /// `threads` workers besides the caller (0: none). Throws std::system_error, with no
  /// thread left running, when the system cannot start them.
  explicit ThreadPool(int threads);
  /// A pool whose chunks run on OpenMP's team of threads + 1 (the caller's): the threads
  /// oneDNN's calls run on, which spin for a while after each call. With threads of its
  /// own, a kernel after a convolution or matmul shared the cores with them. Team thread
  /// t first takes the chunks of the t-th of as many equal parts of a range, then helps
  /// the others: a thread then reads what it wrote in the step before, or what oneDNN
  /// (which splits its work in contiguous parts too) wrote on it, from its own core's cache.
  ThreadPool(int threads, OpenMpTeam team, OpenMpThreadNumber thread_number)
      : team_(team), thread_number_(thread_number), team_threads_(threads + 1) {}
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Splits [0, n) into chunks of at least `grain` items and waits for all of them.
  /// On threads of its own, calls from several threads at once are serialized; on a team,
  /// each calling thread's call runs on a team of its own.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void work();
  void stop();
  void parallel_for_team(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  OpenMpTeam team_ = nullptr;
  OpenMpThreadNumber thread_number_ = nullptr;
  int team_threads_ = 0;

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
