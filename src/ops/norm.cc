#include "ops/norm.h"

#include <cmath>

namespace headscope::ops {

namespace {
// Row-wise loops split over threads only when there is enough work to pay for waking one.
constexpr int64_t kMinParallelElements = int64_t(1) << 15;
}  // namespace

void layer_norm(const float* x, int64_t T, int64_t d, const float* gamma, const float* beta, float eps, float* y) {
#pragma omp parallel for schedule(static) if (T * d >= kMinParallelElements)
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x + t * d;
    float* yr = y + t * d;
    // Two passes in double: the mean first, then the centred variance (stable, matches torch to ~1e-7).
    double mean = 0.0;
#pragma omp simd reduction(+ : mean)
    for (int64_t i = 0; i < d; ++i) mean += xr[i];
    mean /= static_cast<double>(d);
    double var = 0.0;
#pragma omp simd reduction(+ : var)
    for (int64_t i = 0; i < d; ++i) {
      const double c = xr[i] - mean;
      var += c * c;
    }
    var /= static_cast<double>(d);
    const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
    const float m = static_cast<float>(mean);
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) yr[i] = (xr[i] - m) * inv * gamma[i] + beta[i];
  }
}

void rms_norm(const float* x, int64_t T, int64_t d, const float* gamma, float eps, float* y) {
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x + t * d;
    float* yr = y + t * d;
    double sum_sq = 0.0;  // double: the fp32 mean of squares in torch is accurate to ~1e-7
    for (int64_t i = 0; i < d; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(d) + eps));
    for (int64_t i = 0; i < d; ++i) yr[i] = gamma[i] * (xr[i] * inv);
  }
}

}  // namespace headscope::ops
