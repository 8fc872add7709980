// Every fast kernel beside its slow twin (ops/reference), on random inputs of awkward shapes,
// and at 1 and 2 threads for the head-parallel attention.
#include <gtest/gtest.h>

#include <omp.h>
#include "test_support.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "ops/activations.h"
#include "ops/attention.h"
#include "ops/exp.h"
#include "ops/log2.h"
#include "ops/matmul.h"
#include "ops/norm.h"
#include "ops/reference/attention.h"
#include "ops/reference/matmul.h"
#include "ops/reference/norm.h"

namespace headscope::ops {
namespace {

using headscope::testing::max_abs_diff;
using headscope::testing::random_vector;

TEST(Matmul, MatchesReferenceWithStridesAndTranspose) {
  for (bool trans_b : {false, true}) {
    const int64_t M = 37, N = 29, K = 53, lda = 61, ldb = 70, ldc = 33;
    auto A = random_vector(M * lda, 1), B = random_vector(70 * 70, 2), C0 = random_vector(M * ldc, 3);
    auto fast = C0, slow = C0;
    matmul(A.data(), lda, B.data(), ldb, fast.data(), ldc, M, N, K, trans_b, 0.5f, 0.25f);
    reference::matmul(A.data(), lda, B.data(), ldb, slow.data(), ldc, M, N, K, trans_b, 0.5f, 0.25f);
    EXPECT_LT(max_abs_diff(fast, slow), 1e-4f) << "trans_b=" << trans_b;
  }
}

TEST(Linear, AddsBiasToEveryRow) {
  const int64_t T = 5, in = 7, out = 3;
  auto x = random_vector(T * in, 4), W = random_vector(out * in, 5), b = random_vector(out, 6);
  std::vector<float> y(T * out);
  linear(x.data(), T, in, W.data(), b.data(), out, y.data());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t o = 0; o < out; ++o) {
      double ref = b[o];
      for (int64_t i = 0; i < in; ++i) ref += double(x[t * in + i]) * W[o * in + i];
      EXPECT_NEAR(y[t * out + o], ref, 1e-5);
    }
}

TEST(LayerNorm, MatchesReferenceAndNormalises) {
  const int64_t T = 9, d = 384;
  auto x = random_vector(T * d, 7, 3.0f), g = random_vector(d, 8), b = random_vector(d, 9);
  std::vector<float> fast(T * d), slow(T * d), ones(d, 1.0f), zeros(d, 0.0f), plain(T * d);
  layer_norm(x.data(), T, d, g.data(), b.data(), 1e-12f, fast.data());
  reference::layer_norm(x.data(), T, d, g.data(), b.data(), 1e-12f, slow.data());
  EXPECT_LT(max_abs_diff(fast, slow), 1e-5f);
  layer_norm(x.data(), T, d, ones.data(), zeros.data(), 1e-12f, plain.data());
  double mean = 0, var = 0;
  for (int64_t i = 0; i < d; ++i) mean += plain[i];
  mean /= d;
  for (int64_t i = 0; i < d; ++i) var += (plain[i] - mean) * (plain[i] - mean);
  EXPECT_NEAR(mean, 0.0, 1e-6);
  EXPECT_NEAR(var / d, 1.0, 1e-4);
}

TEST(Gelu, MatchesErfFormula) {
  std::vector<float> x = {-3.0f, -1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 3.0f};
  auto y = x;
  gelu_erf(y.data(), static_cast<int64_t>(y.size()));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0))), 1e-6);
}

struct AttentionCase {
  int64_t T, n_head, n_kv_head, d_head;
  bool causal;
  int64_t window;
};

class AttentionTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionTest, MatchesReferenceAtOneAndTwoThreads) {
  const AttentionCase c = GetParam();
  const int64_t ldq = c.n_head * c.d_head + 3, ldk = c.n_kv_head * c.d_head + 5;  // padded rows
  auto q = random_vector(c.T * ldq, 11, 2.0f), k = random_vector(c.T * ldk, 12, 2.0f), v = random_vector(c.T * ldk, 13);
  std::vector<int> kv(c.n_head);
  for (int64_t h = 0; h < c.n_head; ++h) kv[h] = int(h / (c.n_head / c.n_kv_head));
  AttentionDims d{c.T, c.T, c.n_head, c.n_kv_head, c.d_head, 1.0f / std::sqrt(float(c.d_head))};
  KeyMask mask{c.causal, c.window, nullptr};
  const int64_t ldo = c.n_head * c.d_head;
  std::vector<float> p_slow(c.n_head * c.T * c.T), o_slow(c.T * ldo);
  reference::attention(q.data(), ldq, k.data(), ldk, v.data(), ldk, kv.data(), d, mask, 0, p_slow.data(), o_slow.data(),
                       ldo);
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    std::vector<float> p(c.n_head * c.T * c.T, -1.0f), o(c.T * ldo);
    attention(q.data(), ldq, k.data(), ldk, v.data(), ldk, kv.data(), d, mask, 0, p.data(), o.data(), ldo);
    EXPECT_LT(max_abs_diff(p, p_slow), 2e-6f) << threads << " threads";
    EXPECT_LT(max_abs_diff(o, o_slow), 1e-5f) << threads << " threads";
    for (int64_t h = 0; h < c.n_head; ++h)
      for (int64_t i = 0; i < c.T; ++i) {
        double row = 0;
        for (int64_t j = 0; j < c.T; ++j) {
          const float pij = p[(h * c.T + i) * c.T + j];
          row += pij;
          if (c.causal && j > i) {
            EXPECT_EQ(pij, 0.0f);
          }
          if (c.window > 0 && j <= i - c.window) {
            EXPECT_EQ(pij, 0.0f);
          }
        }
        EXPECT_NEAR(row, 1.0, 1e-5);
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Values(AttentionCase{1, 2, 2, 16, false, 0},
                                           AttentionCase{17, 12, 12, 32, false, 0},
                                           AttentionCase{33, 9, 3, 64, true, 0}, AttentionCase{20, 4, 1, 8, true, 0},
                                           AttentionCase{25, 4, 2, 16, true, 6},
                                           // large enough for the head-parallel path (≥ 2^15 scores)
                                           AttentionCase{96, 6, 2, 16, true, 0}, AttentionCase{80, 8, 8, 8, false, 0}));

// HeadFollowUp: every part of every head runs once, on rows that are already complete (each part
// sums its head's rows as it finds them and must get the sum of the finished map), and a part that
// throws is rethrown by the call.
TEST(Attention, FollowUpPartsSeeEachHeadComplete) {
  const int64_t T = 96, H = 9, Hkv = 3, Dh = 16, ld = H * Dh;
  auto q = random_vector(T * ld, 31, 2.0f), k = random_vector(T * Hkv * Dh, 32, 2.0f),
       v = random_vector(T * Hkv * Dh, 33);
  std::vector<int> kv(H);
  for (int64_t h = 0; h < H; ++h) kv[size_t(h)] = int(h / 3);
  const AttentionDims d{T, T, H, Hkv, Dh, 0.25f};
  const KeyMask mask{true, 0, nullptr};
  std::vector<float> p_plain(H * T * T), o_plain(T * ld);
  attention(q.data(), ld, k.data(), Hkv * Dh, v.data(), Hkv * Dh, kv.data(), d, mask, 0, p_plain.data(), o_plain.data(),
            ld);
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    constexpr int kParts = 3;
    std::vector<float> p(H * T * T), o(T * ld);
    std::vector<double> seen(H * kParts, -1.0);
    std::vector<int> calls(H * kParts, 0);
    HeadFollowUp then{kParts, [&](int64_t h, int part) {
                        double sum = 0;
                        for (int64_t i = 0; i < T * T; ++i) sum += double(p[size_t(h * T * T + i)]);
                        sum *= 1 + part;
                        seen[size_t(h * kParts + part)] = sum;
                        ++calls[size_t(h * kParts + part)];
                      }};
    attention(q.data(), ld, k.data(), Hkv * Dh, v.data(), Hkv * Dh, kv.data(), d, mask, 0,
              ProbsOut{p.data(), T * T, T, &then}, o.data(), ld);
    EXPECT_EQ(p, p_plain) << threads << " threads";
    EXPECT_EQ(o, o_plain) << threads << " threads";
    for (int64_t h = 0; h < H; ++h) {
      double expected = 0;
      for (int64_t i = 0; i < T * T; ++i) expected += p_plain[size_t(h * T * T + i)];
      for (int part = 0; part < kParts; ++part) {
        EXPECT_EQ(calls[size_t(h * kParts + part)], 1) << "head " << h << " part " << part;
        EXPECT_NEAR(seen[size_t(h * kParts + part)], expected * (1 + part), 1e-9) << "head " << h << " part " << part;
      }
    }
    HeadFollowUp throws{2, [&](int64_t h, int part) {
                          if (h == 4 && part == 1) throw Error("part failed");
                        }};
    EXPECT_THROW(attention(q.data(), ld, k.data(), Hkv * Dh, v.data(), Hkv * Dh, kv.data(), d, mask, 0,
                           ProbsOut{p.data(), T * T, T, &throws}, o.data(), ld),
                 Error);
  }
  omp_set_num_threads(2);
}

// The query heads of a GQA group have their scores made by one GEMM when the caller allows it and
// their probabilities lie one after the other (a streamed block's buffer); the same call without
// the flag, into a buffer with a gap between heads, or with the heads of a group not consecutive,
// takes one GEMM per head. All against the slow twin, the grouped against the per-head within
// float rounding, and without the flag bit for bit the per-head call.
TEST(Attention, GroupedScoresEqualPerHeadScores) {
  const int64_t Tq = 40, Tk = 300, H = 6, Hkv = 2, Dh = 16, ld = H * Dh, gap = 7;
  auto q = random_vector(Tq * ld, 41, 2.0f), k = random_vector(Tk * Hkv * Dh, 42, 2.0f),
       v = random_vector(Tk * Hkv * Dh, 43);
  const AttentionDims d{Tq, Tk, H, Hkv, Dh, 0.25f};
  const KeyMask mask{true, 0, nullptr};
  const int64_t first_row = Tk - Tq;
  for (const bool consecutive : {true, false}) {
    std::vector<int> kv(H);
    for (int64_t h = 0; h < H; ++h) kv[size_t(h)] = consecutive ? int(h / 3) : int(h % 2);
    std::vector<float> p_slow(H * Tq * Tk), o_slow(Tq * ld);
    reference::attention(q.data(), ld, k.data(), Hkv * Dh, v.data(), Hkv * Dh, kv.data(), d, mask, first_row,
                         p_slow.data(), o_slow.data(), ld);
    std::vector<float> p_grouped(H * Tq * Tk), o_grouped(Tq * ld), p_apart(H * (Tq * Tk + gap)), o_apart(Tq * ld);
    std::vector<float> p_unflagged(H * Tq * Tk), o_unflagged(Tq * ld);
    attention(q.data(), ld, k.data(), Hkv * Dh, v.data(), Hkv * Dh, kv.data(), d, mask, first_row,
              ProbsOut{p_grouped.data(), Tq * Tk, Tk, nullptr, /*group_scores=*/true}, o_grouped.data(), ld);
    attention(q.data(), ld, k.data(), Hkv * Dh, v.data(), Hkv * Dh, kv.data(), d, mask, first_row,
              ProbsOut{p_apart.data(), Tq * Tk + gap, Tk, nullptr, /*group_scores=*/true}, o_apart.data(), ld);
    attention(q.data(), ld, k.data(), Hkv * Dh, v.data(), Hkv * Dh, kv.data(), d, mask, first_row,
              ProbsOut{p_unflagged.data(), Tq * Tk, Tk}, o_unflagged.data(), ld);
    std::vector<float> p_apart_heads(H * Tq * Tk);
    for (int64_t h = 0; h < H; ++h)
      std::copy_n(p_apart.begin() + h * (Tq * Tk + gap), Tq * Tk, p_apart_heads.begin() + h * Tq * Tk);
    EXPECT_LT(max_abs_diff(p_grouped, p_slow), 2e-6f) << consecutive;
    EXPECT_LT(max_abs_diff(p_apart_heads, p_slow), 2e-6f) << consecutive;
    EXPECT_LT(max_abs_diff(p_grouped, p_apart_heads), 1e-6f) << consecutive;
    EXPECT_LT(max_abs_diff(o_grouped, o_slow), 1e-5f) << consecutive;
    EXPECT_LT(max_abs_diff(o_apart, o_slow), 1e-5f) << consecutive;
    EXPECT_EQ(p_unflagged, p_apart_heads) << consecutive;  // both one GEMM per head
    EXPECT_EQ(o_unflagged, o_apart) << consecutive;
  }
}

TEST(Attention, KeyBiasMasksPaddingKeys) {
  const int64_t T = 6, H = 2, Dh = 4;
  auto q = random_vector(T * H * Dh, 21), k = random_vector(T * H * Dh, 22), v = random_vector(T * H * Dh, 23);
  std::vector<float> bias(T, 0.0f);
  bias[4] = bias[5] = -1e30f;  // two padding keys
  std::vector<int> kv = {0, 1};
  AttentionDims d{T, T, H, H, Dh, 0.5f};
  std::vector<float> p(H * T * T), o(T * H * Dh);
  attention(q.data(), H * Dh, k.data(), H * Dh, v.data(), H * Dh, kv.data(), d, KeyMask{false, 0, bias.data()}, 0,
            p.data(), o.data(), H * Dh);
  for (int64_t r = 0; r < H * T; ++r) {
    EXPECT_EQ(p[r * T + 4], 0.0f);
    EXPECT_EQ(p[r * T + 5], 0.0f);
  }
}

}  // namespace
}  // namespace headscope::ops

namespace headscope::ops {
namespace {

TEST(ExpApprox, WithinTwoUlpOfStdExpOverTheSoftmaxRange) {
  float worst = 0;
  for (float x = -87.0f; x <= 0.0f; x += 0.001953125f) {
    const float want = std::exp(x), got = exp_approx(x);
    worst = std::max(worst, std::abs(got - want) / want);
  }
  EXPECT_LT(worst, 2.5e-7f);  // 2 ulp of a float is 2.4e-7 relative
  EXPECT_EQ(exp_approx(0.0f), 1.0f);
}

// The softmax's exp of shifted scores (x <= 0) is exp_approx bit for bit, cut-off included:
// every float in [−100, 0] with its last 8 significand bits zero, both sides of −87, and −inf.
TEST(ExpApprox, TheSoftmaxVariantIsExpApproxBitForBit) {
  int64_t checked = 0;
  for (uint32_t bits = 0x80000000u; bits <= 0xc2c80000u; bits += 256) {  // −0 .. −100
    const float x = std::bit_cast<float>(bits);
    ASSERT_EQ(std::bit_cast<uint32_t>(exp_nonpositive(x)), std::bit_cast<uint32_t>(exp_approx(x))) << x;
    ++checked;
  }
  EXPECT_GT(checked, 4000000);
  for (const float x : {-87.0f, std::nextafter(-87.0f, -100.0f), std::nextafter(-87.0f, 0.0f), -1e30f})
    EXPECT_EQ(std::bit_cast<uint32_t>(exp_nonpositive(x)), std::bit_cast<uint32_t>(exp_approx(x))) << x;
  EXPECT_EQ(exp_nonpositive(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
}

// A NaN score (a model with NaN weights) comes out as NaN from both exps, without converting a NaN
// to an integer on the way (undefined behaviour, which clang's sanitized build checks).
TEST(ExpApprox, NanInNanOut) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(exp_approx(nan)));
  EXPECT_TRUE(std::isnan(exp_nonpositive(nan)));
  EXPECT_TRUE(std::isnan(exp_in_range(nan)));
}

// Both ways to log2 of 16 lanes against std::log2 in double, over every normal float from the
// smallest up to 64 in steps of 251 bit patterns (4.4 million values), and exact at the powers of
// 2 and at 1. The bound is 2 ulp of the result plus 5e-8 absolute: the table's −log2(1/c) is a
// float (within 3e-8 for |log2 c| < 0.6), so results near ±0.1 are off by up to ~10 ulp of
// themselves; the two sub-intervals next to 1 have c = 1 and keep their relative accuracy.
template <class Log2>
void expect_log2_lanes_close(Log2 log2_lanes, const char* name) {
  SCOPED_TRACE(name);
  double worst = 0, worst_near_one = 0;
  int64_t checked = 0;
  const uint32_t last = std::bit_cast<uint32_t>(64.0f);
  Lanes x{};
  uint32_t bits = std::bit_cast<uint32_t>(std::numeric_limits<float>::min());
  while (bits <= last) {
    for (int i = 0; i < kLanes; ++i, bits += 251) x[i] = std::bit_cast<float>(std::min(bits, last));
    const Lanes got = log2_lanes(x);
    for (int i = 0; i < kLanes; ++i) {
      const double want = std::log2(double(x[i]));
      const double ulp = std::abs(std::nextafter(float(want), 1e9f) - float(want));
      const double err = std::abs(double(got[i]) - want);
      ASSERT_LE(err, 2 * ulp + 5e-8) << x[i];
      worst = std::max(worst, err);
      if (x[i] > 0.984375f && x[i] < 1.03125f) worst_near_one = std::max(worst_near_one, err / std::max(ulp, 1e-45));
      ++checked;
    }
  }
  EXPECT_GT(checked, 4000000);
  EXPECT_LT(worst_near_one, 4.0) << "ulps next to 1";
  std::printf("%s: worst %.3g absolute, %.3g ulp next to 1, %lld values\n", name, worst, worst_near_one,
              (long long)checked);
  for (int e = -126; e <= 6; e += 1) {
    Lanes p;
    for (int i = 0; i < kLanes; ++i) p[i] = std::ldexp(1.0f, e);
    EXPECT_EQ(log2_lanes(p)[0], float(e)) << "2^" << e;
  }
}

TEST(Log2Lanes, SeriesAndTableAreCloseToStdLog2) {
  expect_log2_lanes_close([](Lanes x) { return log2_lanes_series(x); }, "series");
#if defined(__AVX512F__)
  expect_log2_lanes_close(Log2Lanes{}, "table");
#else
  GTEST_SKIP() << "the table needs AVX-512";
#endif
}

TEST(Gelu, LongArrayMatchesScalarErf) {
  auto x = random_vector(100003, 31, 3.0f);
  auto y = x;
  gelu_erf(y.data(), static_cast<int64_t>(y.size()));
  float worst = 0;
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, float(std::abs(y[i] - 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0))))));
  EXPECT_LT(worst, 1e-6f);
}

}  // namespace
}  // namespace headscope::ops

#include "ops/packed_linear.h"
#include "ops/panel_linear.h"

namespace headscope::ops {
namespace {

// A random W [out, in] and b, packed once; y = x · Wᵀ + b against the slow twin with each
// kernel (the automatic choice, the blocked 1×1 convolution and the panel kernel), at every
// thread count and row count given (the output starts as NaN, so an unwritten column fails).
void expect_packed_linear_matches_reference(int64_t in, int64_t out, unsigned seed,
                                            std::initializer_list<int> thread_counts,
                                            std::initializer_list<int64_t> row_counts) {
  using Kernel = PackedLinear::Kernel;
  Tensor W({out, in}), b({out});
  const std::vector<float> w_values = random_vector(out * in, seed), b_values = random_vector(out, seed + 1);
  W.data.assign(w_values.begin(), w_values.end());
  b.data.assign(b_values.begin(), b_values.end());
  const PackedLinear packed(W, b);
  const int saved = omp_get_max_threads();
  for (int threads : thread_counts) {
    omp_set_num_threads(threads);
    for (int64_t T : row_counts) {
      auto x = random_vector(T * in, seed + 2 + unsigned(T));
      std::vector<float> slow(T * out);
      reference::matmul(x.data(), in, W.ptr(), in, slow.data(), out, T, out, in, /*trans_b=*/true);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t o = 0; o < out; ++o) slow[t * out + o] += b.data[o];
      for (Kernel kernel : {Kernel::automatic, Kernel::blocked, Kernel::panels}) {
        if (kernel == Kernel::panels && !panel_linear_available()) continue;
        std::vector<float> fast(T * out, std::nanf(""));
        packed.forward(x.data(), T, fast.data(), kernel);
        EXPECT_LT(max_abs_diff(fast, slow), 1e-4f) << "T=" << T << " threads=" << threads << " kernel=" << int(kernel);
      }
    }
  }
  omp_set_num_threads(saved);
}

// Passes of one model run side by side on the OpenMP threads (ablation over a corpus, activation
// patching): the same packed weights and the same row count on two threads at once must give
// what one thread gives. oneDNN's rule is that a primitive runs on the thread that made it (its
// scratchpad is that thread's), so each thread has its own plan; a tiny BERT's patching sweeps
// gave wrong values now and then while threads shared one (tests/reference/test_patch.py).
TEST(PackedLinear, ConcurrentCallsOfOneShapeAgreeWithOneThread) {
  // The shapes of a tiny BERT's and MiniLM's layers, T past the panel kernel's rows (blocked kernel).
  for (const auto& shape : {std::pair<int64_t, int64_t>{32, 96}, {32, 37}, {384, 1152}, {1536, 384}}) {
    const int64_t in = shape.first, out = shape.second, T = 24;
    Tensor W({out, in}), b({out});
    const std::vector<float> w = random_vector(out * in, 11), bias = random_vector(out, 12);
    W.data.assign(w.begin(), w.end());
    b.data.assign(bias.begin(), bias.end());
    const PackedLinear packed(W, b);
    const std::vector<float> x = random_vector(T * in, 13);
    std::vector<float> once(T * out);
    packed.forward(x.data(), T, once.data(), PackedLinear::Kernel::blocked);
    int differing = 0;
#pragma omp parallel for num_threads(2) schedule(dynamic, 1) reduction(+ : differing)
    for (int i = 0; i < 400; ++i) {
      std::vector<float> y(T * out, std::nanf(""));
      packed.forward(x.data(), T, y.data(), PackedLinear::Kernel::blocked);
      differing += y != once ? 1 : 0;
    }
    EXPECT_EQ(differing, 0) << in << " -> " << out;
  }
}

TEST(PackedLinear, WideMatrixMatchesReference) {
  // A width that is not a multiple of the 8-channel weight blocks' pairs (1000 = 125 · 8).
  expect_packed_linear_matches_reference(48, 1000, 51, {1, 2}, {1, 16, 256, 300});
}

TEST(PackedLinear, PanelKernelCoversPartialPanelsAndRowBlocks) {
  // 83 outputs = 13 full panels of 6 and one of 5; 37 inputs (odd, not a multiple of 8); row
  // counts below, at and past one 16-row block, and over several blocks with a partial last one.
  expect_packed_linear_matches_reference(37, 83, 61, {1, 2, 3}, {1, 2, 11, 15, 16, 17, 40});
  // More panels than the kernel's threading threshold: 1152 outputs = 192 panels.
  expect_packed_linear_matches_reference(384, 1152, 71, {1, 2}, {12, 16});
}

TEST(PanelLinear, RejectsWeightsPackedForAnotherShape) {
  Tensor W({10, 8});
  W.data.assign(80, 0.5f);
  const Tensor panels = pack_panels(W);
  std::vector<float> x(16 * 9, 1.0f), y(16 * 10);
  if (panel_linear_available()) {
    EXPECT_THROW(panel_linear(panels, nullptr, /*in=*/9, /*out=*/10, x.data(), 16, y.data()), Error);
  }
  EXPECT_EQ(panels.shape, (std::vector<int64_t>{2, 8, kPanel}));
  EXPECT_EQ(panels.data[(1 * 8 + 3) * kPanel + 3], 0.5f);  // output 9 (the last), input 3
  EXPECT_EQ(panels.data[(1 * 8 + 3) * kPanel + 4], 0.0f);  // padding: there is no output 10
}

TEST(PackedLinear, MatchesReferenceForManyRowCountsAndThreadCounts) {
  // More threads than cores, and than 8-channel blocks fill evenly (80 columns = 10 blocks over
  // 3 threads); T = 16 twice: the cached plan is reused.
  expect_packed_linear_matches_reference(96, 80, 41, {1, 2, 3, 8}, {1, 3, 16, 128, 16});
}

}  // namespace
}  // namespace headscope::ops

#include "kernel_paths.h"

namespace headscope::ops {
namespace {

// ops::panel_linear on each instruction-set path (portable, AVX2 + FMA, AVX-512F) against the
// slow twin: partial panels, odd and even input counts (the AVX-512 tile pairs input features),
// row counts below, at and past one 16-row block, and enough panels to run threaded.
class PanelLinearPath : public headscope::testing::KernelPathTest {};

TEST_P(PanelLinearPath, MatchesReference) {
  struct Shape {
    int64_t in, out;
  };
  const int saved = omp_get_max_threads();
  for (const Shape s : {Shape{37, 83}, Shape{38, 6}, Shape{1, 7}, Shape{384, 1152}}) {
    Tensor W({s.out, s.in});
    const std::vector<float> w_values = random_vector(s.out * s.in, 81), bias = random_vector(s.out, 82);
    W.data.assign(w_values.begin(), w_values.end());
    const Tensor panels = pack_panels(W);
    for (int threads : {1, 2})
      for (int64_t T : {1, 2, 11, 16, 17, 40}) {
        omp_set_num_threads(threads);
        const std::vector<float> x = random_vector(T * s.in, 83 + unsigned(T));
        std::vector<float> slow(T * s.out);
        reference::matmul(x.data(), s.in, W.ptr(), s.in, slow.data(), s.out, T, s.out, s.in, /*trans_b=*/true);
        for (bool with_bias : {false, true}) {
          std::vector<float> fast(T * s.out, std::nanf("")), expected = slow;
          if (with_bias)
            for (int64_t t = 0; t < T; ++t)
              for (int64_t o = 0; o < s.out; ++o) expected[t * s.out + o] += bias[o];
          panel_linear(panels, with_bias ? bias.data() : nullptr, s.in, s.out, x.data(), T, fast.data());
          EXPECT_LT(max_abs_diff(fast, expected), 1e-4f)
              << "in=" << s.in << " out=" << s.out << " T=" << T << " threads=" << threads << " bias=" << with_bias;
        }
      }
  }
  omp_set_num_threads(saved);
  // PackedLinear's own choice on this path (the panel kernel only where a vector variant exists).
  EXPECT_EQ(panel_linear_available(), GetParam() != cpu::Isa::portable);
  expect_packed_linear_matches_reference(37, 83, 91, {1, 2}, {1, 12, 16, 40});
}

INSTANTIATE_KERNEL_PATHS(PanelLinearPath);

}  // namespace
}  // namespace headscope::ops
