#include "ops/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/exp.h"

namespace headscope::ops {

void softmax_rows(float* scores, int64_t rows, int64_t cols, int64_t ld, int64_t first_row, const KeyMask& mask) {
  for (int64_t r = 0; r < rows; ++r) {
    float* s = scores + r * ld;
    const int64_t q = first_row + r;
    const int64_t hi = mask.causal ? std::min<int64_t>(q + 1, cols) : cols;
    const int64_t lo = mask.window > 0 ? std::max<int64_t>(0, hi - mask.window) : 0;
    if (mask.softcap > 0.0f) {
      for (int64_t k = lo; k < hi; ++k) s[k] = mask.softcap * std::tanh(s[k] / mask.softcap);
    }
    if (mask.key_bias != nullptr) {
      for (int64_t k = lo; k < hi; ++k) s[k] += mask.key_bias[k];
    }
    float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
    for (int64_t k = lo; k < hi; ++k) m = s[k] > m ? s[k] : m;  // (std::max here stays scalar in GCC 12)
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t k = lo; k < hi; ++k) {
      float e = exp_nonpositive(s[k] - m);  // s[k] − m <= 0
      s[k] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int64_t k = lo; k < hi; ++k) s[k] *= inv;
    for (int64_t k = 0; k < lo; ++k) s[k] = 0.0f;
    for (int64_t k = hi; k < cols; ++k) s[k] = 0.0f;
  }
}

}  // namespace headscope::ops
