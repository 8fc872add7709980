// headscope — ops::quant_gemv's row kernels, AVX2 + FMA variant (gemv_kernels.h). Compiled with
// -mavx2 -mfma -mf16c.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstring>

#include "io/block_fields.h"
#include "ops/gemv_kernels.h"

namespace headscope::ops::kernels {

namespace {

using io::block_fields::load_f16;
using io::block_fields::unpack_scale_min_k4;

// Block kernels: each walks one row's blocks (layouts in io/gguf_quants.cc), turns 8 weights at a
// time into the same fp32 values the dequantiser writes, and adds weight · x into accumulators
// (x advances with the weights; rows of x are n floats apart).
//
// Each row of x has kChains<T> accumulators, used in turn by the 8-weight groups of a block (slot
// s goes to chain s % kChains): one chain would make every FMA wait for the previous one (4 cycles
// of latency), which bounds a one-row GEMV (a generation step) at 2 weights a cycle. With T rows
// the rows' chains are already independent. The chains are added at the end (chain_sums).
template <int T>
constexpr int kChains = T == 1   ? 4
                        : T == 2 ? 2
                                 : 1;

// acc[chain · T + t] += w · x[t · n .. + 8], chain = s % kChains<T>.
template <int T>
inline void fma8(__m256 w, const float* x, int64_t n, __m256* acc, int s) {
  __m256* a = acc + (s % kChains<T>)*T;
  for (int t = 0; t < T; ++t) a[t] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + t * n), a[t]);
}
inline __m256i u8x8(const uint8_t* p) {  // 8 bytes → 8 int32
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 f32(__m256i v) { return _mm256_cvtepi32_ps(v); }
inline __m256i nib_lo(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi32(0x0F)); }
inline __m256i nib_hi(__m256i v) { return _mm256_srli_epi32(v, 4); }

// Q4_0 (18 B: f16 d; 16 B nibbles, low = values 0..15, high = 16..31): w = (q − 8) · d.
// Q4_1 (20 B: f16 d; f16 m; nibbles): w = q · d + m.
template <int T, bool kMin>
void row_q4(const uint8_t* blk, int64_t nb, const float* x, int64_t n, __m256* acc) {
  constexpr int kSize = kMin ? 20 : 18, kQs = kMin ? 4 : 2;
  for (int64_t b = 0; b < nb; ++b, blk += kSize, x += 32) {
    const __m256 d = _mm256_set1_ps(load_f16(blk));
    const __m256 m = _mm256_set1_ps(kMin ? load_f16(blk + 2) : 0.0f), eight = _mm256_set1_ps(8.0f);
    for (int h = 0; h < 2; ++h) {  // bytes 0..7, 8..15: values 8h.. (low) and 16 + 8h.. (high)
      const __m256i q = u8x8(blk + kQs + 8 * h);
      const __m256 lo = f32(nib_lo(q)), hi = f32(nib_hi(q));
      fma8<T>(kMin ? _mm256_fmadd_ps(lo, d, m) : _mm256_mul_ps(_mm256_sub_ps(lo, eight), d), x + 8 * h, n, acc, 2 * h);
      fma8<T>(kMin ? _mm256_fmadd_ps(hi, d, m) : _mm256_mul_ps(_mm256_sub_ps(hi, eight), d), x + 16 + 8 * h, n, acc,
              2 * h + 1);
    }
  }
}

// Q5_0 (22 B: f16 d; u32 qh, bit j = 5th bit of value j; nibbles as Q4_0): w = (q − 16) · d.
template <int T>
void row_q5_0(const uint8_t* blk, int64_t nb, const float* x, int64_t n, __m256* acc) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), one = _mm256_set1_epi32(1);
  for (int64_t b = 0; b < nb; ++b, blk += 22, x += 32) {
    const __m256 d = _mm256_set1_ps(load_f16(blk)), sixteen = _mm256_set1_ps(16.0f);
    uint32_t qh;
    std::memcpy(&qh, blk + 2, 4);
    const __m256i bits = _mm256_set1_epi32(int(qh));
    for (int h = 0; h < 2; ++h) {
      const __m256i q = u8x8(blk + 6 + 8 * h);
      for (int part = 0; part < 2; ++part) {  // low nibbles: values 8h..; high: 16 + 8h..
        const int first = 16 * part + 8 * h;
        const __m256i fifth =
            _mm256_and_si256(_mm256_srlv_epi32(bits, _mm256_add_epi32(lane, _mm256_set1_epi32(first))), one);
        const __m256i v = _mm256_or_si256(part == 0 ? nib_lo(q) : nib_hi(q), _mm256_slli_epi32(fifth, 4));
        fma8<T>(_mm256_mul_ps(_mm256_sub_ps(f32(v), sixteen), d), x + first, n, acc, 2 * h + part);
      }
    }
  }
}

// Q8_0 (34 B: f16 d; i8 q[32]): w = q · d.
template <int T>
void row_q8_0(const uint8_t* blk, int64_t nb, const float* x, int64_t n, __m256* acc) {
  for (int64_t b = 0; b < nb; ++b, blk += 34, x += 32) {
    const __m256 d = _mm256_set1_ps(load_f16(blk));
    for (int i = 0; i < 4; ++i) {
      const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 2 + 8 * i)));
      fma8<T>(_mm256_mul_ps(f32(q), d), x + 8 * i, n, acc, i);
    }
  }
}

// Q4_K (144 B: f16 d; f16 dmin; 12 B of 6-bit scales and mins; 128 B nibbles): chunk c of 64
// values reads 32 bytes, low nibbles with scale/min 2c, high with 2c + 1: w = d·sc · q − dmin·mn.
template <int T>
void row_q4_k(const uint8_t* blk, int64_t nb, const float* x, int64_t n, __m256* acc) {
  for (int64_t b = 0; b < nb; ++b, blk += 144, x += 256) {
    const float d = load_f16(blk), dmin = load_f16(blk + 2);
    int sc[8], mn[8];
    unpack_scale_min_k4(blk + 4, sc, mn);
    for (int c = 0; c < 4; ++c) {
      const __m256 d1 = _mm256_set1_ps(d * float(sc[2 * c])), m1 = _mm256_set1_ps(dmin * float(mn[2 * c]));
      const __m256 d2 = _mm256_set1_ps(d * float(sc[2 * c + 1])), m2 = _mm256_set1_ps(dmin * float(mn[2 * c + 1]));
      for (int i = 0; i < 4; ++i) {
        const __m256i q = u8x8(blk + 16 + 32 * c + 8 * i);
        fma8<T>(_mm256_fmsub_ps(f32(nib_lo(q)), d1, m1), x + 64 * c + 8 * i, n, acc, 2 * i);
        fma8<T>(_mm256_fmsub_ps(f32(nib_hi(q)), d2, m2), x + 64 * c + 32 + 8 * i, n, acc, 2 * i + 1);
      }
    }
  }
}

// Q6_K (210 B: 128 B low nibbles ql; 64 B 2-bit highs qh; i8 scales[16]; f16 d): per 128-value
// half, value l + 32k takes nibble k/2 of ql[l + 32·(k%2)] and bits 2k of qh[l]; scale l/16 + 2k:
// w = d·sc · (q − 32).
template <int T>
void row_q6_k(const uint8_t* blk, int64_t nb, const float* x, int64_t n, __m256* acc) {
  const __m256i three = _mm256_set1_epi32(3), offset = _mm256_set1_epi32(32);
  for (int64_t b = 0; b < nb; ++b, blk += 210, x += 256) {
    const float d = load_f16(blk + 208);
    const int8_t* scales = reinterpret_cast<const int8_t*>(blk + 192);
    for (int half = 0; half < 2; ++half) {
      const uint8_t *ql = blk + 64 * half, *qh = blk + 128 + 32 * half;
      for (int l = 0; l < 32; l += 8) {
        const __m256i a = u8x8(ql + l), c = u8x8(ql + l + 32), h = u8x8(qh + l);
        const __m256i q[4] = {nib_lo(a), nib_lo(c), nib_hi(a), nib_hi(c)};
        for (int k = 0; k < 4; ++k) {
          const __m256i high = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 2 * k), three), 4);
          const __m256 v = f32(_mm256_sub_epi32(_mm256_or_si256(q[k], high), offset));
          const __m256 scale = _mm256_set1_ps(d * float(scales[8 * half + l / 16 + 2 * k]));
          fma8<T>(_mm256_mul_ps(scale, v), x + 128 * half + 32 * k + l, n, acc, k);
        }
      }
    }
  }
}

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The block types with a kernel above; row<K, T> calls K's kernel with T rows of x.
enum class Kind { q4_0, q4_1, q5_0, q8_0, q4_k, q6_k };
constexpr int64_t block_values(Kind k) { return k == Kind::q4_k || k == Kind::q6_k ? 256 : 32; }

template <Kind K, int T>
void row(const uint8_t* b, int64_t nb, const float* x, int64_t n, __m256* acc) {
  if constexpr (K == Kind::q4_0) row_q4<T, false>(b, nb, x, n, acc);
  if constexpr (K == Kind::q4_1) row_q4<T, true>(b, nb, x, n, acc);
  if constexpr (K == Kind::q5_0) row_q5_0<T>(b, nb, x, n, acc);
  if constexpr (K == Kind::q8_0) row_q8_0<T>(b, nb, x, n, acc);
  if constexpr (K == Kind::q4_k) row_q4_k<T>(b, nb, x, n, acc);
  if constexpr (K == Kind::q6_k) row_q6_k<T>(b, nb, x, n, acc);
}

// Row t's chains added pairwise ((c0 + c1) + (c2 + c3)), then its 8 lanes.
template <int T>
void chain_sums(const __m256* acc, float* sums) {
  for (int t = 0; t < T; ++t) {
    __m256 v[kChains<T>];
    for (int c = 0; c < kChains<T>; ++c) v[c] = acc[c * T + t];
    for (int width = kChains<T>; width > 1; width /= 2)
      for (int c = 0; c < width / 2; ++c) v[c] = _mm256_add_ps(v[2 * c], v[2 * c + 1]);
    sums[t] = hsum(v[0]);
  }
}

// T is a compile-time count so that the accumulators stay in registers.
template <Kind K, int T>
void block_dot(const uint8_t* blocks, int64_t n, const float* x, float* sums) {
  __m256 acc[T * kChains<T>];
  for (__m256& a : acc) a = _mm256_setzero_ps();
  row<K, T>(blocks, n / block_values(K), x, n, acc);
  chain_sums<T>(acc, sums);
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
  __m256 acc[T * kChains<T>];
  for (__m256& a : acc) a = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 * kChains<T> <= n; k += 8 * kChains<T>)
    for (int s = 0; s < kChains<T>; ++s) fma8<T>(_mm256_loadu_ps(w + k + 8 * s), x + k + 8 * s, n, acc, s);
  for (; k + 8 <= n; k += 8) fma8<T>(_mm256_loadu_ps(w + k), x + k, n, acc, 0);
  chain_sums<T>(acc, sums);
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

GemvKernels gemv_kernels_avx2() {
  GemvKernels k;
  k.q4_0 = block_dot<Kind::q4_0>, k.q4_1 = block_dot<Kind::q4_1>, k.q5_0 = block_dot<Kind::q5_0>;
  k.q8_0 = block_dot<Kind::q8_0>, k.q4_k = block_dot<Kind::q4_k>, k.q6_k = block_dot<Kind::q6_k>;
  k.f32 = float_dot;
  return k;
}

}  // namespace headscope::ops::kernels
#endif
