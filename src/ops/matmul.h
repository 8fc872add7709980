// headscope — matrix multiplication, the one kernel every layer spends its time in.
//
// Row-major, BLAS-style strides:  C[M,N] = alpha · A[M,K] · op(B) + beta · C
//   op(B) = B     with B stored [K, N] (trans_b = false)
//   op(B) = Bᵀ    with B stored [N, K] (trans_b = true) — the nn.Linear weight layout (out, in)
// lda/ldb/ldc are row strides in elements, so per-head slices of a [T, n_head·d_head] matrix
// are addressed without copies. Backed by oneDNN's sgemm; ops/reference/ has the slow twin.
#pragma once
#include <cstdint>

namespace headscope::ops {

void matmul(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, int64_t M, int64_t N,
            int64_t K, bool trans_b, float alpha = 1.0f, float beta = 0.0f);

// y[T, out] = x[T, in] · W[out, in]ᵀ + b[out]   (b may be null)
void linear(const float* x, int64_t T, int64_t in, const float* W, const float* b, int64_t out, float* y);

}  // namespace headscope::ops
