// /api/ablate and /api/importance: a request's effect equals the Ablator called directly on the
// same encoding (bit for bit, through the JSON), the importance reply is cached per text, and
// bad head lists, unknown modes and texts over the token budgets are clear 4xx.
#include <nlohmann/json.hpp>

#include <cmath>
#include <set>
#include <string>

#include "headscope/limits.h"
#include "headscope/model.h"
#include "headscope/pipeline.h"
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

json body_of(const HttpReply& r) { return json::parse(r.body); }

constexpr const char* kTrophy = "The trophy would not fit in the brown suitcase because it was too big.";

std::string ablate_body(const std::string& text, const std::string& heads, const std::string& mode) {
  return json({{"text", text}, {"heads", json::parse(heads)}, {"mode", mode}}).dump();
}

TEST(ServerAblate, EncoderEffectEqualsTheAblator) {
  const Model& model = testing::default_model();
  ApiFixture f(model);
  const Encoding enc = model.encode(kTrophy);
  for (const char* mode : {"zero", "mean", "resample"}) {
    const HttpReply r = f.api.ablate(ablate_body(kTrophy, "[[3, 1], [0, 5]]", mode));
    ASSERT_EQ(r.status, 200) << mode << ": " << r.body;
    const json j = body_of(r);
    AblateOptions options;
    options.mode = parse_ablation_mode(mode);
    if (options.mode != Ablation::Mode::kZero)
      for (const std::string& s : ablation_reference_sentences()) options.reference.push_back(model.encode(s));
    const TextEffect e = Ablator(model, {enc}, options).ablate({{3, 1}, {0, 5}}).texts.front();
    EXPECT_GT(e.embedding_distance, 0.0) << mode;
    EXPECT_EQ(j["embedding_distance"].get<double>(), e.embedding_distance) << mode;
    EXPECT_EQ(j["effect"].get<double>(), e.embedding_distance) << mode;
    EXPECT_EQ(j["layer_change"].get<std::vector<double>>(), e.layer_change) << mode;
    EXPECT_EQ(j["tokens"].get<int>(), static_cast<int>(enc.size()));
    EXPECT_EQ(j["mode"], mode);
    EXPECT_EQ(j["unit"], "1 - cos");
    EXPECT_EQ(j["heads"], json::parse("[[3, 1], [0, 5]]"));
    EXPECT_EQ(j["reference"].is_null(), options.mode == Ablation::Mode::kZero) << mode;
  }
}

TEST(ServerAblate, DecoderEffectAndNextTokenEqualTheAblator) {
  const auto model = Model::load((testing::goldens_dir("decoders") / "llama_gqa3").string());
  ApiFixture f(*model);
  const std::string text = "The quick brown fox jumps over the lazy dog.";
  const HttpReply r = f.api.ablate(ablate_body(text, "[[0, 1], [1, 4]]", "zero"));
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = body_of(r);
  const TextEffect e = Ablator(*model, {model->encode(text)}, {}).ablate({{0, 1}, {1, 4}}).texts.front();
  EXPECT_EQ(j["loss_before"].get<std::vector<float>>(), e.loss_before);
  EXPECT_EQ(j["loss_after"].get<std::vector<float>>(), e.loss_after);
  EXPECT_EQ(j["mean_loss_after"].get<double>(), e.mean_loss_after);
  EXPECT_EQ(j["effect"].get<double>(), e.mean_loss_after - e.mean_loss_before);
  EXPECT_EQ(j["top1_changed"].get<std::vector<int>>(), e.top1_changed);
  EXPECT_EQ(j["unit"], "nats");
  ASSERT_GE(e.last_top1_before, 0);
  EXPECT_EQ(j["next_before"]["id"].get<int>(), e.last_top1_before);
  EXPECT_EQ(j["next_after"]["id"].get<int>(), e.last_top1_after);
  EXPECT_EQ(j["next_before"]["text"], model->tokenizer().decode({e.last_top1_before}));
  EXPECT_EQ(j["next_after"]["p"].get<double>(), e.last_p_after);

  // The probability of the last row's top-1, computed here from the plain run's logits.
  const Encoding enc = model->encode(text);
  CaptureOptions o = CaptureOptions::attention_only();
  o.attention = false;
  o.logits = true;
  const Capture cap = model->run(enc, o);
  const int64_t T = cap.T, V = cap.logits.dim(1);
  const float* row = cap.logits.ptr() + (T - 1) * V;
  double z = 0;
  for (int64_t v = 0; v < V; ++v) z += std::exp(double(row[v]) - double(row[e.last_top1_before]));
  // The pipeline sums the vocabulary with the vectorised float exp (within 2 ulp of std::exp).
  EXPECT_NEAR(j["next_before"]["p"].get<double>(), 1.0 / z, 1e-6 / z);
  for (int64_t v = 0; v < V; ++v) ASSERT_LE(row[v], row[e.last_top1_before]);
}

TEST(ServerImportance, EqualsTheAblatorAndIsCachedPerText) {
  const Model& model = testing::default_model();
  ApiFixture f(model);
  const std::string body = json({{"text", kTrophy}}).dump();
  const HttpReply r = f.api.importance(body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = body_of(r);
  const Ablator ablator(model, {model.encode(kTrophy)}, {});
  const std::vector<HeadImportance> heads = ablator.importance();
  const ModelConfig& c = model.config();
  ASSERT_EQ(j["importance"].size(), heads.size());
  EXPECT_EQ(j["shape"], json::array({c.n_layer, c.n_head}));
  EXPECT_FALSE(j.contains("ablation") || j.contains("proxy") || j.contains("rank"));  // one shape: objects
  std::vector<double> ablation, proxy;
  for (size_t i = 0; i < heads.size(); ++i) {
    const json& head = j["importance"][i];
    EXPECT_EQ(head["layer"].get<int>(), heads[i].head.layer) << i;
    EXPECT_EQ(head["head"].get<int>(), heads[i].head.head) << i;
    EXPECT_EQ(head["ablation"].get<double>(), heads[i].ablation) << i;
    EXPECT_EQ(head["proxy"].get<double>(), heads[i].proxy) << i;
    ablation.push_back(heads[i].ablation), proxy.push_back(heads[i].proxy);
  }
  EXPECT_EQ(j["spearman"].get<double>(), spearman(ablation, proxy));
  // rank 1 is the largest effect, and every rank 1 .. n appears once
  std::vector<int> ranks;
  for (const json& head : j["importance"]) ranks.push_back(head["rank"].get<int>());
  for (size_t i = 0; i < heads.size(); ++i) {
    int larger = 0;
    for (size_t k = 0; k < heads.size(); ++k) larger += ablation[k] > ablation[i];
    EXPECT_GE(ranks[i], larger + 1) << i;
  }
  EXPECT_EQ(std::set<int>(ranks.begin(), ranks.end()).size(), heads.size());
  EXPECT_FALSE(j["cached"].get<bool>());

  const json again = body_of(f.api.importance(body));
  EXPECT_TRUE(again["cached"].get<bool>());
  EXPECT_EQ(again["importance"], j["importance"]);
}

TEST(ServerAblate, BadRequestsAreClear4xx) {
  const Model& model = testing::default_model();
  ApiFixture f(model);
  const auto expect = [&](const HttpReply& r, int status, const std::string& code, const std::string& needle) {
    EXPECT_EQ(r.status, status) << r.body;
    const json e = body_of(r)["error"];
    EXPECT_EQ(e["code"], code) << r.body;
    EXPECT_NE(e["message"].get<std::string>().find(needle), std::string::npos) << r.body;
  };
  expect(f.api.ablate(ablate_body(kTrophy, "[[6, 0]]", "zero")), 400, "unknown_head", "layers 0..5");
  expect(f.api.ablate(ablate_body(kTrophy, "[[0, 12]]", "zero")), 400, "unknown_head", "heads 0..11");
  expect(f.api.ablate(ablate_body(kTrophy, "[[-1, 0]]", "zero")), 400, "unknown_head", "[-1,0]");
  expect(f.api.ablate(ablate_body(kTrophy, "[[1, 2], [1, 2]]", "zero")), 400, "bad_field", "named twice");
  expect(f.api.ablate(ablate_body(kTrophy, "[]", "zero")), 400, "bad_field", "non-empty");
  expect(f.api.ablate(ablate_body(kTrophy, "[[1]]", "zero")), 400, "bad_field", "[layer, head]");
  expect(f.api.ablate(ablate_body(kTrophy, "[\"3.1\"]", "zero")), 400, "bad_field", "[layer, head]");
  expect(f.api.ablate(ablate_body(kTrophy, "[[1.5, 0]]", "zero")), 400, "bad_field", "[layer, head]");
  expect(f.api.ablate(ablate_body(kTrophy, "[[1, 0]]", "ones")), 400, "bad_field", "zero, mean, resample");
  expect(f.api.ablate(json({{"text", kTrophy}}).dump()), 400, "missing_field", "heads");

  // 300 words: under the server's 512 tokens, over the importance budget of 16,384 / 72 = 227.
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += "word ";
  const int64_t max_tokens =
      limits::kMaxImportanceTokenPasses / (int64_t{model.config().n_layer} * model.config().n_head);
  ASSERT_GT(static_cast<int64_t>(model.encode(long_text).size()), max_tokens);
  expect(f.api.importance(json({{"text", long_text}}).dump()), 413, "text_too_long",
         "at most " + std::to_string(max_tokens) + " are allowed");
  EXPECT_EQ(f.api.health().body.find("\"runs_computed\":0") != std::string::npos, true);
}

}  // namespace
}  // namespace headscope::server
