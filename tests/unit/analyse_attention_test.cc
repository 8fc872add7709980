// analyse_attention(): statistics and roles of attention maps computed elsewhere (no model), checked
// on hand-built maps, and its refusals of maps that are not distributions.
#include <gtest/gtest.h>

#include "headscope/limits.h"
#include "headscope/pipeline.h"

namespace headscope {
namespace {

// [CLS] a b c [SEP]: head 0 attends to the previous token (row 0 to itself), head 1 to itself.
struct Maps {
  ModelConfig config;
  Encoding encoding;
  std::string text = "a b c";
  Tensor attention;
  Maps() {
    config.name = "hand-built";
    config.n_layer = 1;
    config.n_head = config.n_kv_head = 2;
    config.causal = true;
    const char* names[] = {"[CLS]", "a", "b", "c", "[SEP]"};
    for (int i = 0; i < 5; ++i) {
      Token t;
      t.id = i;
      t.text = names[i];
      t.special = i == 0 || i == 4;
      if (!t.special) t.begin = 2 * (i - 1), t.end = t.begin + 1, t.word = i - 1;
      encoding.tokens.push_back(t);
    }
    attention = Tensor({1, 2, 5, 5});
    for (int q = 0; q < 5; ++q) {
      attention.ptr()[q * 5 + (q > 0 ? q - 1 : 0)] = 1;  // head 0
      attention.ptr()[25 + q * 5 + q] = 1;               // head 1
    }
  }
};

TEST(AnalyseAttention, HandBuiltMapsGetTheirStatisticsAndRoles) {
  Maps m;
  const RunAnalysis run = analyse_attention(m.config, m.text, m.encoding, m.attention);
  const auto& stats = run.token_level.stats;
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_DOUBLE_EQ(stats[0].prev_mass, 1.0);
  EXPECT_DOUBLE_EQ(stats[1].self_mass, 1.0);
  EXPECT_EQ(run.token_level.roles[0].primary.role, analysis::Role::kPreviousToken);
  EXPECT_EQ(run.token_level.roles[1].primary.role, analysis::Role::kSelf);
  EXPECT_EQ(run.on_text.size(), 2u);
}

TEST(AnalyseAttention, RefusesWhatIsNotADistribution) {
  Maps m;
  Tensor sums = m.attention;
  sums.ptr()[25 + 2 * 5 + 1] = 0.5f;  // head 1, row 2 now sums to 1.5
  EXPECT_THROW(analyse_attention(m.config, m.text, m.encoding, sums), Error);
  Tensor future = m.attention;
  future.ptr()[1 * 5 + 0] = 0, future.ptr()[1 * 5 + 3] = 1;  // row 1 looks ahead in a causal model
  EXPECT_THROW(analyse_attention(m.config, m.text, m.encoding, future), Error);
  EXPECT_THROW(analyse_attention(m.config, m.text, m.encoding, Tensor({1, 2, 4, 4})), Error);  // wrong shape
}

// Layer and head counts outside the budgets of limits.h are refused before any map is read.
TEST(AnalyseAttention, RefusesLayerAndHeadCountsOutsideTheLimits) {
  Maps m;
  for (auto [layers, heads] :
       {std::pair<int64_t, int64_t>{0, 2}, {-3, 2}, {1, 0}, {1, limits::kMaxHeads + 1}, {limits::kMaxLayers + 1, 2}}) {
    ModelConfig config = m.config;
    config.n_layer = int(layers), config.n_head = config.n_kv_head = int(heads);
    try {
      analyse_attention(config, m.text, m.encoding, m.attention);
      ADD_FAILURE() << layers << " layers of " << heads << " heads were accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("layers of"), std::string::npos) << e.what();
    }
  }
}

// A sliding window of 2 keys: row q sees q − 1 and q only, so n = min(q + 1, 2).
TEST(AnalyseAttention, StatisticsCountTheKeysOfTheLayersWindow) {
  Maps m;
  m.config.window = {2};
  const RunAnalysis run = analyse_attention(m.config, m.text, m.encoding, m.attention);
  const auto& stats = run.token_level.stats;
  // Head 1 looks at itself: row 0 has one key (sparsity 0), rows 1-4 two, one of them unused
  // (sparsity 1/2); without the window rows 2-4 would count 2/3, 3/4, 4/5.
  EXPECT_NEAR(stats[1].sparsity, (0 + 4 * 0.5) / 5, 1e-12);
  // Only rows 0 and 1 see the first token; head 0 puts all of both rows there.
  EXPECT_EQ(stats[0].n_sink_queries, 2);
  EXPECT_NEAR(stats[0].first_mass, 1.0, 1e-12);
  EXPECT_EQ(stats[0].n_queries, 5);

  Tensor far = m.attention;
  far.ptr()[3 * 5 + 2] = 0, far.ptr()[3 * 5 + 0] = 1;  // head 0, row 3 on key 0: outside its window
  EXPECT_THROW(analyse_attention(m.config, m.text, m.encoding, far), Error);
  m.config.window = {2, 2};  // one window per layer, and there is one layer
  EXPECT_THROW(analyse_attention(m.config, m.text, m.encoding, m.attention), Error);
}

}  // namespace
}  // namespace headscope
