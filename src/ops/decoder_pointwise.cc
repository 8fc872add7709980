#include "ops/decoder_pointwise.h"

#include <cmath>

namespace headscope::ops {

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

void silu_mul(float* gate, const float* up, int64_t n) {
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void gelu_tanh(float* x, int64_t n) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
  }
}

}  // namespace headscope::ops
