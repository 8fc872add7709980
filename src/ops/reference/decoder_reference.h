// headscope — slow twins of the decoder ops (ops/rope.h, ops/decoder_pointwise.h): written from
// the formulas, in double, with the rotation written as a 2×2 matrix per pair.
#pragma once
#include <cstdint>

#include "ops/rope.h"

namespace headscope::ops::reference {

void rms_norm(const float* x, int64_t T, int64_t d, const float* gamma, float eps, float* y);
void silu_mul(float* gate, const float* up, int64_t n);
void gelu_tanh(float* x, int64_t n);
// Rotates x: [T, n_heads · d_head] for positions first .. first + T − 1 with frequencies inv_freq.
void rope_apply(float* x, int64_t ld, int64_t T, int64_t n_heads, int64_t d_head, const float* inv_freq,
                int64_t first, int64_t d_rot, RopeLayout layout);

}  // namespace headscope::ops::reference
