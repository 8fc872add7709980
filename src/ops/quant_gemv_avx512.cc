// headscope — ops::quant_gemv's row kernels, AVX-512F variant (gemv_kernels.h): the AVX2 kernels'
// decoding with 16 weights per register. Compiled with -mavx512f -mavx2 -mfma -mf16c.
//
// The byte layouts (io/gguf_quants.cc) suit 16 lanes: a 32-value block's 16 nibble bytes hold
// values 0..15 in their low nibbles and 16..31 in their high ones, and Q6_K's scales change
// every 16 values.
#if defined(__x86_64__)
// GCC 12's avx512fintrin.h trips its own uninitialized-variable warnings once inlined (GCC bug
// 105593, fixed in 13): silenced for this file only.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "io/block_fields.h"
#include "ops/gemv_kernels.h"

namespace headscope::ops::kernels {

namespace {

using io::block_fields::load_f16;
using io::block_fields::unpack_scale_min_k4;

// acc[t] += w · x[t · n .. + 16].
template <int T>
inline void fma16(__m512 w, const float* x, int64_t n, __m512* acc) {
  for (int t = 0; t < T; ++t) acc[t] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + t * n), acc[t]);
}
inline __m512i u8x16(const uint8_t* p) {  // 16 bytes → 16 int32
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m512 f32(__m512i v) { return _mm512_cvtepi32_ps(v); }
inline __m512i nib_lo(__m512i v) { return _mm512_and_si512(v, _mm512_set1_epi32(0x0F)); }
inline __m512i nib_hi(__m512i v) { return _mm512_srli_epi32(v, 4); }

// Q4_0: w = (q − 8) · d; Q4_1: w = q · d + m (layouts in quant_gemv_avx2.cc).
template <int T, bool kMin>
void row_q4(const uint8_t* blk, int64_t nb, const float* x, int64_t n, __m512* acc) {
  constexpr int kSize = kMin ? 20 : 18, kQs = kMin ? 4 : 2;
  for (int64_t b = 0; b < nb; ++b, blk += kSize, x += 32) {
    const __m512 d = _mm512_set1_ps(load_f16(blk));
    const __m512 m = _mm512_set1_ps(kMin ? load_f16(blk + 2) : 0.0f), eight = _mm512_set1_ps(8.0f);
    const __m512i q = u8x16(blk + kQs);
    const __m512 lo = f32(nib_lo(q)), hi = f32(nib_hi(q));
    fma16<T>(kMin ? _mm512_fmadd_ps(lo, d, m) : _mm512_mul_ps(_mm512_sub_ps(lo, eight), d), x, n, acc);
    fma16<T>(kMin ? _mm512_fmadd_ps(hi, d, m) : _mm512_mul_ps(_mm512_sub_ps(hi, eight), d), x + 16, n, acc);
  }
}

// Q5_0: bit j of qh is the 5th bit of value j; w = (q − 16) · d.
template <int T>
void row_q5_0(const uint8_t* blk, int64_t nb, const float* x, int64_t n, __m512* acc) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i lane_hi = _mm512_add_epi32(lane, _mm512_set1_epi32(16)), one = _mm512_set1_epi32(1);
  for (int64_t b = 0; b < nb; ++b, blk += 22, x += 32) {
    const __m512 d = _mm512_set1_ps(load_f16(blk)), sixteen = _mm512_set1_ps(16.0f);
    uint32_t qh;
    std::memcpy(&qh, blk + 2, 4);
    const __m512i bits = _mm512_set1_epi32(int(qh)), q = u8x16(blk + 6);
    const __m512i fifth_lo = _mm512_and_si512(_mm512_srlv_epi32(bits, lane), one);
    const __m512i fifth_hi = _mm512_and_si512(_mm512_srlv_epi32(bits, lane_hi), one);
    const __m512i lo = _mm512_or_si512(nib_lo(q), _mm512_slli_epi32(fifth_lo, 4));
    const __m512i hi = _mm512_or_si512(nib_hi(q), _mm512_slli_epi32(fifth_hi, 4));
    fma16<T>(_mm512_mul_ps(_mm512_sub_ps(f32(lo), sixteen), d), x, n, acc);
    fma16<T>(_mm512_mul_ps(_mm512_sub_ps(f32(hi), sixteen), d), x + 16, n, acc);
  }
}

// Q8_0: w = q · d.
template <int T>
void row_q8_0(const uint8_t* blk, int64_t nb, const float* x, int64_t n, __m512* acc) {
  for (int64_t b = 0; b < nb; ++b, blk += 34, x += 32) {
    const __m512 d = _mm512_set1_ps(load_f16(blk));
    for (int i = 0; i < 2; ++i) {
      const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2 + 16 * i)));
      fma16<T>(_mm512_mul_ps(f32(q), d), x + 16 * i, n, acc);
    }
  }
}

// Q4_K: chunk c of 64 values reads 32 bytes, low nibbles with scale/min 2c, high with 2c + 1.
template <int T>
void row_q4_k(const uint8_t* blk, int64_t nb, const float* x, int64_t n, __m512* acc) {
  for (int64_t b = 0; b < nb; ++b, blk += 144, x += 256) {
    const float d = load_f16(blk), dmin = load_f16(blk + 2);
    int sc[8], mn[8];
    unpack_scale_min_k4(blk + 4, sc, mn);
    for (int c = 0; c < 4; ++c) {
      const __m512 d1 = _mm512_set1_ps(d * float(sc[2 * c])), m1 = _mm512_set1_ps(dmin * float(mn[2 * c]));
      const __m512 d2 = _mm512_set1_ps(d * float(sc[2 * c + 1])), m2 = _mm512_set1_ps(dmin * float(mn[2 * c + 1]));
      for (int i = 0; i < 2; ++i) {
        const __m512i q = u8x16(blk + 16 + 32 * c + 16 * i);
        fma16<T>(_mm512_fmsub_ps(f32(nib_lo(q)), d1, m1), x + 64 * c + 16 * i, n, acc);
        fma16<T>(_mm512_fmsub_ps(f32(nib_hi(q)), d2, m2), x + 64 * c + 32 + 16 * i, n, acc);
      }
    }
  }
}

// Q6_K: per 128-value half, value l + 32k takes nibble k/2 of ql[l + 32·(k%2)] and bits 2k of
// qh[l]; scale l/16 + 2k, constant over the 16 lanes l .. l + 15: w = d·sc · (q − 32).
template <int T>
void row_q6_k(const uint8_t* blk, int64_t nb, const float* x, int64_t n, __m512* acc) {
  const __m512i three = _mm512_set1_epi32(3), offset = _mm512_set1_epi32(32);
  for (int64_t b = 0; b < nb; ++b, blk += 210, x += 256) {
    const float d = load_f16(blk + 208);
    const int8_t* scales = reinterpret_cast<const int8_t*>(blk + 192);
    for (int half = 0; half < 2; ++half) {
      const uint8_t *ql = blk + 64 * half, *qh = blk + 128 + 32 * half;
      for (int l = 0; l < 32; l += 16) {
        const __m512i a = u8x16(ql + l), c = u8x16(ql + l + 32), h = u8x16(qh + l);
        const __m512i q[4] = {nib_lo(a), nib_lo(c), nib_hi(a), nib_hi(c)};
        for (int k = 0; k < 4; ++k) {
          const __m512i high = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, 2 * k), three), 4);
          const __m512 v = f32(_mm512_sub_epi32(_mm512_or_si512(q[k], high), offset));
          const __m512 scale = _mm512_set1_ps(d * float(scales[8 * half + l / 16 + 2 * k]));
          fma16<T>(_mm512_mul_ps(scale, v), x + 128 * half + 32 * k + l, n, acc);
        }
      }
    }
  }
}

// The block types with a kernel above; row<K, T> calls K's kernel with T rows of x.
enum class Kind { q4_0, q4_1, q5_0, q8_0, q4_k, q6_k };
constexpr int64_t block_values(Kind k) { return k == Kind::q4_k || k == Kind::q6_k ? 256 : 32; }

template <Kind K, int T>
void row(const uint8_t* b, int64_t nb, const float* x, int64_t n, __m512* acc) {
  if constexpr (K == Kind::q4_0) row_q4<T, false>(b, nb, x, n, acc);
  if constexpr (K == Kind::q4_1) row_q4<T, true>(b, nb, x, n, acc);
  if constexpr (K == Kind::q5_0) row_q5_0<T>(b, nb, x, n, acc);
  if constexpr (K == Kind::q8_0) row_q8_0<T>(b, nb, x, n, acc);
  if constexpr (K == Kind::q4_k) row_q4_k<T>(b, nb, x, n, acc);
  if constexpr (K == Kind::q6_k) row_q6_k<T>(b, nb, x, n, acc);
}

template <Kind K, int T>
void block_dot(const uint8_t* blocks, int64_t n, const float* x, float* sums) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  row<K, T>(blocks, n / block_values(K), x, n, acc);
  for (int t = 0; t < T; ++t) sums[t] = _mm512_reduce_add_ps(acc[t]);
}

template <Kind K>
void block_dot(const uint8_t* blocks, int64_t n, const float* x, int T, float* sums) {
  switch (T) {
    case 1:
      return block_dot<K, 1>(blocks, n, x, sums);
    case 2:
      return block_dot<K, 2>(blocks, n, x, sums);
    case 3:
      return block_dot<K, 3>(blocks, n, x, sums);
    default:
      return block_dot<K, 4>(blocks, n, x, sums);  // the caller keeps T ≤ kGemvMaxRows = 4
  }
}

template <int T>
void float_dot(const float* w, int64_t n, const float* x, float* sums) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) fma16<T>(_mm512_loadu_ps(w + k), x + k, n, acc);
  for (int t = 0; t < T; ++t) sums[t] = _mm512_reduce_add_ps(acc[t]);
  for (; k < n; ++k)
    for (int t = 0; t < T; ++t) sums[t] += w[k] * x[t * n + k];
}

void float_dot(const float* w, int64_t n, const float* x, int T, float* sums) {
  switch (T) {
    case 1:
      return float_dot<1>(w, n, x, sums);
    case 2:
      return float_dot<2>(w, n, x, sums);
    case 3:
      return float_dot<3>(w, n, x, sums);
    default:
      return float_dot<4>(w, n, x, sums);
  }
}

}  // namespace

GemvKernels gemv_kernels_avx512() {
  GemvKernels k;
  k.q4_0 = block_dot<Kind::q4_0>, k.q4_1 = block_dot<Kind::q4_1>, k.q5_0 = block_dot<Kind::q5_0>;
  k.q8_0 = block_dot<Kind::q8_0>, k.q4_k = block_dot<Kind::q4_k>, k.q6_k = block_dot<Kind::q6_k>;
  k.f32 = float_dot;
  return k;
}

}  // namespace headscope::ops::kernels
#endif
