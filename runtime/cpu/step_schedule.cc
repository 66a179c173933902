#include "runtime/cpu/step_schedule.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kiln::runtime::cpu {
namespace {

// A run of bytes that no access so far has split: who wrote it last, and who read it since.
struct Segment {
  int64_t end = 0;
  int writer = -1;
  std::vector<uint32_t> readers;
};
using Segments = std::map<int64_t, Segment>;  // by first byte, pairwise disjoint

// Splits the segment holding byte `at`, if any, so that a segment begins there.
void split_at(Segments& segments, int64_t at) {
  auto it = segments.upper_bound(at);
  if (it == segments.begin()) return;
  --it;
  if (it->first == at || at >= it->second.end) return;
  Segment right = it->second;
  it->second.end = at;
  segments.emplace(at, std::move(right));
}

// Calls visit(segment) for each segment of [begin, end), made first where none was.
template <typename Visit>
void cover(Segments& segments, int64_t begin, int64_t end, Visit visit) {
  split_at(segments, begin);
  split_at(segments, end);
  auto it = segments.lower_bound(begin);
  for (int64_t at = begin; at < end; ++it) {
    if (it == segments.end() || it->first > at) {
      Segment gap;
      gap.end = it == segments.end() ? end : std::min(end, it->first);
      it = segments.emplace_hint(it, at, std::move(gap));
    }
    visit(it->second);
    at = it->second.end;
  }
}

}  // namespace

std::vector<std::vector<uint32_t>> step_dependencies(const std::vector<std::vector<StepAccess>>& accesses) {
  std::map<int64_t, Segments> storages;
  std::vector<std::vector<uint32_t>> after(accesses.size());
  for (uint32_t s = 0; s < accesses.size(); ++s) {
    std::vector<uint32_t>& deps = after[s];
    auto follow = [&](int step) {
      if (step >= 0 && static_cast<uint32_t>(step) != s) deps.push_back(static_cast<uint32_t>(step));
    };
    // Reads first: a step that writes over its own input (in place) follows only others.
    for (const StepAccess& a : accesses[s])
      if (!a.write && a.begin < a.end)
        cover(storages[a.storage], a.begin, a.end, [&](Segment& seg) {
          follow(seg.writer);
          if (seg.readers.empty() || seg.readers.back() != s) seg.readers.push_back(s);
        });
    for (const StepAccess& a : accesses[s])
      if (a.write && a.begin < a.end)
        cover(storages[a.storage], a.begin, a.end, [&](Segment& seg) {
          follow(seg.writer);
          for (uint32_t r : seg.readers) follow(static_cast<int>(r));
          seg.writer = static_cast<int>(s);
          seg.readers.clear();
        });
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  }
  return after;
}

std::vector<int64_t> values_of_one_thread_steps(const format::Artifact& a, const std::vector<StepCost>& costs) {
  const uint32_t values = a.values()->size();
  // A kernel that writes over its dying input in place computes the same into bytes of
  // its own, which then no longer order it after the input's other readers (an RNN's
  // hidden state, read by the next step's matmul and by the concat of the outputs).
  // Values a library call writes in place (a convolution adding its residual) keep
  // sharing their bytes: each such group is one, named by one of its values.
  std::vector<uint32_t> group(values);
  for (uint32_t v = 0; v < values; ++v) group[v] = v;
  auto find = [&](uint32_t v) {
    while (group[v] != v) v = group[v] = group[group[v]];
    return v;
  };
  for (const format::Buffer* b : *a.buffers()) {
    if (b->in_place_of() < 0) continue;
    const format::StepKind writer = a.steps()->Get(static_cast<uint32_t>(b->first_step()))->kind();
    if (writer == format::StepKind::Loop || writer == format::StepKind::Reduction) continue;
    group[find(b->value())] = find(static_cast<uint32_t>(b->in_place_of()));
  }
  std::vector<char> arena(values, 0), ok(values, 1);
  for (const format::Buffer* b : *a.buffers()) arena[b->value()] = b->home() == format::Home::Arena;
  for (uint32_t v = 0; v < values; ++v)
    if (!arena[v]) ok[find(v)] = 0;
  for (uint32_t v : *a.results()) ok[find(v)] = 0;
  if (a.state_copies())
    for (const format::StateCopy* c : *a.state_copies()) ok[find(c->value())] = 0;
  for (uint32_t s = 0; s < a.steps()->size(); ++s) {
    if (costs[s].one_thread) continue;
    const format::Step& step = *a.steps()->Get(s);
    for (uint32_t v : *step.inputs()) ok[find(v)] = 0;
    for (uint32_t v : *step.outputs()) ok[find(v)] = 0;
  }
  std::vector<int64_t> own(values, -1);
  for (uint32_t v = 0; v < values; ++v)
    if (arena[v] && ok[find(v)]) own[v] = find(v);
  return own;
}

std::vector<std::vector<StepAccess>> artifact_step_accesses(const format::Artifact& a,
                                                            const std::vector<int64_t>& value_bytes,
                                                            const std::vector<int64_t>& own_bytes) {
  std::vector<const format::Buffer*> buffer_of(value_bytes.size(), nullptr);
  for (const format::Buffer* b : *a.buffers()) buffer_of[b->value()] = b;
  auto access = [&](uint32_t v, bool write) -> StepAccess {
    const format::Buffer* b = buffer_of[v];
    if (own_bytes[v] >= 0) return {static_cast<int64_t>(value_bytes.size()) + own_bytes[v], 0, value_bytes[v], write};
    if (b && b->home() == format::Home::Arena)
      return {-1, static_cast<int64_t>(b->offset()), static_cast<int64_t>(b->offset() + b->bytes()), write};
    // A state's new value written in place: the state's own bytes.
    if (b && b->home() == format::Home::State && b->state() >= 0)
      return {b->state(), 0, value_bytes[static_cast<uint32_t>(b->state())], write};
    return {v, 0, value_bytes[v], write};
  };
  std::vector<std::vector<StepAccess>> accesses(a.steps()->size());
  for (uint32_t s = 0; s < a.steps()->size(); ++s) {
    const format::Step& step = *a.steps()->Get(s);
    for (uint32_t v : *step.inputs()) accesses[s].push_back(access(v, false));
    for (uint32_t v : *step.outputs()) accesses[s].push_back(access(v, true));
    if (step.scratch_bytes() > 0)
      accesses[s].push_back({-1, step.scratch_offset(), step.scratch_offset() + step.scratch_bytes(), true});
  }
  return accesses;
}

namespace {

// Fills in a phase's followers and counts, and whether it has steps enough that do not
// wait for one another to run side by side.
void plan_phase(StepPhase& phase, const std::vector<std::vector<uint32_t>>& dependencies,
                const std::vector<StepCost>& costs, int threads, std::vector<int>& position) {
  const size_t n = phase.steps.size();
  for (size_t i = 0; i < n; ++i) position[phase.steps[i]] = static_cast<int>(i);
  phase.followers.assign(n, {});
  phase.follows.assign(n, 0);
  std::vector<double> chain(n, 0);  // the costliest chain of the phase's steps ending here, alone
  double longest = 0, alone = 0, on_pool = 0;
  for (size_t i = 0; i < n; ++i) {
    const StepCost& cost = costs[phase.steps[i]];
    for (uint32_t d : dependencies[phase.steps[i]]) {
      const int p = position[d];
      if (p < 0) continue;
      phase.followers[static_cast<size_t>(p)].push_back(static_cast<uint32_t>(i));
      ++phase.follows[i];
      chain[i] = std::max(chain[i], chain[static_cast<size_t>(p)]);
    }
    chain[i] += cost.alone;
    longest = std::max(longest, chain[i]);
    alone += cost.alone;
    on_pool += cost.on_pool;
  }
  for (uint32_t s : phase.steps) position[s] = -1;
  phase.side_by_side = n >= 2 && std::max(longest, alone / threads) < on_pool;
  if (!phase.side_by_side) {
    phase.followers.clear();
    phase.follows.clear();
  }
}

// One phase of every step in program order.
StepSchedule program_order(size_t steps) {
  StepSchedule in_order;
  in_order.phases.emplace_back();
  for (uint32_t s = 0; s < steps; ++s) in_order.phases[0].steps.push_back(s);
  return in_order;
}

}  // namespace

StepSchedule plan_step_schedule(const std::vector<std::vector<uint32_t>>& dependencies,
                                const std::vector<StepCost>& costs, int threads) {
  const uint32_t n = static_cast<uint32_t>(dependencies.size());
  const StepSchedule in_order = program_order(n);
  if (threads < 2) return in_order;

  std::vector<std::vector<uint32_t>> followers(n);
  std::vector<uint32_t> waiting(n, 0);
  for (uint32_t s = 0; s < n; ++s) {
    waiting[s] = static_cast<uint32_t>(dependencies[s].size());
    for (uint32_t d : dependencies[s]) followers[d].push_back(s);
  }
  std::set<uint32_t> ready_whole;   // steps on the whole pool whose dependencies are done
  std::vector<uint32_t> ready_one;  // one-thread steps likewise
  auto ready = [&](uint32_t s) {
    costs[s].one_thread ? ready_one.push_back(s) : static_cast<void>(ready_whole.insert(s));
  };
  for (uint32_t s = 0; s < n; ++s)
    if (waiting[s] == 0) ready(s);

  StepSchedule schedule;
  std::vector<int> position(n, -1);
  auto finish = [&](uint32_t s, std::vector<uint32_t>* same_phase) {
    for (uint32_t f : followers[s])
      if (--waiting[f] == 0) {
        if (same_phase && costs[f].one_thread) same_phase->push_back(f);
        else ready(f);
      }
  };
  for (uint32_t planned = 0; planned < n;) {
    if (!ready_whole.empty()) {
      const uint32_t s = *ready_whole.begin();
      ready_whole.erase(ready_whole.begin());
      StepPhase alone;
      alone.steps.push_back(s);
      schedule.phases.push_back(std::move(alone));
      finish(s, nullptr);
      ++planned;
      continue;
    }
    // Every one-thread step that can run before the next step on the whole pool.
    StepPhase phase;
    phase.steps.swap(ready_one);
    if (phase.steps.empty()) return in_order;  // a dependency on a later step: not a program's
    for (size_t i = 0; i < phase.steps.size(); ++i) finish(phase.steps[i], &phase.steps);
    planned += static_cast<uint32_t>(phase.steps.size());
    std::sort(phase.steps.begin(), phase.steps.end());
    plan_phase(phase, dependencies, costs, threads, position);
    if (phase.side_by_side) schedule.side_by_side_steps += static_cast<uint32_t>(phase.steps.size());
    schedule.phases.push_back(std::move(phase));
  }
  return schedule.side_by_side_steps > 0 ? schedule : in_order;
}

StepPlan plan_cpu_steps(const format::Artifact& a, const std::vector<int64_t>& value_bytes,
                        const std::vector<StepCost>& costs, int threads) {
  StepPlan plan;
  plan.arena_bytes = a.arena_bytes();
  plan.own_offsets.assign(value_bytes.size(), -1);
  plan.schedule = program_order(costs.size());
  if (threads < 2) return plan;
  std::vector<int64_t> own = values_of_one_thread_steps(a, costs);
  plan.schedule = plan_step_schedule(step_dependencies(artifact_step_accesses(a, value_bytes, own)), costs, threads);
  if (plan.schedule.side_by_side_steps == 0) return plan;  // the program order, every value in place
  // Bytes of their own only for the values of steps that run side by side: elsewhere the
  // memory plan's reuse keeps a chain's values in cache. The schedule is then planned again
  // on the final places, so that it follows every reuse left.
  std::vector<char> side_by_side(a.steps()->size(), 0);
  for (const StepPhase& phase : plan.schedule.phases)
    for (uint32_t s : phase.steps) side_by_side[s] = phase.side_by_side;
  std::vector<char> dropped(value_bytes.size(), 0);  // per group
  for (uint32_t s = 0; s < a.steps()->size(); ++s) {
    if (side_by_side[s]) continue;
    const format::Step& step = *a.steps()->Get(s);
    for (uint32_t v : *step.outputs())
      if (own[v] >= 0) dropped[static_cast<size_t>(own[v])] = 1;
  }
  for (int64_t& group : own)
    if (group >= 0 && dropped[static_cast<size_t>(group)]) group = -1;
  plan.schedule = plan_step_schedule(step_dependencies(artifact_step_accesses(a, value_bytes, own)), costs, threads);
  if (plan.schedule.side_by_side_steps == 0) return plan;  // the program order, every value in place
  std::vector<int64_t> group_bytes(value_bytes.size(), 0), group_offset(value_bytes.size(), -1);
  for (uint32_t v = 0; v < value_bytes.size(); ++v)
    if (own[v] >= 0)
      group_bytes[static_cast<size_t>(own[v])] = std::max(group_bytes[static_cast<size_t>(own[v])], value_bytes[v]);
  // Aligned as the memory plan aligns (kernels read and write whole vectors).
  const uint64_t align = std::max<uint64_t>(64, a.alignment());
  for (uint32_t v = 0; v < value_bytes.size(); ++v) {
    if (own[v] < 0) continue;
    int64_t& offset = group_offset[static_cast<size_t>(own[v])];
    if (offset < 0) {
      offset = static_cast<int64_t>((plan.arena_bytes + align - 1) / align * align);
      plan.arena_bytes = static_cast<uint64_t>(offset + group_bytes[static_cast<size_t>(own[v])]);
    }
    plan.own_offsets[v] = offset;
  }
  return plan;
}

Status run_side_by_side(const StepPhase& phase, ThreadPool& pool, int threads,
                        const std::function<Status(uint32_t step)>& run) {
  const size_t n = phase.steps.size();
  std::unique_ptr<std::atomic<uint32_t>[]> waiting(new std::atomic<uint32_t>[n]);
  std::vector<uint32_t> ready;  // positions in phase.steps
  for (size_t i = 0; i < n; ++i) {
    waiting[i].store(phase.follows[i], std::memory_order_relaxed);
    if (phase.follows[i] == 0) ready.push_back(static_cast<uint32_t>(i));
  }
  std::reverse(ready.begin(), ready.end());  // taken from the back: program order first
  std::mutex ready_mutex;
  std::atomic<size_t> finished{0};
  std::atomic<bool> failed{false};
  Status error = Status::Ok();
  // Each thread takes a ready step, runs it, and keeps for itself one follower it made
  // ready (a chain stays on one core, its values in that core's cache). A thread with
  // nothing to take waits only while another runs a step: it never waits for a thread
  // that has not started, so the phase finishes on however many threads the pool gives it.
  auto take_steps = [&](int64_t, int64_t) {
    int next = -1;
    for (unsigned idle = 0; !failed.load(std::memory_order_relaxed);) {
      if (next < 0) {
        std::lock_guard<std::mutex> lock(ready_mutex);
        if (!ready.empty()) {
          next = static_cast<int>(ready.back());
          ready.pop_back();
        }
      }
      if (next < 0) {
        if (finished.load(std::memory_order_acquire) == n) return;
        // A short wait spins; a long one (the thread running the step the others wait
        // for was preempted, by another process) gives the core away at every turn.
        if (++idle > 256) {
          std::this_thread::yield();
        } else {
#if defined(__x86_64__)
          _mm_pause();
#endif
        }
        continue;
      }
      const size_t i = static_cast<size_t>(next);
      next = -1;
      idle = 0;
      if (Status status = run(phase.steps[i]); !status.ok()) {
        std::lock_guard<std::mutex> lock(ready_mutex);
        if (!failed.exchange(true)) error = std::move(status);
        return;
      }
      for (uint32_t f : phase.followers[i]) {
        if (waiting[f].fetch_sub(1, std::memory_order_acq_rel) != 1) continue;
        if (next < 0) {
          next = static_cast<int>(f);
        } else {
          std::lock_guard<std::mutex> lock(ready_mutex);
          ready.push_back(f);
        }
      }
      finished.fetch_add(1, std::memory_order_acq_rel);
    }
  };
  pool.parallel_for(threads, 1, take_steps);
  return error;
}

}  // namespace kiln::runtime::cpu
