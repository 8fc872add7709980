// Norm-weighted attention, rollout and direct logit attribution on hand-built tensors; every
// expected value is worked out by hand in the comments (formulas: docs/metrics.md).
#include "analysis/attribution.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "headscope/error.h"
#include "headscope/limits.h"

namespace headscope::analysis {
namespace {

constexpr double kTol = 1e-6;

Tensor filled(std::vector<int64_t> shape, std::vector<float> values) {
  Tensor t(std::move(shape));
  std::copy(values.begin(), values.end(), t.data.begin());
  return t;
}

TEST(AnalysisAttribution, NormWeightedIsAttentionTimesEachKeysValueNorm) {
  const Tensor attention = filled({1, 1, 2, 2}, {0.5f, 0.5f, 0.25f, 0.75f});
  const Tensor norms = filled({1, 1, 2}, {2.0f, 4.0f});
  const Tensor w = norm_weighted_attention(attention, norms);
  ASSERT_EQ(w.shape, (std::vector<int64_t>{1, 1, 2, 2}));
  // Row 0: .5·2, .5·4; row 1: .25·2, .75·4.
  EXPECT_NEAR(w.data[0], 1.0, kTol);
  EXPECT_NEAR(w.data[1], 2.0, kTol);
  EXPECT_NEAR(w.data[2], 0.5, kTol);
  EXPECT_NEAR(w.data[3], 3.0, kTol);
  EXPECT_THROW(norm_weighted_attention(attention, filled({1, 1, 3}, {1, 1, 1})), Error);
}

TEST(AnalysisAttribution, RolloutMixesTheResidualAndMultipliesLayers) {
  // Layer 0: head 0 all on key 0, head 1 all on key 1 → mean [[.5, .5], [.5, .5]]
  //   → Â_0 = .5·mean + .5·I = [[.75, .25], [.25, .75]].
  // Layer 1: both heads all on key 0 → mean [[1, 0], [1, 0]] → Â_1 = [[1, 0], [.5, .5]].
  // R_1 = Â_1 · Â_0 = [[.75, .25], [.5·.75 + .5·.25, .5·.25 + .5·.75]] = [[.75, .25], [.5, .5]].
  const Tensor attention = filled({2, 2, 2, 2}, {1, 0, 1, 0, /**/ 0, 1, 0, 1, /**/ 1, 0, 1, 0, /**/ 1, 0, 1, 0});
  const Tensor r = attention_rollout(attention);
  ASSERT_EQ(r.shape, (std::vector<int64_t>{2, 2, 2}));
  const std::vector<double> want = {0.75, 0.25, 0.25, 0.75, /**/ 0.75, 0.25, 0.5, 0.5};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(r.data[i], want[i], kTol) << i;
  EXPECT_THROW(attention_rollout(filled({1, 1, 1, 2}, {0.5f, 0.5f})), Error);  // not square
}

TEST(AnalysisAttribution, RolloutRefusesTextsOverItsBudget) {
  const int64_t T = limits::kMaxRolloutTokens + 1;  // n_layer · T³ work: refused before any
  EXPECT_THROW(attention_rollout(Tensor({1, 1, T, T})), ResourceError);
}

// One layer, two heads, one token, d_model 2, vocabulary 2:
//   embedding e = [1, 0], head contributions [0, 1] and [1, 1], b_O = [.5, 0] (attention output
//   [1.5, 2]), MLP [.5, −1] → final residual x = [3, 1]; γ = [1, 2]; U = I.
struct Toy {
  Capture cap;
  Tensor gamma = filled({2}, {1, 2}), beta = filled({2}, {0.25f, -0.5f}), U = filled({2, 2}, {1, 0, 0, 1});
  explicit Toy(std::vector<float> final_hidden) {
    cap.n_layer = 1, cap.n_head = 2, cap.n_kv_head = 2, cap.T = 1, cap.d_head = 1, cap.d_model = 2;
    cap.contributions = filled({1, 2, 1, 2}, {0, 1, 1, 1});
    cap.attn_output = filled({1, 1, 2}, {1.5f, 2});
    cap.mlp_outputs = filled({1, 1, 2}, {0.5f, -1});
    cap.hidden_states = filled({2, 1, 2}, {1, 0, final_hidden[0], final_hidden[1]});
  }
  LogitReadout readout(bool rms) const {
    LogitReadout r;
    r.norm_weight = &gamma;
    r.norm_bias = rms ? nullptr : &beta;
    r.rms = rms;
    r.unembedding = &U;
    return r;
  }
};

TEST(AnalysisAttribution, LogitAttributionThroughRmsNorm) {
  // rms(x) = √((9 + 1) / 2) = √5; the model's final stream γ·x/√5 = [3, 2]/√5.
  const double s5 = std::sqrt(5.0);
  const Toy toy({float(3 / s5), float(2 / s5)});
  // Target 1: u = [0, 1], w = γ·u/√5 = [0, 2/√5]. Parts: e 0, heads 2/√5 and 2/√5, b_O 0, MLP −2/√5.
  const LogitAttribution a = attribute_logit(toy.cap, toy.readout(true), 0, 1);
  EXPECT_NEAR(a.logit, 2 / s5, kTol);
  EXPECT_NEAR(a.embeddings, 0, kTol);
  EXPECT_NEAR(a.heads[0], 2 / s5, kTol);
  EXPECT_NEAR(a.heads[1], 2 / s5, kTol);
  EXPECT_NEAR(a.attention_bias[0], 0, kTol);
  EXPECT_NEAR(a.mlp[0], -2 / s5, kTol);
  EXPECT_NEAR(a.rest, 0, kTol);
  // Contrast with token 0: u = [−1, 1], w = [−1, 2]/√5. e −1, heads 2 and 1, b_O −.5, MLP −2.5
  // (all /√5); the logit difference is (2 − 3)/√5.
  const LogitAttribution d = attribute_logit(toy.cap, toy.readout(true), 0, 1, 0);
  EXPECT_NEAR(d.logit, -1 / s5, kTol);
  EXPECT_NEAR(d.embeddings, -1 / s5, kTol);
  EXPECT_NEAR(d.heads[0], 2 / s5, kTol);
  EXPECT_NEAR(d.heads[1], 1 / s5, kTol);
  EXPECT_NEAR(d.attention_bias[0], -0.5 / s5, kTol);
  EXPECT_NEAR(d.mlp[0], -2.5 / s5, kTol);
  EXPECT_NEAR(d.rest, 0, kTol);
}

TEST(AnalysisAttribution, LogitAttributionThroughLayerNormCentresEachPart) {
  // mean(x) = 2, std = 1: the final stream γ·(x − 2) + β = [1, −2] + [.25, −.5] = [1.25, −2.5].
  const Toy toy({1.25f, -2.5f});
  // Target 1: w = [0, 2], Σw = 2; part(c) = c·w − mean(c)·2:
  //   e [1, 0] → −1; heads [0, 1] → 1, [1, 1] → 0; b_O [.5, 0] → −.5; MLP [.5, −1] → −1.5; β·u = −.5.
  const LogitAttribution a = attribute_logit(toy.cap, toy.readout(false), 0, 1);
  EXPECT_NEAR(a.logit, -2.5, kTol);
  EXPECT_NEAR(a.embeddings, -1, kTol);
  EXPECT_NEAR(a.heads[0], 1, kTol);
  EXPECT_NEAR(a.heads[1], 0, kTol);
  EXPECT_NEAR(a.attention_bias[0], -0.5, kTol);
  EXPECT_NEAR(a.mlp[0], -1.5, kTol);
  EXPECT_NEAR(a.final_norm_bias, -0.5, kTol);
  EXPECT_NEAR(a.rest, 0, kTol);
}

TEST(AnalysisAttribution, LogitAttributionThroughASandwichNormAndTheHeadLens) {
  // The toy with a sandwich norm after the attention block: γ_a = [2, 1], eps 0. b_O = [1, 0] makes
  // the attention output [2, 2], rms 2, normed [2, 1]; MLP 0 (recorded after its own norm), so the
  // final residual is again e + [2, 1] = [3, 1], rms √5, final stream [3, 2]/√5.
  const double s5 = std::sqrt(5.0);
  Toy toy({float(3 / s5), float(2 / s5)});
  toy.cap.attn_output = filled({1, 1, 2}, {2, 2});
  toy.cap.mlp_outputs = filled({1, 1, 2}, {0, 0});
  const Tensor gain = filled({2}, {2, 1});
  LogitReadout r = toy.readout(true);
  r.attention_gain = {&gain};
  // Target 1, w = [0, 2/√5]. Through the block a part c becomes γ_a·c/2: head 0 [0, 1] → [0, .5] → 1/√5;
  // head 1 [1, 1] → [1, .5] → 1/√5; b_O [1, 0] → [1, 0] → 0; e and MLP 0. Σ = 2/√5 = the logit.
  const LogitAttribution a = attribute_logit(toy.cap, r, 0, 1);
  EXPECT_NEAR(a.logit, 2 / s5, kTol);
  EXPECT_NEAR(a.heads[0], 1 / s5, kTol);
  EXPECT_NEAR(a.heads[1], 1 / s5, kTol);
  EXPECT_NEAR(a.attention_bias[0], 0, kTol);
  EXPECT_NEAR(a.rest, 0, kTol);
  // Without the sandwich norm the same parts would not add up: [0, 1] and [1, 1] give 2/√5 each.
  EXPECT_GT(std::abs(attribute_logit(toy.cap, toy.readout(true), 0, 1).rest), 0.5);
  // The head lens: U = I, so head 1's effect on the two logits is γ ⊙ [1, .5] / √5 = [1, 1]/√5, and
  // its entry 1 minus entry 0 is the attribution of 1 against 0.
  const std::vector<double> h1 = head_logits(toy.cap, r, 0, 1, 0);
  ASSERT_EQ(h1.size(), 2u);
  EXPECT_NEAR(h1[0], 1 / s5, kTol);
  EXPECT_NEAR(h1[1], 1 / s5, kTol);
  const std::vector<double> h0 = head_logits(toy.cap, r, 0, 0, 0);
  EXPECT_NEAR(h0[0], 0, kTol);
  EXPECT_NEAR(h0[1], 1 / s5, kTol);
  EXPECT_NEAR(h0[1] - h0[0], attribute_logit(toy.cap, r, 0, 1, 0).heads[0], kTol);
  EXPECT_THROW(head_logits(toy.cap, r, 1, 0, 0), Error);  // no layer 1
  EXPECT_THROW(head_logits(toy.cap, r, 0, 2, 0), Error);  // no head 2
  EXPECT_THROW(head_logits(toy.cap, r, 0, 0, 1), Error);  // no position 1
}

TEST(AnalysisAttribution, LogitAttributionRejectsWhatItCannotRead) {
  const Toy toy({0, 0});
  EXPECT_THROW(attribute_logit(toy.cap, toy.readout(true), 1, 0), Error);     // position
  EXPECT_THROW(attribute_logit(toy.cap, toy.readout(true), 0, 2), Error);     // target
  EXPECT_THROW(attribute_logit(toy.cap, toy.readout(true), 0, 0, 5), Error);  // contrast
  Capture no_mlp = toy.cap;
  no_mlp.mlp_outputs = Tensor();
  EXPECT_THROW(attribute_logit(no_mlp, toy.readout(true), 0, 0), Error);
}

}  // namespace
}  // namespace headscope::analysis
