// The hand-written reference for softmax rows, compiled with -O3 -march=native -ffast-math
// so that glibc's libmvec vectorizes expf: what a C++ programmer would write.
#include <algorithm>
#include <cmath>
#include <cstdint>

void hand_softmax(const float* x, float* y, int64_t rows, int64_t length) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * length;
    float* out = y + r * length;
    float max = in[0];
    for (int64_t i = 1; i < length; ++i) max = std::max(max, in[i]);
    float sum = 0;
    for (int64_t i = 0; i < length; ++i) {
      out[i] = std::exp(in[i] - max);
      sum += out[i];
    }
    const float inverse = 1 / sum;
    for (int64_t i = 0; i < length; ++i) out[i] *= inverse;
  }
}
