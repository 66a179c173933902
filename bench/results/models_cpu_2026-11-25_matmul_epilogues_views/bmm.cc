#include <dnnl.h>
#include <omp.h>
#include <chrono>
#include <vector>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
int main(int argc, char** argv) {
  int B = atoi(argv[1]), M = atoi(argv[2]), N = atoi(argv[3]), K = atoi(argv[4]);
  char tb = argc > 5 ? argv[5][0] : 'N';
  std::vector<float> A(size_t(B)*M*K, 0.01f), Bm(size_t(B)*K*N, 0.02f), C(size_t(B)*M*N);
  auto run = [&](int mode) {
    auto t0 = std::chrono::steady_clock::now();
    if (mode == 0) {
      omp_set_num_threads(2);
      for (int b = 0; b < B; ++b)
        dnnl_sgemm('N', tb, M, N, K, 1.f, &A[size_t(b)*M*K], K, &Bm[size_t(b)*K*N], tb == 'N' ? N : K, 0.f, &C[size_t(b)*M*N], N);
    } else {
      omp_set_num_threads(2);
#pragma omp parallel for schedule(static)
      for (int b = 0; b < B; ++b)
        dnnl_sgemm('N', tb, M, N, K, 1.f, &A[size_t(b)*M*K], K, &Bm[size_t(b)*K*N], tb == 'N' ? N : K, 0.f, &C[size_t(b)*M*N], N);
    }
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> t[2];
  for (int r = 0; r < 40; ++r) for (int m = 0; m < 2; ++m) t[m].push_back(run(m));
  for (int m = 0; m < 2; ++m) { std::sort(t[m].begin(), t[m].end()); printf("%s median %.3f ms (%.0f GFLOP/s)\n", m ? "batch-parallel" : "loop", t[m][20], 2.0*B*M*N*K/t[m][20]/1e6); }
}
