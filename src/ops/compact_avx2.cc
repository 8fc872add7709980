// headscope — ops::keep_greater / keep_less, AVX2 variant (compact.h): 8 lanes compared, their
// mask picks a permutation that packs the kept lanes to the front, one full store, the position
// advanced by the mask's population count. Compiled with -mavx2 -mfma -mf16c.
#if defined(__x86_64__)
#include <immintrin.h>

#include <array>
#include <bit>
#include <cstdint>

#include "ops/compact.h"

namespace headscope::ops::kernels {

namespace {

// kPack[mask] lists the set lanes of `mask` first, in order (the rest of the row is unused).
constexpr std::array<std::array<int32_t, 8>, 256> make_pack() {
  std::array<std::array<int32_t, 8>, 256> t{};
  for (int mask = 0; mask < 256; ++mask) {
    int m = 0;
    for (int lane = 0; lane < 8; ++lane)
      if (mask & (1 << lane)) t[size_t(mask)][size_t(m++)] = lane;
  }
  return t;
}
alignas(32) constexpr std::array<std::array<int32_t, 8>, 256> kPack = make_pack();

// A full store at dst + m writes lanes m .. m + 7; in place, m <= i, so it never reaches a value
// not yet loaded (i + 8 onwards).
template <int kCmp>
int keep(const float* src, float* dst, int n, float pivot) {
  const __m256 p = _mm256_set1_ps(pivot);
  int m = 0;
  for (int i = 0; i < n; i += 8) {  // n: a multiple of 8 (compact.h)
    const __m256 x = _mm256_loadu_ps(src + i);
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(x, p, kCmp));
    const __m256i order = _mm256_load_si256(reinterpret_cast<const __m256i*>(kPack[size_t(mask)].data()));
    _mm256_storeu_ps(dst + m, _mm256_permutevar8x32_ps(x, order));
    m += std::popcount(static_cast<unsigned>(mask));
  }
  return m;
}

}  // namespace

CompactKernels compact_kernels_avx2() { return {keep<_CMP_GT_OQ>, keep<_CMP_LT_OQ>, 8}; }

}  // namespace headscope::ops::kernels
#endif
