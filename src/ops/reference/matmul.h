// headscope — slow twin of ops/matmul.h: plain loops from the formulas, double accumulation, no
// library. Tests run the fast op beside it on the same inputs (STYLE.md, "every fast kernel has a
// slow twin").
#pragma once
#include <cstdint>

namespace headscope::ops::reference {

void matmul(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc, int64_t M, int64_t N,
            int64_t K, bool trans_b, float alpha = 1.0f, float beta = 0.0f);

}  // namespace headscope::ops::reference
