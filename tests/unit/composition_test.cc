// Composition scores (src/circuits/composition.cc): the fast path, which never forms a d_model ×
// d_model matrix, against its slow twin (circuits/reference/composition.h: the dense W_QK and W_OV
// in double) on tiny random decoders and an encoder from the goldens — GQA (6 query heads over 2
// key/value heads; 4 over 1), QK-norm per head and over all heads, sandwich norms, LayerNorm —
// and against hand computations: heads of d_head = 1 score |cos| between what the receiver reads
// and what the sender writes, and the random baseline of such heads has the mean of |cos| between
// two random directions. The reference test (tests/reference/test_composition.py) compares every
// score with numpy on the Hugging Face weights.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "circuits/composition.h"
#include "circuits/reference/composition.h"
#include "headscope/circuits.h"
#include "headscope/error.h"
#include "headscope/model.h"
#include "test_support.h"

namespace headscope {
namespace {

constexpr double kTolerance = 1e-5;  // the fast path's fp32 GEMMs against the twin's double

std::unique_ptr<Model> golden(const std::string& kind, const std::string& name) {
  return Model::load((testing::goldens_dir(kind) / name).string());
}

double max_difference(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape, b.shape);
  double worst = 0;
  for (int64_t i = 0; i < std::min(a.numel(), b.numel()); ++i)
    worst = std::max(worst, std::abs(double(a.ptr()[i]) - double(b.ptr()[i])));
  return worst;
}

// A [rows, cols] matrix from a list of values, row-major.
Tensor matrix(int64_t rows, int64_t cols, std::vector<float> values) {
  Tensor t({rows, cols});
  EXPECT_EQ(values.size(), size_t(rows * cols));
  std::copy(values.begin(), values.end(), t.ptr());
  return t;
}

Tensor random_matrix(int64_t rows, int64_t cols, unsigned seed) {
  Tensor t({rows, cols});
  const std::vector<float> v = testing::random_vector(size_t(rows * cols), seed);
  std::copy(v.begin(), v.end(), t.ptr());
  return t;
}

class CompositionOn : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(CompositionOn, FastPathEqualsTheDenseTwin) {
  const auto [kind, name] = GetParam();
  const auto model = golden(kind, name);
  CompositionOptions options;
  options.baseline_draws = 4;
  const CompositionScores fast = composition_scores(*model, options);
  const CompositionScores slow = circuits::reference::composition_scores(*model);
  const int64_t L = model->config().n_layer, H = model->config().n_head;
  ASSERT_EQ(fast.q.shape, (std::vector<int64_t>{L, H, L, H}));
  EXPECT_LE(max_difference(fast.q, slow.q), kTolerance) << name;
  EXPECT_LE(max_difference(fast.k, slow.k), kTolerance) << name;
  EXPECT_LE(max_difference(fast.v, slow.v), kTolerance) << name;
  // Only later layers receive; every score of a real pair is in (0, 1] for random weights.
  for (int64_t l1 = 0; l1 < L; ++l1)
    for (int64_t l2 = 0; l2 < L; ++l2)
      for (int64_t i = 0; i < H * H; ++i) {
        const int64_t at = ((l1 * H + i / H) * L + l2) * H + i % H;
        for (const Tensor* t : {&fast.q, &fast.k, &fast.v}) {
          if (l2 <= l1) {
            EXPECT_EQ(t->ptr()[at], 0.0f);
          } else {
            EXPECT_GT(t->ptr()[at], 0.0f);
            EXPECT_LE(t->ptr()[at], 1.0f + 1e-6f);
          }
        }
      }
}

INSTANTIATE_TEST_SUITE_P(Goldens, CompositionOn,
                         ::testing::Values(std::pair{"decoders", "llama_gqa3"}, std::pair{"decoders", "gemma3_text"},
                                           std::pair{"decoders", "qwen3"}, std::pair{"decoders", "olmo2"},
                                           std::pair{"decoders", "gpt2"}, std::pair{"encoders", "bert_cls"}),
                         [](const auto& info) { return info.param.second; });

// Without the gains: the stored weights (Gemma 3 has all four: input norm, QK-norm of queries and
// keys, post-attention norm), which score otherwise.
TEST(Composition, WithoutGainsTheStoredWeights) {
  const auto model = golden("decoders", "gemma3_text");
  CompositionOptions options;
  options.baseline_draws = 2;
  options.fold_gains = false;
  const CompositionScores raw = composition_scores(*model, options);
  const CompositionScores slow = circuits::reference::composition_scores(*model, /*fold_gains=*/false);
  EXPECT_LE(max_difference(raw.q, slow.q), kTolerance);
  EXPECT_LE(max_difference(raw.k, slow.k), kTolerance);
  EXPECT_LE(max_difference(raw.v, slow.v), kTolerance);
  options.fold_gains = true;
  EXPECT_GT(max_difference(raw.v, composition_scores(*model, options).v), 1e-3);
}

// A Llama GGUF holds Q and K with the rows of each head permuted for interleaved RoPE (and Gemma's
// norms as 1 + w): the same model, so the same scores (the goldens' GGUFs are fp32).
TEST(Composition, GgufLayoutsGiveTheSameScoresAsTheHuggingFaceFolder) {
  for (const std::string name : {"llama_gqa3", "gemma3_text"}) {
    const auto folder = golden("decoders", name);
    const auto gguf = golden("decoders", name + ".gguf");
    CompositionOptions options;
    options.baseline_draws = 2;
    const CompositionScores a = composition_scores(*folder, options), b = composition_scores(*gguf, options);
    EXPECT_LE(max_difference(a.q, b.q), 1e-6) << name;
    EXPECT_LE(max_difference(a.k, b.k), 1e-6) << name;
    EXPECT_LE(max_difference(a.v, b.v), 1e-6) << name;
  }
}

// d_head = 1: W_QK = q kᵀ, W_OV = o vᵀ, so ‖W_QKᵀ W_OV^s‖ = |q·o_s| ‖k‖ ‖v_s‖ and
// Q = |cos(q, o_s)|, K = |cos(k, o_s)|, V = |cos(v_r, o_s)|: how well what the receiver reads lines
// up with what the sender writes. Worked by hand in d_model = 3.
TEST(Composition, RankOneHeadsScoreTheCosineOfReadAndWritten) {
  HeadMatrices sender{Tensor(), Tensor(), matrix(1, 3, {2, -1, 5}), matrix(3, 1, {3, 0, 4})};  // writes (3, 0, 4)/5
  HeadMatrices receiver{matrix(1, 3, {0, 2, 0}),  // query reads (0, 1, 0): orthogonal, Q = 0
                        matrix(1, 3, {1, 0, 0}),  // key reads (1, 0, 0): K = 3/5
                        matrix(1, 3, {0, 1, 1}),  // value reads (0, 1, 1)/√2: V = 4/(5√2)
                        matrix(3, 1, {1, 1, 1})};
  for (const CompositionTriple& t :
       {composition_of(sender, receiver), circuits::reference::composition_of(sender, receiver)}) {
    EXPECT_NEAR(t.q, 0.0, 1e-7);
    EXPECT_NEAR(t.k, 0.6, 1e-7);
    EXPECT_NEAR(t.v, 4.0 / (5.0 * std::sqrt(2.0)), 1e-7);
  }
}

// d_head = 2, d_model = 4: a sender that copies the plane (e1, e2) into itself and a receiver whose
// query, key and value all read that plane: W_QK = W_OV = diag(1, 1, 0, 0) up to scale, so every
// score is ‖P‖/‖P‖² = 1/√2; a receiver reading (e3, e4) instead scores 0.
TEST(Composition, HeadsOnOnePlaneScoreOneOverRootTwo) {
  const Tensor reads_12 = matrix(2, 4, {1, 0, 0, 0, 0, 1, 0, 0}), reads_34 = matrix(2, 4, {0, 0, 1, 0, 0, 0, 0, 1});
  const Tensor writes_12 = matrix(4, 2, {1, 0, 0, 1, 0, 0, 0, 0});
  const HeadMatrices sender{Tensor(), Tensor(), reads_12, writes_12};
  const CompositionTriple same = composition_of(sender, {reads_12, reads_12, reads_12, writes_12});
  EXPECT_NEAR(same.q, 1 / std::sqrt(2.0), 1e-7);
  EXPECT_NEAR(same.k, 1 / std::sqrt(2.0), 1e-7);
  EXPECT_NEAR(same.v, 1 / std::sqrt(2.0), 1e-7);
  const CompositionTriple apart = composition_of(sender, {reads_34, reads_34, reads_34, writes_12});
  EXPECT_NEAR(apart.q, 0.0, 1e-7);
  EXPECT_NEAR(apart.k, 0.0, 1e-7);
  EXPECT_NEAR(apart.v, 0.0, 1e-7);
}

// Random heads, including d_head > d_model (singular Gram matrices: the pivoted factor stops at
// the rank) and a zero sender (score 0, not NaN).
TEST(Composition, PairScoresEqualTheDenseTwin) {
  for (const auto& [d, dh] : {std::pair{24, 5}, std::pair{7, 7}, std::pair{4, 6}}) {
    const HeadMatrices sender{Tensor(), Tensor(), random_matrix(dh, d, 1), random_matrix(d, dh, 2)};
    const HeadMatrices receiver{random_matrix(dh, d, 3), random_matrix(dh, d, 4), random_matrix(dh, d, 5),
                                random_matrix(d, dh, 6)};
    const CompositionTriple fast = composition_of(sender, receiver);
    const CompositionTriple slow = circuits::reference::composition_of(sender, receiver);
    EXPECT_NEAR(fast.q, slow.q, kTolerance) << d << " " << dh;
    EXPECT_NEAR(fast.k, slow.k, kTolerance) << d << " " << dh;
    EXPECT_NEAR(fast.v, slow.v, kTolerance) << d << " " << dh;
    const CompositionTriple zero = composition_of({Tensor(), Tensor(), Tensor({dh, d}), Tensor({d, dh})}, receiver);
    EXPECT_EQ(zero.q, 0.0);
    EXPECT_EQ(zero.v, 0.0);
  }
}

// For d_head = 1 every score is |cos| of two independent Gaussian directions in R^d, whose mean is
// Γ(d/2) / (√π Γ((d + 1)/2)) (0.2026 for d = 16) and whose variance is 1/d − mean².
TEST(Composition, BaselineOfRankOneHeadsIsTheMeanAbsoluteCosine) {
  const int d = 16, draws = 4000;
  const double mean = std::exp(std::lgamma(d / 2.0) - std::lgamma((d + 1) / 2.0)) / std::sqrt(M_PI);
  const double sd = std::sqrt(1.0 / d - mean * mean);
  const std::vector<CompositionBaseline> b = composition_baselines(d, 1, draws, 7);
  ASSERT_EQ(b.size(), 3u);
  for (const CompositionBaseline& kind : b) {
    EXPECT_NEAR(kind.mean, mean, 4 * sd / std::sqrt(draws));  // four standard errors
    EXPECT_NEAR(kind.std, sd, 0.1 * sd);
  }
  // Seeded: the same seed gives the same numbers, another seed others.
  const std::vector<CompositionBaseline> again = composition_baselines(d, 1, draws, 7);
  EXPECT_EQ(again[1].mean, b[1].mean);
  EXPECT_NE(composition_baselines(d, 1, draws, 8)[1].mean, b[1].mean);
}

TEST(Composition, TopPairsAreTheHighestScoresOfLaterReceivers) {
  const auto model = golden("decoders", "gemma3_text");
  CompositionOptions options;
  options.baseline_draws = 2;
  const CompositionScores s = composition_scores(*model, options);
  const int L = s.model.n_layer, H = s.model.n_head;
  const int pairs = H * H * L * (L - 1) / 2;
  for (const CompositionKind kind : kCompositionKinds) {
    const std::vector<CompositionPair> top = top_composition_pairs(s, kind, 5);
    ASSERT_EQ(top.size(), 5u);
    float highest = 0;
    for (int64_t i = 0; i < s.q.numel(); ++i) highest = std::max(highest, s.scores(kind).ptr()[i]);
    EXPECT_EQ(top[0].score, highest);
    for (size_t i = 0; i < top.size(); ++i) {
      EXPECT_LT(top[i].sender.layer, top[i].receiver.layer);
      if (i > 0) {
        EXPECT_GE(top[i - 1].score, top[i].score);
      }
    }
    EXPECT_EQ(top_composition_pairs(s, kind, 1 << 20).size(), size_t(pairs));
  }
}

TEST(Composition, Refusals) {
  const auto model = golden("decoders", "llama_gqa3");
  CompositionOptions options;
  options.baseline_draws = 1;
  testing::expect_error([&] { composition_scores(*model, options); }, {"baseline draws", "2..100000", "got 1"});
  options.baseline_draws = 2;
  const CompositionScores s = composition_scores(*model, options);
  testing::expect_error([&] { top_composition_pairs(s, CompositionKind::kK, 0); }, {"top pairs", "at least 1"});
  testing::expect_error([&] { model->attention_weights(2); }, {"no layer 2", "0..1"});
  testing::expect_error([&] { composition_baselines(0, 4, 10, 0); }, {"d_model and d_head"});
  const HeadMatrices sender{Tensor(), Tensor(), random_matrix(2, 5, 1), random_matrix(5, 2, 2)};
  const HeadMatrices receiver{random_matrix(2, 5, 3), random_matrix(3, 5, 4), random_matrix(2, 5, 5),
                              random_matrix(5, 2, 6)};
  testing::expect_error([&] { composition_of(sender, receiver); }, {"receiver's W_K", "[2, 5]", "[3, 5]"});
  testing::expect_error(
      [&] {
        composition_of(
            {Tensor(), Tensor(), random_matrix(2, 4, 1), random_matrix(4, 2, 2)},
            {random_matrix(2, 5, 3), random_matrix(2, 5, 4), random_matrix(2, 5, 5), random_matrix(5, 2, 6)});
      },
      {"sender's W_V"});
}

}  // namespace
}  // namespace headscope
