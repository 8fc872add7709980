#include "ops/reference/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace headscope::ops::reference {

void attention(const float* q, int64_t ldq, const float* k, int64_t ldk, const float* v, int64_t ldv,
               const int* kv_head_of, const AttentionDims& d, const KeyMask& mask, int64_t mask_first_row, float* probs,
               float* out, int64_t ldo) {
  std::vector<double> s(static_cast<size_t>(d.T_k));
  for (int64_t h = 0; h < d.n_head; ++h) {
    const int64_t g = kv_head_of[h];
    for (int64_t i = 0; i < d.T_q; ++i) {
      const int64_t pos = mask_first_row + i;
      const int64_t hi = mask.causal ? std::min(pos + 1, d.T_k) : d.T_k;
      const int64_t lo = mask.window > 0 ? std::max<int64_t>(0, hi - mask.window) : 0;
      double mx = -1e300;
      for (int64_t j = lo; j < hi; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d.d_head; ++c)
          dot += double(q[i * ldq + h * d.d_head + c]) * k[j * ldk + g * d.d_head + c];
        s[j] = dot * d.scale;
        if (mask.softcap > 0.0f) s[j] = mask.softcap * std::tanh(s[j] / mask.softcap);
        s[j] += mask.key_bias ? mask.key_bias[j] : 0.0;
        mx = std::max(mx, s[j]);
      }
      double z = 0;
      for (int64_t j = lo; j < hi; ++j) z += std::exp(s[j] - mx);
      float* P = probs + (h * d.T_q + i) * d.T_k;
      for (int64_t j = 0; j < d.T_k; ++j)
        P[j] = (j >= lo && j < hi) ? static_cast<float>(std::exp(s[j] - mx) / z) : 0.0f;
      for (int64_t c = 0; c < d.d_head; ++c) {
        double acc = 0;
        for (int64_t j = lo; j < hi; ++j) acc += double(P[j]) * v[j * ldv + g * d.d_head + c];
        out[i * ldo + h * d.d_head + c] = static_cast<float>(acc);
      }
    }
  }
}

}  // namespace headscope::ops::reference
