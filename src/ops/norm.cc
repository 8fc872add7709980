#include "ops/norm.h"

#include <cmath>

namespace headscope::ops {

void layer_norm(const float* x, int64_t T, int64_t d, const float* gamma, const float* beta, float eps, float* y) {
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x + t * d;
    float* yr = y + t * d;
    // Two passes in double: the mean first, then the centred variance (stable, matches torch to ~1e-7).
    double mean = 0.0;
    for (int64_t i = 0; i < d; ++i) mean += xr[i];
    mean /= static_cast<double>(d);
    double var = 0.0;
    for (int64_t i = 0; i < d; ++i) {
      double c = xr[i] - mean;
      var += c * c;
    }
    var /= static_cast<double>(d);
    const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
    const float m = static_cast<float>(mean);
    for (int64_t i = 0; i < d; ++i) yr[i] = (xr[i] - m) * inv * gamma[i] + beta[i];
  }
}

void gelu_erf(float* x, int64_t n) {
  constexpr float kInvSqrt2 = 0.70710678118654752440f;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace headscope::ops
