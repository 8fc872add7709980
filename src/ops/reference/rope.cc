#include "ops/reference/rope.h"

#include <cmath>

namespace headscope::ops::reference {

void rope_apply(float* x, int64_t ld, int64_t T, int64_t n_heads, int64_t d_head, const float* inv_freq, int64_t first,
                int64_t d_rot, RopeLayout layout) {
  const int64_t half = d_rot / 2;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + t * ld + h * d_head;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = layout == RopeLayout::kHalfSplit ? i : 2 * i;
        const int64_t b = layout == RopeLayout::kHalfSplit ? i + half : 2 * i + 1;
        const double angle = double(first + t) * double(inv_freq[i]);
        // [a'; b'] = [[cos, −sin], [sin, cos]] · [a; b]
        const double R[2][2] = {{std::cos(angle), -std::sin(angle)}, {std::sin(angle), std::cos(angle)}};
        const double va = v[a], vb = v[b];
        v[a] = static_cast<float>(R[0][0] * va + R[0][1] * vb);
        v[b] = static_cast<float>(R[1][0] * va + R[1][1] * vb);
      }
    }
}

}  // namespace headscope::ops::reference
