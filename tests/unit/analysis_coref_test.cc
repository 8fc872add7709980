// GAP coreference: reading (code-point offsets → bytes), pronoun → candidate attention on a
// hand-built matrix, scoring, and the position baselines against the Python count.
#include "analysis/coref.h"

#include <gtest/gtest.h>

#include "test_support.h"

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "headscope/error.h"

namespace headscope::analysis {
namespace {

const std::string kHeader = "ID\tText\tPronoun\tPronoun-offset\tA\tA-offset\tA-coref\tB\tB-offset\tB-coref\tURL\n";

TEST(AnalysisCoref, ReadsGapAndConvertsCodePointOffsetsToBytes) {
  // "Zoë" has a two-byte ë: "She" is at code point 13 but byte 14.
  const std::string tsv =
      kHeader + "t-1\tZo\xC3\xAB met Ann. She smiled.\tShe\t13\tZo\xC3\xAB\t0\tTRUE\tAnn\t8\tFALSE\thttp://x\n";
  const auto ex = parse_gap_tsv(tsv, "mem");
  ASSERT_EQ(ex.size(), 1u);
  EXPECT_EQ(ex[0].pronoun.begin, 14);
  EXPECT_EQ(ex[0].pronoun.end, 17);
  EXPECT_EQ(ex[0].b.begin, 9);
  EXPECT_TRUE(ex[0].a_coref);
  EXPECT_FALSE(ex[0].b_coref);
  EXPECT_TRUE(ex[0].decidable());
}

TEST(AnalysisCoref, RejectsInconsistentRows) {
  EXPECT_THROW(parse_gap_tsv("a\tb\n", "mem"), Error);  // no GAP header
  EXPECT_THROW(parse_gap_tsv(kHeader + "t\tAnn met Bo.\tshe\t0\tAnn\t0\tTRUE\tBo\t8\tFALSE\tu\n", "mem"), Error);
  EXPECT_THROW(parse_gap_tsv(kHeader + "t\tAnn met Bo.\tAnn\t0\tAnn\t0\tMAYBE\tBo\t8\tFALSE\tu\n", "mem"), Error);
  EXPECT_THROW(read_gap_tsv("/nonexistent.tsv"), Error);
}

// "Mary Jones met Ann . She smiled" as tokens: [CLS] mary jones met ann . she smiled [SEP].
Encoding mary_ann(GapExample& ex) {
  ex.text = "Mary Jones met Ann. She smiled";
  ex.a = {"Mary Jones", 0, 10};
  ex.b = {"Ann", 15, 18};
  ex.pronoun = {"She", 20, 23};
  Encoding enc;
  auto tok = [&](int64_t b, int64_t e, int32_t word, bool special) {
    Token t;
    t.begin = b;
    t.end = e;
    t.word = word;
    t.special = special;
    enc.tokens.push_back(t);
  };
  tok(0, 0, -1, true);
  tok(0, 4, 0, false);    // mary
  tok(5, 10, 1, false);   // jones
  tok(11, 14, 2, false);  // met
  tok(15, 18, 3, false);  // ann
  tok(18, 19, 4, false);  // .
  tok(20, 23, 5, false);  // she
  tok(24, 30, 6, false);  // smiled
  tok(30, 30, -1, true);
  return enc;
}

TEST(AnalysisCoref, CandidateGetsItsMostAttendedWord) {
  GapExample ex;
  const Encoding enc = mary_ann(ex);
  std::vector<float> a(81, 0.0f);
  // Row of "she" (token 6): mary .2, jones .2, ann .3, rest elsewhere.
  a[6 * 9 + 1] = 0.2f, a[6 * 9 + 2] = 0.2f, a[6 * 9 + 4] = 0.3f, a[6 * 9 + 0] = 0.3f;
  CandidateAttention c;
  ASSERT_TRUE(candidate_attention(a.data(), enc, ex, c));
  EXPECT_NEAR(c.a, 0.2, 1e-6);  // max over "Mary", "Jones" — not their sum .4
  EXPECT_NEAR(c.b, 0.3, 1e-6);
  GapExample cut = ex;
  cut.b = {"Ann", 40, 43};  // outside the encoding (as after truncation)
  EXPECT_FALSE(candidate_attention(a.data(), enc, cut, c));
}

TEST(AnalysisCoref, ScorerCountsHeadsAndBaselines) {
  GapExample ex;
  const Encoding enc = mary_ann(ex);
  ex.a_coref = false;
  ex.b_coref = true;  // "She" = Ann
  Tensor att({1, 2, 9, 9});
  att.data[6 * 9 + 4] = 0.6f;       // head 0: she → ann
  att.data[81 + 6 * 9 + 1] = 0.6f;  // head 1: she → mary
  CorefScorer scorer(2);
  scorer.add(ex, enc, att);
  GapExample neither = ex;
  neither.b_coref = false;
  scorer.add(neither, enc, att);  // not decidable: ignored
  EXPECT_EQ(scorer.support(), 1);
  EXPECT_EQ(scorer.correct(0), 1);
  EXPECT_EQ(scorer.correct(1), 0);
  // Ann ends 2 bytes before "She", Mary Jones 10: nearest = Ann (right); first = Mary (wrong).
  EXPECT_EQ(scorer.baseline_correct(CorefBaseline::kNearest), 1);
  EXPECT_EQ(scorer.baseline_correct(CorefBaseline::kFirst), 0);
  EXPECT_THROW(scorer.add(ex, enc, Tensor({1, 1, 9, 9})), Error);
}

using headscope::testing::env_or_fail;

TEST(AnalysisCoref, BaselinesMatchTheIndependentPythonCount) {
  const std::string goldens = env_or_fail("HEADSCOPE_GOLDENS"), data = env_or_fail("HEADSCOPE_DATA");
  ASSERT_FALSE(goldens.empty() || data.empty());
  std::ifstream in(goldens + "/analysis_baselines.json");
  ASSERT_TRUE(in) << "missing " << goldens << "/analysis_baselines.json (golden_analysis.py)";
  const auto gold = nlohmann::json::parse(in)["gap"];
  for (const char* name : {"gap-development.tsv", "gap-validation.tsv"}) {
    int64_t decidable = 0, nearest = 0, first = 0;
    for (const auto& ex : read_gap_tsv(data + "/gap/" + name)) {
      if (!ex.decidable()) continue;
      ++decidable;
      nearest += coref_baseline_correct(ex, CorefBaseline::kNearest);
      first += coref_baseline_correct(ex, CorefBaseline::kFirst);
    }
    EXPECT_EQ(decidable, gold[name]["decidable"].get<int64_t>()) << name;
    EXPECT_EQ(nearest, gold[name]["nearest"].get<int64_t>()) << name;
    EXPECT_EQ(first, gold[name]["first"].get<int64_t>()) << name;
  }
}

}  // namespace
}  // namespace headscope::analysis
