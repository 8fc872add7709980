// Corpus evidence on the default model (src/pipeline/evidence.cc): the trophy sentence's
// coreference and determiner heads get their corpus roles, named on the text; the cache gives
// back what was measured; "which heads link A → B" reads the maps. The evidence is measured once
// into $HEADSCOPE_CACHE_DIR or the build's evidence-cache/ (~3 min of two cores the first time).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "headscope/pipeline.h"
#include "test_support.h"

namespace headscope {
namespace {

constexpr const char* kTrophy = "The trophy didn't fit in the suitcase because it was too big.";

EvidenceOptions options() {
  EvidenceOptions o;
  o.data_dir = testing::env_or_fail("HEADSCOPE_DATA");
  const char* cache = std::getenv("HEADSCOPE_CACHE_DIR");
  o.cache_dir = cache && *cache ? cache : std::string(HEADSCOPE_BINARY_DIR) + "/evidence-cache";
  return o;
}

const CorpusEvidence& evidence() {
  static const CorpusEvidence e =
      corpus_evidence(testing::default_model(), testing::env_or_fail("HEADSCOPE_MODEL"), options());
  return e;
}

RunAnalysis trophy() {
  const Model& m = testing::default_model();
  AnalyseOptions o;
  o.corpus = evidence().heads;
  return analyse(m, kTrophy, m.encode(kTrophy), {}, o);
}

size_t index(int layer, int head) { return size_t(layer * testing::default_model().config().n_head + head); }

TEST(CorpusEvidence, TrophySentenceNamesTheCoreferenceAndDeterminerHeads) {
  ASSERT_TRUE(evidence().syntax);
  ASSERT_TRUE(evidence().coreference);
  const RunAnalysis run = trophy();
  // docs/atlas-minilm.md: L3H1 is the best coreference head; on this text it is labelled so and
  // its text evidence names "trophy" as the antecedent of "it".
  const size_t coref = index(3, 1);
  EXPECT_EQ(run.token_level.roles[coref].primary.role, analysis::Role::kCoreference);
  ASSERT_TRUE(run.on_text[coref].recognised.has_value());
  EXPECT_EQ(*run.on_text[coref].recognised, analysis::Role::kCoreference);
  EXPECT_NE(run.on_text[coref].recognised_text.find("'it' → 'trophy'"), std::string::npos)
      << run.on_text[coref].recognised_text;
  // L2H8, the determiner head of the atlas: a syntactic label (its best relation on the cached
  // sentences may be det or case, both function-word relations it wins on the atlas).
  const size_t det = index(2, 8);
  EXPECT_EQ(run.token_level.roles[det].primary.role, analysis::Role::kSyntactic)
      << run.token_level.roles[det].primary.evidence;
  EXPECT_EQ(run.sink_columns, "[CLS] and [SEP]");
}

TEST(CorpusEvidence, TheCacheGivesBackWhatWasMeasured) {
  const CorpusEvidence& first = evidence();
  ASSERT_FALSE(first.path.empty());
  const CorpusEvidence again =
      corpus_evidence(testing::default_model(), testing::env_or_fail("HEADSCOPE_MODEL"), options());
  EXPECT_TRUE(again.from_cache);
  EXPECT_EQ(again.key, first.key);
  ASSERT_EQ(again.heads.size(), first.heads.size());
  for (size_t i = 0; i < first.heads.size(); ++i) {
    EXPECT_EQ(again.heads[i].syntax.has_value(), first.heads[i].syntax.has_value());
    if (first.heads[i].syntax) {
      EXPECT_EQ(again.heads[i].syntax->accuracy, first.heads[i].syntax->accuracy);
    }
    if (first.heads[i].coref) {
      EXPECT_EQ(again.heads[i].coref->accuracy, first.heads[i].coref->accuracy);
    }
  }
  // Other sizes are another key.
  EvidenceOptions other = options();
  other.sentences = 7;
  EXPECT_NE(evidence_key(testing::env_or_fail("HEADSCOPE_MODEL"), other), first.key);
}

TEST(CorpusEvidence, HeadsLinkingRanksEveryHeadByTheMapsWeight) {
  const Model& m = testing::default_model();
  const RunAnalysis run = trophy();
  const std::vector<std::string> labels = token_labels(run);
  const int T = run.T();
  const int it = int(std::find(labels.begin(), labels.end(), "it") - labels.begin());
  const int trophy_token = int(std::find(labels.begin(), labels.end(), "trophy") - labels.begin());
  ASSERT_LT(it, T);
  ASSERT_LT(trophy_token, it);
  const std::vector<HeadLink> ranked = heads_linking(m, run, it, trophy_token);
  ASSERT_EQ(ranked.size(), size_t(m.config().n_layer * m.config().n_head));
  for (size_t i = 1; i < ranked.size(); ++i) EXPECT_GE(ranked[i - 1].weight, ranked[i].weight);
  for (const HeadLink& l : ranked) {
    const float* row = run.capture.attention.ptr() + ((int64_t(l.layer) * m.config().n_head + l.head) * T + it) * T;
    EXPECT_FLOAT_EQ(float(l.weight), row[trophy_token]);
  }
  EXPECT_THROW(heads_linking(m, run, T, 0), Error);
}

}  // namespace
}  // namespace headscope
