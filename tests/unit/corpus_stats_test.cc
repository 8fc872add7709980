// Mergeable corpus statistics (analysis::CorpusStats): 300 EWT dev sentences through MiniLM in one
// pass, and in three different splits (halves, thirds of other sizes, every other sentence), each
// shard with its own batch size, serialised, read back and merged in another order — the partials
// must equal the one pass bit for bit. The pooled statistics are checked against an independent
// double-precision merge of the per-text sums, and bad partials are refused.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/statistics.h"
#include "headscope/analysis.h"
#include "headscope/headscope.h"
#include "headscope/pipeline.h"
#include "test_support.h"

namespace headscope {
namespace {

std::vector<CorpusText> ewt_sentences(size_t n) {
  std::vector<CorpusText> all = read_corpus(testing::env_or_fail("HEADSCOPE_DATA") + "/ud/en_ewt-ud-dev.conllu");
  all.resize(std::min(n, all.size()));
  return all;
}

// The partial of `texts` (a shard), with `batch_tokens` per packed pass.
analysis::CorpusStats partial(const Model& m, std::span<const CorpusText> texts, int64_t batch_tokens,
                              analysis::HeadStatsAccumulator* plain = nullptr, size_t plain_head = 0) {
  const ModelConfig& c = m.config();
  analysis::CorpusStats stats(c.name, c.n_layer, c.n_head, c.n_kv_head);
  CorpusOptions o;
  o.batch_tokens = batch_tokens;
  const CorpusSummary s = analyse_corpus(m, texts, {}, o, [&](size_t, const CorpusText&, const RunAnalysis& run) {
    stats.add(run.token_level.sums, run.token_level.stats, run.token_level.roles, run.T());
    if (plain != nullptr) plain->merge(analysis::HeadStatsAccumulator::from_sums(run.token_level.sums[plain_head]));
  });
  EXPECT_EQ(s.progress.failed, 0);
  return stats;
}

analysis::CorpusStats round_trip(const analysis::CorpusStats& s) {
  return analysis::CorpusStats::from_bytes(s.to_bytes());
}

TEST(CorpusStats, AnySplitMergedEqualsOnePassBitForBit) {
  const Model& m = testing::default_model();
  const std::vector<CorpusText> texts = ewt_sentences(300);
  ASSERT_EQ(texts.size(), 300u);
  const size_t head = 2 * size_t(m.config().n_head) + 7;
  analysis::HeadStatsAccumulator plain;  // head's per-text sums merged in double, text by text
  const analysis::CorpusStats whole = partial(m, texts, 2048, &plain, head);
  EXPECT_EQ(whole.texts(), 300);
  const std::span<const CorpusText> all(texts);

  // Halves, then two thirds of other sizes merged backwards, then odd and even sentences.
  analysis::CorpusStats halves = round_trip(partial(m, all.subspan(0, 150), 512));
  halves.merge(round_trip(partial(m, all.subspan(150), 4096)));
  EXPECT_TRUE(halves == whole) << "halves";

  analysis::CorpusStats thirds = round_trip(partial(m, all.subspan(210), 300));
  thirds.merge(round_trip(partial(m, all.subspan(40, 170), 1024)));
  thirds.merge(round_trip(partial(m, all.subspan(0, 40), 16)));  // sentences over 16 tokens run alone
  EXPECT_TRUE(thirds == whole) << "thirds";

  std::vector<CorpusText> odd, even;
  for (size_t i = 0; i < texts.size(); ++i) (i % 2 ? odd : even).push_back(texts[i]);
  analysis::CorpusStats interleaved = round_trip(partial(m, odd, 700));
  interleaved.merge(round_trip(partial(m, even, 2048)));
  EXPECT_TRUE(interleaved == whole) << "odd and even sentences";

  // The pooled statistics against the plain double merge of the same per-text sums.
  const analysis::HeadStats exact = whole.stats(head), reference = plain.result();
  EXPECT_EQ(exact.n_queries, reference.n_queries);
  for (const analysis::StatInfo& s : analysis::statistics_catalogue()) {
    if (s.kind != analysis::StatKind::kMean || std::isnan(reference.*s.mean)) continue;
    EXPECT_NEAR(exact.*s.mean, reference.*s.mean, 1e-12 * std::max(1.0, std::abs(reference.*s.mean))) << s.key;
  }
  int64_t roles = 0, entropy = 0;
  for (int64_t n : whole.role_counts(head)) roles += n;
  for (int64_t n : whole.entropy_histogram(head)) entropy += n;
  EXPECT_EQ(roles, 300);
  EXPECT_EQ(entropy, 300);
}

TEST(CorpusStats, RefusesBadPartialsAndOtherModels) {
  const analysis::CorpusStats a("model-a", 2, 3), b("model-b", 2, 3);
  analysis::CorpusStats c = a;
  testing::expect_error([&] { c.merge(b); }, {"model-b", "model-a"});
  testing::expect_error([] { analysis::CorpusStats::from_bytes("not cbor"); }, {"headscope.corpus_partial/1"});
  std::string bytes = a.to_bytes();
  testing::expect_error([&] { analysis::CorpusStats::from_bytes(bytes.substr(0, bytes.size() / 2)); },
                        {"corpus statistics"});
  EXPECT_TRUE(analysis::CorpusStats::from_bytes(bytes) == a);
  std::vector<analysis::StatSums> sums(5);
  std::vector<analysis::HeadStats> stats(6);
  std::vector<analysis::HeadRoles> roles(6);
  testing::expect_error([&] { c.add(sums, stats, roles, 1); }, {"sums for 5 heads", "6"});
}

}  // namespace
}  // namespace headscope
