// Dependency evaluation (Clark et al. 2019): CoNLL-U reading, word predictions on hand-built
// attention, head/offset selection, and the fixed-offset baselines on the real treebanks against
// the independent Python count in tests/reference/golden_analysis.py.
#include "analysis/syntax.h"

#include <gtest/gtest.h>

#include "test_support.h"

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "headscope/error.h"

namespace headscope::analysis {
namespace {

// "The cat sat ." with an empty node and a multiword range that must be skipped.
constexpr const char* kConllu =
    "# sent_id = s1\n"
    "# text = The cat sat.\n"
    "1\tThe\tthe\tDET\tDT\t_\t2\tdet\t2:det\t_\n"
    "2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t3:nsubj\t_\n"
    "2.1\tghost\tghost\tNOUN\tNN\t_\t_\t_\t3:dep\t_\n"
    "3-4\tsat.\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t0:root\t_\n"
    "4\t.\t.\tPUNCT\t.\t_\t3\tpunct:x\t3:punct\t_\n"
    "\n";

TEST(AnalysisSyntax, ReadsCoNLLUAndSkipsRangesAndEmptyNodes) {
  const auto s = parse_conllu(kConllu, "mem");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].id, "s1");
  ASSERT_EQ(s[0].words.size(), 4u);
  EXPECT_EQ(s[0].words[1].form, "cat");
  EXPECT_EQ(s[0].words[1].head, 3);
  EXPECT_EQ(s[0].words[3].relation, "punct");  // subtype removed
  std::vector<std::pair<int64_t, int64_t>> spans;
  EXPECT_EQ(join_words(s[0], &spans), "The cat sat .");
  EXPECT_EQ(spans, (std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {4, 7}, {8, 11}, {12, 13}}));
}

TEST(AnalysisSyntax, RejectsMalformedCoNLLU) {
  EXPECT_THROW(parse_conllu("1\tThe\tthe\n\n", "bad"), Error);                             // 3 fields
  EXPECT_THROW(parse_conllu("2\tThe\tthe\tDET\tDT\t_\t0\troot\t_\t_\n\n", "bad"), Error);  // ID not 1
  EXPECT_THROW(parse_conllu("1\tThe\tthe\tDET\tDT\t_\tx\troot\t_\t_\n\n", "bad"), Error);  // HEAD
  EXPECT_THROW(parse_conllu("1\tThe\tthe\tDET\tDT\t_\t5\tdet\t_\t_\n\n", "bad"), Error);   // HEAD > n
  EXPECT_THROW(read_conllu("/nonexistent/file.conllu"), Error);
}

// Units: [CLS] The cat sat . [SEP] (one piece per word), so unit = word + 1.
WordMap four_words() {
  WordMap m;
  m.n_units = 6;
  m.unit_of_token = {0, 1, 2, 3, 4, 5};
  m.word_of_unit = {-1, 0, 1, 2, 3, -1};
  m.unit_of_word = {1, 2, 3, 4};
  m.first_token = {0, 1, 2, 3, 4, 5};
  return m;
}

// A head where each word looks at its gold head (The→cat, cat→sat, .→sat) and "sat" at "The";
// [CLS] and the word itself carry more weight but must be ignored.
std::vector<float> gold_like_attention() {
  std::vector<float> a(36, 0.0f);
  auto set = [&](int q, int k, float v) { a[static_cast<size_t>(q * 6 + k)] = v; };
  for (int q = 0; q < 6; ++q) set(q, 0, 0.3f);
  set(1, 1, 0.4f), set(1, 2, 0.2f), set(1, 3, 0.1f);  // The → cat
  set(2, 2, 0.4f), set(2, 3, 0.2f), set(2, 1, 0.1f);  // cat → sat
  set(3, 3, 0.4f), set(3, 1, 0.2f), set(3, 2, 0.1f);  // sat → The
  set(4, 4, 0.4f), set(4, 3, 0.2f), set(4, 2, 0.1f);  // . → sat
  return a;
}

TEST(AnalysisSyntax, PredictsTheMostAttendedOtherWordInBothDirections) {
  const auto a = gold_like_attention();
  EXPECT_EQ(predict_words(a.data(), four_words(), Direction::kDependentToHead), (std::vector<int32_t>{1, 2, 0, 2}));
  // Head → dependent: for word i, the other word attending most to it (column i). Column "The":
  // sat .2 wins; "cat": The .2; "sat": cat .2 ties with "." .2, the first wins; ".": nobody looks
  // at it, all zeros, the first word wins.
  EXPECT_EQ(predict_words(a.data(), four_words(), Direction::kHeadToDependent), (std::vector<int32_t>{2, 0, 1, 0}));
}

TEST(AnalysisSyntax, CountsHeadsAndBaselinesPerRelation) {
  const auto sentence = parse_conllu(kConllu, "mem")[0];
  const auto a = gold_like_attention();
  DependencyScorer scorer(1);
  scorer.add(sentence, a.data(), four_words());
  const auto& rel = scorer.relations();
  // Dependents: The (det, head cat), cat (nsubj, head sat), . (punct, head sat); the root is left out.
  EXPECT_EQ(rel.at("all").support, 3);
  EXPECT_EQ(rel.at("det").correct[0], 1);  // dependent → head right for all three
  EXPECT_EQ(rel.at("nsubj").correct[0], 1);
  EXPECT_EQ(rel.at("punct").correct[0], 1);
  EXPECT_EQ(rel.at("all").correct[0], 3);
  EXPECT_EQ(rel.at("det").correct[1], 0);    // head → dependent: The ← sat, wrong
  EXPECT_EQ(rel.at("nsubj").correct[1], 0);  // cat ← The, wrong
  EXPECT_EQ(rel.at("all").correct[1], 0);
  // Offsets that would be right: det +1, nsubj +1, punct -1.
  EXPECT_EQ(rel.at("det").offset_correct[kMaxBaselineOffset + 1], 1);
  EXPECT_EQ(rel.at("punct").offset_correct[kMaxBaselineOffset - 1], 1);
  EXPECT_EQ(rel.at("all").offset_correct[kMaxBaselineOffset + 1], 2);
  EXPECT_EQ(rel.count("root"), 0u);
}

TEST(AnalysisSyntax, SelectsOnOneSetAndReportsOnTheOther) {
  const auto sentence = parse_conllu(kConllu, "mem")[0];
  const auto good = gold_like_attention();
  std::vector<float> two(72);
  // Head 0: the gold-like head; head 1: every word looks at [CLS] only, then ties → first word.
  std::copy(good.begin(), good.end(), two.begin());
  for (int q = 0; q < 6; ++q) two[static_cast<size_t>(36 + q * 6)] = 1.0f;
  DependencyScorer select(2), report(2);
  select.add(sentence, two.data(), four_words());
  report.add(sentence, two.data(), four_words());
  const auto results = select_and_report(select, report, 1);
  ASSERT_FALSE(results.empty());
  EXPECT_EQ(results[0].relation, "all");
  EXPECT_EQ(results[0].head, 0);
  EXPECT_EQ(results[0].direction, Direction::kDependentToHead);
  EXPECT_DOUBLE_EQ(results[0].head_report_accuracy, 1.0);
  EXPECT_EQ(results[0].baseline_offset, 1);
  EXPECT_DOUBLE_EQ(results[0].baseline_report_accuracy, 2.0 / 3);
  const HeadSyntax hs = best_relation_of_head(select, report, 0, 1);
  EXPECT_FALSE(hs.relation.empty());
  EXPECT_DOUBLE_EQ(hs.accuracy, 1.0);
}

using headscope::testing::env_or_fail;

// The fixed-offset baseline counts of the C++ scorer equal the plain-Python count on the real
// treebanks, relation by relation and offset by offset.
TEST(AnalysisSyntax, BaselinesMatchTheIndependentPythonCount) {
  const std::string goldens = env_or_fail("HEADSCOPE_GOLDENS"), data = env_or_fail("HEADSCOPE_DATA");
  ASSERT_FALSE(goldens.empty() || data.empty());
  std::ifstream in(goldens + "/analysis_baselines.json");
  ASSERT_TRUE(in) << "missing " << goldens << "/analysis_baselines.json (golden_analysis.py)";
  const auto gold = nlohmann::json::parse(in)["treebanks"];
  for (const char* name : {"en_ewt-ud-dev.conllu", "en_pud-ud-test.conllu"}) {
    DependencyScorer scorer(0);
    for (const auto& s : read_conllu(data + "/ud/" + name)) scorer.add_baseline(s);
    const auto& g = gold.at(name);
    ASSERT_EQ(scorer.relations().size(), g.size()) << name;
    for (const auto& [rel, counts] : scorer.relations()) {
      ASSERT_TRUE(g.contains(rel)) << name << " " << rel;
      EXPECT_EQ(counts.support, g[rel]["support"].get<int64_t>()) << name << " " << rel;
      for (int d = -kMaxBaselineOffset; d <= kMaxBaselineOffset; ++d) {
        if (d == 0) continue;
        EXPECT_EQ(counts.offset_correct[static_cast<size_t>(d + kMaxBaselineOffset)],
                  g[rel]["offsets"][std::to_string(d)].get<int64_t>())
            << name << " " << rel << " offset " << d;
      }
    }
  }
}

}  // namespace
}  // namespace headscope::analysis
