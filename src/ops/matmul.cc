#include "ops/matmul.h"

#include <dnnl.h>

#include "headscope/error.h"

namespace headscope::ops {

void matmul(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, int64_t M, int64_t N,
            int64_t K, bool trans_b, float alpha, float beta) {
  if (M == 0 || N == 0) return;
  // dnnl_sgemm is row-major: C = alpha·op(A)·op(B) + beta·C.
  dnnl_status_t st = dnnl_sgemm('N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (st != dnnl_success) throw Error("matmul: oneDNN sgemm failed (status " + std::to_string(st) + ")");
}

void linear(const float* x, int64_t T, int64_t in, const float* W, const float* b, int64_t out, float* y) {
  matmul(x, in, W, in, y, out, T, out, in, /*trans_b=*/true);
  if (b == nullptr) return;
  for (int64_t t = 0; t < T; ++t) {
    float* row = y + t * out;
    for (int64_t o = 0; o < out; ++o) row[o] += b[o];
  }
}

}  // namespace headscope::ops
