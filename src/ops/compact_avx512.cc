// headscope — ops::keep_greater / keep_less, AVX-512F variant (compact.h): 16 lanes compared into
// a mask, compressed into a register (vcompressps to memory is slow on some cores, to a register
// it is not), one full store, the position advanced by the mask's population count. Compiled
// with -mavx512f -mavx2 -mfma -mf16c.
#if defined(__x86_64__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's avx512fintrin.h (bug 105593)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <bit>

#include "ops/compact.h"

namespace headscope::ops::kernels {

namespace {

// In place, m <= i: the store at dst + m never reaches a value not yet loaded (i + 16 onwards).
template <int kCmp>
int keep(const float* src, float* dst, int n, float pivot) {
  const __m512 p = _mm512_set1_ps(pivot);
  int m = 0;
  for (int i = 0; i < n; i += 16) {  // n: a multiple of 16 (compact.h)
    const __m512 x = _mm512_loadu_ps(src + i);
    const __mmask16 mask = _mm512_cmp_ps_mask(x, p, kCmp);
    _mm512_storeu_ps(dst + m, _mm512_maskz_compress_ps(mask, x));
    m += std::popcount(static_cast<unsigned>(mask));
  }
  return m;
}

}  // namespace

CompactKernels compact_kernels_avx512() { return {keep<_CMP_GT_OQ>, keep<_CMP_LT_OQ>, 16}; }

}  // namespace headscope::ops::kernels
#endif
