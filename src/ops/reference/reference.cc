#include "ops/reference/reference.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace headscope::ops::reference {

void matmul(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc,
            int64_t M, int64_t N, int64_t K, bool trans_b, float alpha, float beta) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int64_t p = 0; p < K; ++p) acc += double(A[i * lda + p]) * double(trans_b ? B[j * ldb + p] : B[p * ldb + j]);
      const double prev = beta == 0.0f ? 0.0 : double(beta) * C[i * ldc + j];
      C[i * ldc + j] = static_cast<float>(alpha * acc + prev);
    }
}

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

void attention(const float* q, int64_t ldq, const float* k, int64_t ldk, const float* v, int64_t ldv,
               const int* kv_head_of, const AttentionDims& d, const KeyMask& mask, int64_t mask_first_row,
               float* probs, float* out, int64_t ldo) {
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
        for (int64_t c = 0; c < d.d_head; ++c) dot += double(q[i * ldq + h * d.d_head + c]) * k[j * ldk + g * d.d_head + c];
        s[j] = dot * d.scale + (mask.key_bias ? mask.key_bias[j] : 0.0);
        mx = std::max(mx, s[j]);
      }
      double z = 0;
      for (int64_t j = lo; j < hi; ++j) z += std::exp(s[j] - mx);
      float* P = probs + (h * d.T_q + i) * d.T_k;
      for (int64_t j = 0; j < d.T_k; ++j) P[j] = (j >= lo && j < hi) ? static_cast<float>(std::exp(s[j] - mx) / z) : 0.0f;
      for (int64_t c = 0; c < d.d_head; ++c) {
        double acc = 0;
        for (int64_t j = lo; j < hi; ++j) acc += double(P[j]) * v[j * ldv + g * d.d_head + c];
        out[i * ldo + h * d.d_head + c] = static_cast<float>(acc);
      }
    }
  }
}

}  // namespace headscope::ops::reference
