// What each part of kiln's pipelined softmax row schedule costs against memcpy, on the
// `softmax_4096` row of `kiln bench` (64M f32 in rows of 4096, all hardware threads).
// A hand-written AVX-512 model of the schedule (docs/architecture.md, CPU codegen) runs
// whole and with parts taken out, in alternation with the same memcpy and with kiln's own
// kernel, so every fraction comes from the same minutes of a noisy machine. The variants
// that take parts out compute wrong results on purpose: they price the parts. Not a test:
// `bazel run -c opt //bench:softmax_schedule`.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "bench/timing.h"
#include "compiler/compile.h"
#include "ir/parser.h"
#include "runtime/model.h"

#ifdef __AVX512F__
#include <immintrin.h>

namespace {

constexpr int64_t kLength = 4096;
constexpr int64_t kRows = (int64_t{64} << 20) / kLength;

// The same degree-6 exp as codegen/cpu/float_math.cc, 17 vector instructions.
__m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.f)), _mm512_set1_ps(89.f));
  const __m512 shift = _mm512_set1_ps(12582912.f + 254.f);
  __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504f), shift);
  __m512 n = _mm512_sub_ps(t, shift);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
  __m512 p = _mm512_set1_ps(0.0013843596680089831f);
  for (float c : {0.008374195545911789f, 0.04166800528764725f, 0.1666644662618637f, 0.49999988079071045f, 1.f, 1.f})
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
  __m512i bits = _mm512_castps_si512(t), half = _mm512_srai_epi32(bits, 1);
  __m512 low = _mm512_castsi512_ps(_mm512_slli_epi32(half, 23));
  __m512 high = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(bits, half), 23));
  return _mm512_mul_ps(_mm512_mul_ps(p, low), high);
}

float row_max(const float* in) {
  __m512 m0 = _mm512_set1_ps(-INFINITY), m1 = m0;
  for (int64_t j = 0; j < kLength; j += 32) {
    m0 = _mm512_max_ps(m0, _mm512_load_ps(in + j));
    m1 = _mm512_max_ps(m1, _mm512_load_ps(in + j + 16));
  }
  return _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
}

// Which parts of the schedule run.
struct Parts {
  bool exp = true;         // false: exp(v) becomes v
  bool max_pass = true;    // false: the row's maximum is taken as 0 without reading the row
  bool buffer = true;      // false: the output is computed from the input row, not from stored exps
  bool exp_twice = false;  // with buffer false: the output computes exp again, as a schedule without the buffer must
};

// kiln's schedule (docs/architecture.md): the pass over row r+1 first takes its maximum,
// then in one loop computes its exps into a buffer, streams out row r from the other
// buffer, and prefetches row r+2 into L2.
void softmax_rows(const float* x, float* y, int64_t rows, Parts parts) {
  alignas(64) static thread_local float buffers[2][kLength];
  float sum = 0, max = 0;
  for (int64_t r = -1; r < rows; ++r) {
    const bool more = r + 1 < rows, write = r >= 0;
    const float* in = x + std::min(r + 1, rows - 1) * kLength;  // the row whose exps this pass computes
    const float* ahead = x + std::min(r + 2, rows - 1) * kLength;
    const float* written_in = x + std::max<int64_t>(r, 0) * kLength;  // the row this pass writes
    float* out = y + std::max<int64_t>(r, 0) * kLength;
    float* stored = buffers[(r + 2) & 1];
    const float* written_from = parts.buffer ? buffers[(r + 1) & 1] : written_in;  // row r's exps, or its inputs
    const __m512 written_max = _mm512_set1_ps(max), inverse = _mm512_set1_ps(1.f / sum);
    max = more && parts.max_pass ? row_max(in) : 0.f;
    const __m512 in_max = _mm512_set1_ps(max);
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    for (int64_t j = 0; j < kLength; j += 32) {
      if (more) {
        _mm_prefetch(reinterpret_cast<const char*>(ahead + j), _MM_HINT_T1);
        _mm_prefetch(reinterpret_cast<const char*>(ahead + j + 16), _MM_HINT_T1);
        __m512 e0 = _mm512_sub_ps(_mm512_load_ps(in + j), in_max),
               e1 = _mm512_sub_ps(_mm512_load_ps(in + j + 16), in_max);
        if (parts.exp) e0 = exp16(e0), e1 = exp16(e1);
        if (parts.buffer) {
          _mm512_store_ps(stored + j, e0);
          _mm512_store_ps(stored + j + 16, e1);
        }
        s0 = _mm512_add_ps(s0, e0);
        s1 = _mm512_add_ps(s1, e1);
      }
      if (!write) continue;
      __m512 o0 = _mm512_load_ps(written_from + j), o1 = _mm512_load_ps(written_from + j + 16);
      if (!parts.buffer && parts.exp_twice)
        o0 = exp16(_mm512_sub_ps(o0, written_max)), o1 = exp16(_mm512_sub_ps(o1, written_max));
      _mm512_stream_ps(out + j, _mm512_mul_ps(o0, inverse));
      _mm512_stream_ps(out + j + 16, _mm512_mul_ps(o1, inverse));
    }
    sum = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
  }
  _mm_sfence();
}

// Splits rows across threads as kiln's runtime does: one contiguous block each.
void on_threads(int threads, int64_t rows, const std::function<void(int64_t, int64_t)>& fn) {
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back([=, &fn] { fn(rows * t / threads, rows * (t + 1) / threads); });
  fn(0, rows / threads);
  for (auto& th : pool) th.join();
}

struct Aligned {
  explicit Aligned(size_t bytes) : p(static_cast<float*>(std::aligned_alloc(64, bytes)), &std::free) {
    if (!p) throw std::bad_alloc();
    std::memset(p.get(), 0, bytes);
  }
  std::unique_ptr<float, decltype(&std::free)> p;
};

}  // namespace

int main() {
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const size_t bytes = static_cast<size_t>(kRows * kLength) * 4;
  Aligned x(bytes), y(bytes), copy(bytes);
  uint64_t s = 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < kRows * kLength; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x.p.get()[i] = static_cast<float>(s >> 40) / static_cast<float>(1 << 24) * 2 - 1;  // as kiln bench fills inputs
  }
  auto graph = kiln::ir::parse(
      fmt::format(
          "graph @softmax(%x: f32[{0},{1}]) {{\n  %y: f32[{0},{1}] = softmax(%x) {{axis=-1}}\n  return %y\n}}\n", kRows,
          kLength),
      "softmax.kir");
  if (!graph.ok()) return fmt::print(stderr, "{}\n", graph.error().message), 1;
  auto artifact = kiln::compile_to_artifact(*graph, {});
  if (!artifact.ok()) return fmt::print(stderr, "{}\n", artifact.error().message), 1;
  auto model = kiln::runtime::Model::load_bytes(*artifact, {threads});
  if (!model.ok()) return fmt::print(stderr, "{}\n", model.error().message), 1;
  std::map<std::string, std::span<const uint8_t>> in = {{"x", {reinterpret_cast<const uint8_t*>(x.p.get()), bytes}}};
  std::map<std::string, std::span<uint8_t>> out = {{"y", {reinterpret_cast<uint8_t*>(y.p.get()), bytes}}};

  struct Candidate {
    std::string name;
    std::function<void()> run;
  };
  auto model_run = [&](Parts parts) {
    return [&, parts] {
      on_threads(threads, kRows, [&](int64_t a, int64_t b) {
        softmax_rows(x.p.get() + a * kLength, y.p.get() + a * kLength, b - a, parts);
      });
    };
  };
  std::vector<Candidate> candidates = {
      {"memcpy",
       [&] {
         on_threads(threads, kRows, [&](int64_t a, int64_t b) {
           std::memcpy(copy.p.get() + a * kLength, x.p.get() + a * kLength, (b - a) * kLength * 4);
         });
       }},
      {"kiln's softmax kernel", [&] { (void)(*model)->run(in, out); }},
      {"model of the schedule", model_run({})},
      {"  without exp", model_run({.exp = false})},
      {"  without exp, max pass", model_run({.exp = false, .max_pass = false})},
      {"  without exp, buffer", model_run({.exp = false, .buffer = false})},
      {"  without exp, max pass, buffer", model_run({.exp = false, .max_pass = false, .buffer = false})},
      {"  exp twice instead of the buffer", model_run({.buffer = false, .exp_twice = true})},
  };
  // The whole model computes softmax: check it against kiln's kernel before timing it.
  std::vector<float> from_kiln(static_cast<size_t>(kRows * kLength));
  if (auto st = (*model)->run(in, out); !st.ok()) return fmt::print(stderr, "{}\n", st.error().message), 1;
  std::memcpy(from_kiln.data(), y.p.get(), bytes);
  candidates[2].run();
  double worst = 0;
  for (int64_t i = 0; i < kRows * kLength; ++i)
    worst = std::max(worst, std::abs(double{y.p.get()[i]} - from_kiln[i]) / from_kiln[i]);
  fmt::print("the model's softmax against kiln's: largest relative difference {:.2g}\n", worst);
  std::vector<std::function<void()>> runs;
  for (const Candidate& c : candidates) runs.push_back(c.run);
  fmt::print("softmax over rows of {}, f32[{},{}], {} threads; 60 rounds in turn\n", kLength, kRows, kLength, threads);
  auto t = kiln::bench::time_interleaved(60, runs);
  fmt::print("{:<34} {:>9} {:>17}\n", "candidate", "median ms", "fraction of copy");
  for (size_t i = 0; i < candidates.size(); ++i)
    fmt::print("{:<34} {:>9.2f} {:>17.3f}\n", candidates[i].name, t.timings[i].median_ms, t.median_ratio(0, i));
  return 0;
}

#else
int main() {
  fmt::print("softmax_schedule models the AVX-512 kernels; this machine's compiler target has no AVX-512\n");
  return 0;
}
#endif
