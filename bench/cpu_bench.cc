// CPU backend figures: medians of timed runs after warm-up, each compared with its
// physical or library reference timed in alternation with it (the ratio is the median of
// the per-pair ratios). Not a test: `bazel run -c opt //bench:cpu_bench`.
#include <cblas.h>
#include <fmt/format.h>
#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "bench/timing.h"
#include "compiler/compile.h"
#include "ir/parser.h"
#include "runtime/model.h"

void hand_coscos(const float* x, float* y, int64_t n);
void hand_softmax(const float* x, float* y, int64_t rows, int64_t length);

namespace {

double median_seconds(int runs, const std::function<void()>& fn) {
  return kiln::bench::time_runs(runs, fn).median_ms / 1e3;
}

std::shared_ptr<kiln::runtime::Model> compile(const std::string& text, int threads,
                                              const kiln::CompileOptions& options = {}) {
  auto g = kiln::ir::parse(text, "bench.kir");
  if (!g.ok()) throw std::runtime_error(g.error().message);
  auto artifact = kiln::compile_to_artifact(*g, options);
  if (!artifact.ok()) throw std::runtime_error(artifact.error().message);
  auto model = kiln::runtime::Model::load_bytes(*artifact, {threads});
  if (!model.ok()) throw std::runtime_error(model.error().message);
  return *model;
}

kiln::runtime::HostTensor f32(const std::string& name, std::vector<int64_t> shape, float fill) {
  kiln::runtime::HostTensor t{{name, kiln::runtime::ElementType::F32, std::move(shape)}, {}};
  t.data.resize(static_cast<size_t>(t.info.bytes()));
  auto* p = reinterpret_cast<float*>(t.data.data());
  for (int64_t i = 0; i < t.info.elements(); ++i) p[i] = fill + 1e-3f * static_cast<float>(i % 1000);
  return t;
}

void parallel_memcpy(uint8_t* to, const uint8_t* from, size_t bytes, int threads) {
  std::vector<std::thread> pool;
  size_t chunk = bytes / static_cast<size_t>(threads);
  for (int t = 0; t < threads; ++t)
    pool.emplace_back(
        [=] { std::memcpy(to + t * chunk, from + t * chunk, t + 1 == threads ? bytes - t * chunk : chunk); });
  for (auto& th : pool) th.join();
}

}  // namespace

int main() {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  fmt::print("machine: {} hardware threads\n\n", cores);

  {  // 1. A memory-bound fused kernel against memcpy, both cores.
    const int64_t n = int64_t{64} << 20;
    auto model = compile(
        "graph @affine(%x: f32[67108864]) {\n  %two: f32[] = constant {value=2.0}\n  %one: f32[] = constant "
        "{value=1.0}\n"
        "  %a: f32[67108864] = mul(%x, %two)\n  %y: f32[67108864] = add(%a, %one)\n  return %y\n}\n",
        cores);
    auto x = f32("x", {n}, 1.0f);
    std::vector<uint8_t> y(static_cast<size_t>(n) * 4), copy(static_cast<size_t>(n) * 4);
    std::map<std::string, kiln::runtime::HostTensor> in = {{"x", x}};
    std::map<std::string, std::span<uint8_t>> out = {{"y", std::span<uint8_t>(y)}};
    auto t = kiln::bench::time_paired(
        20, [&] { (void)model->run(in, out); },
        [&] { parallel_memcpy(copy.data(), x.data.data(), copy.size(), cores); });
    double bytes = 2.0 * static_cast<double>(n) * 4;
    fmt::print(
        "y = x*2 + 1, 64M f32 ({} threads): kernel {:.2f} ms ({:.1f} GB/s), memcpy {:.2f} ms ({:.1f} GB/s), fraction "
        "of memcpy {:.3f}\n",
        cores, t.a.median_ms, bytes / t.a.median_ms / 1e6, t.b.median_ms, bytes / t.b.median_ms / 1e6, t.median_ratio);
  }
  {  // 2. cos(cos(x)): compute-bound; one thread each.
    const int64_t n = int64_t{16} << 20;
    auto model = compile(
        "graph @coscos(%x: f32[16777216]) {\n  %a: f32[16777216] = cos(%x)\n  %y: f32[16777216] = cos(%a)\n  return "
        "%y\n}\n",
        1);
    auto x = f32("x", {n}, 0.5f);
    std::vector<uint8_t> y(static_cast<size_t>(n) * 4);
    std::vector<float> hand(static_cast<size_t>(n));
    std::map<std::string, kiln::runtime::HostTensor> in = {{"x", x}};
    std::map<std::string, std::span<uint8_t>> out = {{"y", std::span<uint8_t>(y)}};
    auto t = kiln::bench::time_paired(
        20, [&] { hand_coscos(reinterpret_cast<const float*>(x.data.data()), hand.data(), n); },
        [&] { (void)model->run(in, out); });
    fmt::print(
        "cos(cos(x)), 16M f32 (1 thread): kiln {:.2f} ms, g++ -O3 -march=native -ffast-math loop {:.2f} ms, ratio "
        "{:.3f}\n",
        t.b.median_ms, t.a.median_ms, t.median_ratio);
  }
  {  // 2b. softmax over rows of 4096 that stay in cache (512 KiB): compute only; one thread each.
    const int64_t rows = 32, length = 4096;
    auto model =
        compile("graph @softmax(%x: f32[32,4096]) {\n  %y: f32[32,4096] = softmax(%x) {axis=-1}\n  return %y\n}\n", 1);
    auto x = f32("x", {rows, length}, 0.5f);
    std::vector<uint8_t> y(static_cast<size_t>(rows * length) * 4);
    std::vector<float> hand(static_cast<size_t>(rows * length));
    std::map<std::string, kiln::runtime::HostTensor> in = {{"x", x}};
    std::map<std::string, std::span<uint8_t>> out = {{"y", std::span<uint8_t>(y)}};
    auto t = kiln::bench::time_paired(
        200, [&] { hand_softmax(reinterpret_cast<const float*>(x.data.data()), hand.data(), rows, length); },
        [&] { (void)model->run(in, out); });
    fmt::print(
        "softmax, rows of 4096 in cache, f32[32,4096] (1 thread): kiln {:.3f} ms ({:.2f} ns/element), g++ -O3 "
        "-march=native -ffast-math loop {:.3f} ms, ratio {:.3f}\n",
        t.b.median_ms, t.b.median_ms * 1e6 / static_cast<double>(rows * length), t.a.median_ms, t.median_ratio);
  }
  {  // 3. matmul 1024^3 through an artifact against cblas_sgemm.
    auto model = compile(
        "graph @mm(%a: f32[1024,1024], %b: f32[1024,1024]) {\n  %c: f32[1024,1024] = matmul(%a, %b)\n  return %c\n}\n",
        cores);
    auto a = f32("a", {1024, 1024}, 0.1f), b = f32("b", {1024, 1024}, 0.2f);
    std::vector<uint8_t> c(1024 * 1024 * 4);
    std::map<std::string, kiln::runtime::HostTensor> in = {{"a", a}, {"b", b}};
    std::map<std::string, std::span<uint8_t>> out = {{"c", std::span<uint8_t>(c)}};
    auto t = kiln::bench::time_paired(
        20, [&] { (void)model->run(in, out); },
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1024, 1024, 1024, 1.0f,
                      reinterpret_cast<const float*>(a.data.data()), 1024,
                      reinterpret_cast<const float*>(b.data.data()), 1024, 0.0f, reinterpret_cast<float*>(c.data()),
                      1024);
        });
    fmt::print("matmul 1024^3: artifact {:.2f} ms ({:.1f} GFLOP/s), cblas_sgemm {:.2f} ms, fraction of sgemm {:.3f}\n",
               t.a.median_ms, 2e-6 * 1024 * 1024 * 1024 / t.a.median_ms, t.b.median_ms, t.median_ratio);
  }
  {  // 4. Per-run overhead: 10 unfused steps on tiny tensors.
    std::string text = "graph @ten(%x: f32[4]) {\n";
    std::string prev = "x";
    for (int i = 0; i < 10; ++i) {
      text += fmt::format("  %v{}: f32[4] = {}(%{})\n", i, i % 2 ? "neg" : "abs", prev);
      prev = fmt::format("v{}", i);
    }
    text += fmt::format("  return %{}\n}}\n", prev);
    kiln::CompileOptions unfused;
    unfused.fuse = false;
    auto model = compile(text, cores, unfused);
    auto x = f32("x", {4}, 1.0f);
    std::vector<uint8_t> y(16);
    std::map<std::string, kiln::runtime::HostTensor> in = {{"x", x}};
    std::map<std::string, std::span<uint8_t>> out = {{prev, std::span<uint8_t>(y)}};
    double t = median_seconds(2000, [&] { (void)model->run(in, out); });
    fmt::print("per-run overhead, 10 steps on f32[4]: {:.2f} us per run\n", t * 1e6);
  }
  {  // 5. Load time of an artifact with 10 MB of weights.
    auto g = kiln::ir::parse(
        "graph @big(%x: f32[1,2560], param %w: f32[2560,1024]) {\n  %y: f32[1,1024] = matmul(%x, %w)\n  return %y\n}\n",
        "big.kir");
    kiln::CompileOptions options;
    options.weights["w"] =
        kiln::ir::Tensor::from_doubles({kiln::ir::DType::F32, {2560, 1024}}, std::vector<double>(2560 * 1024, 0.5));
    auto artifact = kiln::compile_to_artifact(*g, options);
    if (!artifact.ok()) throw std::runtime_error(artifact.error().message);
    double t = median_seconds(20, [&] {
      auto m = kiln::runtime::Model::load_bytes(*artifact);
      (void)m;
    });
    fmt::print("load and verify, {:.1f} MB artifact with 10 MB of weights: {:.2f} ms\n", artifact->size() / 1e6,
               t * 1e3);
  }
  return 0;
}
