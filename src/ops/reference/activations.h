// headscope — slow twin of ops/activations.h: plain loops from the formulas, double accumulation, no
// library. Tests run the fast op beside it on the same inputs (STYLE.md, "every fast kernel has a
// slow twin").
#pragma once
#include <cstdint>

namespace headscope::ops::reference {

void gelu_tanh(float* x, int64_t n);
void silu_mul(float* gate, const float* up, int64_t n);
void gelu_tanh_mul(float* gate, const float* up, int64_t n);
void soft_cap(float* x, int64_t n, float cap);

}  // namespace headscope::ops::reference
