// headscope — slow twins of the fast kernels: plain loops, double accumulation, no library.
// Tests run each fast op beside its twin on the same inputs (STYLE.md, "every fast kernel has
// a slow twin").
#pragma once
#include <cstdint>

#include "ops/attention.h"

namespace headscope::ops::reference {

void matmul(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc,
            int64_t M, int64_t N, int64_t K, bool trans_b, float alpha = 1.0f, float beta = 0.0f);

void layer_norm(const float* x, int64_t T, int64_t d, const float* gamma, const float* beta, float eps, float* y);

void attention(const float* q, int64_t ldq, const float* k, int64_t ldk, const float* v, int64_t ldv,
               const int* kv_head_of, const AttentionDims& dims, const KeyMask& mask, int64_t mask_first_row,
               float* probs, float* out, int64_t ldo);

}  // namespace headscope::ops::reference
