// headscope — slow twin of ops/rope.h: the rotation written as a 2×2 matrix per pair, in double,
// no library. Tests run the fast op beside it on the same inputs (STYLE.md, "every fast kernel has
// a slow twin").
#pragma once
#include <cstdint>

#include "ops/rope.h"

namespace headscope::ops::reference {

// Rotates x: [T, n_heads · d_head] for positions first .. first + T − 1 with frequencies inv_freq.
void rope_apply(float* x, int64_t ld, int64_t T, int64_t n_heads, int64_t d_head, const float* inv_freq, int64_t first,
                int64_t d_rot, RopeLayout layout);

}  // namespace headscope::ops::reference
