// Bulk 16-bit float conversion. With F16C (x86, enabled by -march=native on any CPU since 2012)
// eight values convert per instruction; the scalar loop is the portable fallback and gives the
// same bits (see float_bits.h on NaNs).
#include "io/float_bits.h"

#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#endif

namespace headscope::io {

void f16_to_f32_row(const uint8_t* src, float* dst, size_t n) {
  size_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < n; ++i) dst[i] = load_f16(src + 2 * i);
}

void bf16_to_f32_row(const uint8_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t b;
    std::memcpy(&b, src + 2 * i, sizeof b);
    dst[i] = bf16_bits_to_f32(b);
  }
}

}  // namespace headscope::io
