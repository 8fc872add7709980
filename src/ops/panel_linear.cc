#include "ops/panel_linear.h"

#include <algorithm>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define HEADSCOPE_PANEL_KERNEL 1
#endif

#include "headscope/error.h"

namespace headscope::ops {

namespace {
constexpr int64_t kRows = 16;  // rows of x per block: two 8-float registers
}  // namespace

Tensor pack_panels(const Tensor& W) {
  const int64_t out = W.dim(0), in = W.dim(1);
  const int64_t n_panels = (out + kPanel - 1) / kPanel;
  Tensor panels({n_panels, in, kPanel}, Tensor::Uninitialized{});
  float* p = panels.ptr();
  for (int64_t panel = 0; panel < n_panels; ++panel)
    for (int64_t k = 0; k < in; ++k)
      for (int64_t j = 0; j < kPanel; ++j) {
        const int64_t o = panel * kPanel + j;
        p[(panel * in + k) * kPanel + j] = o < out ? W.ptr()[o * in + k] : 0.0f;
      }
  return panels;
}

#ifdef HEADSCOPE_PANEL_KERNEL

bool panel_linear_available() { return true; }

namespace {

// Prefetch distance along the weight stream: 256 input features of one panel (6 KiB) ahead,
// which runs on into the next panel, as panels are contiguous. Measured flat from 1.5 to 18 KiB.
constexpr int64_t kPrefetchFloats = 256 * kPanel;

// yᵀ tile [kPanel, 16] = panelᵀ · xᵀ block, then stored as y[rows, cols] (row stride `out`).
// The twelve accumulators are named variables: kept in an array, GCC stores them to the stack on
// every step (measured 3× slower).
inline void panel_tile(const float* w, const float* bias, int64_t in, const float* xT, int64_t rows, int64_t cols,
                       float* y, int64_t out) {
  static_assert(kPanel == 6, "the tile below is written out for 6 output features");
  auto b = [&](int64_t j) { return _mm256_set1_ps(bias && j < cols ? bias[j] : 0.0f); };
  __m256 a00 = b(0), a01 = a00, a10 = b(1), a11 = a10, a20 = b(2), a21 = a20;
  __m256 a30 = b(3), a31 = a30, a40 = b(4), a41 = a40, a50 = b(5), a51 = a50;
  for (int64_t k = 0; k < in; ++k) {
    if ((k & 7) == 0) {  // 8 features × 6 floats = 3 cache lines per 8 steps
      const char* ahead = reinterpret_cast<const char*>(w + k * kPanel + kPrefetchFloats);
      _mm_prefetch(ahead, _MM_HINT_T0);
      _mm_prefetch(ahead + 64, _MM_HINT_T0);
      _mm_prefetch(ahead + 128, _MM_HINT_T0);
    }
    const __m256 x0 = _mm256_loadu_ps(xT + k * kRows), x1 = _mm256_loadu_ps(xT + k * kRows + 8);
    const float* wk = w + k * kPanel;
    __m256 wj = _mm256_broadcast_ss(wk + 0);
    a00 = _mm256_fmadd_ps(wj, x0, a00), a01 = _mm256_fmadd_ps(wj, x1, a01);
    wj = _mm256_broadcast_ss(wk + 1);
    a10 = _mm256_fmadd_ps(wj, x0, a10), a11 = _mm256_fmadd_ps(wj, x1, a11);
    wj = _mm256_broadcast_ss(wk + 2);
    a20 = _mm256_fmadd_ps(wj, x0, a20), a21 = _mm256_fmadd_ps(wj, x1, a21);
    wj = _mm256_broadcast_ss(wk + 3);
    a30 = _mm256_fmadd_ps(wj, x0, a30), a31 = _mm256_fmadd_ps(wj, x1, a31);
    wj = _mm256_broadcast_ss(wk + 4);
    a40 = _mm256_fmadd_ps(wj, x0, a40), a41 = _mm256_fmadd_ps(wj, x1, a41);
    wj = _mm256_broadcast_ss(wk + 5);
    a50 = _mm256_fmadd_ps(wj, x0, a50), a51 = _mm256_fmadd_ps(wj, x1, a51);
  }
  alignas(32) float tile[kPanel][kRows];
  _mm256_store_ps(tile[0], a00), _mm256_store_ps(tile[0] + 8, a01);
  _mm256_store_ps(tile[1], a10), _mm256_store_ps(tile[1] + 8, a11);
  _mm256_store_ps(tile[2], a20), _mm256_store_ps(tile[2] + 8, a21);
  _mm256_store_ps(tile[3], a30), _mm256_store_ps(tile[3] + 8, a31);
  _mm256_store_ps(tile[4], a40), _mm256_store_ps(tile[4] + 8, a41);
  _mm256_store_ps(tile[5], a50), _mm256_store_ps(tile[5] + 8, a51);
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t j = 0; j < cols; ++j) y[t * out + j] = tile[j][t];
}

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

void panel_linear(const Tensor& panels, const float* bias, int64_t in, int64_t out, const float* x, int64_t T,
                  float* y) {
  const int64_t n_panels = (out + kPanel - 1) / kPanel;
  panels.expect_shape({n_panels, in, kPanel}, "panel_linear weights");
  if (T <= 0) return;
  // xᵀ in blocks of 16 rows: [blocks, in, 16], rows past T zero (written by transpose_rows, so
  // the buffer needs no fill of its own).
  const int64_t blocks = (T + kRows - 1) / kRows;
  Tensor xT({blocks, in, kRows}, Tensor::Uninitialized{});
  for (int64_t b = 0; b < blocks; ++b) transpose_rows(x + b * kRows * in, std::min(kRows, T - b * kRows), in,
                                                      xT.ptr() + b * in * kRows);
  const float* w = panels.ptr();
#pragma omp parallel for schedule(static) if (n_panels >= 16)
  for (int64_t p = 0; p < n_panels; ++p) {
    const int64_t cols = std::min(kPanel, out - p * kPanel);
    for (int64_t b = 0; b < blocks; ++b)
      panel_tile(w + p * in * kPanel, bias ? bias + p * kPanel : nullptr, in, xT.ptr() + b * in * kRows,
                 std::min(kRows, T - b * kRows), cols, y + b * kRows * out + p * kPanel, out);
  }
}

#else

bool panel_linear_available() { return false; }

void panel_linear(const Tensor&, const float*, int64_t, int64_t, const float*, int64_t, float*) {
  throw Error("panel_linear: this build has no AVX2/FMA kernel (check panel_linear_available() first)");
}

#endif

}  // namespace headscope::ops
