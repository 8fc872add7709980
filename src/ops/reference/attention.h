// headscope — slow twin of ops/attention.h: plain loops from the formulas, double accumulation, no
// library. Tests run the fast op beside it on the same inputs (STYLE.md, "every fast kernel has a
// slow twin").
#pragma once
#include <cstdint>

#include "ops/attention.h"

namespace headscope::ops::reference {

void attention(const float* q, int64_t ldq, const float* k, int64_t ldk, const float* v, int64_t ldv,
               const int* kv_head_of, const AttentionDims& dims, const KeyMask& mask, int64_t mask_first_row,
               float* probs, float* out, int64_t ldo);

}  // namespace headscope::ops::reference
