// The role census of the real decoders (SmolLM2-135M, Gemma 3 270M): their heads are labelled from
// the attention without the sink, never "Sink", and a head is dormant exactly when the rule of
// headscope/analysis.h holds on its own statistics. The bounds are those of the measurement in
// docs/roles.md ("Decoders"), with room for float rounding across machines:
//   trophy sentence, no probe, no corpus evidence: SmolLM2 29 dormant heads of 270, Gemma 3 none of 72;
//   the first 20 UD PUD sentences: SmolLM2 9.3 % of text x head records dormant, Gemma 3 0.8 %.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/atlas.h"
#include "headscope/headscope.h"
#include "headscope/pipeline.h"
#include "pipeline/atlas.h"
#include "test_support.h"

namespace headscope {
namespace {

const Model& decoder(const std::string& golden) { return testing::real_decoder(golden); }

struct Census {
  int heads = 0, dormant = 0, sink = 0;
};

// Counts the primary roles of one analysis and checks every head against the dormant rule, from
// the statistics of its whole rows (what the sink takes, and what the head writes).
Census census(const RunAnalysis& run) {
  Census c;
  const LevelAnalysis& a = run.token_level;
  for (size_t i = 0; i < a.roles.size(); ++i) {
    const analysis::HeadStats& s = a.stats[i];
    const analysis::Role role = a.roles[i].primary.role;
    const double written = (1.0 - s.sink_mass) / (1.0 - s.sink_mass_norm);
    const bool rule =
        s.sink_mass >= analysis::kDormantSinkMass && std::isfinite(written) && written <= analysis::kDormantWritten;
    EXPECT_EQ(role == analysis::Role::kDormant, rule)
        << "head " << i << ": sink " << s.sink_mass << ", norm-weighted " << s.sink_mass_norm;
    ++c.heads;
    c.dormant += role == analysis::Role::kDormant;
    c.sink += role == analysis::Role::kSink;
  }
  return c;
}

class DecoderRoles : public ::testing::TestWithParam<std::string> {};

TEST_P(DecoderRoles, TrophySentenceCensusAndTheHeadThatLinksItToTrophy) {
  const Model& model = decoder(GetParam());
  const std::string text = "The trophy didn't fit in the suitcase because it was too big.";
  const RunAnalysis run = analyse(model, text, model.encode(text), {}, AnalyseOptions{});
  const Census c = census(run);
  std::printf("%s, trophy sentence: %d heads, %d dormant, %d sink\n", GetParam().c_str(), c.heads, c.dormant, c.sink);
  EXPECT_EQ(c.sink, 0);
  if (GetParam() == "smollm2") {
    EXPECT_GE(c.dormant, 20);
    EXPECT_LE(c.dormant, 40);
    // L17 H4 links 'it' to 'trophy' most of all heads: it does something, so it is neither parked
    // nor dormant, and its strongest link from 'it' on the text is to 'trophy'.
    const size_t h = 17 * 9 + 4;
    const analysis::Role r = run.token_level.roles[h].primary.role;
    EXPECT_NE(r, analysis::Role::kDormant);
    EXPECT_NE(r, analysis::Role::kSink);
    int it = -1, trophy = -1;
    for (size_t t = 0; t < run.encoding.size(); ++t) {
      const std::string piece = token_display(run.text, run.encoding.tokens[t]);
      if (piece.find("it") != std::string::npos && piece.size() <= 3) it = int(t);
      if (piece.find("trophy") != std::string::npos) trophy = int(t);
    }
    ASSERT_TRUE(it > 0 && trophy > 0);
    bool linked = false;
    for (const analysis::TextLink& l : run.on_text[h].links) linked = linked || (l.query == it && l.key == trophy);
    EXPECT_TRUE(linked) << run.on_text[h].links_text;
  } else {
    EXPECT_LE(c.dormant, 5);
  }
}

TEST_P(DecoderRoles, PudCensus) {
  const Model& model = decoder(GetParam());
  const std::string data = testing::env_or_fail("HEADSCOPE_DATA");
  ASSERT_FALSE(data.empty());
  const std::string path = data + "/ud/en_pud-ud-test.conllu";
  std::vector<CorpusText> texts = read_corpus(path);  // each sentence's words joined by spaces
  ASSERT_GE(texts.size(), 20u);
  texts.resize(20);
  Census all;
  analyse_corpus(model, texts, {}, CorpusOptions{}, [&](size_t, const CorpusText&, const RunAnalysis& run) {
    const Census c = census(run);
    all.heads += c.heads, all.dormant += c.dormant, all.sink += c.sink;
  });
  const double dormant = double(all.dormant) / all.heads;
  std::printf("%s, 20 PUD sentences: %d text x head records, %.1f %% dormant, %d sink\n", GetParam().c_str(), all.heads,
              100 * dormant, all.sink);
  EXPECT_EQ(all.sink, 0);
  if (GetParam() == "smollm2") {
    EXPECT_GE(dormant, 0.04);
    EXPECT_LE(dormant, 0.16);
  } else {
    EXPECT_LE(dormant, 0.04);
  }
}

// The atlas reads a decoder's roles as analyse() does, from the rows without the sink with the
// sink's shares as evidence (before, it labelled most decoder heads Sink from whole rows): with
// the same (empty) evidence, each corpus text's roles in the atlas are those analyse() gives the
// text, to the rounding of the atlas's packed passes; and the sink-free sums of shards merged equal
// one pass's.
TEST_P(DecoderRoles, AtlasReadsRolesWithoutTheSink) {
  const Model& model = decoder(GetParam());
  const int N = model.config().n_layer * model.config().n_head;
  const std::string data = testing::env_or_fail("HEADSCOPE_DATA");
  const std::string pud = data + "/ud/en_pud-ud-test.conllu";
  std::vector<CorpusText> texts = read_corpus(pud);
  ASSERT_GE(texts.size(), 30u);
  texts.erase(texts.begin(), texts.begin() + 20);  // other sentences than the treebank stage's
  texts.resize(6);
  const std::string corpus = ::testing::TempDir() + "/atlas_corpus_" + GetParam() + ".txt";
  {
    std::ofstream f(corpus);
    for (const CorpusText& t : texts) f << t.text << "\n";
  }
  analysis::AtlasOptions o;
  o.report_treebank = pud;
  o.max_sentences = 20;
  o.corpus = corpus;
  o.text_roles = true;
  o.importance_texts = 0;
  o.evidence.assign(size_t(N), analysis::HeadEvidence{});  // no probe, syntax or coreference
  const analysis::AtlasResult atlas = build_atlas(model, GetParam(), o);
  ASSERT_EQ(atlas.free_stats.size(), size_t(N));
  int sink = 0;
  for (const analysis::HeadRoles& r : atlas.roles) sink += r.primary.role == analysis::Role::kSink;
  EXPECT_EQ(sink, 0);
  for (const analysis::HeadEvidence& e : atlas.evidence) ASSERT_TRUE(e.sink.has_value());
  ASSERT_EQ(atlas.texts.size(), texts.size());
  int same = 0, total = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const RunAnalysis run = analyse(model, texts[i].text, model.encode(texts[i].text), {}, AnalyseOptions{});
    ASSERT_EQ(atlas.texts[i].roles.size(), size_t(N));
    for (size_t h = 0; h < size_t(N); ++h, ++total)
      same += atlas.texts[i].roles[h].primary.role == run.token_level.roles[h].primary.role;
  }
  std::printf("%s atlas: %d sink heads; per-text roles equal to analyse() for %d of %d text x head records\n",
              GetParam().c_str(), sink, same, total);
  EXPECT_GE(same, total * 97 / 100);

  // Shards of the treebank stage, merged, carry the same sink-free sums as one pass (one thread,
  // as atlas_partial_test runs the encoder's: the sums are exact, the passes deterministic).
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  analysis::AtlasOptions tb = o;
  tb.corpus.clear();
  AtlasShard a, b;
  a.report_end = 7;
  b.report_begin = 7;
  AtlasPartial merged = atlas_partial_from_bytes(atlas_partial_to_bytes(atlas_partial(model, tb, a)));
  merged.merge(atlas_partial(model, tb, b));
  EXPECT_EQ(merged.token_free_stats.to_json(), atlas_partial(model, tb, AtlasShard{}).token_free_stats.to_json());
  EXPECT_NE(merged.token_free_stats.to_json(), AtlasPartial(model.config()).token_free_stats.to_json());
  omp_set_num_threads(threads);
}

INSTANTIATE_TEST_SUITE_P(Decoders, DecoderRoles, ::testing::Values("smollm2", "gemma3_270m"));

}  // namespace
}  // namespace headscope
