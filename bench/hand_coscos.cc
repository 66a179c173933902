// The hand-written reference for the cos(cos(x)) benchmark, compiled with
// -O3 -march=native -ffast-math so that glibc's libmvec vectorizes cosf.
#include <cmath>
#include <cstdint>

void hand_coscos(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::cos(std::cos(x[i]));
}
