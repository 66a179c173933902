// The emulator's threads: each CUDA thread of a block is a fiber on the calling thread;
// a fiber runs until it waits at a barrier, and a barrier opens when every thread of its
// scope that has not returned has arrived, as on the GPU. Blocks run one after another,
// so a program's __shared__ arrays (static in the host build) are the running block's.
#include <sys/mman.h>
#include <algorithm>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/cuda_emulator/emulator.h"

// Saves the callee-saved registers and the stack pointer (to *from), and resumes the
// fiber whose stack pointer is `to` (x86-64 System V). A switch of its own, since
// ucontext's makes a system call for the signal mask each time. The SSE and x87 control
// words, which nothing in the emulator or its programs changes, are not switched: saving
// and loading them was most of a switch's time.
extern "C" void kiln_emu_switch(void** from, void* to);
asm(R"(
  .text
  .globl kiln_emu_switch
  .type kiln_emu_switch, @function
kiln_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size kiln_emu_switch, .-kiln_emu_switch
)");

namespace kiln::cuda_emulator {
namespace {

struct Dim3 {
  unsigned x, y, z;
};
struct ThreadState {  // the program's kiln_emu_thread
  Dim3 thread, block, block_dim, grid_dim;
};
struct Api {  // the program's kiln_emu_api
  ThreadState* const* current;
  void (*sync)();
  int (*sync_or)(int);
  void (*exchange)(const void* mine, void* all, unsigned bytes);
  void (*shuffle)(const void* mine, void* theirs, unsigned bytes, unsigned lane);
  void (*fault)(const char* what);
  void* (*dynamic_shared)();
};

constexpr size_t kStackBytes = 256 << 10;
constexpr unsigned kExchangeBytes = 64;

struct Barrier {
  unsigned arrived = 0, generation = 0, members = 0;
  int any = 0, result = 0;
  uint32_t lanes = 0;  // a warp's: those of its lanes still running
};

struct Fiber {
  void* sp = nullptr;
  ThreadState state;
  bool done = false;
  unsigned warp = 0, lane = 0;
};

struct Block {
  std::vector<Fiber> fibers;
  std::vector<Barrier> warp_barriers;
  std::vector<char> exchanges;  // per warp, 32 lanes' slots side by side
  Barrier block_barrier;
  void* scheduler_sp = nullptr;
  Fiber* running = nullptr;
  uint64_t progress = 0;  // arrivals, openings and returns: a pass without any is a deadlock
  const Kernel* kernel = nullptr;
  void** params = nullptr;
};

Block* g_block = nullptr;
ThreadState* g_current = nullptr;
char* g_stacks = nullptr;
size_t g_stack_count = 0;

// Hands over to the next fiber of the block that has not returned, or, past the last one,
// back to the scheduler (which ends its pass there): one switch per waiting fiber.
void yield() {
  Block& block = *g_block;
  Fiber* self = block.running;
  for (Fiber* f = self + 1; f != block.fibers.data() + block.fibers.size(); ++f) {
    if (f->done) continue;
    block.running = f;
    g_current = &f->state;
    kiln_emu_switch(&self->sp, f->sp);
    return;
  }
  kiln_emu_switch(&self->sp, block.scheduler_sp);
}

// Waits until `b` opens; the last of its members to arrive opens it and goes on.
void arrive_and_wait(Barrier& b) {
  Block& block = *g_block;
  ++block.progress;
  const unsigned generation = b.generation;
  if (++b.arrived >= b.members) {
    b.arrived = 0;
    b.result = b.any;
    b.any = 0;
    ++b.generation;
    return;
  }
  while (b.generation == generation) yield();
}

void sync() { arrive_and_wait(g_block->block_barrier); }

int sync_or(int predicate) {
  Barrier& b = g_block->block_barrier;
  b.any |= predicate != 0;
  arrive_and_wait(b);
  return b.result;
}

// Every lane of the warp leaves `bytes` of its own in its slot of the warp's exchange
// area; when all have, `take` reads the slots (lanes past the block's end, or returned,
// read as zeros), and the warp waits again before any lane can write its slot anew.
template <class Take>
void exchange_through_slots(const void* mine, unsigned bytes, Take take) {
  if (bytes > kExchangeBytes) {  // the device header's own use: a fragment is 24 bytes
    std::fprintf(stderr, "kiln CUDA emulator: an exchange of %u bytes (at most %u)\n", bytes, kExchangeBytes);
    std::abort();
  }
  Block& block = *g_block;
  Fiber& self = *block.running;
  const size_t lane = self.lane;
  char* slots = block.exchanges.data() + static_cast<size_t>(self.warp) * 32 * kExchangeBytes;
  std::memcpy(slots + lane * bytes, mine, bytes);
  Barrier& b = block.warp_barriers[self.warp];
  arrive_and_wait(b);
  take(static_cast<const char*>(slots), b.lanes);
  arrive_and_wait(b);
}

// Each lane gets all 32 lanes' bytes (ldmatrix, mma).
void exchange(const void* mine, void* all, unsigned bytes) {
  exchange_through_slots(mine, bytes, [&](const char* slots, uint32_t lanes) {
    // 8 bytes at a time (32 slots are a multiple of 8 bytes): a memcpy of unknown size
    // became `rep movs`, slow to start at these sizes.
    char* out = static_cast<char*>(all);
    for (size_t k = 0; k < 32 * bytes; k += 8) {
      uint64_t word;
      std::memcpy(&word, slots + k, 8);
      std::memcpy(out + k, &word, 8);
    }
    if (lanes != ~uint32_t{0})
      for (size_t l = 0; l < 32; ++l)
        if (!(lanes >> l & 1)) std::memset(out + l * bytes, 0, bytes);
  });
}

// Each lane gets one lane's bytes (__shfl_sync, __shfl_xor_sync).
void shuffle(const void* mine, void* theirs, unsigned bytes, unsigned lane) {
  exchange_through_slots(mine, bytes, [&](const char* slots, uint32_t lanes) {
    if (lanes >> lane & 1) std::memcpy(theirs, slots + lane * bytes, bytes);
    else std::memset(theirs, 0, bytes);
  });
}

// A fault a GPU would report (a misaligned address): the grid's launch fails with it.
std::string g_fault;
void fault(const char* what) {
  if (g_fault.empty()) g_fault = what;
}

// The launch's dynamic shared memory (cuLaunchKernel's sharedMemBytes), filled with 0xff
// bytes (NaN as floats) so that a kernel reading what it did not write sees it, and a
// guard past it, whose bytes a kernel that writes past its allocation changes (a GPU
// would write another array's memory, or fault).
constexpr size_t kSharedGuardBytes = 4096;
constexpr char kSharedGuard = static_cast<char>(0xa5);
std::vector<char> g_dynamic_shared;
void* dynamic_shared() { return g_dynamic_shared.empty() ? nullptr : g_dynamic_shared.data(); }

const Api kApi = {&g_current, sync, sync_or, exchange, shuffle, fault, dynamic_shared};

void fiber_main() {
  Block& block = *g_block;
  block.kernel->entry(block.params);
  Fiber& self = *block.running;
  self.done = true;
  ++block.progress;
  block.warp_barriers[self.warp].lanes &= ~(uint32_t{1} << self.lane);
  // A returned thread no longer counts at barriers: open those it held back.
  for (Barrier* b : {&block.block_barrier, &block.warp_barriers[self.warp]}) {
    --b->members;
    if (b->arrived > 0 && b->arrived >= b->members) {
      b->arrived = 0;
      b->result = b->any;
      b->any = 0;
      ++b->generation;
    }
  }
}

[[noreturn]] void fiber_start() {
  fiber_main();
  void* unused;
  kiln_emu_switch(&unused, g_block->scheduler_sp);
  __builtin_unreachable();
}

// A new fiber's stack as kiln_emu_switch leaves one: six registers
// (zero) and fiber_start as the return address, 16-byte aligned as at a call. Fiber i's
// top sits (i mod 1024) cache lines below its stack's end: tops a multiple of 256 KiB
// apart would all fall in the same cache sets, and each switch would miss.
void* initial_stack(char* stack, size_t fiber) {
  char* end = stack + kStackBytes - (fiber % 1024) * 64;
  auto* top = reinterpret_cast<uint64_t*>(reinterpret_cast<uintptr_t>(end) & ~uintptr_t{15});
  uint64_t* sp = top - 2;
  sp[1] = 0;
  sp[0] = reinterpret_cast<uint64_t>(&fiber_start);
  sp -= 6;
  for (int r = 0; r < 6; ++r) sp[r] = 0;
  return sp;
}

char* stacks(size_t count) {
  if (count > g_stack_count) {
    if (g_stacks) munmap(g_stacks, g_stack_count * kStackBytes);
    void* p =
        mmap(nullptr, count * kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    g_stacks = p == MAP_FAILED ? nullptr : static_cast<char*>(p);
    g_stack_count = g_stacks ? count : 0;
  }
  return g_stacks;
}

std::string run_block(Block& block, Dim3 block_index, Dim3 block_dim, Dim3 grid_dim) {
  const size_t threads = static_cast<size_t>(block_dim.x) * block_dim.y * block_dim.z;
  char* stack = stacks(threads);
  if (!stack) return "no memory for the fibers' stacks";
  block.fibers.assign(threads, Fiber{});
  const size_t warps = (threads + 31) / 32;
  block.warp_barriers.assign(warps, Barrier{});
  for (size_t w = 0; w < warps; ++w) {
    Barrier& b = block.warp_barriers[w];
    b.members = static_cast<unsigned>(std::min<size_t>(32, threads - w * 32));
    b.lanes = b.members == 32 ? ~uint32_t{0} : (uint32_t{1} << b.members) - 1;
  }
  block.exchanges.resize(warps * 32 * kExchangeBytes);
  block.block_barrier = Barrier{};
  block.block_barrier.members = static_cast<unsigned>(threads);
  for (size_t i = 0; i < threads; ++i) {
    Fiber& f = block.fibers[i];
    const unsigned x = static_cast<unsigned>(i % block_dim.x), y = static_cast<unsigned>(i / block_dim.x % block_dim.y),
                   z = static_cast<unsigned>(i / block_dim.x / block_dim.y);
    f.state = {{x, y, z}, block_index, block_dim, grid_dim};
    f.warp = static_cast<unsigned>(i / 32);
    f.lane = static_cast<unsigned>(i % 32);
    f.sp = initial_stack(stack + i * kStackBytes, i);
  }
  // A pass resumes the fibers in order; each that waits hands over to the next itself, and
  // control comes back here after the last, or when one returns.
  size_t live = threads;
  while (live > 0) {
    const uint64_t before = block.progress;
    for (size_t i = 0; i < threads; ++i) {
      Fiber& f = block.fibers[i];
      if (f.done) continue;
      block.running = &f;
      g_current = &f.state;
      kiln_emu_switch(&block.scheduler_sp, f.sp);
      i = static_cast<size_t>(block.running - block.fibers.data());
    }
    live = static_cast<size_t>(
        std::count_if(block.fibers.begin(), block.fibers.end(), [](const Fiber& f) { return !f.done; }));
    if (live > 0 && block.progress == before)
      return std::to_string(live) + " threads of block (" + std::to_string(block_index.x) + ", " +
             std::to_string(block_index.y) + ", " + std::to_string(block_index.z) +
             ") wait at a barrier that the others never reach";
  }
  return "";
}

}  // namespace

void bind_program(void (*bind)(const void* api)) { bind(&kApi); }

std::string run_grid(const Kernel& kernel, const std::vector<std::vector<char>>& params, unsigned grid[3],
                     unsigned block_dims[3], unsigned shared_bytes) {
  g_dynamic_shared.assign(shared_bytes + kSharedGuardBytes, kSharedGuard);
  std::fill_n(g_dynamic_shared.begin(), shared_bytes, static_cast<char>(0xff));
  auto guard_intact = [&] {
    return std::all_of(g_dynamic_shared.begin() + shared_bytes, g_dynamic_shared.end(),
                       [](char c) { return c == kSharedGuard; });
  };
  std::vector<std::vector<char>> values = params;
  std::vector<void*> pointers;
  for (auto& v : values) pointers.push_back(v.data());
  Block block;
  block.kernel = &kernel;
  block.params = pointers.data();
  g_block = &block;
  const Dim3 grid_dim = {grid[0], grid[1], grid[2]}, block_dim = {block_dims[0], block_dims[1], block_dims[2]};
  std::string error;
  g_fault.clear();
  for (unsigned z = 0; z < grid[2] && error.empty(); ++z)
    for (unsigned y = 0; y < grid[1] && error.empty(); ++y)
      for (unsigned x = 0; x < grid[0] && error.empty(); ++x) {
        error = run_block(block, {x, y, z}, block_dim, grid_dim);
        if (error.empty()) error = g_fault;
        if (error.empty() && !guard_intact())
          error = "wrote past its " + std::to_string(shared_bytes) + " bytes of dynamic shared memory";
      }
  g_block = nullptr;
  g_current = nullptr;
  if (!error.empty()) return "kernel " + kernel.name + ": " + error;
  return "";
}

}  // namespace kiln::cuda_emulator
