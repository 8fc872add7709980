// The repeated-random-tokens probe: layout from a small stand-in tokenizer, scores on hand-built
// attention of a perfect induction head and a perfect duplicate-token head.
#include "analysis/probe.h"

#include <gtest/gtest.h>

#include <set>

#include "headscope/error.h"
#include "pipeline/probe.h"
#include "test_support.h"

namespace headscope::analysis {
namespace {

// 200 entries: 0 [PAD], 1 [CLS], 2 [SEP], 3..9 [unusedN], then ordinary words "w10".."w199".
// encode() returns [CLS] <one token> [SEP] whatever the text: enough for the probe template.
class TinyTokenizer : public Tokenizer {
 public:
  Encoding encode(std::string_view, const EncodeOptions&) const override {
    Encoding e;
    Token cls, word, sep;
    cls.id = 1, cls.special = true;
    word.id = 50, word.word = 0, word.end = 1;
    sep.id = 2, sep.special = true;
    e.tokens = {cls, word, sep};
    return e;
  }
  std::string token_text(int32_t id) const override {
    if (id == 0) return "[PAD]";
    if (id == 1) return "[CLS]";
    if (id == 2) return "[SEP]";
    if (id < 10) return "[unused" + std::to_string(id) + "]";
    return "w" + std::to_string(id);
  }
  int32_t vocab_size() const override { return 200; }
};

TEST(AnalysisProbe, LayoutIsTwoCopiesOfDistinctOrdinaryTokensInsideTheSpecials) {
  const TinyTokenizer tok;
  const ProbeLayout p = make_repeated_probe(tok, 20, 7);
  EXPECT_EQ(p.prefix, 1);
  EXPECT_EQ(p.length, 20);
  ASSERT_EQ(p.encoding.size(), 42u);
  EXPECT_EQ(p.encoding.tokens.front().id, 1);
  EXPECT_EQ(p.encoding.tokens.back().id, 2);
  std::set<int32_t> seen;
  for (int i = 0; i < 20; ++i) {
    const int32_t id = p.encoding.tokens[static_cast<size_t>(1 + i)].id;
    EXPECT_GE(id, 10);  // no special or placeholder entry
    EXPECT_EQ(p.encoding.tokens[static_cast<size_t>(21 + i)].id, id);
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 20u);
  // Same seed, same probe; another seed, another one.
  EXPECT_EQ(make_repeated_probe(tok, 20, 7).encoding.ids(), p.encoding.ids());
  EXPECT_NE(make_repeated_probe(tok, 20, 8).encoding.ids(), p.encoding.ids());
  EXPECT_THROW(make_repeated_probe(tok, 100, 7), Error);  // 200 entries are too few for 100
}

TEST(AnalysisProbe, ScoresInductionAndDuplicateHeads) {
  const TinyTokenizer tok;
  const ProbeLayout p = make_repeated_probe(tok, 10, 1);
  const int64_t T = 22, P = 1, L = 10;
  Tensor att({1, 3, T, T});
  auto at = [&](int64_t h, int64_t q, int64_t k) -> float& {
    return att.data[static_cast<size_t>((h * T + q) * T + k)];
  };
  for (int64_t q = 0; q < T; ++q) {
    at(0, q, 0) = 1.0f;  // default: everything on [CLS]
    at(1, q, 0) = 1.0f;
    at(2, q, 0) = 1.0f;
  }
  for (int64_t i = 0; i < L; ++i) {
    const int64_t q = P + L + i;
    at(0, q, 0) = 0.0f, at(0, q, P + i + 1) = 1.0f;              // head 0: induction
    at(1, q, 0) = 0.0f, at(1, q, P + i) = 1.0f;                  // head 1: duplicate token
    at(2, q, 0) = 0.5f, at(2, q, P + i + 1) = i < 5 ? 0.5f : 0;  // head 2: half, on half the tokens
  }
  const auto ev = score_probe(att, p);
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_NEAR(ev[0].induction, 1.0, 1e-9);
  EXPECT_NEAR(ev[0].duplicate, 0.0, 1e-9);
  EXPECT_NEAR(ev[1].induction, 0.0, 1e-9);
  EXPECT_NEAR(ev[1].duplicate, 1.0, 1e-9);
  EXPECT_NEAR(ev[2].induction, 0.25, 1e-9);  // 5 of 10 tokens with .5
  EXPECT_EQ(ev[2].probe_length, 10);
  const auto mean = average_probes({ev, std::vector<ProbeEvidence>(3, ProbeEvidence{0, 0, 10})});
  EXPECT_NEAR(mean[0].induction, 0.5, 1e-9);
  EXPECT_THROW(score_probe(Tensor({1, 1, 5, 5}), p), Error);
}

}  // namespace
}  // namespace headscope::analysis

namespace headscope::analysis {
namespace {

// The streamed probe reads the same rows as score_probe() reads from the stored maps, computed in
// the same blocks: the scores are equal, not merely close.
TEST(AnalysisProbe, StreamedScoresEqualTheStoredMaps) {
  const Model& model = testing::default_model();
  const ProbeLayout layout = make_repeated_probe(model.tokenizer(), 40, 99);
  const std::vector<ProbeEvidence> stored =
      score_probe(model.run(layout.encoding, CaptureOptions::attention_only()).attention, layout);
  const std::vector<ProbeEvidence> streamed = run_probe(model, layout);
  ASSERT_EQ(stored.size(), streamed.size());
  for (size_t h = 0; h < stored.size(); ++h) {
    EXPECT_EQ(stored[h].induction, streamed[h].induction) << "head " << h;
    EXPECT_EQ(stored[h].duplicate, streamed[h].duplicate) << "head " << h;
    EXPECT_EQ(streamed[h].probe_length, 40);
  }
}

}  // namespace
}  // namespace headscope::analysis
