// headscope — slow twin of ops/backward.h: every backward op as plain loops in double from its
// formula, no library. tests/unit/ops_backward_test.cc runs the fast op beside it and both against
// finite differences of the forward formulas.
#pragma once
#include <cstdint>

#include "ops/rope.h"
#include "tensor/quant_matrix.h"

namespace headscope::ops::reference {

void softmax_backward(const float* p, const float* dp, int64_t rows, int64_t cols, float* ds);
void layer_norm_backward(const float* x, int64_t T, int64_t d, const float* gamma, float eps, const float* dy,
                         float* dx, float* dgamma, float* dbeta);
void rms_norm_backward(const float* x, int64_t T, int64_t d, const float* gamma, float eps, const float* dy, float* dx,
                       float* dgamma);
void linear_backward(const float* x, int64_t T, int64_t in, const float* W, int64_t out, const float* dy, float* dx,
                     float* dW, float* db);
void rope_backward(float* dy, int64_t ld, int64_t T, int64_t n_heads, int64_t d_head, const RopeTable& table,
                   int64_t d_rot, RopeLayout layout);
void attention_head_backward(const float* q, int64_t ldq, const float* k, const float* v, int64_t ldk, const float* p,
                             const float* d_out, int64_t ldo, int64_t Tq, int64_t Tk, int64_t d, float scale,
                             float softcap, float* dq, float* dk, float* dv, float* dp_out);

// dx = dy · W, W dequantised whole, in double.
void quant_linear_backward(const float* dy, int64_t T, const QuantMatrix& W, float* dx);

}  // namespace headscope::ops::reference
