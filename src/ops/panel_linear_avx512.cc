// headscope — ops::panel_linear, AVX-512F variant (see panel_linear.h for the layout and
// panel_kernels.h for how variants are built). Compiled with -mavx512f -mavx2 -mfma.
//
// Same panels and xᵀ blocks as the AVX2 variant, but one 16-float register holds a whole column
// of the 16-row block: a 6 × 16 tile is six accumulators. Six dependent FMA chains would wait on
// the FMA latency, so even and odd input features go to two sets of six and the sets are added at
// the end (the sum is then in two interleaved halves rather than strictly in order).
#if defined(__x86_64__)
// GCC 12's avx512fintrin.h trips its own uninitialized-variable warnings once inlined (GCC bug
// 105593, fixed in 13): silenced for this file only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "ops/panel_kernels.h"
#include "ops/panel_transpose.h"

namespace headscope::ops::kernels {

namespace {

inline void panel_tile16(const float* w, const float* bias, int64_t in, const float* xT, int64_t rows, int64_t cols,
                         float* y, int64_t out) {
  static_assert(kPanelWidth == 6, "the tile below is written out for 6 output features");
  auto b = [&](int64_t j) { return _mm512_set1_ps(bias && j < cols ? bias[j] : 0.0f); };
  __m512 e0 = b(0), e1 = b(1), e2 = b(2), e3 = b(3), e4 = b(4), e5 = b(5);       // even k (and the bias)
  __m512 o0 = _mm512_setzero_ps(), o1 = o0, o2 = o0, o3 = o0, o4 = o0, o5 = o0;  // odd k
  int64_t k = 0;
  for (; k + 2 <= in; k += 2) {
    prefetch_panel(w, k);
    const __m512 x0 = _mm512_loadu_ps(xT + k * kRows), x1 = _mm512_loadu_ps(xT + (k + 1) * kRows);
    const float* wk = w + k * kPanelWidth;  // features k and k + 1: 12 consecutive floats
    e0 = _mm512_fmadd_ps(_mm512_set1_ps(wk[0]), x0, e0), o0 = _mm512_fmadd_ps(_mm512_set1_ps(wk[6]), x1, o0);
    e1 = _mm512_fmadd_ps(_mm512_set1_ps(wk[1]), x0, e1), o1 = _mm512_fmadd_ps(_mm512_set1_ps(wk[7]), x1, o1);
    e2 = _mm512_fmadd_ps(_mm512_set1_ps(wk[2]), x0, e2), o2 = _mm512_fmadd_ps(_mm512_set1_ps(wk[8]), x1, o2);
    e3 = _mm512_fmadd_ps(_mm512_set1_ps(wk[3]), x0, e3), o3 = _mm512_fmadd_ps(_mm512_set1_ps(wk[9]), x1, o3);
    e4 = _mm512_fmadd_ps(_mm512_set1_ps(wk[4]), x0, e4), o4 = _mm512_fmadd_ps(_mm512_set1_ps(wk[10]), x1, o4);
    e5 = _mm512_fmadd_ps(_mm512_set1_ps(wk[5]), x0, e5), o5 = _mm512_fmadd_ps(_mm512_set1_ps(wk[11]), x1, o5);
  }
  if (k < in) {  // an odd count of input features: the last one
    const __m512 x0 = _mm512_loadu_ps(xT + k * kRows);
    const float* wk = w + k * kPanelWidth;
    e0 = _mm512_fmadd_ps(_mm512_set1_ps(wk[0]), x0, e0), e1 = _mm512_fmadd_ps(_mm512_set1_ps(wk[1]), x0, e1);
    e2 = _mm512_fmadd_ps(_mm512_set1_ps(wk[2]), x0, e2), e3 = _mm512_fmadd_ps(_mm512_set1_ps(wk[3]), x0, e3);
    e4 = _mm512_fmadd_ps(_mm512_set1_ps(wk[4]), x0, e4), e5 = _mm512_fmadd_ps(_mm512_set1_ps(wk[5]), x0, e5);
  }
  alignas(64) float tile[kPanelWidth][kRows];
  _mm512_store_ps(tile[0], _mm512_add_ps(e0, o0)), _mm512_store_ps(tile[1], _mm512_add_ps(e1, o1));
  _mm512_store_ps(tile[2], _mm512_add_ps(e2, o2)), _mm512_store_ps(tile[3], _mm512_add_ps(e3, o3));
  _mm512_store_ps(tile[4], _mm512_add_ps(e4, o4)), _mm512_store_ps(tile[5], _mm512_add_ps(e5, o5));
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t j = 0; j < cols; ++j) y[t * out + j] = tile[j][t];
}

}  // namespace

void panel_linear_avx512(const float* w, const float* bias, int64_t in, int64_t out, const float* x, int64_t T,
                         float* y, float* xT) {
  const int64_t n_panels = (out + kPanelWidth - 1) / kPanelWidth, blocks = (T + kRows - 1) / kRows;
  for (int64_t b = 0; b < blocks; ++b)
    transpose_rows(x + b * kRows * in, min64(kRows, T - b * kRows), in, xT + b * in * kRows);
#pragma omp parallel for schedule(static) if (n_panels >= 16)
  for (int64_t p = 0; p < n_panels; ++p) {
    const int64_t cols = min64(kPanelWidth, out - p * kPanelWidth);
    for (int64_t b = 0; b < blocks; ++b)
      panel_tile16(w + p * in * kPanelWidth, bias ? bias + p * kPanelWidth : nullptr, in, xT + b * in * kRows,
                   min64(kRows, T - b * kRows), cols, y + b * kRows * out + p * kPanelWidth, out);
  }
}

}  // namespace headscope::ops::kernels
#endif
