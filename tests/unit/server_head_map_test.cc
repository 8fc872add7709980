// POST /api/head_map through the handler API: the reply is head_map_json of the pipeline's head map
// (on the server's reference sentences when no gold data is given; from the cache beside the corpus
// evidence otherwise), computed once and kept; a body that is not an empty object is refused. The
// distances themselves are checked against numpy in tests/python/test_head_map.py.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "headscope/json.h"
#include "headscope/model.h"
#include "headscope/pipeline.h"
#include "server/api.h"
#include "server/run_cache.h"
#include "test_support.h"

namespace headscope::server {
namespace {

using json = nlohmann::json;

TEST(ServerHeadMap, ReplyIsThePipelinesHeadMapComputedOnce) {
  const auto model = Model::load(testing::env_or_fail("HEADSCOPE_MODEL"));
  RunCache cache(*model, 2, size_t{1} << 30, 512);
  Api api(*model, cache);
  const HttpReply first = api.head_map("{}");
  ASSERT_EQ(first.status, 200) << first.body.substr(0, 300);
  json a = json::parse(first.body);
  EXPECT_EQ(a["cached"], false);
  EXPECT_EQ(a["schema"], "headscope.head_map/1");
  const analysis::HeadMap want = head_map(*model, ablation_reference_sentences());
  json w = head_map_json(want, model->config());
  EXPECT_EQ(a["distance"], w["distance"]);
  EXPECT_EQ(a["heads"], w["heads"]);
  const int N = model->config().n_layer * model->config().n_head;
  ASSERT_EQ(a["heads"].size(), size_t(N));
  // The JSON round trip keeps every number; the distances are a metric's: symmetric, zero diagonal.
  const analysis::HeadMap back = head_map_from_json(w);
  EXPECT_EQ(back.distance, want.distance);
  for (int i = 0; i < N; ++i) {
    EXPECT_EQ(want.distance[size_t(i) * N + i], 0.0);
    for (int j = 0; j < N; ++j) EXPECT_EQ(want.distance[size_t(i) * N + j], want.distance[size_t(j) * N + i]);
  }
  EXPECT_GT(want.explained, 0.0);
  EXPECT_LE(want.explained, 1.0);
  const json again = json::parse(api.head_map("").body);
  EXPECT_EQ(again["cached"], true);
  EXPECT_EQ(again["distance"], a["distance"]);
  EXPECT_EQ(api.head_map("[1]").status, 400);
  EXPECT_EQ(api.head_map("{\"texts\": 3}").status, 400);
  EXPECT_THROW(head_map_from_json(json{{"schema", "other"}}), Error);
}

}  // namespace
}  // namespace headscope::server
