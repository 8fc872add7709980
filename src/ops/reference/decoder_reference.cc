#include "ops/reference/decoder_reference.h"

#include <cmath>
#include <vector>

namespace headscope::ops::reference {

void rms_norm(const float* x, int64_t T, int64_t d, const float* gamma, float eps, float* y) {
  for (int64_t t = 0; t < T; ++t) {
    double ms = 0.0;
    for (int64_t i = 0; i < d; ++i) ms += double(x[t * d + i]) * x[t * d + i] / double(d);
    const double r = 1.0 / std::sqrt(ms + eps);
    for (int64_t i = 0; i < d; ++i) y[t * d + i] = static_cast<float>(gamma[i] * (x[t * d + i] * r));
  }
}

void silu_mul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double z = gate[i];
    gate[i] = static_cast<float>(z * (1.0 / (1.0 + std::exp(-z))) * up[i]);
  }
}

void gelu_tanh(float* x, int64_t n) {
  const double k = std::sqrt(2.0 / M_PI);
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    x[i] = static_cast<float>(0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v))));
  }
}

void rope_apply(float* x, int64_t ld, int64_t T, int64_t n_heads, int64_t d_head, const float* inv_freq,
                int64_t first, int64_t d_rot, RopeLayout layout) {
  const int64_t half = d_rot / 2;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + t * ld + h * d_head;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = layout == RopeLayout::kHalfSplit ? i : 2 * i;
        const int64_t b = layout == RopeLayout::kHalfSplit ? i + half : 2 * i + 1;
        const double angle = double(first + t) * double(inv_freq[i]);
        // [a'; b'] = [[cos, −sin], [sin, cos]] · [a; b]
        const double R[2][2] = {{std::cos(angle), -std::sin(angle)}, {std::sin(angle), std::cos(angle)}};
        const double va = v[a], vb = v[b];
        v[a] = static_cast<float>(R[0][0] * va + R[0][1] * vb);
        v[b] = static_cast<float>(R[1][0] * va + R[1][1] * vb);
      }
    }
}

}  // namespace headscope::ops::reference
