#include "ops/reference/matmul.h"

namespace headscope::ops::reference {

void matmul(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, int64_t M, int64_t N,
            int64_t K, bool trans_b, float alpha, float beta) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int64_t p = 0; p < K; ++p) acc += double(A[i * lda + p]) * double(trans_b ? B[j * ldb + p] : B[p * ldb + j]);
      const double prev = beta == 0.0f ? 0.0 : double(beta) * C[i * ldc + j];
      C[i * ldc + j] = static_cast<float>(alpha * acc + prev);
    }
}

}  // namespace headscope::ops::reference
