// headscope — the scalar fields of ggml blocks, for the vector block kernels (io/gguf_quants_avx2.cc,
// _avx512.cc and ops/quant_gemv_avx2.cc, _avx512.cc): a block's binary16 scale by F16C, its 32-bit
// high-bit mask, the K-quants' packed scales and mins. Included only by files compiled with -mf16c; everything here has
// internal linkage, so no file's copy, compiled with its own instruction set, can stand in for another's
// (ops/panel_kernels.h says why that matters).
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace headscope::io::block_fields {
namespace {

// A little-endian binary16 scale: the same value as io::load_f16.
inline float load_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return _cvtsh_ss(h);
}

// A little-endian 32-bit word at any alignment (Q5_0 and Q5_1's fifth bits).
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The 12-byte scale/min table of Q4_K and Q5_K (ggml get_scale_min_k4), as in gguf_quants.cc:
// eight 6-bit scales and eight 6-bit mins.
inline void unpack_scale_min_k4(const uint8_t* s, int sc[8], int mn[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    mn[j] = s[j + 4] & 63;
    sc[j + 4] = (s[j + 8] & 0x0F) | ((s[j] >> 6) << 4);
    mn[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
  }
}

// Q3_K's 12 packed bytes as its 16 signed 6-bit scales (scale − 32), as in gguf_quants.cc.
inline void unpack_scales_q3_k(const uint8_t* packed, int scale[16]) {
  for (int i = 0; i < 16; ++i) {
    const int lo = i < 8 ? (packed[i] & 0x0F) : (packed[i - 8] >> 4);
    const int hi = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
    scale[i] = (lo | (hi << 4)) - 32;
  }
}

}  // namespace
}  // namespace headscope::io::block_fields
