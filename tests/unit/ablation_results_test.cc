// The causal results of the pipeline (src/pipeline/ablate_results.cc): Spearman's ρ and the ranking
// against values worked out by hand (with ties), the 1 % rule of the pruning curve, and on a real
// model that measure_importance and prune_heads give what the Ablator gives when driven by hand,
// and that their JSON is the one shape every frontend writes.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "headscope/json.h"
#include "headscope/pipeline.h"
#include "test_support.h"

namespace headscope {
namespace {

using json = nlohmann::json;

TEST(AblationResults, SpearmanWithTiesByHand) {
  // x ranks 1, 2.5, 2.5, 5, 4 and y ranks 1, 3, 2, 4.5, 4.5 (ties share their mean rank); both
  // have mean 3, Σ dx·dy = 9 and Σ dx² = Σ dy² = 9.5, so ρ = 9 / 9.5 = 18 / 19.
  EXPECT_NEAR(spearman({10, 20, 20, 40, 30}, {1, 3, 2, 5, 5}), 18.0 / 19.0, 1e-15);
  EXPECT_NEAR(spearman({1, 2, 3}, {30, 20, 10}), -1.0, 1e-15);
  EXPECT_TRUE(std::isnan(spearman({1}, {2})));              // one value: undefined
  EXPECT_TRUE(std::isnan(spearman({1, 2, 3}, {5, 5, 5})));  // a constant: no ranking to correlate
  EXPECT_TRUE(std::isnan(spearman({1, 2}, {1, 2, 3})));     // unequal lengths
}

TEST(AblationResults, RankOneIsTheLargestEffectTiesInLayerMajorOrder) {
  std::vector<HeadImportance> heads;
  const std::vector<double> effect = {0.3, 0.1, 0.3, -0.2, 0.5};
  for (size_t i = 0; i < effect.size(); ++i) heads.push_back({{int(i / 3), int(i % 3)}, effect[i], 0.0});
  rank_importance(heads);
  const std::vector<int> want = {2, 4, 3, 5, 1};  // 0.5, then the two 0.3 in order, 0.1, −0.2
  for (size_t i = 0; i < heads.size(); ++i) EXPECT_EQ(heads[i].rank, want[i]) << i;
  const std::vector<HeadImportance> ranked = by_rank(heads);
  const std::vector<int> order = {4, 0, 2, 1, 3};
  for (size_t r = 0; r < ranked.size(); ++r) {
    EXPECT_EQ(ranked[r].head, heads[size_t(order[r])].head) << r;
    EXPECT_EQ(ranked[r].rank, int(r) + 1);
  }
  EXPECT_EQ(json(heads[0]), json::parse(R"({"layer": 0, "head": 0, "ablation": 0.3, "proxy": 0.0, "rank": 2})"));
}

TEST(AblationResults, RemovableHeadsStopAtTheFirstChangeOfOnePercent) {
  const std::vector<PruningPoint> curve = {{0, 0, 0}, {2, 0, 0.005}, {4, 0, -0.009}, {6, 0, 0.02}, {8, 0, 0.001}};
  EXPECT_EQ(removable_heads(curve), 4);
  EXPECT_EQ(removable_heads({{0, 0, 0}, {3, 0, -0.01}}), 0);
}

std::vector<Encoding> encode_all(const Model& model, const std::vector<std::string>& texts) {
  std::vector<Encoding> out;
  for (const std::string& t : texts) out.push_back(model.encode(t));
  return out;
}

// Importance is "shard -> parts -> merge": the parts of two shards, appended in corpus order, give the
// importance of one Ablator over all the texts bit for bit (whatever packed passes each shard made).
TEST(AblationResults, ImportancePartsOfShardsMergeIntoTheWholeCorpusBitForBit) {
  const Model& model = testing::default_model();
  const std::vector<std::string> texts = {"The keys to the cabinet are on the table.", "It rained.",
                                          "She gave him the book that he had asked for.", "Cats sleep a lot."};
  const ImportanceResult whole = measure_importance(Ablator(model, encode_all(model, texts), {}));
  ImportanceParts parts = Ablator(model, encode_all(model, {texts[0]}), {}).importance_parts();
  parts.append(Ablator(model, encode_all(model, {texts[1], texts[2], texts[3]}), {}).importance_parts());
  ASSERT_EQ(parts.texts(), 4u);
  const ImportanceResult merged = importance_from_parts(parts);
  ASSERT_EQ(merged.heads.size(), whole.heads.size());
  for (size_t i = 0; i < whole.heads.size(); ++i) {
    EXPECT_EQ(merged.heads[i].ablation, whole.heads[i].ablation) << i;
    EXPECT_EQ(merged.heads[i].proxy, whole.heads[i].proxy) << i;
    EXPECT_EQ(merged.heads[i].rank, whole.heads[i].rank) << i;
  }
  EXPECT_EQ(merged.spearman, whole.spearman);
  EXPECT_EQ(merged.tokens, whole.tokens);
  // The mean over texts, by hand, for one head.
  const size_t N = whole.heads.size(), k = 17;
  double sum = 0;
  for (size_t i = 0; i < 4; ++i) sum += parts.effect[i * N + k];
  EXPECT_EQ(whole.heads[k].ablation, sum / 4);
  ImportanceParts other;
  other.n_layer = 2, other.n_head = 2;
  EXPECT_THROW(parts.append(other), Error);
  EXPECT_THROW(importance_from_parts(ImportanceParts{}), Error);
}

TEST(AblationResults, ImportanceAndPruningComeFromThePipeline) {
  const Model& model = testing::default_model();
  const ModelConfig& c = model.config();
  const Ablator ablator(model, {model.encode("The keys to the cabinet are on the table.")}, {});
  const ImportanceResult imp = measure_importance(ablator);

  // The same as the Ablator's importance, ranked and correlated here by hand.
  const std::vector<HeadImportance> direct = ablator.importance();
  ASSERT_EQ(imp.heads.size(), size_t(c.n_layer * c.n_head));
  std::vector<double> ablation, proxy;
  for (size_t i = 0; i < direct.size(); ++i) {
    EXPECT_EQ(imp.heads[i].head, direct[i].head);
    EXPECT_EQ(imp.heads[i].ablation, direct[i].ablation);
    int larger = 0, equal_before = 0;
    for (size_t k = 0; k < direct.size(); ++k) {
      larger += direct[k].ablation > direct[i].ablation;
      equal_before += k < i && direct[k].ablation == direct[i].ablation;
    }
    EXPECT_EQ(imp.heads[i].rank, larger + equal_before + 1) << i;
    ablation.push_back(direct[i].ablation), proxy.push_back(direct[i].proxy);
  }
  EXPECT_EQ(imp.spearman, spearman(ablation, proxy));

  PruneOptions options;
  options.step = 24;
  options.random_orders = 2;
  options.seed = 7;
  const PruningResult p = prune_heads(ablator, imp, options);
  std::vector<HeadRef> least_first(size_t(c.n_layer * c.n_head));
  for (const HeadImportance& h : imp.heads) least_first[least_first.size() - size_t(h.rank)] = h.head;
  const std::vector<PruningPoint> want = ablator.pruning_curve(least_first, 24);
  ASSERT_EQ(p.importance_order.size(), want.size());
  ASSERT_EQ(want.size(), size_t(c.n_layer * c.n_head / 24 + 1));
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(p.importance_order[k].removed, want[k].removed);
    EXPECT_EQ(p.importance_order[k].effect, want[k].effect);
    EXPECT_NEAR(p.random_summary[k].change_mean, (p.random_orders[0][k].change + p.random_orders[1][k].change) / 2,
                1e-15);
  }
  EXPECT_EQ(p.importance_order.front().effect, 0.0);
  ASSERT_EQ(p.random_orders.size(), 2u);
  EXPECT_EQ(p.removable_share_importance, removable_heads(want) / double(imp.heads.size()));
  EXPECT_EQ(p.texts, 1u);
  EXPECT_FALSE(p.held_out);

  AblationExperiment x;
  x.model = c, x.seed = 7, x.texts = 1;
  x.importance = imp;
  x.pruning = p;
  const json j = x;
  EXPECT_EQ(j["schema"], "headscope.ablate/1");
  EXPECT_EQ(j["importance"], json(imp.heads));
  EXPECT_EQ(j["spearman_proxy"].get<double>(), imp.spearman);
  EXPECT_EQ(j["pruning"]["random_order"], j["pruning"]["random_orders"][0]);
  EXPECT_EQ(j["pruning"]["removable_shares_random"].size(), 2u);
  EXPECT_FALSE(j.contains("result"));
  // The server's reply: the same head objects.
  EXPECT_EQ(json(imp)["importance"], j["importance"]);
}

}  // namespace
}  // namespace headscope
