// headscope — ops::panel_linear, AVX2 + FMA variant (see panel_linear.h for the layout and
// panel_kernels.h for how variants are built). Compiled with -mavx2 -mfma.
#if defined(__x86_64__)
#include <immintrin.h>

#include "ops/panel_kernels.h"
#include "ops/panel_transpose.h"

namespace headscope::ops::kernels {

namespace {

// yᵀ tile [kPanel, 16] = panelᵀ · xᵀ block, then stored as y[rows, cols] (row stride `out`).
// The twelve accumulators are named variables: kept in an array, GCC stores them to the stack on
// every step (measured 3× slower).
inline void panel_tile(const float* w, const float* bias, int64_t in, const float* xT, int64_t rows, int64_t cols,
                       float* y, int64_t out) {
  static_assert(kPanelWidth == 6, "the tile below is written out for 6 output features");
  auto b = [&](int64_t j) { return _mm256_set1_ps(bias && j < cols ? bias[j] : 0.0f); };
  __m256 a00 = b(0), a01 = a00, a10 = b(1), a11 = a10, a20 = b(2), a21 = a20;
  __m256 a30 = b(3), a31 = a30, a40 = b(4), a41 = a40, a50 = b(5), a51 = a50;
  for (int64_t k = 0; k < in; ++k) {
    prefetch_panel(w, k);
    const __m256 x0 = _mm256_loadu_ps(xT + k * kRows), x1 = _mm256_loadu_ps(xT + k * kRows + 8);
    const float* wk = w + k * kPanelWidth;
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
  alignas(32) float tile[kPanelWidth][kRows];
  _mm256_store_ps(tile[0], a00), _mm256_store_ps(tile[0] + 8, a01);
  _mm256_store_ps(tile[1], a10), _mm256_store_ps(tile[1] + 8, a11);
  _mm256_store_ps(tile[2], a20), _mm256_store_ps(tile[2] + 8, a21);
  _mm256_store_ps(tile[3], a30), _mm256_store_ps(tile[3] + 8, a31);
  _mm256_store_ps(tile[4], a40), _mm256_store_ps(tile[4] + 8, a41);
  _mm256_store_ps(tile[5], a50), _mm256_store_ps(tile[5] + 8, a51);
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t j = 0; j < cols; ++j) y[t * out + j] = tile[j][t];
}

}  // namespace

void panel_linear_avx2(const float* w, const float* bias, int64_t in, int64_t out, const float* x, int64_t T, float* y,
                       float* xT) {
  const int64_t n_panels = (out + kPanelWidth - 1) / kPanelWidth, blocks = (T + kRows - 1) / kRows;
  for (int64_t b = 0; b < blocks; ++b)
    transpose_rows(x + b * kRows * in, min64(kRows, T - b * kRows), in, xT + b * in * kRows);
#pragma omp parallel for schedule(static) if (n_panels >= 16)
  for (int64_t p = 0; p < n_panels; ++p) {
    const int64_t cols = min64(kPanelWidth, out - p * kPanelWidth);
    for (int64_t b = 0; b < blocks; ++b)
      panel_tile(w + p * in * kPanelWidth, bias ? bias + p * kPanelWidth : nullptr, in, xT + b * in * kRows,
                 min64(kRows, T - b * kRows), cols, y + b * kRows * out + p * kPanelWidth, out);
  }
}

}  // namespace headscope::ops::kernels
#endif
