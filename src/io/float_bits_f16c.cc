// headscope — f16_to_f32_row's F16C variant (float_bits.cc picks it when cpu::active_isa() is
// avx2 or above). Compiled with -mavx -mf16c; raw pointers only (see ops/panel_kernels.h).
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace headscope::io {

// Converts the first n − n % 8 values, eight per instruction; returns how many it converted.
size_t f16_to_f32_row_f16c(const uint8_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  return i;
}

}  // namespace headscope::io
#endif
