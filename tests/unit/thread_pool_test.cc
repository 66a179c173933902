// The runtime's thread pool: every index of a range exactly once, on threads of its own
// and on OpenMP's team (libgomp, found through oneDNN as the executor finds it).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
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
void check_covers(ThreadPool& pool, bool expect_threads) {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{1000}, int64_t{100003}}) {
    for (int64_t grain : {int64_t{1}, int64_t{16}, int64_t{16384}}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      std::mutex mutex;
      std::set<std::thread::id> threads;
      pool.parallel_for(n, grain, [&](int64_t begin, int64_t end) {
        REQUIRE(0 <= begin);
        REQUIRE(begin < end);
        REQUIRE(end <= n);
        for (int64_t i = begin; i < end; ++i) seen[static_cast<size_t>(i)]++;
        // Long enough that another thread takes a chunk meanwhile.
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        std::lock_guard<std::mutex> lock(mutex);
        threads.insert(std::this_thread::get_id());
      });
      INFO("n " << n << ", grain " << grain);
      for (int64_t i = 0; i < n; ++i) CHECK(seen[static_cast<size_t>(i)] == 1);
      if (expect_threads && n >= 4 * grain && n > 16) CHECK(threads.size() > 1);
    }
  }
}

TEST_CASE("the thread pool visits every index once, on threads of its own", "[runtime][cpu]") {
  ThreadPool none(0);
  check_covers(none, false);
  ThreadPool three(3);
  check_covers(three, true);
}

TEST_CASE("the thread pool visits every index once, on OpenMP's team", "[runtime][cpu]") {
  const cpu::DnnlLibrary& dnnl = cpu::dnnl_library();
  if (!dnnl.handle) {
    // Debian's libdnnl2 is a build dependency (tools/setup.sh installs it): its absence
    // is a broken machine, not a case to skip.
    FAIL("oneDNN not found: " << dnnl.why_not);
  }
  REQUIRE(dnnl.gomp_parallel != nullptr);
  ThreadPool one(0, dnnl.gomp_parallel);
  check_covers(one, false);
  ThreadPool three(3, dnnl.gomp_parallel);
  check_covers(three, true);
}

}  // namespace
}  // namespace kiln::runtime
