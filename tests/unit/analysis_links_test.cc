// A head on one text in words (analysis/links.h): hand-built maps whose links, sink discount and
// recognised roles are worked out by hand.
#include "analysis/links.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace headscope::analysis {
namespace {

// [CLS] the trophy fit because it was big [SEP]
const std::vector<std::string> kLabels = {"[CLS]", "the", "trophy", "fit", "because", "it", "was", "big", "[SEP]"};
constexpr int T = 9;

SequenceInfo sequence() {
  SequenceInfo s;
  s.kinds.assign(T, TokenKind::kContent);
  s.kinds.front() = s.kinds.back() = TokenKind::kSpecial;
  return s;
}

// Every row: .6 on [CLS], .1 on itself, .3 on `target(q)`.
std::vector<float> map_with(const std::vector<int>& target) {
  std::vector<float> a(T * T, 0.0f);
  for (int q = 0; q < T; ++q) {
    a[q * T + 0] += 0.6f;
    a[q * T + q] += 0.1f;
    a[q * T + target[size_t(q)]] += 0.3f;
  }
  return a;
}

HeadRoles holding(Role role, double score) {
  HeadRoles r;
  r.scores.push_back(RoleScore{role, score, "", ""});
  r.primary = r.scores.front();
  return r;
}

TEST(AnalysisLinks, SinkIsDroppedAndRowsRenormalised) {
  // "the" (1) → "trophy" (2): .3 of the .4 left after [CLS] → .75.
  const std::vector<float> a = map_with({0, 2, 3, 2, 3, 2, 7, 6, 7});
  const TextEvidence t = describe_text(a.data(), kLabels, sequence(), HeadEvidence{}, HeadRoles{});
  ASSERT_FALSE(t.links.empty());
  EXPECT_NEAR(t.links.front().weight, 0.75, 1e-6);
  EXPECT_NEAR(t.links.front().raw_weight, 0.3, 1e-6);
  EXPECT_FALSE(t.recognised.has_value());  // no corpus role held: nothing claimed
  EXPECT_NE(t.links_text.find("'the' → 'trophy' 0.75"), std::string::npos) << t.links_text;
  EXPECT_EQ(sink_columns_text(sequence(), kLabels), "[CLS] and [SEP]");
}

TEST(AnalysisLinks, CoreferenceIsRecognisedWhenAPronounPointsBack) {
  const std::vector<float> a = map_with({0, 2, 3, 2, 3, 2, 7, 6, 7});
  HeadEvidence corpus;
  corpus.coref = CorefEvidence{0.71, 0.56, "nearest candidate", 392};
  const TextEvidence t = describe_text(a.data(), kLabels, sequence(), corpus, holding(Role::kCoreference, 0.34));
  ASSERT_TRUE(t.recognised.has_value());
  EXPECT_EQ(*t.recognised, Role::kCoreference);
  ASSERT_EQ(t.matching.size(), 1u);
  EXPECT_EQ(t.matching[0].query, 5);
  EXPECT_EQ(t.matching[0].key, 2);
  EXPECT_NE(t.recognised_text.find("'it' → 'trophy'"), std::string::npos) << t.recognised_text;
  // The same map with "it" pointing forward to "big": not an antecedent.
  const std::vector<float> b = map_with({0, 2, 3, 2, 3, 7, 7, 6, 7});
  EXPECT_FALSE(describe_text(b.data(), kLabels, sequence(), corpus, holding(Role::kCoreference, 0.34)).recognised);
}

TEST(AnalysisLinks, DeterminerLinksMatchADetRole) {
  const std::vector<float> a = map_with({0, 2, 3, 2, 3, 2, 7, 6, 7});
  HeadEvidence corpus;
  corpus.syntax = SyntaxEvidence{"det", false, 0.8, 0.57, 1, 2052, 1000};
  const TextEvidence t = describe_text(a.data(), kLabels, sequence(), corpus, holding(Role::kSyntactic, 0.54));
  ASSERT_TRUE(t.recognised.has_value());
  EXPECT_EQ(*t.recognised, Role::kSyntactic);
  ASSERT_EQ(t.matching.size(), 1u);  // only "the" is a determiner
  EXPECT_EQ(t.matching[0].query, 1);
  EXPECT_EQ(t.matching[0].key, 2);
  // A det role whose corpus side is the left: "the" → "trophy" goes right, so it does not match.
  corpus.syntax->baseline_offset = -1;
  EXPECT_FALSE(describe_text(a.data(), kLabels, sequence(), corpus, holding(Role::kSyntactic, 0.54)).recognised);
}

}  // namespace
}  // namespace headscope::analysis
