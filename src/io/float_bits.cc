// Bulk 16-bit float conversion. On the avx2 path and above (cpu/isa.h: every AVX2 CPU has F16C)
// eight values convert per instruction (float_bits_f16c.cc); the scalar loop is the portable
// path and gives the same bits (see float_bits.h on NaNs).
#include "io/float_bits.h"

#include "cpu/isa.h"

namespace headscope::io {

size_t f16_to_f32_row_f16c(const uint8_t* src, float* dst, size_t n);  // float_bits_f16c.cc

void f16_to_f32_row(const uint8_t* src, float* dst, size_t n) {
  size_t i = 0;
#if defined(__x86_64__)
  if (cpu::active_isa() >= cpu::Isa::avx2) i = f16_to_f32_row_f16c(src, dst, n);
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
