// The atlas pipeline end to end on the default model against transformers: for a slice of UD PUD
// and GAP (written by tests/reference/golden_analysis.py), the per-head Clark et al. correct counts,
// token/word statistics and GAP counts must match the Python oracle; then the report formats.
#include "analysis/atlas.h"

#include <gtest/gtest.h>

#include <omp.h>
#include "test_support.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/atlas_report.h"
#include "headscope/error.h"
#include "headscope/pipeline.h"
#include "pipeline/atlas.h"

namespace headscope::analysis {
namespace {

using headscope::testing::env_or_fail;

// One atlas build serves every check below (ctest runs each TEST in its own process, and a build
// is the expensive part). One thread: the sequences are tiny and the CI machine is shared.
TEST(AtlasPipeline, MatchesTransformersOnAGoldSlice) {
  const std::string goldens = env_or_fail("HEADSCOPE_GOLDENS"), model_dir = env_or_fail("HEADSCOPE_MODEL");
  ASSERT_FALSE(goldens.empty() || model_dir.empty());
  std::ifstream in(goldens + "/atlas_pipeline.json");
  ASSERT_TRUE(in) << "missing " << goldens << "/atlas_pipeline.json (tests/reference/golden_analysis.py)";
  const nlohmann::json g = nlohmann::json::parse(in);
  omp_set_num_threads(1);
  const auto model = Model::load(model_dir);
  AtlasOptions o;
  o.report_treebank = goldens + "/atlas_pud.conllu";
  o.report_coref = goldens + "/atlas_gap.tsv";
  o.probe_count = 1;
  o.probe_length = 20;
  o.min_support = 1;
  const AtlasResult r = build_atlas(*model, model_dir, o);
  ASSERT_EQ(r.n_heads(), g["n_layer"].get<int>() * g["n_head"].get<int>());

  {
    SCOPED_TRACE("dependency counts");
    EXPECT_EQ(r.report_sentences, g["sentences"].get<int64_t>());
    EXPECT_EQ(r.skipped_sentences, 0);
    const RelationCounts& all = r.report_counts.relations().at(std::string(kAllRelations));
    EXPECT_EQ(all.support, g["support"].get<int64_t>());
    // An argmax can flip between two nearly equal words when fp32 sums are taken in another
    // order; allow one such flip per head and direction, and a handful in all.
    int64_t total_diff = 0;
    for (int h = 0; h < r.n_heads(); ++h) {
      for (int dir = 0; dir < 2; ++dir) {
        const int64_t ours = all.correct[static_cast<size_t>(h * 2 + dir)];
        const int64_t want = g["correct"][static_cast<size_t>(h)][static_cast<size_t>(dir)].get<int64_t>();
        EXPECT_LE(std::abs(ours - want), 1) << "head " << h << " direction " << dir;
        total_diff += std::abs(ours - want);
      }
    }
    EXPECT_LE(total_diff, 6);
  }
  {
    SCOPED_TRACE("token and word statistics");
    for (int h = 0; h < r.n_heads(); ++h) {
      const auto i = static_cast<size_t>(h);
      EXPECT_NEAR(r.stats[i].entropy_bits, g["token_entropy_bits"][i].get<double>(), 2e-4) << "head " << h;
      EXPECT_NEAR(r.stats[i].sink_mass, g["token_sink_mass"][i].get<double>(), 1e-4) << "head " << h;
      EXPECT_NEAR(r.stats[i].prev_mass, g["token_prev_mass"][i].get<double>(), 1e-4) << "head " << h;
      EXPECT_NEAR(r.word_stats[i].entropy_bits, g["word_entropy_bits"][i].get<double>(), 2e-4) << "head " << h;
    }
  }
  {
    SCOPED_TRACE("coreference counts");
    ASSERT_TRUE(r.coref.has_value());
    EXPECT_EQ(r.coref->support_report, g["gap_support"].get<int64_t>());
    for (int h = 0; h < r.n_heads(); ++h) {
      const double correct =
          r.coref->head_report_accuracies[static_cast<size_t>(h)] * static_cast<double>(r.coref->support_report);
      EXPECT_LE(std::abs(std::lround(correct) - g["gap_correct"][static_cast<size_t>(h)].get<int64_t>()), 1)
          << "head " << h;
    }
  }
  {
    SCOPED_TRACE("roles and reports");
    ASSERT_EQ(r.roles.size(), static_cast<size_t>(r.n_heads()));
    for (const HeadRoles& h : r.roles) {
      EXPECT_FALSE(h.primary.evidence.empty());
      EXPECT_GE(h.confidence, 0.0);
      EXPECT_LE(h.confidence, 1.0);
    }
    // A head whose previous-token mass transformers puts above 0.95 must be a previous-token head.
    int strong_prev = -1;
    for (int h = 0; h < r.n_heads(); ++h) {
      if (g["token_prev_mass"][static_cast<size_t>(h)].get<double>() > 0.95) strong_prev = h;
    }
    ASSERT_GE(strong_prev, 0);
    EXPECT_EQ(r.roles[static_cast<size_t>(strong_prev)].primary.role, Role::kPreviousToken);
    const nlohmann::json j = atlas_json(r, &r);
    EXPECT_EQ(j["schema"], "headscope.atlas/2");
    EXPECT_EQ(j["heads"].size(), static_cast<size_t>(r.n_heads()));
    EXPECT_EQ(j["roles"].size(), static_cast<size_t>(kRoleCount));
    EXPECT_TRUE(j.contains("control"));
    const std::string md = atlas_markdown(r, nullptr, "headscope atlas ...", "atlas.png");
    EXPECT_NE(md.find("## Dependency relations"), std::string::npos);
    EXPECT_NE(md.find("![primary role per head"), std::string::npos);
    const auto png = headscope::render::grid_png(atlas_grid(r, "test"));
    ASSERT_GT(png.size(), 8u);
    EXPECT_EQ(std::string(png.begin() + 1, png.begin() + 4), "PNG");
  }
}

// Evidence given to the atlas (the cached corpus evidence) is what its roles rest on, and each
// corpus text gets its own roles from its own statistics.
TEST(AtlasTextRoles, EachTextGetsRolesFromItsStatisticsAndTheGivenEvidence) {
  const std::string goldens = env_or_fail("HEADSCOPE_GOLDENS"), model_dir = env_or_fail("HEADSCOPE_MODEL");
  ASSERT_FALSE(goldens.empty() || model_dir.empty());
  omp_set_num_threads(1);
  const auto model = Model::load(model_dir);
  const int N = model->config().n_layer * model->config().n_head;
  headscope::testing::TempDir dir("atlas_text_roles");
  AtlasOptions o;
  o.report_treebank = goldens + "/atlas_pud.conllu";
  o.max_sentences = 2;
  o.text_roles = true;
  o.evidence.resize(static_cast<size_t>(N) - 1);
  headscope::testing::write_raw(dir.file("one.txt"), "The trophy didn't fit in the suitcase because it was too big.\n");
  o.corpus = dir.file("one.txt");
  EXPECT_THROW(build_atlas(*model, model_dir, o), Error);  // one head short

  // Head 5 gets a strong determiner relation, head 7 a strong coreference record; no probe.
  o.evidence.assign(static_cast<size_t>(N), HeadEvidence{});
  o.evidence[5].syntax = SyntaxEvidence{"det", false, 0.95, 0.40, -1, 500, 1000};
  o.evidence[7].coref = CorefEvidence{0.90, 0.50, "nearest candidate", 400};
  const AtlasResult one = build_atlas(*model, model_dir, o);
  ASSERT_EQ(one.texts.size(), 1u);
  EXPECT_TRUE(one.probe.size() == static_cast<size_t>(N) && one.probe[0].probe_length == 0);  // not measured
  for (int h = 0; h < N; ++h) {
    const auto i = static_cast<size_t>(h);
    // One text: its statistics are the corpus's, so its roles are the corpus roles.
    EXPECT_EQ(one.texts[0].roles[i].primary.role, one.roles[i].primary.role) << h;
    EXPECT_EQ(one.texts[0].roles[i].confidence, one.roles[i].confidence) << h;
  }
  auto has = [](const HeadRoles& r, Role role) {
    for (const RoleScore& s : r.scores)
      if (s.role == role && s.score > 0) return true;
    return false;
  };
  EXPECT_TRUE(has(one.roles[5], Role::kSyntactic));
  EXPECT_TRUE(has(one.roles[7], Role::kCoreference));
  EXPECT_FALSE(has(one.roles[6], Role::kSyntactic));

  // Two texts: each keeps its own statistics (they differ), and the JSON lists both.
  headscope::testing::write_raw(dir.file("two.txt"),
                                "The cat sat on the mat.\nA storm damaged the roof of the school last night.\n");
  o.corpus = dir.file("two.txt");
  const AtlasResult two = build_atlas(*model, model_dir, o);
  ASSERT_EQ(two.texts.size(), 2u);
  EXPECT_NE(two.texts[0].stats[0].entropy_bits, two.texts[1].stats[0].entropy_bits);
  const nlohmann::json j = atlas_json(two, nullptr);
  ASSERT_EQ(j["texts"].size(), 2u);
  EXPECT_EQ(j["texts"][1]["text"], "A storm damaged the roof of the school last night.");
  EXPECT_EQ(j["texts"][1]["heads"].size(), static_cast<size_t>(N));
}

// The corpus stage runs short texts through packed passes: each text's statistics are those of its
// own streamed analysis (no [T, T] map stored), to float rounding, in file order.
TEST(AtlasCorpus, PackedTextsEqualTheirOwnStreamedAnalysis) {
  const std::string goldens = env_or_fail("HEADSCOPE_GOLDENS"), model_dir = env_or_fail("HEADSCOPE_MODEL");
  ASSERT_FALSE(goldens.empty() || model_dir.empty());
  const auto model = Model::load(model_dir);
  const int N = model->config().n_layer * model->config().n_head;
  headscope::testing::TempDir dir("atlas_corpus_packed");
  const std::vector<std::string> texts = {
      "The cat sat on the mat.", "A storm damaged the roof of the school last night, and the pupils were sent home.",
      "Yes.", "The trophy didn't fit in the suitcase because it was too big; the suitcase was too small."};
  std::string file;
  for (const std::string& t : texts) file += t + "\n";
  headscope::testing::write_raw(dir.file("corpus.txt"), file);
  AtlasOptions o;
  o.report_treebank = goldens + "/atlas_pud.conllu";
  o.max_sentences = 2;
  o.text_roles = true;
  o.evidence.assign(static_cast<size_t>(N), HeadEvidence{});  // no probe, no importance
  o.corpus = dir.file("corpus.txt");
  const AtlasResult a = build_atlas(*model, model_dir, o);
  ASSERT_EQ(a.texts.size(), texts.size());
  EXPECT_EQ(a.corpus_texts, static_cast<int64_t>(texts.size()));
  AnalyseOptions streamed;
  streamed.maps = AnalyseOptions::Maps::kStream;
  streamed.capture = CaptureOptions::attention_only();
  streamed.capture.value_norms = true;
  double worst = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(a.texts[i].text, texts[i]);
    const RunAnalysis run = analyse(*model, texts[i], model->encode(texts[i], false), {}, streamed);
    ASSERT_TRUE(run.streamed);
    for (int h = 0; h < N; ++h) {
      const HeadStats& got = a.texts[i].stats[size_t(h)];
      const HeadStats& want = run.token_level.stats[size_t(h)];
      EXPECT_EQ(got.n_queries, want.n_queries);
      for (double HeadStats::*f : {&HeadStats::entropy_bits, &HeadStats::max_attention, &HeadStats::avg_attention,
                                   &HeadStats::first_mass, &HeadStats::sink_mass_norm, &HeadStats::mean_distance})
        worst = std::max(worst, std::abs(got.*f - want.*f) / std::max(1.0, std::abs(want.*f)));
    }
  }
  EXPECT_LE(worst, 1e-6);
  std::printf("packed corpus stage vs streamed analyse(): worst relative difference %.2e\n", worst);
}

TEST(AtlasInputs, MissingFilesAreReportedByName) {
  const std::string model_dir = env_or_fail("HEADSCOPE_MODEL");
  ASSERT_FALSE(model_dir.empty());
  const auto model = Model::load(model_dir);
  AtlasOptions o;
  EXPECT_THROW(build_atlas(*model, model_dir, o), Error);  // no treebank
  o.report_treebank = "/nonexistent/pud.conllu";
  try {
    build_atlas(*model, model_dir, o);
    ADD_FAILURE() << "no error for a missing treebank";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/pud.conllu"), std::string::npos);
  }
}

}  // namespace
}  // namespace headscope::analysis
