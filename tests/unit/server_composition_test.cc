// POST /api/composition through the handler API:
//   - the reply is `headscope composition --json`'s document: every score, the baselines and the top
//     pairs equal composition_scores called directly with the same options (bit for bit, through
//     the JSON), on the encoder and on SmolLM2 (GQA: 9 query heads over 3 key/value heads);
//   - the receivers are later layers only, and the top pairs are the highest of the reply's own
//     scores, ranked here;
//   - an option set is computed once and kept (a repeat says "cached" and has the first reply's
//     timings); the seed moves only the baseline, the gains only models that have them;
//   - every refusal is a 400 whose message says what to change.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "headscope/circuits.h"
#include "headscope/json.h"
#include "headscope/limits.h"
#include "headscope/model.h"
#include "server/api.h"
#include "server/run_cache.h"
#include "test_support.h"

namespace headscope::server {
namespace {

using json = nlohmann::json;

struct ApiFixture {
  explicit ApiFixture(const Model& model) : cache(model, 4, size_t{1} << 30, 512), api(model, cache) {}
  RunCache cache;
  Api api;
};

const Model& smollm2() {
  static std::unique_ptr<Model> model = [] {
    std::ifstream in(headscope::testing::goldens_dir("decoders") / "smollm2" / "golden" / "manifest.json");
    if (!in) throw std::runtime_error("missing smollm2 goldens: run `make goldens`");
    return Model::load(json::parse(in).at("gguf").get<std::string>());
  }();
  return *model;
}

json post(Api& api, const json& body) {
  const HttpReply r = api.composition(body.dump());
  EXPECT_EQ(r.status, 200) << r.body.substr(0, 400);
  return json::parse(r.body);
}

// The document without what differs from one computation to the next (wall and CPU times) and
// without what the server adds.
json without_timings(json j) {
  j.erase("seconds");
  j.erase("cached");
  return j;
}

// Every pair (sender layer < receiver layer) of one kind from the reply's nested lists, highest
// first, ties in (sender, receiver) order: the ranking top_composition_pairs documents.
std::vector<std::tuple<double, int, int, int, int>> ranked(const json& scores, int L, int H) {
  std::vector<std::tuple<double, int, int, int, int>> pairs;
  for (int l1 = 0; l1 < L; ++l1)
    for (int h1 = 0; h1 < H; ++h1)
      for (int l2 = l1 + 1; l2 < L; ++l2)
        for (int h2 = 0; h2 < H; ++h2) pairs.emplace_back(-scores[l1][h1][l2][h2].get<double>(), l1, h1, l2, h2);
  std::stable_sort(pairs.begin(), pairs.end());
  return pairs;
}

void expect_masked_and_ranked(const json& j, int L, int H, int top) {
  for (const char* kind : {"Q", "K", "V"}) {
    const json& s = j["scores"][kind];
    ASSERT_EQ(s.size(), size_t(L)) << kind;
    for (int l1 = 0; l1 < L; ++l1)
      for (int h1 = 0; h1 < H; ++h1)
        for (int l2 = 0; l2 <= l1; ++l2)
          for (int h2 = 0; h2 < H; ++h2) ASSERT_EQ(s[l1][h1][l2][h2].get<double>(), 0.0) << kind;
    const auto pairs = ranked(s, L, H);
    ASSERT_EQ(j["top"][kind].size(), size_t(top)) << kind;
    for (int i = 0; i < top; ++i) {
      const json& p = j["top"][kind][size_t(i)];
      const auto& [score, l1, h1, l2, h2] = pairs[size_t(i)];
      EXPECT_EQ(p["score"].get<double>(), -score) << kind << " " << i;
      EXPECT_EQ(p["sender"], json({{"layer", l1}, {"head", h1}})) << kind << " " << i;
      EXPECT_EQ(p["receiver"], json({{"layer", l2}, {"head", h2}})) << kind << " " << i;
    }
  }
}

TEST(ServerComposition, EncoderReplyEqualsTheCoreAndIsComputedOnce) {
  const Model& model = testing::default_model();
  const ModelConfig& c = model.config();
  ApiFixture f(model);
  const json j = post(f.api, json::object());
  EXPECT_EQ(j["schema"], "headscope.composition/1");
  EXPECT_EQ(j["shape"], json({c.n_layer, c.n_head, c.n_layer, c.n_head}));
  EXPECT_EQ(j["baseline"]["draws"], 100);
  EXPECT_EQ(j["baseline"]["seed"], 0);
  EXPECT_FALSE(j["cached"].get<bool>());
  EXPECT_NE(j["rope"].get<std::string>().find("not included"), std::string::npos);

  const CompositionScores direct = composition_scores(model, CompositionOptions{});
  EXPECT_EQ(without_timings(j), without_timings(composition_json(direct, 10)));
  expect_masked_and_ranked(j, c.n_layer, c.n_head, 10);

  // The same options again: kept, so the first computation's timings come back with it.
  const json again = post(f.api, {{"draws", 100}, {"seed", 0}, {"gains", true}, {"top", 3}});
  EXPECT_TRUE(again["cached"].get<bool>());
  EXPECT_EQ(again["seconds"], j["seconds"]);
  EXPECT_EQ(again["scores"], j["scores"]);
  ASSERT_EQ(again["top"]["V"].size(), 3u);
  EXPECT_EQ(again["top"]["V"][2], j["top"]["V"][2]);

  // Another seed draws another baseline over the same scores. A post-norm encoder has no gain in
  // front of a head's input or after its output, so leaving the gains out changes nothing.
  const json seeded = post(f.api, {{"seed", 7}, {"draws", 20}});
  EXPECT_FALSE(seeded["cached"].get<bool>());
  EXPECT_EQ(seeded["scores"], j["scores"]);
  EXPECT_NE(seeded["baseline"]["Q"], j["baseline"]["Q"]);
  CompositionOptions options;
  options.seed = 7, options.baseline_draws = 20;
  EXPECT_EQ(seeded["baseline"], composition_json(composition_scores(model, options), 10)["baseline"]);
  EXPECT_EQ(post(f.api, {{"gains", false}})["scores"], j["scores"]);
}

TEST(ServerComposition, KeepsTheLastOptionSetsOnly) {
  ApiFixture f(testing::default_model());
  const auto ask = [&](int seed) { return post(f.api, {{"seed", seed}, {"draws", 2}})["cached"].get<bool>(); };
  for (size_t seed = 0; seed <= limits::kCompositionCacheSets; ++seed) EXPECT_FALSE(ask(int(seed)));
  EXPECT_TRUE(ask(int(limits::kCompositionCacheSets)));  // the newest is kept
  EXPECT_FALSE(ask(0));                                  // the oldest was dropped
}

TEST(ServerComposition, DecoderWithGroupedQueriesEqualsTheCore) {
  const Model& model = smollm2();
  const ModelConfig& c = model.config();
  ASSERT_LT(c.n_kv_head, c.n_head);
  ApiFixture f(model);
  const json j = post(f.api, {{"top", 5}});
  const CompositionScores direct = composition_scores(model, CompositionOptions{});
  EXPECT_EQ(without_timings(j), without_timings(composition_json(direct, 5)));
  expect_masked_and_ranked(j, c.n_layer, c.n_head, 5);
  // docs/circuits.md, "Measured": K-composition's highest pair, 17.8 → 18.7.
  EXPECT_EQ(j["top"]["K"][0]["sender"], json({{"layer", 17}, {"head", 8}}));
  EXPECT_EQ(j["top"]["K"][0]["receiver"], json({{"layer", 18}, {"head", 7}}));
  EXPECT_NEAR(j["top"]["K"][0]["score"].get<double>(), 0.180, 5e-4);
  // SmolLM2 has gains (RMSNorm before every attention block): leaving them out scores otherwise.
  CompositionOptions stored;
  stored.fold_gains = false;
  const json raw = post(f.api, {{"gains", false}, {"top", 5}});
  EXPECT_EQ(without_timings(raw), without_timings(composition_json(composition_scores(model, stored), 5)));
  EXPECT_NE(raw["scores"]["V"], j["scores"]["V"]);
}

// Status, code, and a piece of the message.
void expect_refused(const HttpReply& r, int status, const std::string& code, const std::string& needle) {
  EXPECT_EQ(r.status, status) << r.body;
  const json e = json::parse(r.body)["error"];
  EXPECT_EQ(e["code"], code) << r.body;
  EXPECT_NE(e["message"].get<std::string>().find(needle), std::string::npos) << r.body;
}

TEST(ServerComposition, RefusalsSayWhatToChange) {
  ApiFixture f(testing::default_model());
  const auto ask = [&](const json& j) { return f.api.composition(j.dump()); };
  expect_refused(ask({{"draws", 1}}), 400, "bad_field", "between 2 and 1000");
  expect_refused(ask({{"draws", limits::kMaxCompositionDraws + 1}}), 400, "bad_field", "between 2 and 1000");
  expect_refused(ask({{"draws", "many"}}), 400, "bad_field", "\"draws\" must be an integer");
  expect_refused(ask({{"draws", 1e12}}), 400, "bad_field", "\"draws\" must be an integer");
  expect_refused(ask({{"seed", -1}}), 400, "bad_field", "non-negative integer");
  expect_refused(ask({{"seed", 1.5}}), 400, "bad_field", "non-negative integer");
  expect_refused(ask({{"gains", "yes"}}), 400, "bad_field", "true or false");
  expect_refused(ask({{"top", 0}}), 400, "bad_field", "between 1 and 1000");
  expect_refused(ask({{"kind", "Q"}}), 400, "unknown_field", "kind");
  expect_refused(f.api.composition("{\"draws\": "), 400, "bad_json", "not valid JSON");
  expect_refused(f.api.composition("[100]"), 400, "bad_request", "JSON object");
  EXPECT_EQ(f.api.composition("").status, 400);
}

}  // namespace
}  // namespace headscope::server
