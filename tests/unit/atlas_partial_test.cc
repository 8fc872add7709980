// An atlas's data stages in shards (src/pipeline/atlas.h): the partials of any split of the
// treebanks and GAP rows, through their bytes and merged in any order, count and sum exactly what one
// pass does, and an atlas built from the merged partial is the one-process atlas (its timings aside).
#include <gtest/gtest.h>
#include <omp.h>

#include <nlohmann/json.hpp>
#include <string>

#include "analysis/atlas.h"
#include "analysis/atlas_report.h"
#include "headscope/error.h"
#include "pipeline/atlas.h"
#include "test_support.h"

namespace headscope {
namespace {

using headscope::testing::env_or_fail;

analysis::AtlasOptions options_on_the_gold_slice() {
  const std::string goldens = env_or_fail("HEADSCOPE_GOLDENS");
  analysis::AtlasOptions o;
  o.report_treebank = goldens + "/atlas_pud.conllu";
  o.select_treebank = goldens + "/atlas_pud.conllu";
  o.report_coref = goldens + "/atlas_gap.tsv";
  o.probe_count = 1;
  o.probe_length = 20;
  o.min_support = 1;
  o.role_min_support = 1;
  o.importance_texts = 0;
  return o;
}

// Everything a partial holds but its timings.
nlohmann::json counted(const AtlasPartial& p) {
  nlohmann::json j = nlohmann::json::from_cbor(atlas_partial_to_bytes(p));
  j.erase("seconds");
  return j;
}

TEST(AtlasPartial, ShardsMergedInAnyOrderEqualOnePassAndTheAtlas) {
  omp_set_num_threads(1);
  const auto model = Model::load(env_or_fail("HEADSCOPE_MODEL"));
  const analysis::AtlasOptions o = options_on_the_gold_slice();
  const std::array<int64_t, 4> sizes = atlas_stage_sizes(o);
  ASSERT_GE(sizes[0], 6);
  ASSERT_GE(sizes[2], 4);
  const AtlasPartial whole = atlas_partial(*model, o, AtlasShard{});
  EXPECT_EQ(whole.report_sentences + whole.skipped_sentences, sizes[0]);
  // Three shards cutting every stage at different places, merged in another order.
  AtlasShard a, b, c;
  a.report_end = 2, a.select_end = 4, a.coref_report_end = 1, a.coref_select_end = 3;
  b.report_begin = 2, b.report_end = 5, b.select_begin = 4, b.select_end = 4, b.coref_report_begin = 1,
  b.coref_report_end = 3, b.coref_select_begin = 3;
  c.report_begin = 5, c.select_begin = 4, c.coref_report_begin = 3, c.coref_select_begin = 99;
  AtlasPartial merged = atlas_partial_from_bytes(atlas_partial_to_bytes(atlas_partial(*model, o, c)));
  merged.merge(atlas_partial_from_bytes(atlas_partial_to_bytes(atlas_partial(*model, o, a))));
  merged.merge(atlas_partial(*model, o, b));
  EXPECT_EQ(counted(merged), counted(whole));

  // The atlas of the merged partial is the one-process atlas.
  const analysis::AtlasResult one = build_atlas(*model, "model", o);
  analysis::AtlasOptions from_parts = o;
  from_parts.partial_bytes = atlas_partial_to_bytes(merged);
  const analysis::AtlasResult two = build_atlas(*model, "model", from_parts);
  nlohmann::json x = analysis::atlas_json(one, nullptr), y = analysis::atlas_json(two, nullptr);
  x.erase("seconds"), y.erase("seconds");
  EXPECT_EQ(x, y);

  // Another model's partial, and bytes that are not a partial, are refused.
  ModelConfig other = model->config();
  other.n_head += 1;
  EXPECT_THROW(merged.merge(AtlasPartial(other)), Error);
  EXPECT_THROW(atlas_partial_from_bytes("not a partial"), Error);
}

}  // namespace
}  // namespace headscope
