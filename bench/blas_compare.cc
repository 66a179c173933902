// Which CPU matmul library runs the models suite's GEMM shapes fastest on this machine:
// OpenBLAS (what the runtime links), BLIS and oneDNN, each opened at run time (no build
// dependency; a library that is not installed is skipped and said so), all on the same
// threads, timed in alternation shape by shape.
//
//   bazel run -c opt //bench:blas_compare [-- --threads=N --repeat=N]
//
// Libraries: libopenblas.so.0 (Debian's libopenblas0), libblis.so.4 (libblis4-*),
// libdnnl.so.2 (libdnnl2). Batched shapes are a loop of calls, as the runtime makes them.
#include <dlfcn.h>
#include <fmt/format.h>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench/timing.h"

namespace {

// cblas' enums, as every CBLAS spells them.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                            int);
using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                          float, float*, int64_t);

// One GEMM shape of the suite: C[m,n] = op(A) op(B), `batch` times.
struct Shape {
  std::string where;
  int64_t batch, m, n, k;
  bool trans_a = false;
};

// A library's sgemm, behind one signature.
struct Library {
  std::string name;
  std::function<void(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c)> sgemm;
};

void* open_library(const char* file, std::vector<std::string>& missing) {
  void* handle = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (!handle) missing.push_back(fmt::format("{} ({})", file, dlerror()));
  return handle;
}

std::vector<Library> open_libraries(int threads, std::vector<std::string>& missing) {
  std::vector<Library> libraries;
  auto cblas = [](void* h, const char* name) -> Library {
    auto sgemm = reinterpret_cast<CblasSgemm>(dlsym(h, "cblas_sgemm"));
    return {name, [sgemm](bool ta, int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
              sgemm(kRowMajor, ta ? kTrans : kNoTrans, kNoTrans, static_cast<int>(m), static_cast<int>(n),
                    static_cast<int>(k), 1.0f, a, static_cast<int>(ta ? m : k), b, static_cast<int>(n), 0.0f, c,
                    static_cast<int>(n));
            }};
  };
  if (void* h = open_library("libopenblas.so.0", missing)) {
    if (auto set = reinterpret_cast<void (*)(int)>(dlsym(h, "openblas_set_num_threads"))) set(threads);
    auto config = reinterpret_cast<const char* (*)()>(dlsym(h, "openblas_get_config"));
    libraries.push_back(cblas(h, "OpenBLAS"));
    if (config) libraries.back().name += fmt::format(" ({})", config());
  }
  if (void* h = open_library("libblis.so.4", missing)) {
    if (auto set = reinterpret_cast<void (*)(long)>(dlsym(h, "bli_thread_set_num_threads"))) set(threads);
    libraries.push_back(cblas(h, "BLIS"));
  }
  if (void* h = open_library("libdnnl.so.2", missing)) {
    auto sgemm = reinterpret_cast<DnnlSgemm>(dlsym(h, "dnnl_sgemm"));
    if (sgemm)
      libraries.push_back(
          {"oneDNN", [sgemm](bool ta, int64_t m, int64_t n, int64_t k, const float* a, const float* b, float* c) {
             sgemm(ta ? 'T' : 'N', 'N', m, n, k, 1.0f, a, ta ? m : k, b, n, 0.0f, c, n);
           }});
  }
  return libraries;
}

// The models suite's GEMMs (bench/models.cc at full size), as the runtime calls them after
// the compiler folds batch dims only A has into M (a transposed B is left out: every
// shape here reads B as stored).
std::vector<Shape> suite_shapes() {
  return {
      {"gpt2 qkv", 1, 4096, 2304, 768},
      {"gpt2 attention out", 1, 4096, 768, 768},
      {"gpt2 mlp up", 1, 4096, 3072, 768},
      {"gpt2 mlp down", 1, 4096, 768, 3072},
      {"gpt2 scores q @ k", 96, 512, 512, 64},
      {"gpt2 probs v", 96, 512, 64, 512},
      {"gpt2 weight grad (per batch)", 8, 768, 3072, 512, true},
      {"gpt2 weight grad (K = B.T)", 1, 768, 3072, 4096, true},
      {"bert q/k/v/out", 1, 2048, 768, 768},
      {"bert ffn up", 1, 2048, 3072, 768},
      {"bert ffn down", 1, 2048, 768, 3072},
      {"bert scores", 192, 128, 128, 64},
      {"mlp 784-512", 1, 128, 512, 784},
      {"mlp 512-512", 1, 128, 512, 512},
      {"square 4096", 1, 4096, 4096, 4096},
  };
}

int flag(int argc, char** argv, const char* name, int fallback) {
  const std::string prefix = fmt::format("--{}=", name);
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return std::atoi(argv[i] + prefix.size());
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = flag(argc, argv, "threads", 2), repeat = flag(argc, argv, "repeat", 5);
  // oneDNN and BLIS's OpenMP build take their threads from OpenMP, read when they start.
  setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
  std::vector<std::string> missing;
  std::vector<Library> libraries = open_libraries(threads, missing);
  for (const std::string& m : missing) fmt::print("skipped: {}\n", m);
  if (libraries.empty()) return 1;
  fmt::print("{} threads, {} rounds per shape (libraries in alternation); GFLOP/s, median\n", threads, repeat);
  for (const Library& l : libraries) fmt::print("  {}\n", l.name);
  fmt::print("{:<30} {:>5} {:>6} {:>6} {:>6}", "shape", "batch", "m", "n", "k");
  for (const Library& l : libraries) fmt::print(" {:>10}", l.name.substr(0, l.name.find(' ')));
  fmt::print("\n");
  for (const Shape& s : suite_shapes()) {
    std::vector<float> a(static_cast<size_t>(s.batch * s.m * s.k), 0.5f),
        b(static_cast<size_t>(s.batch * s.k * s.n), 0.25f), c(static_cast<size_t>(s.batch * s.m * s.n));
    std::vector<std::function<void()>> candidates;
    for (const Library& l : libraries)
      candidates.push_back([&, l] {
        for (int64_t p = 0; p < s.batch; ++p)
          l.sgemm(s.trans_a, s.m, s.n, s.k, a.data() + p * s.m * s.k, b.data() + p * s.k * s.n,
                  c.data() + p * s.m * s.n);
      });
    kiln::bench::Interleaved t = kiln::bench::time_interleaved(repeat, candidates);
    const double flops = 2.0 * static_cast<double>(s.batch * s.m * s.n * s.k);
    fmt::print("{:<30} {:>5} {:>6} {:>6} {:>6}", s.where + (s.trans_a ? " (A^T)" : ""), s.batch, s.m, s.n, s.k);
    for (const auto& timing : t.timings) fmt::print(" {:>10.1f}", flops / timing.median_ms / 1e6);
    fmt::print("\n");
  }
  return 0;
}
