// headscope — io::dequantize_row's block kernels, AVX-512F variant (dequant_kernels.h): 16 values
// per register. Compiled with -mavx512f -mavx2 -mfma -mf16c.
//
// Each kernel decodes as the scalar loop beside its layout in gguf_quants.cc does, with the same
// arithmetic in the same order (an integer converted to float, times a scale, then ± a second
// one), so the floats agree bit for bit. The 16 lanes suit the layouts: a 32-value block's 16
// nibble bytes hold values 0..15 in their low nibbles and 16..31 in their high ones, and the
// K-quants' scales change every 16 or 32 values.
#if defined(__x86_64__)
// GCC 12's avx512fintrin.h trips its own uninitialized-variable warnings once inlined (GCC bug
// 105593, fixed in 13): silenced for this file only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "io/block_fields.h"
#include "io/dequant_kernels.h"

namespace headscope::io::kernels {

namespace {

using block_fields::load_f16;
using block_fields::load_u32;
using block_fields::unpack_scale_min_k4;
using block_fields::unpack_scales_q3_k;

inline __m512i u8x16(const uint8_t* p) {  // 16 bytes → 16 int32
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m512i i8x16(const uint8_t* p) {  // 16 signed bytes → 16 int32
  return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m512 f32(__m512i v) { return _mm512_cvtepi32_ps(v); }
inline __m512i nib_lo(__m512i v) { return _mm512_and_si512(v, _mm512_set1_epi32(0x0F)); }
inline __m512i nib_hi(__m512i v) { return _mm512_srli_epi32(v, 4); }
inline __m512i sub_i(__m512i v, int k) { return _mm512_sub_epi32(v, _mm512_set1_epi32(k)); }
// v with 16 added in the lanes whose bit of `mask` is set: the 5th bit of a 5-bit value.
inline __m512i or16(__m512i v, __mmask16 mask) { return _mm512_mask_or_epi32(v, mask, v, _mm512_set1_epi32(16)); }

// y = q · d (Q4_0, Q5_0, Q8_0, Q3_K, Q6_K) or q · d + m / q · d − m (Q4_1, Q5_1 / the K-quants):
// the product rounded, then the sum (exact products: the compiler may fuse the two, same bits).
inline void store_mul(float* y, __m512i q, __m512 d) { _mm512_storeu_ps(y, _mm512_mul_ps(f32(q), d)); }
inline void store_mul_add(float* y, __m512i q, __m512 d, __m512 m) {
  _mm512_storeu_ps(y, _mm512_add_ps(_mm512_mul_ps(f32(q), d), m));
}
inline void store_mul_sub(float* y, __m512i q, __m512 d, __m512 m) {
  _mm512_storeu_ps(y, _mm512_sub_ps(_mm512_mul_ps(f32(q), d), m));
}
// Q4_1 / Q5_1: q · d + m; Q4_0 / Q5_0: (q − zero) · d.
template <bool kMin>
inline void store_q(float* y, __m512i q, __m512 d, __m512 m, int zero) {
  if constexpr (kMin)
    store_mul_add(y, q, d, m);
  else
    store_mul(y, sub_i(q, zero), d);
}

// Q4_0 (18 B: f16 d; u8 qs[16]): (nibble − 8) · d. Q4_1 (20 B: f16 d, m; u8 qs[16]): nibble · d + m.
template <bool kMin>
void dequant_q4(const uint8_t* x, float* y, int64_t nb) {
  constexpr int kSize = kMin ? 20 : 18, kQs = kMin ? 4 : 2;
  for (int64_t b = 0; b < nb; ++b, x += kSize, y += 32) {
    const __m512 d = _mm512_set1_ps(load_f16(x)), m = _mm512_set1_ps(kMin ? load_f16(x + 2) : 0.0f);
    const __m512i q = u8x16(x + kQs);
    store_q<kMin>(y, nib_lo(q), d, m, 8);
    store_q<kMin>(y + 16, nib_hi(q), d, m, 8);
  }
}

// Q5_0 (22 B: f16 d; u32 qh; u8 qs[16]): (5-bit q − 16) · d. Q5_1 (24 B: f16 d, m; u32 qh;
// u8 qs[16]): 5-bit q · d + m. Bit j of qh is the 5th bit of value j: bits 0..15 go with the
// low nibbles, 16..31 with the high ones, one bit per lane.
template <bool kMin>
void dequant_q5(const uint8_t* x, float* y, int64_t nb) {
  constexpr int kSize = kMin ? 24 : 22, kQh = kMin ? 4 : 2;
  for (int64_t b = 0; b < nb; ++b, x += kSize, y += 32) {
    const __m512 d = _mm512_set1_ps(load_f16(x)), m = _mm512_set1_ps(kMin ? load_f16(x + 2) : 0.0f);
    const uint32_t qh = load_u32(x + kQh);
    const __m512i q = u8x16(x + kQh + 4);
    store_q<kMin>(y, or16(nib_lo(q), __mmask16(qh & 0xFFFF)), d, m, 16);
    store_q<kMin>(y + 16, or16(nib_hi(q), __mmask16(qh >> 16)), d, m, 16);
  }
}

// Q8_0 (34 B: f16 d; i8 qs[32]): q · d.
void dequant_q8_0(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 34, y += 32) {
    const __m512 d = _mm512_set1_ps(load_f16(x));
    store_mul(y, i8x16(x + 2), d);
    store_mul(y + 16, i8x16(x + 18), d);
  }
}

// Q2_K (84 B: u8 scales[16]; u8 qs[64]; f16 d, dmin): each 128-value half reads 32 bytes of qs at
// bit shifts 0, 2, 4, 6; each 16 values take scale byte `sc`: d·(sc & 15) · q − dmin·(sc >> 4).
void dequant_q2_k(const uint8_t* x, float* y, int64_t nb) {
  const __m512i three = _mm512_set1_epi32(3);
  for (int64_t b = 0; b < nb; ++b, x += 84, y += 256) {
    const float d = load_f16(x + 80), dmin = load_f16(x + 82);
    for (int half = 0; half < 2; ++half)
      for (int sub = 0; sub < 2; ++sub) {
        const __m512i q = u8x16(x + 16 + 32 * half + 16 * sub);
        for (int pass = 0; pass < 4; ++pass) {
          const uint8_t sc = x[half * 8 + pass * 2 + sub];
          const __m512 dl = _mm512_set1_ps(d * float(sc & 0x0F)), ml = _mm512_set1_ps(dmin * float(sc >> 4));
          const __m512i v = _mm512_and_si512(_mm512_srli_epi32(q, unsigned(2 * pass)), three);
          store_mul_sub(y + half * 128 + pass * 32 + sub * 16, v, dl, ml);
        }
      }
  }
}

// Q3_K (110 B: u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d): low 2 bits walked as in Q2_K,
// minus 4 where the value's hmask bit is clear; 16 signed 6-bit scales: d·(scale − 32) · q.
void dequant_q3_k(const uint8_t* x, float* y, int64_t nb) {
  const __m512i three = _mm512_set1_epi32(3);
  for (int64_t b = 0; b < nb; ++b, x += 110, y += 256) {
    const uint8_t* packed = x + 96;
    const float d = load_f16(x + 108);
    int scale[16];
    unpack_scales_q3_k(packed, scale);
    for (int sub = 0; sub < 2; ++sub) {
      const __m512i hmask = u8x16(x + 16 * sub);
      for (int half = 0; half < 2; ++half) {
        const __m512i q = u8x16(x + 32 + 32 * half + 16 * sub);
        for (int pass = 0; pass < 4; ++pass) {
          const __m512i low2 = _mm512_and_si512(_mm512_srli_epi32(q, unsigned(2 * pass)), three);
          const __mmask16 set = _mm512_test_epi32_mask(hmask, _mm512_set1_epi32(1 << (half * 4 + pass)));
          const __m512i v = _mm512_mask_mov_epi32(sub_i(low2, 4), set, low2);
          const __m512 dl = _mm512_set1_ps(d * float(scale[half * 8 + pass * 2 + sub]));
          store_mul(y + half * 128 + pass * 32 + sub * 16, v, dl);
        }
      }
    }
  }
}

// Q4_K (144 B: f16 d, dmin; u8 scales[12]; u8 qs[128]) and Q5_K (176 B: the same with u8 qh[32]
// before qs): chunk c of 64 values reads 32 bytes of qs, low nibbles with scale/min 2c, high
// with 2c + 1; Q5_K's 5th bit is bit 2c (low) or 2c + 1 (high) of qh[l]: d·sc · q − dmin·mn.
template <bool kHigh>
void dequant_q45_k(const uint8_t* x, float* y, int64_t nb) {
  constexpr int kSize = kHigh ? 176 : 144, kQs = kHigh ? 48 : 16;
  for (int64_t b = 0; b < nb; ++b, x += kSize, y += 256) {
    const float d = load_f16(x), dmin = load_f16(x + 2);
    int sc[8], mn[8];
    unpack_scale_min_k4(x + 4, sc, mn);
    for (int c = 0; c < 4; ++c) {
      const __m512 d1 = _mm512_set1_ps(d * float(sc[2 * c])), m1 = _mm512_set1_ps(dmin * float(mn[2 * c]));
      const __m512 d2 = _mm512_set1_ps(d * float(sc[2 * c + 1])), m2 = _mm512_set1_ps(dmin * float(mn[2 * c + 1]));
      for (int i = 0; i < 2; ++i) {
        const __m512i q = u8x16(x + kQs + 32 * c + 16 * i);
        __m512i lo = nib_lo(q), hi = nib_hi(q);
        if constexpr (kHigh) {
          const __m512i h = u8x16(x + 16 + 16 * i);
          lo = or16(lo, _mm512_test_epi32_mask(h, _mm512_set1_epi32(1 << (2 * c))));
          hi = or16(hi, _mm512_test_epi32_mask(h, _mm512_set1_epi32(1 << (2 * c + 1))));
        }
        store_mul_sub(y + 64 * c + 16 * i, lo, d1, m1);
        store_mul_sub(y + 64 * c + 32 + 16 * i, hi, d2, m2);
      }
    }
  }
}

// Q6_K (210 B: u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d): per 128-value half, value l + 32k
// takes nibble k/2 of ql[l + 32·(k%2)] and bits 2k of qh[l]; scale l/16 + 2k, constant over the
// 16 lanes l .. l + 15: d·sc · (q − 32).
void dequant_q6_k(const uint8_t* x, float* y, int64_t nb) {
  const __m512i three = _mm512_set1_epi32(3);
  for (int64_t b = 0; b < nb; ++b, x += 210, y += 256) {
    const float d = load_f16(x + 208);
    const int8_t* scales = reinterpret_cast<const int8_t*>(x + 192);
    for (int half = 0; half < 2; ++half) {
      const uint8_t *ql = x + 64 * half, *qh = x + 128 + 32 * half;
      for (int l = 0; l < 32; l += 16) {
        const __m512i a = u8x16(ql + l), c = u8x16(ql + l + 32), h = u8x16(qh + l);
        const __m512i q[4] = {nib_lo(a), nib_lo(c), nib_hi(a), nib_hi(c)};
        for (int k = 0; k < 4; ++k) {
          const __m512i high = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, unsigned(2 * k)), three), 4);
          const __m512 scale = _mm512_set1_ps(d * float(scales[8 * half + l / 16 + 2 * k]));
          store_mul(y + 128 * half + 32 * k + l, sub_i(_mm512_or_si512(q[k], high), 32), scale);
        }
      }
    }
  }
}

}  // namespace

DequantKernels dequant_kernels_avx512() {
  DequantKernels k;
  k.q4_0 = dequant_q4<false>, k.q4_1 = dequant_q4<true>, k.q5_0 = dequant_q5<false>, k.q5_1 = dequant_q5<true>;
  k.q8_0 = dequant_q8_0, k.q2_k = dequant_q2_k, k.q3_k = dequant_q3_k;
  k.q4_k = dequant_q45_k<false>, k.q5_k = dequant_q45_k<true>, k.q6_k = dequant_q6_k;
  return k;
}

}  // namespace headscope::io::kernels
#endif
