// The logit lens (src/circuits/logit_lens.cc) on the real decoders: its last row is the model's own
// logits (the decoders' logits are compared with transformers in decoders_test), and every other
// row equals a slow twin computed here in double from the hidden states, the final norm's γ and the
// unembedding.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "headscope/circuits.h"
#include "headscope/error.h"
#include "headscope/model.h"
#include "headscope/pipeline.h"
#include "test_support.h"

namespace headscope {
namespace {

const Model& decoder(const std::string& golden) { return testing::real_decoder(golden); }

class LogitLensOn : public ::testing::TestWithParam<std::string> {};

TEST_P(LogitLensOn, LastRowIsTheModelsLogitsAndEveryRowMatchesTheSlowTwin) {
  const Model& model = decoder(GetParam());
  CaptureOptions options;
  options.logits = true;
  const Capture cap = model.run(model.encode("When Mary and John went to the store, John gave a drink to"), options);
  const LogitReadout r = model.final_readout();
  const int64_t L = cap.n_layer, D = cap.d_model, vocab = r.unembedding->dim(0);
  for (int position : {cap.T - 1, 3}) {
    const Tensor lens = logit_lens(cap, r, position);
    ASSERT_EQ(lens.dim(0), L + 1);
    ASSERT_EQ(lens.dim(1), vocab);
    // The last row: the model's logits at that position.
    double worst = 0, scale = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const float own = cap.logits.ptr()[position * vocab + v];
      worst = std::max(worst, std::abs(double(lens.ptr()[L * vocab + v]) - own));
      scale = std::max(scale, std::abs(double(own)));
    }
    EXPECT_LE(worst, 1e-5 * scale) << "position " << position;
    // Every layer: Norm_final(h_l) · U[v] in double, for a sample of the vocabulary.
    for (int64_t l = 0; l < L; ++l) {
      const float* x = cap.hidden_states.ptr() + (l * cap.T + position) * D;
      double mean = 0, sq = 0;
      if (!r.rms) {
        for (int64_t i = 0; i < D; ++i) mean += x[i];
        mean /= double(D);
      }
      for (int64_t i = 0; i < D; ++i) sq += (x[i] - mean) * (x[i] - mean);
      const double inv = 1 / std::sqrt(sq / double(D) + r.eps);
      for (int64_t v = 0; v < vocab; v += 997) {
        double want = 0, size = 0;
        for (int64_t i = 0; i < D; ++i) {
          const double term = (x[i] - mean) * inv * r.norm_weight->ptr()[i] * r.unembedding->ptr()[v * D + i];
          want += term;
          size += std::abs(term);
        }
        if (r.final_softcap > 0) want = r.final_softcap * std::tanh(want / r.final_softcap);
        EXPECT_NEAR(lens.ptr()[l * vocab + v], want, 1e-5 * size + 1e-6) << "layer " << l << " token " << v;
      }
    }
  }
}

TEST_P(LogitLensOn, TopTokensAndRanksAgreeWithTheRow) {
  const Model& model = decoder(GetParam());
  CaptureOptions options;
  options.logits = true;
  const Capture cap = model.run(model.encode("The capital of France is"), options);
  const LogitReadout r = model.final_readout();
  const int64_t vocab = r.unembedding->dim(0);
  const Tensor lens = logit_lens(cap, r, cap.T - 1);
  const float* last = lens.ptr() + cap.n_layer * vocab;
  const std::vector<LensToken> top = lens_top(last, vocab, 5);
  ASSERT_EQ(top.size(), 5u);
  double p = 0;
  for (size_t i = 0; i < top.size(); ++i) {
    EXPECT_EQ(top[i].rank, static_cast<int64_t>(i));
    if (i) EXPECT_GE(top[i - 1].logit, top[i].logit);
    EXPECT_EQ(lens_token(last, vocab, top[i].id).rank, top[i].rank);
    p += top[i].probability;
  }
  EXPECT_LE(p, 1.0 + 1e-6);
  int64_t argmax = 0;
  for (int64_t v = 1; v < vocab; ++v)
    if (last[v] > last[argmax]) argmax = v;
  EXPECT_EQ(top[0].id, argmax);
  EXPECT_THROW(lens_token(last, vocab, static_cast<int32_t>(vocab)), Error);
  EXPECT_THROW(logit_lens(cap, r, cap.T), Error);
}

// Direct logit attribution and the per-head lens on the real decoders (SmolLM2: pre-norm; Gemma 3
// 270M: sandwich norms around every block). The parts must add up to the model's own logit — which
// they cannot unless each block's output norm is linearised at the run's own scale — and each head's
// lens entry, target minus contrast, must be that head's attribution.
TEST_P(LogitLensOn, AttributionAddsUpAndTheHeadLensIsEachHeadsPart) {
  const Model& model = decoder(GetParam());
  const Encoding e = model.encode("When Mary and John went to the store, John gave a drink to");
  LogitAttributionOptions options;
  options.contrast = 5;
  const std::vector<analysis::LogitAttribution> rows = attribute_logits(model, e, options);
  ASSERT_EQ(rows.size(), 2 * e.size());
  for (const analysis::LogitAttribution& a : rows) {
    double size = std::abs(a.embeddings) + std::abs(a.final_norm_bias);
    for (double v : a.heads) size += std::abs(v);
    for (double v : a.mlp) size += std::abs(v);
    EXPECT_LE(std::abs(a.rest), 1e-5 * size + 1e-5) << GetParam() << " position " << a.position;
  }
  const analysis::LogitAttribution& last = rows[rows.size() - 1];  // the prediction against token 5
  const ModelConfig& c = model.config();
  for (const auto& [layer, head] : std::vector<std::pair<int, int>>{{0, 0}, {c.n_layer / 2, 1}, {c.n_layer - 1, 2}}) {
    HeadLensOptions o;
    o.layer = layer, o.head = head, o.top_k = 5, o.keep_logits = true;
    o.tokens = {last.target, 5};
    const HeadLens lens = text_head_lens(model, e, o);
    ASSERT_EQ(lens.logits.size(), size_t(lens.vocab));
    const double part = last.heads[size_t(layer * c.n_head + head)];
    EXPECT_NEAR(lens.tokens[0].logit - lens.tokens[1].logit, part, 1e-6 * (1 + std::abs(part))) << layer << "." << head;
    EXPECT_EQ(lens.kv_head, head / (c.n_head / c.n_kv_head));
    ASSERT_EQ(lens.promoted.size(), 5u);
    ASSERT_EQ(lens.suppressed.size(), 5u);
    double largest = -INFINITY, smallest = INFINITY;
    for (double v : lens.logits) largest = std::max(largest, v), smallest = std::min(smallest, v);
    EXPECT_EQ(lens.promoted[0].logit, largest);
    EXPECT_EQ(lens.suppressed[0].logit, smallest);
    EXPECT_EQ(lens.promoted[0].rank, 0);
    for (size_t i = 1; i < 5; ++i) {
      EXPECT_GE(lens.promoted[i - 1].logit, lens.promoted[i].logit);
      EXPECT_LE(lens.suppressed[i - 1].logit, lens.suppressed[i].logit);
    }
    int64_t above = 0;  // the followed token's rank, counted here
    for (double v : lens.logits) above += v > lens.tokens[1].logit;
    EXPECT_EQ(lens.tokens[1].rank, above);
  }
  HeadLensOptions bad;
  bad.layer = c.n_layer;
  EXPECT_THROW(text_head_lens(model, e, bad), Error);
  bad.layer = 0, bad.position = int64_t(e.size());
  EXPECT_THROW(text_head_lens(model, e, bad), Error);
  bad.position = -1, bad.tokens = {int32_t(c.vocab_size)};
  EXPECT_THROW(text_head_lens(model, e, bad), Error);
}

INSTANTIATE_TEST_SUITE_P(Decoders, LogitLensOn, ::testing::Values("smollm2", "gemma3_270m"));

}  // namespace
}  // namespace headscope
