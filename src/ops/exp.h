// headscope — a vectorisable exp for the softmax loop.
//
// exp(x) = 2^n · e^r with n = round(x / ln 2) and r = x − n·ln 2 ∈ [−ln2/2, ln2/2]; e^r from its
// Taylor series to degree 7 (truncation error r^8/8! < 4e-9 relative) and 2^n put straight into
// the float's exponent bits. Branch-free, so `#pragma omp simd` loops compile to AVX-512/AVX2.
// Accuracy: within 2 ulp of std::exp over the softmax range (checked in tests/unit/ops_test.cc).
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>

namespace headscope::ops {

// e^x for x already within [−87, 88] (each caller clamps): 2^n · e^r as above.
inline float exp_in_range(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;         // ln 2 split in two (Cody–Waite) so that
  constexpr float kLn2Lo = 1.428606765330187045e-06f;  // r keeps full precision
  const float n = __builtin_rintf(x * kLog2e);         // round to nearest even (default rounding mode)
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040.0f;  // Horner: Σ_{i=0..7} r^i / i!
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // A NaN x (NaN weights in a model) gives a NaN r and p; its n is NaN too, and converting a NaN to
  // an integer is undefined, so n is taken as 0 there: the result stays NaN, and every other x is
  // unchanged (one compare and select, vectorised with the rest).
  const float n_finite = n == n ? n : 0.0f;
  const int32_t bits = (static_cast<int32_t>(n_finite) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

inline float exp_approx(float x) {
  const float keep = x < -87.0f ? 0.0f : 1.0f;  // e^-87 ≈ 1.6e-38: below, the answer is 0
  x = x < -87.0f ? -87.0f : x;                  // 2^n stays a normal float
  x = x > 88.0f ? 88.0f : x;
  return keep * exp_in_range(x);
}

// exp_approx(x) for the softmax's shifted scores x = s − max(s) <= 0, bit for bit (checked in
// tests/unit/ops_test.cc), with less work per element: no upper clamp (x <= 0 keeps 2^n within
// range), and the lower cut-off as one masked select instead of a clamp, a blend and a product.
inline float exp_nonpositive(float x) {
  const bool zero = x < -87.0f;
  return zero ? 0.0f : exp_in_range(zero ? -87.0f : x);
}

}  // namespace headscope::ops
