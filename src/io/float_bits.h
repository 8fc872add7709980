// headscope — exact conversion of the 16-bit float storage formats to fp32, by bit manipulation.
//
//   IEEE 754 binary16 (F16):  1 sign | 5 exponent (bias 15)  | 10 mantissa
//   bfloat16 (BF16):          1 sign | 8 exponent (bias 127) |  7 mantissa  (the top half of an fp32)
//
// Every F16 value, subnormals included, is exactly representable in fp32, so the conversion is
// lossless. NaNs come out quiet (the quiet bit set, payload kept), which is what x86's F16C
// instruction does, so the scalar and vector paths agree bit for bit.
#pragma once
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace headscope::io {

inline float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  uint32_t bits;
  if (exponent == 0x1F) {  // inf (mantissa 0) or NaN
    bits = sign | 0x7F800000u | (mantissa << 13) | (mantissa ? 0x00400000u : 0u);
  } else if (exponent != 0) {  // normal: rebias 15 -> 127
    bits = sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {  // signed zero
    bits = sign;
  } else {
    // Subnormal: value = mantissa * 2^-24. Shift the leading 1 up to the implicit-bit position
    // (bit 10); each shift lowers the exponent by one. The result is a normal fp32.
    int shifts = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shifts;
    }
    bits = sign | (static_cast<uint32_t>(127 - 15 + 1 - shifts) << 23) | ((mantissa & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(bits);
}

inline float bf16_bits_to_f32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// Reads a little-endian binary16 at an arbitrary (possibly unaligned) address.
inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return f16_bits_to_f32(h);
}

// Converts n consecutive binary16 values at `src` (any alignment) to fp32.
void f16_to_f32_row(const uint8_t* src, float* dst, size_t n);
// Converts n consecutive bfloat16 values at `src` (any alignment) to fp32.
void bf16_to_f32_row(const uint8_t* src, float* dst, size_t n);

}  // namespace headscope::io
