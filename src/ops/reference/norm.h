// headscope — slow twin of ops/norm.h: plain loops from the formulas, double accumulation, no
// library. Tests run the fast op beside it on the same inputs (STYLE.md, "every fast kernel has a
// slow twin").
#pragma once
#include <cstdint>

namespace headscope::ops::reference {

void layer_norm(const float* x, int64_t T, int64_t d, const float* gamma, const float* beta, float eps, float* y);
void rms_norm(const float* x, int64_t T, int64_t d, const float* gamma, float eps, float* y);

}  // namespace headscope::ops::reference
