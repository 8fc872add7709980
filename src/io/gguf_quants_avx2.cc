// headscope — io::dequantize_row's block kernels, AVX2 variant (dequant_kernels.h): 8 values per
// register. Compiled with -mavx2 -mfma -mf16c.
//
// Each kernel decodes as the scalar loop beside its layout in gguf_quants.cc does, with the same
// arithmetic in the same order (an integer converted to float, times a scale, then ± a second
// one), so the floats agree bit for bit.
#if defined(__x86_64__)
#include <immintrin.h>

#include "io/block_fields.h"
#include "io/dequant_kernels.h"

namespace headscope::io::kernels {

namespace {

using block_fields::load_f16;
using block_fields::load_u32;
using block_fields::unpack_scale_min_k4;
using block_fields::unpack_scales_q3_k;

inline __m256i u8x8(const uint8_t* p) {  // 8 bytes → 8 int32
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline __m256i i8x8(const uint8_t* p) {  // 8 signed bytes → 8 int32
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 f32(__m256i v) { return _mm256_cvtepi32_ps(v); }
inline __m256i nib_lo(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi32(0x0F)); }
inline __m256i nib_hi(__m256i v) { return _mm256_srli_epi32(v, 4); }
inline __m256i sub_i(__m256i v, int k) { return _mm256_sub_epi32(v, _mm256_set1_epi32(k)); }
// Bit `bit` of each lane of v, moved to bit 4 (value 16): the 5th bit of a 5-bit value.
inline __m256i bit_to_16(__m256i v, int bit) {
  return _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(v, bit), _mm256_set1_epi32(1)), 4);
}

// y = q · d, or q · d ± m: the product rounded, then the sum (exact products: the compiler may
// fuse the two, same bits).
inline void store_mul(float* y, __m256i q, __m256 d) { _mm256_storeu_ps(y, _mm256_mul_ps(f32(q), d)); }
inline void store_mul_add(float* y, __m256i q, __m256 d, __m256 m) {
  _mm256_storeu_ps(y, _mm256_add_ps(_mm256_mul_ps(f32(q), d), m));
}
inline void store_mul_sub(float* y, __m256i q, __m256 d, __m256 m) {
  _mm256_storeu_ps(y, _mm256_sub_ps(_mm256_mul_ps(f32(q), d), m));
}
// Q4_1 / Q5_1: q · d + m; Q4_0 / Q5_0: (q − zero) · d.
template <bool kMin>
inline void store_q(float* y, __m256i q, __m256 d, __m256 m, int zero) {
  if constexpr (kMin)
    store_mul_add(y, q, d, m);
  else
    store_mul(y, sub_i(q, zero), d);
}

// Q4_0 (18 B: f16 d; u8 qs[16]): (nibble − 8) · d. Q4_1 (20 B: f16 d, m; u8 qs[16]): nibble · d + m.
// Bytes 8h .. 8h + 7 hold values 8h.. (low nibbles) and 16 + 8h.. (high).
template <bool kMin>
void dequant_q4(const uint8_t* x, float* y, int64_t nb) {
  constexpr int kSize = kMin ? 20 : 18, kQs = kMin ? 4 : 2;
  for (int64_t b = 0; b < nb; ++b, x += kSize, y += 32) {
    const __m256 d = _mm256_set1_ps(load_f16(x));
    const __m256 m = _mm256_set1_ps(kMin ? load_f16(x + 2) : 0.0f);
    for (int h = 0; h < 2; ++h) {
      const __m256i q = u8x8(x + kQs + 8 * h);
      store_q<kMin>(y + 8 * h, nib_lo(q), d, m, 8);
      store_q<kMin>(y + 16 + 8 * h, nib_hi(q), d, m, 8);
    }
  }
}

// Q5_0 (22 B: f16 d; u32 qh; u8 qs[16]): (5-bit q − 16) · d. Q5_1 (24 B: f16 d, m; u32 qh;
// u8 qs[16]): 5-bit q · d + m. Bit j of qh is the 5th bit of value j.
template <bool kMin>
void dequant_q5(const uint8_t* x, float* y, int64_t nb) {
  constexpr int kSize = kMin ? 24 : 22, kQh = kMin ? 4 : 2;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t b = 0; b < nb; ++b, x += kSize, y += 32) {
    const __m256 d = _mm256_set1_ps(load_f16(x));
    const __m256 m = _mm256_set1_ps(kMin ? load_f16(x + 2) : 0.0f);
    const __m256i bits = _mm256_set1_epi32(int(load_u32(x + kQh)));
    for (int h = 0; h < 2; ++h) {
      const __m256i q = u8x8(x + kQh + 4 + 8 * h);
      for (int part = 0; part < 2; ++part) {  // low nibbles: values 8h..; high: 16 + 8h..
        const int first = 16 * part + 8 * h;
        const __m256i fifth = _mm256_srlv_epi32(bits, _mm256_add_epi32(lane, _mm256_set1_epi32(first)));
        const __m256i v = _mm256_or_si256(part == 0 ? nib_lo(q) : nib_hi(q), bit_to_16(fifth, 0));
        store_q<kMin>(y + first, v, d, m, 16);
      }
    }
  }
}

// Q8_0 (34 B: f16 d; i8 qs[32]): q · d.
void dequant_q8_0(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b, x += 34, y += 32) {
    const __m256 d = _mm256_set1_ps(load_f16(x));
    for (int i = 0; i < 4; ++i) store_mul(y + 8 * i, i8x8(x + 2 + 8 * i), d);
  }
}

// Q2_K (84 B: u8 scales[16]; u8 qs[64]; f16 d, dmin): each 128-value half reads 32 bytes of qs at
// bit shifts 0, 2, 4, 6; each 16 values take scale byte `sc`: d·(sc & 15) · q − dmin·(sc >> 4).
void dequant_q2_k(const uint8_t* x, float* y, int64_t nb) {
  const __m256i three = _mm256_set1_epi32(3);
  for (int64_t b = 0; b < nb; ++b, x += 84, y += 256) {
    const float d = load_f16(x + 80), dmin = load_f16(x + 82);
    for (int half = 0; half < 2; ++half)
      for (int l = 0; l < 32; l += 8) {  // sub-block l / 16
        const __m256i q = u8x8(x + 16 + 32 * half + l);
        for (int pass = 0; pass < 4; ++pass) {
          const uint8_t sc = x[half * 8 + pass * 2 + l / 16];
          const __m256 dl = _mm256_set1_ps(d * float(sc & 0x0F)), ml = _mm256_set1_ps(dmin * float(sc >> 4));
          const __m256i v = _mm256_and_si256(_mm256_srli_epi32(q, 2 * pass), three);
          store_mul_sub(y + half * 128 + pass * 32 + l, v, dl, ml);
        }
      }
  }
}

// Q3_K (110 B: u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d): low 2 bits walked as in Q2_K,
// minus 4 where the value's hmask bit is clear; 16 signed 6-bit scales: d·(scale − 32) · q.
void dequant_q3_k(const uint8_t* x, float* y, int64_t nb) {
  const __m256i three = _mm256_set1_epi32(3), four = _mm256_set1_epi32(4), zero = _mm256_setzero_si256();
  for (int64_t b = 0; b < nb; ++b, x += 110, y += 256) {
    const uint8_t* packed = x + 96;
    const float d = load_f16(x + 108);
    int scale[16];
    unpack_scales_q3_k(packed, scale);
    for (int l = 0; l < 32; l += 8) {  // sub-block l / 16
      const __m256i hmask = u8x8(x + l);
      for (int half = 0; half < 2; ++half) {
        const __m256i q = u8x8(x + 32 + 32 * half + l);
        for (int pass = 0; pass < 4; ++pass) {
          const __m256i low2 = _mm256_and_si256(_mm256_srli_epi32(q, 2 * pass), three);
          const __m256i bit = _mm256_and_si256(hmask, _mm256_set1_epi32(1 << (half * 4 + pass)));
          const __m256i v = _mm256_sub_epi32(low2, _mm256_and_si256(_mm256_cmpeq_epi32(bit, zero), four));
          const __m256 dl = _mm256_set1_ps(d * float(scale[half * 8 + pass * 2 + l / 16]));
          store_mul(y + half * 128 + pass * 32 + l, v, dl);
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
      const __m256 d1 = _mm256_set1_ps(d * float(sc[2 * c])), m1 = _mm256_set1_ps(dmin * float(mn[2 * c]));
      const __m256 d2 = _mm256_set1_ps(d * float(sc[2 * c + 1])), m2 = _mm256_set1_ps(dmin * float(mn[2 * c + 1]));
      for (int l = 0; l < 32; l += 8) {
        const __m256i q = u8x8(x + kQs + 32 * c + l);
        __m256i lo = nib_lo(q), hi = nib_hi(q);
        if constexpr (kHigh) {
          const __m256i h = u8x8(x + 16 + l);
          lo = _mm256_or_si256(lo, bit_to_16(h, 2 * c));
          hi = _mm256_or_si256(hi, bit_to_16(h, 2 * c + 1));
        }
        store_mul_sub(y + 64 * c + l, lo, d1, m1);
        store_mul_sub(y + 64 * c + 32 + l, hi, d2, m2);
      }
    }
  }
}

// Q6_K (210 B: u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d): per 128-value half, value l + 32k
// takes nibble k/2 of ql[l + 32·(k%2)] and bits 2k of qh[l]; scale l/16 + 2k: d·sc · (q − 32).
void dequant_q6_k(const uint8_t* x, float* y, int64_t nb) {
  const __m256i three = _mm256_set1_epi32(3);
  for (int64_t b = 0; b < nb; ++b, x += 210, y += 256) {
    const float d = load_f16(x + 208);
    const int8_t* scales = reinterpret_cast<const int8_t*>(x + 192);
    for (int half = 0; half < 2; ++half) {
      const uint8_t *ql = x + 64 * half, *qh = x + 128 + 32 * half;
      for (int l = 0; l < 32; l += 8) {
        const __m256i a = u8x8(ql + l), c = u8x8(ql + l + 32), h = u8x8(qh + l);
        const __m256i q[4] = {nib_lo(a), nib_lo(c), nib_hi(a), nib_hi(c)};
        for (int k = 0; k < 4; ++k) {
          const __m256i high = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 2 * k), three), 4);
          const __m256 scale = _mm256_set1_ps(d * float(scales[8 * half + l / 16 + 2 * k]));
          store_mul(y + 128 * half + 32 * k + l, sub_i(_mm256_or_si256(q[k], high), 32), scale);
        }
      }
    }
  }
}

}  // namespace

DequantKernels dequant_kernels_avx2() {
  DequantKernels k;
  k.q4_0 = dequant_q4<false>, k.q4_1 = dequant_q4<true>, k.q5_0 = dequant_q5<false>, k.q5_1 = dequant_q5<true>;
  k.q8_0 = dequant_q8_0, k.q2_k = dequant_q2_k, k.q3_k = dequant_q3_k;
  k.q4_k = dequant_q45_k<false>, k.q5_k = dequant_q45_k<true>, k.q6_k = dequant_q6_k;
  return k;
}

}  // namespace headscope::io::kernels
#endif
