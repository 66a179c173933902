// The runtime's thread pool: every index of a range exactly once, on threads of its own
// and on OpenMP's team (libgomp, found through oneDNN as the executor finds it).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "runtime/cpu/dnnl.h"
#include "runtime/cpu/thread_pool.h"

namespace kiln::runtime {
namespace {

// Runs ranges of several sizes and grains; each index must be visited once, and the
// chunks must come from more than one thread where the range is long enough.
void check_covers(ThreadPool& pool, int threads_in_all, bool expect_threads) {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{1000}, int64_t{100003}}) {
    for (int64_t grain : {int64_t{1}, int64_t{16}, int64_t{16384}}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      std::mutex mutex;
      std::set<std::thread::id> threads;
      std::atomic<int> short_chunks{0};
      pool.parallel_for(n, grain, [&](int64_t begin, int64_t end) {
        REQUIRE(0 <= begin);
        REQUIRE(begin < end);
        REQUIRE(end <= n);
        short_chunks += end - begin < grain;
        for (int64_t i = begin; i < end; ++i) seen[static_cast<size_t>(i)]++;
        // Long enough that another thread takes a chunk meanwhile.
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        std::lock_guard<std::mutex> lock(mutex);
        threads.insert(std::this_thread::get_id());
      });
      INFO("n " << n << ", grain " << grain);
      for (int64_t i = 0; i < n; ++i) CHECK(seen[static_cast<size_t>(i)] == 1);
      // Chunks of at least a grain, but for the last of each part: at most one part per
      // thread, and none shorter than a grain.
      CHECK(short_chunks <= std::max<int64_t>(1, std::min<int64_t>(threads_in_all, n / grain)));
      if (expect_threads && n >= 4 * grain && n > 16) CHECK(threads.size() > 1);
    }
  }
}

TEST_CASE("the thread pool visits every index once, on threads of its own", "[runtime][cpu]") {
  ThreadPool none(0);
  check_covers(none, 1, false);
  ThreadPool three(3);
  check_covers(three, 4, true);
}

TEST_CASE("the thread pool visits every index once, on OpenMP's team", "[runtime][cpu]") {
  const cpu::DnnlLibrary& dnnl = cpu::dnnl_library();
  if (!dnnl.handle) {
    // Debian's libdnnl2 is a build dependency (tools/setup.sh installs it): its absence
    // is a broken machine, not a case to skip.
    FAIL("oneDNN not found: " << dnnl.why_not);
  }
  REQUIRE(dnnl.gomp_parallel != nullptr);
  REQUIRE(dnnl.omp_get_thread_num != nullptr);
  ThreadPool one(0, dnnl.gomp_parallel, dnnl.omp_get_thread_num);
  check_covers(one, 1, false);
  ThreadPool three(3, dnnl.gomp_parallel, dnnl.omp_get_thread_num);
  check_covers(three, 4, true);
}

TEST_CASE("on OpenMP's team, each thread runs its own part of a range first, run after run", "[runtime][cpu]") {
  const cpu::DnnlLibrary& dnnl = cpu::dnnl_library();
  REQUIRE(dnnl.handle);
  ThreadPool pool(1, dnnl.gomp_parallel, dnnl.omp_get_thread_num);
  // Two parts of 4 chunks each. Every chunk waits until both threads have started one, so
  // that neither can take a second chunk (and run out of its own part, and take the
  // other's) before the other has taken its first: each thread's first chunk is the start
  // of its own part, whichever thread the team starts first.
  constexpr int64_t n = 16000;
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id worker;
  for (int run = 0; run < 5; ++run) {
    INFO("run " << run);
    std::mutex mutex;
    std::map<std::thread::id, int64_t> first;
    std::atomic<int> started{0};
    pool.parallel_for(n, 2000, [&](int64_t begin, int64_t) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (first.try_emplace(std::this_thread::get_id(), begin).second) ++started;
      }
      for (int wait = 0; started < 2 && wait < 10000; ++wait) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    REQUIRE(first.size() == 2);
    CHECK(first.at(caller) == 0);
    for (const auto& [thread, begin] : first)
      if (thread != caller) {
        CHECK(begin == n / 2);
        if (run == 0) worker = thread;
        CHECK(thread == worker);  // the same team thread, run after run
      }
  }
}

}  // namespace
}  // namespace kiln::runtime
