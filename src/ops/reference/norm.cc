#include "ops/reference/norm.h"

#include <cmath>

namespace headscope::ops::reference {

void layer_norm(const float* x, int64_t T, int64_t d, const float* gamma, const float* beta, float eps, float* y) {
  for (int64_t t = 0; t < T; ++t) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += x[t * d + i];
    mean /= d;
    for (int64_t i = 0; i < d; ++i) var += (x[t * d + i] - mean) * (x[t * d + i] - mean);
    var /= d;
    for (int64_t i = 0; i < d; ++i)
      y[t * d + i] = static_cast<float>((x[t * d + i] - mean) / std::sqrt(var + eps) * gamma[i] + beta[i]);
  }
}

void rms_norm(const float* x, int64_t T, int64_t d, const float* gamma, float eps, float* y) {
  for (int64_t t = 0; t < T; ++t) {
    double ms = 0.0;
    for (int64_t i = 0; i < d; ++i) ms += double(x[t * d + i]) * x[t * d + i] / double(d);
    const double r = 1.0 / std::sqrt(ms + eps);
    for (int64_t i = 0; i < d; ++i) y[t * d + i] = static_cast<float>(gamma[i] * (x[t * d + i] * r));
  }
}

}  // namespace headscope::ops::reference
