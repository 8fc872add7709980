// Decoder ops (RMSNorm, SwiGLU, GELU-tanh, RoPE) against their slow twins, plus properties that
// hold independently of any implementation: RoPE scores depend only on the relative position, the
// two pair layouts agree once the head dimensions are permuted, Llama-3 scaling leaves the high
// frequencies alone and divides the low ones by the factor.
#include <gtest/gtest.h>

#include "test_support.h"

#include <cmath>
#include <random>
#include <vector>

#include "ops/activations.h"
#include "ops/attention.h"
#include "ops/norm.h"
#include "ops/reference/activations.h"
#include "ops/reference/attention.h"
#include "ops/reference/norm.h"
#include "ops/reference/rope.h"
#include "ops/rope.h"

namespace {

using headscope::testing::max_abs_diff;
using headscope::testing::random_vector;

using namespace headscope::ops;

TEST(DecoderOps, RmsNormMatchesTwin) {
  const int64_t T = 7, d = 96;
  auto x = random_vector(T * d, 1, 3.0f), g = random_vector(d, 2);
  std::vector<float> fast(x.size()), slow(x.size());
  rms_norm(x.data(), T, d, g.data(), 1e-5f, fast.data());
  reference::rms_norm(x.data(), T, d, g.data(), 1e-5f, slow.data());
  EXPECT_LT(max_abs_diff(fast, slow), 1e-6f);
  // Hand check: x = [3, 4], gamma = 1: rms = sqrt(12.5), y = x / rms.
  const float x2[2] = {3.0f, 4.0f}, g2[2] = {1.0f, 1.0f};
  float y2[2];
  rms_norm(x2, 1, 2, g2, 0.0f, y2);
  EXPECT_NEAR(y2[0], 3.0 / std::sqrt(12.5), 1e-7);
  EXPECT_NEAR(y2[1], 4.0 / std::sqrt(12.5), 1e-7);
}

TEST(DecoderOps, ActivationsMatchTwins) {
  auto gate = random_vector(1000, 3, 4.0f), up = random_vector(1000, 4);
  auto g_fast = gate, g_slow = gate;
  silu_mul(g_fast.data(), up.data(), 1000);
  reference::silu_mul(g_slow.data(), up.data(), 1000);
  EXPECT_LT(max_abs_diff(g_fast, g_slow), 1e-5f);
  for (size_t i = 0; i < g_fast.size(); ++i)  // a few ulp of each value, not just of the largest
    EXPECT_NEAR(g_fast[i], g_slow[i], 4e-7f * std::abs(g_slow[i]) + 1e-30f) << "gate " << gate[i];
  // The ends of the range: e^−z overflows float for z < −88.7, underflows for z > 103.
  std::vector<float> far = {-200.0f, -100.0f, -88.0f, -20.0f, 20.0f, 88.0f, 100.0f, 200.0f}, ones(far.size(), 1.0f);
  auto f_fast = far, f_slow = far;
  silu_mul(f_fast.data(), ones.data(), int64_t(far.size()));
  reference::silu_mul(f_slow.data(), ones.data(), int64_t(far.size()));
  for (size_t i = 0; i < far.size(); ++i)
    EXPECT_NEAR(f_fast[i], f_slow[i], 1e-6f * std::abs(f_slow[i]) + 1e-30f) << far[i];
  auto x_fast = gate, x_slow = gate;
  gelu_tanh(x_fast.data(), 1000);
  reference::gelu_tanh(x_slow.data(), 1000);
  EXPECT_LT(max_abs_diff(x_fast, x_slow), 1e-5f);
  float one = 1.0f;  // GELU-tanh(1) = 0.841191990607...
  gelu_tanh(&one, 1);
  EXPECT_NEAR(one, 0.8411919906f, 1e-6f);
}

// Gemma's GeGLU gate and soft-capping against their twins and a hand value.
TEST(DecoderOps, GemmaActivationsMatchTwins) {
  auto gate = random_vector(1000, 6, 4.0f), up = random_vector(1000, 7);
  auto g_fast = gate, g_slow = gate;
  gelu_tanh_mul(g_fast.data(), up.data(), 1000);
  reference::gelu_tanh_mul(g_slow.data(), up.data(), 1000);
  EXPECT_LT(max_abs_diff(g_fast, g_slow), 1e-5f);
  float one = 1.0f;
  const float two = 2.0f;
  gelu_tanh_mul(&one, &two, 1);  // 2 · GELU-tanh(1)
  EXPECT_NEAR(one, 2 * 0.8411919906f, 2e-6f);
  auto s_fast = random_vector(1000, 8, 200.0f), s_slow = s_fast;
  soft_cap(s_fast.data(), 1000, 50.0f);
  reference::soft_cap(s_slow.data(), 1000, 50.0f);
  EXPECT_LT(max_abs_diff(s_fast, s_slow), 1e-4f);
  for (float v : s_fast) EXPECT_LE(std::abs(v), 50.0f);
  float x = 50.0f;  // 50 · tanh(1) = 38.0797077977...
  soft_cap(&x, 1, 50.0f);
  EXPECT_NEAR(x, 38.0797078f, 1e-4f);
}

// Attention with soft-capped scores (Gemma 2) against the slow twin; with a cap far below the
// scores the rows flatten, so the cap must be applied (a run without it differs).
TEST(DecoderOps, SoftCappedAttentionMatchesTwin) {
  const int64_t T = 11, H = 4, Hkv = 2, Dh = 8, ld = H * Dh;
  auto q = random_vector(T * ld, 21, 3.0f), k = random_vector(T * Hkv * Dh, 22, 3.0f),
       v = random_vector(T * Hkv * Dh, 23);
  const int kv[H] = {0, 0, 1, 1};
  const AttentionDims d{T, T, H, Hkv, Dh, 1.0f};
  KeyMask mask;
  mask.causal = true;
  mask.window = 4;
  mask.softcap = 2.0f;
  std::vector<float> p(H * T * T), o(T * ld), p_slow(p.size()), o_slow(o.size()), p_plain(p.size()), o_plain(o.size());
  attention(q.data(), ld, k.data(), Hkv * Dh, v.data(), Hkv * Dh, kv, d, mask, 0, p.data(), o.data(), ld);
  reference::attention(q.data(), ld, k.data(), Hkv * Dh, v.data(), Hkv * Dh, kv, d, mask, 0, p_slow.data(),
                       o_slow.data(), ld);
  EXPECT_LT(max_abs_diff(p, p_slow), 2e-6f);
  EXPECT_LT(max_abs_diff(o, o_slow), 1e-5f);
  KeyMask plain = mask;
  plain.softcap = 0.0f;
  attention(q.data(), ld, k.data(), Hkv * Dh, v.data(), Hkv * Dh, kv, d, plain, 0, p_plain.data(), o_plain.data(), ld);
  EXPECT_GT(max_abs_diff(p, p_plain), 1e-2f);
}

TEST(DecoderOps, RopeMatchesTwinInBothLayouts) {
  const int64_t T = 9, H = 3, Dh = 16;
  RopeConfig cfg;
  cfg.d_rot = Dh;
  cfg.base = 10000.0;
  const auto inv = rope_inverse_frequencies(cfg);
  for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    auto x = random_vector(T * H * Dh, 5);
    auto fast = x, slow = x;
    rope_apply(fast.data(), H * Dh, T, H, Dh, rope_table(inv, 4, T), Dh, layout);
    reference::rope_apply(slow.data(), H * Dh, T, H, Dh, inv.data(), 4, Dh, layout);
    EXPECT_LT(max_abs_diff(fast, slow), 1e-5f);
  }
}

// q·k after rotation depends on p_q − p_k only; and the interleaved layout on permuted vectors
// gives the same score as the half-split layout.
TEST(DecoderOps, RopeScoresAreRelativeAndLayoutInvariant) {
  const int64_t Dh = 32;
  RopeConfig cfg;
  cfg.d_rot = Dh;
  const auto inv = rope_inverse_frequencies(cfg);
  const auto q = random_vector(Dh, 6), k = random_vector(Dh, 7);
  const auto score = [&](std::vector<float> a, std::vector<float> b, int64_t pa, int64_t pb, RopeLayout layout) {
    rope_apply(a.data(), Dh, 1, 1, Dh, rope_table(inv, pa, 1), Dh, layout);
    rope_apply(b.data(), Dh, 1, 1, Dh, rope_table(inv, pb, 1), Dh, layout);
    double s = 0.0;
    for (int64_t i = 0; i < Dh; ++i) s += double(a[size_t(i)]) * b[size_t(i)];
    return s;
  };
  const double s1 = score(q, k, 5, 2, RopeLayout::kHalfSplit), s2 = score(q, k, 13, 10, RopeLayout::kHalfSplit);
  EXPECT_NEAR(s1, s2, 1e-4);
  // half-split dimension i pairs with i + Dh/2; interleaved puts them at 2i, 2i + 1.
  std::vector<float> qi(Dh), ki(Dh);
  for (int64_t i = 0; i < Dh / 2; ++i) {
    qi[size_t(2 * i)] = q[size_t(i)], qi[size_t(2 * i + 1)] = q[size_t(i + Dh / 2)];
    ki[size_t(2 * i)] = k[size_t(i)], ki[size_t(2 * i + 1)] = k[size_t(i + Dh / 2)];
  }
  EXPECT_NEAR(score(qi, ki, 5, 2, RopeLayout::kInterleaved), s1, 1e-4);
}

TEST(DecoderOps, Llama3ScalingRegimes) {
  RopeConfig plain;
  plain.d_rot = 64;
  plain.base = 500000.0;
  RopeConfig scaled = plain;
  scaled.llama3_scaling = true;
  scaled.factor = 8.0;
  scaled.low_freq_factor = 1.0;
  scaled.high_freq_factor = 4.0;
  scaled.original_max_positions = 8192.0;
  const auto a = rope_inverse_frequencies(plain), b = rope_inverse_frequencies(scaled);
  int high = 0, low = 0, mid = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double wavelen = 2.0 * M_PI / a[i];
    if (wavelen < 8192.0 / 4.0) {
      EXPECT_EQ(b[i], a[i]) << i;
      ++high;
    } else if (wavelen > 8192.0 / 1.0) {
      EXPECT_FLOAT_EQ(b[i], a[i] / 8.0f) << i;
      ++low;
    } else {
      EXPECT_LT(b[i], a[i]);
      EXPECT_GT(b[i], a[i] / 8.0f);
      ++mid;
    }
  }
  EXPECT_GT(high, 0);
  EXPECT_GT(low, 0);
  EXPECT_GT(mid, 0);
}

}  // namespace
