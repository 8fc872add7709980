// headscope — xᵀ blocks for the panel kernels' AVX2 and AVX-512 variants (panel_kernels.h).
// Included only by files compiled with AVX2 enabled; everything here has internal linkage.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace headscope::ops::kernels {
namespace {

constexpr int64_t kRows = 16;       // = kPanelBlockRows
constexpr int64_t kPanelWidth = 6;  // = ops::kPanel (panel_linear.h), restated: this file sees no Tensor

// Prefetch distances along the weight stream, which runs on from one panel into the next (panels
// are contiguous): into L1 256 input features ahead (6 KiB), into L2 2,048 ahead (48 KiB). At
// T ≤ 16 the weights come from memory once per pass and the kernel waits on them: on the Zen 4
// machine the L2 stream cut the default model's 24 layers at T = 16 from 4.9–5.2 ms to 3.7–3.9 ms
// (`linear_bench 1 16 --layers 6`); L2 distances from 24 to 96 KiB measured alike, the L1 distance
// alone (1.5–18 KiB) did not matter, and no prefetch at all was slower (5.9–7.4 ms).
constexpr int64_t kPrefetchFloats = 256 * kPanelWidth, kPrefetchFarFloats = 2048 * kPanelWidth;

// Every 8 input features (8 × 6 floats = 3 cache lines): those lines near into L1, far into L2.
inline void prefetch_panel(const float* w, int64_t k) {
  if ((k & 7) != 0) return;
  const char* near = reinterpret_cast<const char*>(w + k * kPanelWidth + kPrefetchFloats);
  const char* far = reinterpret_cast<const char*>(w + k * kPanelWidth + kPrefetchFarFloats);
  for (int line = 0; line < 3; ++line) {
    _mm_prefetch(near + 64 * line, _MM_HINT_T0);
    _mm_prefetch(far + 64 * line, _MM_HINT_T1);
  }
}

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// xᵀ block [in][16] from `rows` ≤ 16 rows of x [rows, in], the block's other rows zero. Eight
// rows × eight features at a time through registers, the rest one by one.
inline void transpose_rows(const float* x, int64_t rows, int64_t in, float* xT) {
  int64_t t0 = 0;
  for (; t0 + 8 <= rows; t0 += 8) {
    int64_t k0 = 0;
    for (; k0 + 8 <= in; k0 += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(x + (t0 + i) * in + k0);
      // 8 × 8 transpose: interleave pairs, then quads, then swap 128-bit halves.
      const __m256 a0 = _mm256_unpacklo_ps(r[0], r[1]), a1 = _mm256_unpackhi_ps(r[0], r[1]);
      const __m256 a2 = _mm256_unpacklo_ps(r[2], r[3]), a3 = _mm256_unpackhi_ps(r[2], r[3]);
      const __m256 a4 = _mm256_unpacklo_ps(r[4], r[5]), a5 = _mm256_unpackhi_ps(r[4], r[5]);
      const __m256 a6 = _mm256_unpacklo_ps(r[6], r[7]), a7 = _mm256_unpackhi_ps(r[6], r[7]);
      const __m256 b0 = _mm256_shuffle_ps(a0, a2, 0x44), b1 = _mm256_shuffle_ps(a0, a2, 0xEE);
      const __m256 b2 = _mm256_shuffle_ps(a1, a3, 0x44), b3 = _mm256_shuffle_ps(a1, a3, 0xEE);
      const __m256 b4 = _mm256_shuffle_ps(a4, a6, 0x44), b5 = _mm256_shuffle_ps(a4, a6, 0xEE);
      const __m256 b6 = _mm256_shuffle_ps(a5, a7, 0x44), b7 = _mm256_shuffle_ps(a5, a7, 0xEE);
      const __m256 c[8] = {_mm256_permute2f128_ps(b0, b4, 0x20), _mm256_permute2f128_ps(b1, b5, 0x20),
                           _mm256_permute2f128_ps(b2, b6, 0x20), _mm256_permute2f128_ps(b3, b7, 0x20),
                           _mm256_permute2f128_ps(b0, b4, 0x31), _mm256_permute2f128_ps(b1, b5, 0x31),
                           _mm256_permute2f128_ps(b2, b6, 0x31), _mm256_permute2f128_ps(b3, b7, 0x31)};
      for (int i = 0; i < 8; ++i) _mm256_storeu_ps(xT + (k0 + i) * kRows + t0, c[i]);
    }
    for (; k0 < in; ++k0)
      for (int64_t t = t0; t < t0 + 8; ++t) xT[k0 * kRows + t] = x[t * in + k0];
  }
  for (int64_t t = t0; t < rows; ++t)
    for (int64_t k = 0; k < in; ++k) xT[k * kRows + t] = x[t * in + k];
  for (int64_t k = 0; k < in && rows < kRows; ++k)
    for (int64_t t = rows; t < kRows; ++t) xT[k * kRows + t] = 0.0f;
}

}  // namespace
}  // namespace headscope::ops::kernels
