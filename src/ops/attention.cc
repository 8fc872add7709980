#include "ops/attention.h"

#include "ops/matmul.h"

namespace headscope::ops {

void attention(const float* q, int64_t ldq, const float* k, int64_t ldk, const float* v, int64_t ldv,
               const int* kv_head_of, const AttentionDims& d, const KeyMask& mask, int64_t mask_first_row,
               ProbsOut probs, float* out, int64_t ldo) {
  // One head per thread; the GEMMs inside run single-threaded (oneDNN detects the parallel region).
  // Short sequences stay on one thread: waking a second one costs more than the work.
  constexpr int64_t kMinParallelScores = 1 << 15;
#pragma omp parallel for schedule(dynamic, 1) if (d.n_head * d.T_q * d.T_k >= kMinParallelScores)
  for (int64_t h = 0; h < d.n_head; ++h) {
    const int64_t g = kv_head_of[h];
    float* P = probs.data + h * probs.head_stride;           // [T_q, T_k], row stride probs.ld
    const float* Qh = q + h * d.d_head;                      // [T_q, d_head], stride ldq
    const float* Kg = k + g * d.d_head;                      // [T_k, d_head], stride ldk
    const float* Vg = v == nullptr ? nullptr : v + g * d.d_head;  // [T_k, d_head], stride ldv
    matmul(Qh, ldq, Kg, ldk, P, probs.ld, d.T_q, d.T_k, d.d_head, /*trans_b=*/true, d.scale);  // scale · Q Kᵀ
    softmax_rows(P, d.T_q, d.T_k, probs.ld, mask_first_row, mask);
    if (out != nullptr) matmul(P, probs.ld, Vg, ldv, out + h * d.d_head, ldo, d.T_q, d.d_head, d.T_k, /*trans_b=*/false);  // P V
  }
}

}  // namespace headscope::ops
