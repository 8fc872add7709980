#include "ops/reference/activations.h"

#include <cmath>

namespace headscope::ops::reference {

void gelu_tanh(float* x, int64_t n) {
  const double k = std::sqrt(2.0 / M_PI);
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    x[i] = static_cast<float>(0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v))));
  }
}

void silu_mul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double z = gate[i];
    gate[i] = static_cast<float>(z * (1.0 / (1.0 + std::exp(-z))) * up[i]);
  }
}

void gelu_tanh_mul(float* gate, const float* up, int64_t n) {
  const double k = std::sqrt(2.0 / M_PI);
  for (int64_t i = 0; i < n; ++i) {
    const double v = gate[i];
    gate[i] = static_cast<float>(0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v))) * up[i]);
  }
}

void soft_cap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(double(cap) * std::tanh(double(x[i]) / cap));
}

}  // namespace headscope::ops::reference
