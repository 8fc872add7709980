// headscope — log2 of sixteen floats at once, for the entropy of attention rows.
//
// Lanes are GCC vector types of 16 floats (one AVX-512 register, two AVX2 ones), so that a loop
// keeps its accumulators in registers. Two ways to the same function:
//   - log2_lanes_series, portable: x = m · 2^e with m ∈ [√½, √2), log2 m = 2·atanh(s) / ln 2 with
//     s = (m − 1)/(m + 1), |s| <= 0.172, the atanh series to s^11 (truncation < 1e-9). Within a
//     few float ulps of std::log2, exact at powers of 2. It pays for a division.
//   - log2_lanes_table, AVX-512: the exponent and mantissa m ∈ [0.75, 1.5) from vgetexpps and
//     vgetmantps, then one of 32 sub-intervals of m by its top mantissa bits, with a centre c
//     whose reciprocal 1/c and −log2(1/c) come from two 32-entry tables (vpermt2ps);
//     log2 m = log2(m · 1/c) − log2(1/c), the first as the Taylor series of log2(1 + r) in
//     r = m · 1/c − 1 (one rounding, |r| <= 1/32) to degree 5 (truncation < 3e-10). The two
//     sub-intervals next to 1 use c = 1, so results near 0 keep their relative accuracy, and
//     powers of 2 are exact. No division.
// log2_lanes is the table where the build has AVX-512, else the series. tests/unit/ops_test.cc
// checks both against std::log2.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX512F__)
#pragma GCC diagnostic push  // GCC 12's avx512fintrin.h (bug 105593), wherever these inline
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // (a GCC-only group)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

namespace headscope::ops {

using Lanes = float __attribute__((vector_size(64)));
using IntLanes = int32_t __attribute__((vector_size(64)));
constexpr int kLanes = 16;

// log2(x) for x > 0, lane by lane, branch-free (the series above).
inline Lanes log2_lanes_series(Lanes x) {
  const IntLanes bits = (IntLanes)x;
  IntLanes e = ((bits >> 23) & 0xff) - 127;
  Lanes m = (Lanes)((bits & 0x007fffff) | 0x3f800000);  // [1, 2)
  const IntLanes high = m > 1.41421356f;                // −1 (all bits) where true
  m = high ? m * 0.5f : m;
  e -= high;
  const Lanes s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
  Lanes p = s2 * (1.0f / 11.0f) + 1.0f / 9.0f;
  p = p * s2 + 1.0f / 7.0f;
  p = p * s2 + 1.0f / 5.0f;
  p = p * s2 + 1.0f / 3.0f;
  p = p * s2 + 1.0f;
  constexpr float k2OverLn2 = 2.88539008177792681f;  // 2 / ln 2
  return __builtin_convertvector(e, Lanes) + k2OverLn2 * s * p;
}

#if defined(__AVX512F__)
// The 32 sub-intervals of m ∈ [0.75, 1.5), indexed by bits 18..22 of m's float (the top five
// mantissa bits): indices 0–15 are [1 + i/32, 1 + (i+1)/32), indices 16–31 are
// [0.75 + (i−16)/64, 0.75 + (i−15)/64). inv[i] = 1/c_i as a float, neg_log[i] = −log2(inv[i]).
struct Log2Table {
  alignas(64) float inv[32];
  alignas(64) float neg_log[32];
};

inline const Log2Table& log2_table() {
  static const Log2Table table = [] {
    Log2Table t{};
    for (int i = 0; i < 32; ++i) {
      const double lo = i < 16 ? 1.0 + i / 32.0 : 0.75 + (i - 16) / 64.0;
      const double width = i < 16 ? 1.0 / 32.0 : 1.0 / 64.0;
      const bool next_to_one = i == 0 || i == 31;
      t.inv[i] = next_to_one ? 1.0f : static_cast<float>(1.0 / (lo + width / 2));
      t.neg_log[i] = next_to_one ? 0.0f : static_cast<float>(-std::log2(static_cast<double>(t.inv[i])));
    }
    return t;
  }();
  return table;
}

// The tables loaded into registers once per loop, not once per call.
struct Log2Registers {
  __m512 inv_lo, inv_hi, log_lo, log_hi;
  Log2Registers() {
    const Log2Table& t = log2_table();
    inv_lo = _mm512_load_ps(t.inv), inv_hi = _mm512_load_ps(t.inv + 16);
    log_lo = _mm512_load_ps(t.neg_log), log_hi = _mm512_load_ps(t.neg_log + 16);
  }
};

// log2(x) for x > 0 and normal, lane by lane (the table above).
inline Lanes log2_lanes_table(Lanes xs, const Log2Registers& t) {
  const __m512 x = (__m512)xs;
  const __m512 m = _mm512_getmant_ps(x, _MM_MANT_NORM_p75_1p5, _MM_MANT_SIGN_src);  // [0.75, 1.5)
  __m512 e = _mm512_getexp_ps(x);                                                   // floor(log2 x)
  // x = 2^E · M with M ∈ [1, 2); getmant halves M >= 1.5, so that x = 2^(E+1) · m there.
  e = _mm512_mask_add_ps(e, _mm512_cmp_ps_mask(m, _mm512_set1_ps(1.0f), _CMP_LT_OQ), e, _mm512_set1_ps(1.0f));
  const __m512i index = _mm512_srli_epi32(_mm512_castps_si512(m), 18);  // vpermt2ps reads its low 5 bits
  const __m512 inv = _mm512_permutex2var_ps(t.inv_lo, index, t.inv_hi);
  const __m512 neg_log = _mm512_permutex2var_ps(t.log_lo, index, t.log_hi);
  const __m512 r = _mm512_fmsub_ps(m, inv, _mm512_set1_ps(1.0f));  // m/c − 1, one rounding
  constexpr float kInvLn2 = 1.44269504088896341f;
  __m512 p = _mm512_set1_ps(kInvLn2 / 5.0f);  // Horner: log2(1 + r) = Σ_{i=1..5} (−1)^(i+1) r^i / (i ln 2)
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(-kInvLn2 / 4.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kInvLn2 / 3.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(-kInvLn2 / 2.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kInvLn2));
  return (Lanes)_mm512_fmadd_ps(p, r, _mm512_add_ps(e, neg_log));
}

struct Log2Lanes {  // log2_lanes with its tables in registers
  Log2Registers t;
  Lanes operator()(Lanes x) const { return log2_lanes_table(x, t); }
};
#pragma GCC diagnostic pop
#else
struct Log2Lanes {
  Lanes operator()(Lanes x) const { return log2_lanes_series(x); }
};
#endif

}  // namespace headscope::ops
