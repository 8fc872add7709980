#include "ops/rope.h"

#include <cmath>

#include "headscope/error.h"

namespace headscope::ops {

std::vector<float> rope_inverse_frequencies(const RopeConfig& c) {
  if (c.d_rot <= 0 || c.d_rot % 2 != 0)
    throw Error("rope: rotated dimension " + std::to_string(c.d_rot) + " must be even");
  const int64_t half = c.d_rot / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  // transformers: 1.0 / (base ** (arange(0, dim, 2).float() / dim)), all in fp32.
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(c.d_rot);
    inv[size_t(i)] = 1.0f / std::pow(static_cast<float>(c.base), exponent);
  }
  if (c.llama3_scaling) {
    const float pi = 3.14159265358979323846f;
    const float factor = static_cast<float>(c.factor);
    const float low_wavelen = static_cast<float>(c.original_max_positions / c.low_freq_factor);
    const float high_wavelen = static_cast<float>(c.original_max_positions / c.high_freq_factor);
    for (float& f : inv) {
      const float wavelen = 2.0f * pi / f;
      const float scaled = wavelen > low_wavelen ? f / factor : f;
      if (wavelen < high_wavelen || wavelen > low_wavelen) {
        f = scaled;
      } else {  // medium frequencies: blend the two
        const float smooth =
            (static_cast<float>(c.original_max_positions) / wavelen - static_cast<float>(c.low_freq_factor)) /
            static_cast<float>(c.high_freq_factor - c.low_freq_factor);
        f = (1.0f - smooth) * scaled / factor + smooth * scaled;
      }
    }
  }
  if (!c.freq_divisors.empty()) {
    if (static_cast<int64_t>(c.freq_divisors.size()) != half) {
      throw Error("rope: rope_freqs has " + std::to_string(c.freq_divisors.size()) + " entries, expected " +
                  std::to_string(half));
    }
    for (int64_t i = 0; i < half; ++i) inv[size_t(i)] /= c.freq_divisors[size_t(i)];
  }
  return inv;
}

RopeTable rope_table(const std::vector<float>& inv_freq, int64_t first, int64_t T) {
  const int64_t half = static_cast<int64_t>(inv_freq.size());
  RopeTable t;
  t.cos.resize(size_t(T * half));
  t.sin.resize(size_t(T * half));
  for (int64_t p = 0; p < T; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      // The angle is an fp32 product, as in transformers (inv_freq @ position_ids in fp32).
      const float angle = static_cast<float>(first + p) * inv_freq[size_t(i)];
      t.cos[size_t(p * half + i)] = std::cos(angle);
      t.sin[size_t(p * half + i)] = std::sin(angle);
    }
  }
  return t;
}

void rope_apply(float* x, int64_t ld, int64_t T, int64_t n_heads, int64_t d_head, const RopeTable& table, int64_t d_rot,
                RopeLayout layout) {
  const int64_t half = d_rot / 2;
  for (int64_t t = 0; t < T; ++t) {
    const float* c = table.cos.data() + t * half;
    const float* s = table.sin.data() + t * half;
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + t * ld + h * d_head;
      if (layout == RopeLayout::kHalfSplit) {
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[i], b = v[i + half];
          v[i] = a * c[i] - b * s[i];
          v[i + half] = b * c[i] + a * s[i];
        }
      } else {
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[2 * i], b = v[2 * i + 1];
          v[2 * i] = a * c[i] - b * s[i];
          v[2 * i + 1] = b * c[i] + a * s[i];
        }
      }
    }
  }
}

}  // namespace headscope::ops
