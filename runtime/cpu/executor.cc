#include "runtime/cpu/executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

#include "base/allocation.h"
#include "runtime/cpu/attention.h"
#include "runtime/cpu/dnnl.h"
#include "runtime/cpu/dnnl_conv.h"
#include "runtime/cpu/dnnl_matmul.h"
#include "runtime/cpu/kernel_library.h"
#include "runtime/cpu/layout_plan.h"
#include "runtime/cpu/matmul.h"
#include "runtime/cpu/page_memory.h"
#include "runtime/cpu/step_schedule.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/cpu/winograd.h"

namespace kiln::runtime::cpu {
namespace {

using Arena = PageMemory;

// The fewest work items of a kernel step that the pool gives a thread: below this a step
// runs on the calling thread alone.
int64_t kernel_grain(const format::Step& step) { return step.kind() == format::StepKind::Loop ? 16384 : 16; }

// Matmuls of at most this many floating-point operations may run on one thread beside
// other steps (issue 23's LSTM: its recurrent [8,128]x[128,512] products, 1 MFLOP).
constexpr int64_t kOneThreadMatmulFlops = int64_t{4} << 20;

// What a step costs for the schedule (step_schedule.h), in microseconds of this
// development VM's cores (docs/cpu.md, "Steps side by side"): a small matmul at 100
// GFLOP/s on one thread, split on the pool across as many threads as it has quarter
// MFLOPs; a kernel the pool would not split, 1. Only their ratios matter. Kernels the
// pool splits, split reductions, convolutions, attention and large matmuls run on the
// whole pool.
StepCost step_cost(const format::Step& step, int threads) {
  StepCost cost;
  switch (step.kind()) {
    case format::StepKind::Scatter: cost.one_thread = true; break;
    case format::StepKind::Loop:
    case format::StepKind::Reduction:
      cost.one_thread =
          step.partial_items() == 0 && step.scratch_bytes() == 0 && step.work_items() <= kernel_grain(step);
      break;
    case format::StepKind::Library: {
      if (!step.matmul() || step.conv() || step.attention()) break;
      int64_t flops = 2 * step.matmul()->m() * step.matmul()->n() * step.matmul()->k();
      if (step.matmul()->batch())
        for (const format::BatchDim* d : *step.matmul()->batch()) flops *= d->count();
      cost.one_thread = flops <= kOneThreadMatmulFlops;
      cost.alone = static_cast<double>(flops) / 1e5;
      const int64_t split = std::clamp<int64_t>(flops >> 18, 1, threads);
      cost.on_pool = cost.alone / static_cast<double>(split);
      break;
    }
  }
  return cost;
}

// A run's arena. The first is made at load, so that an arena larger than memory is a load
// error.
Result<Arena> new_arena(uint64_t bytes) { return PageMemory::allocate(bytes, "the arena"); }

// Arenas of finished runs, reused: a fresh one would fault in its pages on every run.
class ArenaPool {
 public:
  ArenaPool() = default;
  // Before the first take().
  void set_bytes(uint64_t bytes) { bytes_ = bytes; }

  // An arena for one run, given back when the lease ends.
  class Lease {
   public:
    Lease(ArenaPool& pool, Arena arena) : pool_(&pool), arena_(std::move(arena)) {}
    Lease(Lease&&) = default;
    ~Lease() {
      if (arena_.data()) pool_->give_back(std::move(arena_));
    }
    uint8_t* get() const { return arena_.data(); }

   private:
    ArenaPool* pool_;
    Arena arena_;
  };

  Result<Lease> take() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!free_.empty()) {
        Arena arena = std::move(free_.back());
        free_.pop_back();
        return Lease(*this, std::move(arena));
      }
    }
    KILN_ASSIGN_OR_RETURN(Arena arena, new_arena(bytes_));
    return Lease(*this, std::move(arena));
  }

 private:
  void give_back(Arena arena) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(std::move(arena));
  }

  uint64_t bytes_ = 0;
  std::mutex mutex_;
  std::vector<Arena> free_;
};

class CpuExecutor final : public Executor {
 public:
  CpuExecutor(const format::ArtifactView& view, Signature sig, KernelLibrary kernels)
      : a_(view.metadata()), sig_(std::move(sig)), kernels_(std::move(kernels)) {}

  Status init(const Options& options) {
    for (size_t i = 0; i < sig_.state_values.size(); ++i) {
      const uint32_t v = sig_.state_values[i];
      std::vector<uint8_t>& bytes = state_[v];
      KILN_RETURN_IF_ERROR(
          resize_or_error(bytes, static_cast<uint64_t>(sig_.value_bytes[v]), "state %" + sig_.values[v].name));
      if (sig_.state_initial[i]) std::memcpy(bytes.data(), sig_.state_initial[i], bytes.size());
    }
    buffer_of_.assign(sig_.values.size(), -1);
    for (uint32_t i = 0; i < a_.buffers()->size(); ++i) buffer_of_[a_.buffers()->Get(i)->value()] = static_cast<int>(i);
    const int threads =
        options.threads > 0 ? options.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    threads_ = threads;
    std::vector<StepCost> costs;
    for (const format::Step* step : *a_.steps()) costs.push_back(step_cost(*step, threads_));
    plan_ = plan_cpu_steps(a_, sig_.value_bytes, costs, options.side_by_side_steps ? threads_ : 1);
    arenas_.set_bytes(plan_.arena_bytes);
    KILN_ASSIGN_OR_RETURN(ArenaPool::Lease first, arenas_.take());  // given back at once: the first run's
    try {
      // Where oneDNN runs on libgomp, the kernels run on its team too (thread_pool.h);
      // ViT-B/16's loop and row steps took twice as long on threads of their own.
      const DnnlLibrary& dnnl = dnnl_library();
      pool_ = dnnl.gomp_parallel && dnnl.omp_set_num_threads && dnnl.omp_get_thread_num
                  ? std::make_unique<ThreadPool>(threads - 1, dnnl.gomp_parallel, dnnl.omp_get_thread_num)
                  : std::make_unique<ThreadPool>(threads - 1);
    } catch (const std::system_error& e) {
      return make_error("runtime: cannot start " + std::to_string(threads) + " threads: " + e.code().message());
    }
    if (const Result<bool> winograd = winograd_allowed(); !winograd.ok()) return winograd.error();
    // Activations passed from convolution to convolution in the library's layout, through
    // the pools and elementwise steps between them.
    std::vector<char> pinned(sig_.values.size(), 0);
    for (const auto* values : {&sig_.input_values, &sig_.output_values, &sig_.state_values})
      for (uint32_t v : *values) pinned[v] = 1;
    for (uint32_t v = 0; v < sig_.values.size(); ++v) pinned[v] = pinned[v] || sig_.weights[v] || state_.count(v);
    if (a_.state_copies())  // copied into state after the run, where callers read it
      for (const format::StateCopy* c : *a_.state_copies()) pinned[c->value()] = 1;
    for (const format::Buffer* b : *a_.buffers())
      if (b->home() != format::Home::Arena) pinned[b->value()] = 1;
    layouts_ = plan_layouts(a_, pinned);
    // Baked-in convolution and f32 or f16 matmul weights, in the layout the library reads best,
    // once per session, side by side in one buffer on huge pages (page_memory.h).
    std::vector<uint64_t> packed_bytes(a_.steps()->size(), 0);
    std::vector<uint64_t> packed_offset(a_.steps()->size(), 0);
    uint64_t total = 0;
    for (uint32_t s = 0; s < a_.steps()->size(); ++s) {
      const format::Step& step = *a_.steps()->Get(s);
      if (step.kind() != format::StepKind::Library || step.inputs()->size() < 2) continue;
      if (!sig_.weights[step.inputs()->Get(1)]) continue;
      if (step.conv())
        packed_bytes[s] =
            packed_conv_weights_bytes(*step.conv(), conv_types(step, *a_.values()), layouts_[s].y_blocked);
      else if (step.matmul())
        packed_bytes[s] = packed_weights_bytes(*step.matmul(), sig_.values[step.inputs()->Get(1)].type,
                                               sig_.values[step.outputs()->Get(0)].type);
      packed_offset[s] = total;
      total += (packed_bytes[s] + 63) / 64 * 64;
    }
    packed_at_.assign(a_.steps()->size(), nullptr);
    if (total == 0) return Status::Ok();
    KILN_ASSIGN_OR_RETURN(packed_, PageMemory::allocate(total, "the packed weights"));
    for (uint32_t s = 0; s < a_.steps()->size(); ++s) {
      if (packed_bytes[s] == 0) continue;
      const format::Step& step = *a_.steps()->Get(s);
      const uint8_t* w = sig_.weights[step.inputs()->Get(1)];
      uint8_t* to = packed_.data() + packed_offset[s];
      if (step.conv()) {
        KILN_RETURN_IF_ERROR(
            pack_conv_weights(*step.conv(), conv_types(step, *a_.values()), w, to, threads_, layouts_[s].y_blocked));
      } else {
        KILN_RETURN_IF_ERROR(pack_weights(*step.matmul(), sig_.values[step.inputs()->Get(1)].type,
                                          sig_.values[step.outputs()->Get(0)].type, w, to, threads_));
      }
      packed_at_[s] = to;
    }
    return Status::Ok();
  }

  Status run_host(const std::vector<const uint8_t*>& inputs, const std::vector<uint8_t*>& outputs,
                  RunProfile* profile) const override;

  std::string code() const override { return kernels_.cpu(); }
  std::string schedule() const override {
    if (plan_.schedule.side_by_side_steps == 0) return {};
    size_t phases = 0;
    for (const StepPhase& phase : plan_.schedule.phases) phases += phase.side_by_side;
    return std::to_string(plan_.schedule.side_by_side_steps) + " of " + std::to_string(a_.steps()->size()) +
           " steps side by side, in " + std::to_string(phases) + (phases == 1 ? " phase" : " phases") + ", " +
           std::to_string(plan_.arena_bytes - a_.arena_bytes()) + " bytes of arena more for their values";
  }
  std::string step_implementation(size_t s) const override {
    const format::Step& step = *a_.steps()->Get(static_cast<uint32_t>(s));
    if (step.kind() == format::StepKind::Library && step.attention())
      return attention_implementation(*step.attention(), attention_types(step));
    if (step.kind() != format::StepKind::Library || !step.conv()) return {};
    return conv_implementation(*step.conv(), conv_types(step, *a_.values()), layouts_[s].y_blocked,
                               packed_at_[s] != nullptr);
  }

  AttentionTypes attention_types(const format::Step& step) const {
    auto type = [&](uint32_t v) { return a_.values()->Get(v)->dtype(); };
    const uint32_t last = step.inputs()->size() - 1;  // a backward's dO
    AttentionTypes types{type(step.inputs()->Get(0)), type(step.inputs()->Get(1)), type(step.inputs()->Get(2)),
                         type(step.outputs()->Get(0)), type(step.inputs()->Get(last))};
    if (const auto* written = step.attention()->gradient_outputs())
      for (uint32_t i = 0; i < 3 && i < written->size(); ++i)
        types.gradients[i] = type(step.outputs()->Get(static_cast<uint32_t>(written->Get(i))));
    return types;
  }

  Status run_device(const std::vector<uint64_t>&, const std::vector<uint64_t>&, RunProfile*) const override {
    return make_error("run: device pointers need a CUDA artifact; this one targets " + a_.target()->str());
  }

  Status read_state(size_t index, uint8_t* to) const override {
    std::lock_guard<std::mutex> lock(state_mutex_);
    const std::vector<uint8_t>& bytes = state_.at(sig_.state_values[index]);
    std::memcpy(to, bytes.data(), bytes.size());
    return Status::Ok();
  }

  Status write_state(size_t index, const uint8_t* from) override {
    std::lock_guard<std::mutex> lock(state_mutex_);
    std::vector<uint8_t>& bytes = state_.at(sig_.state_values[index]);
    std::memcpy(bytes.data(), from, bytes.size());
    return Status::Ok();
  }

 private:
  const format::Artifact& a_;
  Signature sig_;
  KernelLibrary kernels_;
  mutable ArenaPool arenas_;
  std::vector<int> buffer_of_;             // per value
  PageMemory packed_;                      // every step's packed weights
  std::vector<const uint8_t*> packed_at_;  // per step: its packed weights in packed_, or null
  std::vector<StepLayout> layouts_;        // per step
  StepPlan plan_;
  std::unique_ptr<ThreadPool> pool_;
  int threads_ = 1;                      // the pool's and the caller's: what the matmul library may use too
  mutable std::mutex state_mutex_;       // runs of a model with state are serialized: each updates it
  mutable std::atomic<int> running_{0};  // runs between taking their arena and returning
  mutable std::map<uint32_t, std::vector<uint8_t>> state_;  // per state value
};

Status CpuExecutor::run_host(const std::vector<const uint8_t*>& inputs, const std::vector<uint8_t*>& outputs,
                             RunProfile* profile) const {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point started = profile ? Clock::now() : Clock::time_point{};  // read only to profile
  auto since_start = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(t - started).count();
  };
  // Times step s (or, as the last, the copies at the end) into the profile, when there is
  // one. Steps that run side by side write their own entries from their own threads.
  auto timed = [&](uint32_t s, auto&& body) {
    if (!profile) return body();
    const Clock::time_point begin = Clock::now();
    auto status = body();
    const Clock::time_point end = Clock::now();
    profile->steps[s] = {since_start(begin), std::chrono::duration<double, std::milli>(end - begin).count()};
    return status;
  };
  if (profile) *profile = {0, std::vector<StepTime>(a_.steps()->size() + 1), "host steady_clock around each step"};
  std::vector<uint8_t*> where(sig_.values.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i)
    where[sig_.input_values[i]] = const_cast<uint8_t*>(inputs[i]);  // kernels only read inputs
  std::unique_lock<std::mutex> state_lock(state_mutex_, std::defer_lock);
  if (!sig_.state_values.empty()) state_lock.lock();
  // Where other runs of the model are under way, the cores are busy with them: this run
  // takes its steps one after another (phase by phase, in an order the phases allow)
  // rather than waiting on threads that other runs hold.
  struct Running {
    std::atomic<int>& count;
    bool alone;
    explicit Running(std::atomic<int>& c) : count(c), alone(c.fetch_add(1) == 0) {}
    ~Running() { count.fetch_sub(1); }
  } running(running_);
  KILN_ASSIGN_OR_RETURN(ArenaPool::Lease lease, arenas_.take());
  uint8_t* arena = lease.get();
  for (uint32_t v = 0; v < sig_.values.size(); ++v) {
    if (sig_.weights[v]) where[v] = const_cast<uint8_t*>(sig_.weights[v]);
    if (state_.count(v)) where[v] = state_[v].data();
    int b = buffer_of_[v];
    if (b < 0) continue;
    const format::Buffer* buffer = a_.buffers()->Get(static_cast<uint32_t>(b));
    if (buffer->home() == format::Home::Arena)
      where[v] = arena + (plan_.own_offsets[v] >= 0 ? static_cast<uint64_t>(plan_.own_offsets[v]) : buffer->offset());
    if (buffer->home() == format::Home::State && buffer->state() >= 0)
      where[v] = state_[static_cast<uint32_t>(buffer->state())].data();
  }
  // Results in the arena are written straight into the caller's buffers: they live to
  // the end, so no other arena value uses their bytes. (A value returned twice, an
  // argument or a state update is copied at the end instead; a state update the caller
  // left out, null here, is not copied at all.)
  std::vector<char> redirected(sig_.values.size(), 0);
  for (size_t i = 0; i < outputs.size(); ++i) {
    uint32_t v = sig_.output_values[i];
    int b = buffer_of_[v];
    if (!outputs[i] || b < 0 || a_.buffers()->Get(static_cast<uint32_t>(b))->home() != format::Home::Arena ||
        redirected[v])
      continue;
    where[v] = outputs[i];
    redirected[v] = 1;
  }
  // Step s on `threads` threads of `pool`, or on the calling thread alone where `pool` is null.
  auto run_step = [&](uint32_t s, int threads, ThreadPool* pool) -> Status {
    const format::Step& step = *a_.steps()->Get(s);
    // Each thread's own, reused from step to step: steps side by side fill theirs at once.
    thread_local std::vector<uint8_t*> ptrs;
    ptrs.clear();
    for (uint32_t v : *step.inputs()) ptrs.push_back(where[v]);
    for (uint32_t v : *step.outputs()) ptrs.push_back(where[v]);
    Kernel kernel = layouts_[s].channel_layout != StepLayout::kPlain
                        ? kernels_.layout_kernel(s, layouts_[s].channel_layout)
                        : kernels_.kernel(s);
    Kernel partial = kernels_.partial_kernel(s);
    if (partial) ptrs.push_back(arena + step.scratch_offset());
    return timed(s, [&]() -> Status {
      if (step.kind() == format::StepKind::Library && step.attention())
        return step.attention()->gradient()
                   ? run_attention_gradient(*step.attention(), attention_types(step), ptrs.data(), threads, pool)
                   : run_attention(*step.attention(), attention_types(step), ptrs.data(), threads, pool);
      if (step.kind() == format::StepKind::Library && step.conv()) {
        return run_conv(*step.conv(), conv_types(step, *a_.values()), ptrs.data(), threads, packed_at_[s], layouts_[s],
                        pool);
      }
      if (step.kind() == format::StepKind::Library && packed_at_[s])
        return run_packed_matmul(*step.matmul(), sig_.values[step.inputs()->Get(0)].type,
                                 sig_.values[step.outputs()->Get(0)].type, packed_at_[s], ptrs.data(), threads, pool);
      if (step.kind() == format::StepKind::Library)
        return run_matmul(*step.matmul(), sig_.values[step.inputs()->Get(0)].type,
                          sig_.values[step.outputs()->Get(0)].type, ptrs.data(), threads, pool);
      uint8_t* const* args = ptrs.data();
      if (step.kind() == format::StepKind::Scatter) {
        kernel(args, 0, step.work_items());
        return Status::Ok();
      }
      if (!pool) {
        if (partial) partial(args, 0, step.partial_items());
        kernel(args, 0, step.work_items());
        return Status::Ok();
      }
      // A split step's parts first, one part per work item: each is long already.
      if (partial)
        pool->parallel_for(step.partial_items(), 1, [&](int64_t begin, int64_t end) { partial(args, begin, end); });
      pool->parallel_for(step.work_items(), kernel_grain(step),
                         [&](int64_t begin, int64_t end) { kernel(args, begin, end); });
      return Status::Ok();
    });
  };
  for (const StepPhase& phase : plan_.schedule.phases) {
    if (phase.side_by_side && running.alone) {
      KILN_RETURN_IF_ERROR(
          run_side_by_side(phase, *pool_, threads_, [&](uint32_t s) { return run_step(s, 1, nullptr); }));
      continue;
    }
    for (uint32_t s : phase.steps) KILN_RETURN_IF_ERROR(run_step(s, threads_, pool_.get()));
  }
  KILN_RETURN_IF_ERROR(timed(a_.steps()->size(), [&] {
    for (size_t i = 0; i < outputs.size(); ++i) {
      uint8_t* to = outputs[i];
      const uint8_t* from = where[sig_.output_values[i]];
      if (to && to != from) std::memcpy(to, from, static_cast<size_t>(sig_.value_bytes[sig_.output_values[i]]));
    }
    if (a_.state_copies())
      for (const format::StateCopy* c : *a_.state_copies())
        std::memcpy(state_[c->state()].data(), where[c->value()], state_[c->state()].size());
    return Status::Ok();
  }));
  if (profile) profile->total_ms = since_start(Clock::now());
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Executor>> load_executor(const format::ArtifactView& view, Signature signature,
                                                const Options& options) {
  KILN_ASSIGN_OR_RETURN(KernelLibrary kernels, KernelLibrary::load(view, signature));
  auto executor = std::make_unique<CpuExecutor>(view, std::move(signature), std::move(kernels));
  KILN_RETURN_IF_ERROR(executor->init(options));
  return std::unique_ptr<Executor>(std::move(executor));
}

}  // namespace kiln::runtime::cpu
