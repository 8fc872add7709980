// /api/patch, /api/logit_lens, /api/head_lens and /api/tokenize through the handler API:
//   - a sweep's reply equals the pipeline called directly on the same pairs (bit for bit, through
//     the JSON), and its clean / corrupt metrics equal the ones computed here from plain runs
//     (the encoder's 1 − cos of the mean-pooled embeddings, the decoder's logit difference);
//   - normalised effects are (value − corrupt) / (clean − corrupt) of the reply's own numbers;
//   - key/value sites are labelled per key/value head with their query-head group (SmolLM2: GQA 3);
//   - path patching from a head to the heads after it gives one result per later head;
//   - the logit lens's last layer is the model's own next-token distribution; a head's lens is that
//     head's direct logit attribution; heads patched together equal the pipeline;
//   - every refusal is a 4xx whose message says what to change.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headscope/circuits.h"
#include "headscope/json.h"
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

const Model& smollm2() {
  static std::unique_ptr<Model> model = [] {
    std::ifstream in(headscope::testing::goldens_dir("decoders") / "smollm2" / "golden" / "manifest.json");
    if (!in) throw std::runtime_error("missing smollm2 goldens: run `make goldens`");
    return Model::load(json::parse(in).at("gguf").get<std::string>());
  }();
  return *model;
}

json body_of(const HttpReply& r) { return json::parse(r.body); }

constexpr const char* kBig = "The trophy did not fit in the suitcase because it was too big.";
constexpr const char* kSmall = "The trophy did not fit in the suitcase because it was too small.";
constexpr const char* kIoi = "When Mary and John went to the store, John gave a drink to";
constexpr const char* kIoiCorrupt = "When Alice and Bob went to the store, Bob gave a drink to";

json ioi(json extra = json::object()) {
  json j = {{"clean", kIoi}, {"corrupt", kIoiCorrupt}, {"answer", " Mary"}, {"wrong", " John"}};
  j.update(extra);
  return j;
}

// The mean-pooled last hidden state of a plain run, in double.
std::vector<double> embedding(const Model& model, const std::string& text) {
  CaptureOptions o = CaptureOptions::attention_only();
  o.attention = false;
  o.hidden_states = true;
  const Capture c = model.run(model.encode(text), o);
  std::vector<double> e(size_t(c.d_model), 0.0);
  const float* h = c.hidden_states.ptr() + int64_t(c.n_layer) * c.T * c.d_model;
  for (int t = 0; t < c.T; ++t)
    for (int i = 0; i < c.d_model; ++i) e[size_t(i)] += h[int64_t(t) * c.d_model + i] / double(c.T);
  return e;
}

// The last row's logits of a plain run.
std::vector<float> last_logits(const Model& model, const std::string& text) {
  CaptureOptions o = CaptureOptions::attention_only();
  o.attention = false;
  o.logits = true;
  const Capture c = model.run(model.encode(text), o);
  const int64_t V = c.logits.dim(1);
  const float* row = c.logits.ptr() + (c.logits.dim(0) - 1) * V;
  return {row, row + V};
}

int32_t token_id(const Model& model, const std::string& text) {
  EncodeOptions plain;
  plain.add_special_tokens = false;
  return model.tokenizer().encode(text, plain).tokens.at(0).id;
}

void expect_normalised_from_own_numbers(const json& j) {
  const double clean = j["clean"].get<double>(), corrupt = j["corrupt"].get<double>();
  for (const json& r : j["results"])
    EXPECT_NEAR(r["normalised"].get<double>(), (r["value"].get<double>() - corrupt) / (clean - corrupt), 1e-12) << r;
}

TEST(ServerPatch, EncoderHeadSweepEqualsThePipelineAndCosines) {
  const Model& model = testing::default_model();
  const ModelConfig& c = model.config();
  ApiFixture f(model);
  const HttpReply r = f.api.patch(json({{"clean", kBig}, {"corrupt", kSmall}}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = body_of(r);
  EXPECT_EQ(j["schema"], "headscope.patch/1");
  EXPECT_EQ(j["metric"], "cosine");
  EXPECT_EQ(j["direction"], "denoise");
  EXPECT_EQ(j["n_tokens"].get<int64_t>(), int64_t(model.encode(kBig).size()));
  ASSERT_EQ(j["results"].size(), size_t(c.n_layer * c.n_head));
  EXPECT_EQ(j["passes"].get<int64_t>(), int64_t{c.n_layer} * c.n_head);

  // Clean is 1 − cos(clean, clean) = 0; corrupt the corrupted embedding's 1 − cos, computed here.
  const std::vector<double> a = embedding(model, kBig), b = embedding(model, kSmall);
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) dot += a[i] * b[i], na += a[i] * a[i], nb += b[i] * b[i];
  EXPECT_NEAR(j["clean"].get<double>(), 0.0, 1e-7);
  EXPECT_NEAR(j["corrupt"].get<double>(), 1.0 - dot / std::sqrt(na * nb), 1e-6);
  ASSERT_GT(j["corrupt"].get<double>(), 1e-4);
  expect_normalised_from_own_numbers(j);

  PairSource source;
  source.clean = kBig, source.corrupt = kSmall;
  PromptPairs pairs = load_prompt_pairs(model, source);
  PatchRequest request;
  request.metric = PatchMetric::kCosine;
  const json direct = run_patch_sweep(model, pairs, request);
  EXPECT_EQ(j["results"], direct["results"]);
  for (int i = 0; i < c.n_layer * c.n_head; ++i) {
    EXPECT_EQ(j["results"][size_t(i)]["layer"].get<int>(), i / c.n_head);
    EXPECT_EQ(j["results"][size_t(i)]["head"].get<int>(), i % c.n_head);
  }
}

TEST(ServerPatch, DecoderIoiPairLogitDifferenceKvGroupsAndPathPatching) {
  const Model& model = smollm2();
  const ModelConfig& c = model.config();
  ApiFixture f(model);
  const HttpReply r = f.api.patch(ioi({{"layers", {23}}}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = body_of(r);
  EXPECT_EQ(j["metric"], "logit_diff");
  ASSERT_EQ(j["results"].size(), size_t(c.n_head));
  const std::vector<float> clean = last_logits(model, kIoi), corrupt = last_logits(model, kIoiCorrupt);
  const int32_t mary = token_id(model, " Mary"), john = token_id(model, " John");
  EXPECT_NEAR(j["clean"].get<double>(), double(clean[size_t(mary)]) - clean[size_t(john)], 1e-3);
  EXPECT_NEAR(j["corrupt"].get<double>(), double(corrupt[size_t(mary)]) - corrupt[size_t(john)], 1e-3);
  EXPECT_GT(j["clean"].get<double>(), 2.0);  // the model prefers " Mary" on the clean prompt
  expect_normalised_from_own_numbers(j);
  // Head 23.3 restores a large share of the behaviour on this pair (0.46 when measured).
  EXPECT_GT(j["results"][3]["normalised"].get<double>(), 0.2);

  PairSource source;
  source.clean = kIoi, source.corrupt = kIoiCorrupt, source.answer = " Mary", source.wrong = " John";
  PromptPairs pairs = load_prompt_pairs(model, source);
  PatchRequest request;
  request.layers = {23};
  EXPECT_EQ(j["results"], json(run_patch_sweep(model, pairs, request))["results"]);

  // Keys and values: one result per key/value head, each naming the query heads that read it.
  const json kv = body_of(f.api.patch(ioi({{"layers", {0}}, {"sites", {"k", "v"}}}).dump()));
  ASSERT_EQ(kv["results"].size(), size_t(2 * c.n_kv_head)) << kv;
  for (const json& e : kv["results"]) {
    std::vector<int> group;
    for (int h = 0; h < c.n_head; ++h)
      if (h * c.n_kv_head / c.n_head == e["head"].get<int>()) group.push_back(h);
    EXPECT_EQ(e["group"].get<std::vector<int>>(), group) << e;
  }

  // Path patching from 23.3 to every later head through the queries: one result per head after it.
  const HttpReply p = f.api.patch(ioi({{"senders", {{23, 3}}}, {"input", "q"}}).dump());
  ASSERT_EQ(p.status, 200) << p.body;
  const json path = body_of(p);
  EXPECT_EQ(path["direction"], "noise");
  EXPECT_EQ(path["path"]["input"], "q");
  EXPECT_EQ(path["path"]["senders"], json::parse("[[23, 3]]"));
  ASSERT_EQ(path["path"]["results"].size(), size_t((c.n_layer - 24) * c.n_head));
  EXPECT_EQ(path["path"]["results"][0]["receivers"], json::parse("[[24, 0]]"));
  PathPatchRequest pr;
  pr.senders = {{23, 3}};
  EXPECT_EQ(path["path"], json(run_path_patch(model, pairs, pr))["path"]);
}

TEST(ServerPatch, TasksAndPairListsAreAccepted) {
  const Model& model = smollm2();
  ApiFixture f(model);
  const json task = body_of(f.api.patch(json({{"task", "ioi"}, {"n", 2}, {"seed", 3}, {"layers", {29}}}).dump()));
  ASSERT_TRUE(task.contains("results")) << task;
  EXPECT_EQ(task["task"], "ioi");
  EXPECT_EQ(task["n_pairs"], 2);
  EXPECT_EQ(task["seed"], 3);
  const json list =
      body_of(f.api.patch(json({{"pairs", {ioi(), ioi()}}, {"layers", {29}}, {"metric", "prob"}}).dump()));
  ASSERT_TRUE(list.contains("results")) << list;
  EXPECT_EQ(list["n_pairs"], 2);
  EXPECT_EQ(list["metric"], "prob");
}

// Status, code, and a piece of the message.
void expect_refused(const HttpReply& r, int status, const std::string& code, const std::string& needle) {
  EXPECT_EQ(r.status, status) << r.body;
  const json e = json::parse(r.body)["error"];
  EXPECT_EQ(e["code"], code) << r.body;
  EXPECT_NE(e["message"].get<std::string>().find(needle), std::string::npos) << r.body;
}

TEST(ServerPatch, DecoderRefusalsSayWhatToChange) {
  const Model& model = smollm2();
  ApiFixture f(model);
  const auto patch = [&](const json& j) { return f.api.patch(j.dump()); };
  expect_refused(patch(ioi({{"corrupt", "When Alice and Bob went to the grocery store, Bob gave a drink to"}})), 400,
                 "bad_pair", "same number of tokens");
  expect_refused(patch(ioi({{"answer", " Maryanne"}})), 400, "bad_pair", "must be one token");
  expect_refused(patch(ioi({{"senders", {{30, 0}}}})), 400, "unknown_head", "layers 0..29, heads 0..8");
  expect_refused(patch(ioi({{"senders", {{3, 9}}}})), 400, "unknown_head", "heads 0..8");
  expect_refused(patch(ioi({{"senders", {{29, 0}}}})), 400, "bad_field", "no head comes after layer 29");
  expect_refused(patch(ioi({{"senders", {{5, 0}}}, {"receivers", {{4, 0}}}})), 400, "bad_field",
                 "not after every sender");
  expect_refused(patch(ioi({{"sites", {"heads"}}})), 400, "bad_field", "one of: head, head_position");
  expect_refused(patch(ioi({{"sites", {"head", "head"}}})), 400, "bad_field", "named twice");
  expect_refused(patch(ioi({{"metric", "cosine"}})), 400, "bad_field", "is a decoder");
  expect_refused(patch(ioi({{"metric", "accuracy"}})), 400, "bad_field", "logit_diff");
  expect_refused(patch(ioi({{"direction", "sideways"}})), 400, "bad_field", "denoise, noise");
  expect_refused(patch(ioi({{"senders", {{2, 0}}}, {"input", "o"}})), 400, "bad_field", "q, k, v, logits");
  expect_refused(patch(ioi({{"layers", {30}}})), 400, "unknown_layer", "0 to 29");
  expect_refused(patch(ioi({{"layers", {1}}, {"senders", {{0, 1}}}})), 400, "bad_field", "belongs to a sweep");
  expect_refused(patch(ioi({{"input", "q"}})), 400, "bad_field", "needs \"senders\"");
  expect_refused(patch(json({{"clean", kIoi}, {"corrupt", kIoiCorrupt}, {"wrong", " John"}})), 400, "missing_field",
                 "\"answer\"");
  expect_refused(patch(ioi({{"task", "ioi"}})), 400, "bad_field", "one way");
  expect_refused(patch(json({{"task", "ioi"}, {"n", 21}})), 400, "bad_field", "between 1 and 20");
  expect_refused(patch(json({{"task", "sorting"}})), 400, "bad_field", "ioi, induction, greater_than");
  expect_refused(patch(ioi({{"colour", "red"}})), 400, "unknown_field", "colour");
  expect_refused(patch(json({{"pairs", {ioi({{"extra", 1}})}}})), 400, "unknown_field", "pairs[0]");
  expect_refused(patch(ioi({{"clean", std::string(limits::kMaxTextBytes + 1, 'a')}})), 413, "text_too_long",
                 "the limit is");
  expect_refused(f.api.patch("{\"clean\": \"When Mary"), 400, "bad_json", "not valid JSON");
  // Every head at every position of a 14-token pair: 270 · 14 passes of 14 tokens.
  expect_refused(patch(ioi({{"sites", {"head_position"}}})), 413, "too_much_work", "passes x tokens per request");
  expect_refused(patch(ioi({{"sites", {"head_position"}}})), 413, "too_much_work", "fewer \"layers\"");
}

TEST(ServerPatch, EncoderRefusals) {
  const Model& model = testing::default_model();
  ApiFixture f(model);
  expect_refused(f.api.patch(json({{"clean", kBig}, {"corrupt", "The trophy did not fit in the suitcase."}}).dump()),
                 400, "bad_pair", "same number of tokens");
  expect_refused(f.api.patch(json({{"clean", kBig}, {"corrupt", kSmall}, {"metric", "logit_diff"}}).dump()), 400,
                 "bad_field", "cosine");
  expect_refused(f.api.patch(json({{"clean", kBig}, {"corrupt", "  "}}).dump()), 400, "empty_text", "corrupt");
}

TEST(ServerLogitLens, DecoderLastLayerIsTheModelsPrediction) {
  const Model& model = smollm2();
  const ModelConfig& c = model.config();
  ApiFixture f(model);
  const std::string text = "The capital of France is";
  const HttpReply r = f.api.logit_lens(json({{"text", text}, {"top_k", 5}, {"tokens", {" Paris", " the"}}}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = body_of(r);
  EXPECT_EQ(j["schema"], "headscope.lens/1");
  const int T = int(model.encode(text).size());
  EXPECT_EQ(j["position"].get<int>(), T - 1);
  ASSERT_EQ(j["layers"].size(), size_t(c.n_layer + 1));
  const std::vector<float> logits = last_logits(model, text);
  const auto top = std::max_element(logits.begin(), logits.end());
  const json& last = j["layers"][size_t(c.n_layer)];
  EXPECT_EQ(last["layer"].get<int>(), c.n_layer);
  ASSERT_EQ(last["top"].size(), 5u);
  EXPECT_EQ(last["top"][0]["id"].get<int>(), int(top - logits.begin()));
  EXPECT_EQ(last["top"][0]["rank"].get<int>(), 0);
  double z = 0;
  for (float v : logits) z += std::exp(double(v) - *top);
  EXPECT_NEAR(last["top"][0]["probability"].get<double>(), 1.0 / z, 1e-4);
  const int32_t paris = token_id(model, " Paris");
  const json& followed = last["followed"][0];
  EXPECT_EQ(followed["id"].get<int>(), paris);
  EXPECT_EQ(followed["text"], " Paris");
  int64_t above = 0;
  for (float v : logits) above += v > logits[size_t(paris)];
  EXPECT_EQ(followed["rank"].get<int64_t>(), above);
  for (const json& layer : j["layers"]) EXPECT_EQ(layer["followed"].size(), 2u);
  EXPECT_FALSE(j["followed_prediction"].get<bool>());

  // No tokens named: the prediction is followed; a position picks another row.
  const json own = body_of(f.api.logit_lens(json({{"text", text}, {"position", 1}}).dump()));
  EXPECT_TRUE(own["followed_prediction"].get<bool>());
  EXPECT_EQ(own["position"].get<int>(), 1);
  EXPECT_EQ(own["layers"][size_t(c.n_layer)]["followed"][0]["rank"].get<int>(), 0);
  EXPECT_EQ(own["layers"][0]["top"].size(), 10u);

  expect_refused(f.api.logit_lens(json({{"text", text}, {"tokens", {" Parisian"}}}).dump()), 400, "bad_token",
                 "one token");
  expect_refused(f.api.logit_lens(json({{"text", text}, {"top_k", 0}}).dump()), 400, "bad_field", "between 1 and 50");
  expect_refused(f.api.logit_lens(json({{"text", text}, {"position", T}}).dump()), 400, "unknown_token",
                 "0 to " + std::to_string(T - 1));
  expect_refused(f.api.logit_lens(json({{"text", text}, {"tokens", " Paris"}}).dump()), 400, "bad_field", "list");
}

TEST(ServerLogitLens, EncoderIsRefusedInWords) {
  ApiFixture f(testing::default_model());
  expect_refused(f.api.logit_lens(json({{"text", kBig}}).dump()), 400, "not_causal", "needs a decoder");
}

TEST(ServerPatch, HeadsTogetherEqualThePipeline) {
  const Model& model = smollm2();
  ApiFixture f(model);
  const HttpReply r = f.api.patch(ioi({{"heads", {{23, 3}, {23, 0}}}}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = body_of(r);
  PairSource source;
  source.clean = kIoi, source.corrupt = kIoiCorrupt, source.answer = " Mary", source.wrong = " John";
  PromptPairs pairs = load_prompt_pairs(model, source);
  const json want =
      json(run_head_set_patch(model, pairs, {{23, 3}, {23, 0}}, PatchDirection::kDenoise, PatchMetric::kLogitDiff));
  EXPECT_EQ(j["set"], want["set"]);
  EXPECT_EQ(j["direction"], "denoise");
  const double clean = j["clean"].get<double>(), corrupt = j["corrupt"].get<double>();
  EXPECT_NEAR(j["set"]["normalised"].get<double>(), (j["set"]["value"].get<double>() - corrupt) / (clean - corrupt),
              1e-12);
  expect_refused(f.api.patch(ioi({{"heads", {{23, 3}}}, {"senders", {{22, 0}}}}).dump()), 400, "bad_field",
                 "does not go with");
  expect_refused(f.api.patch(ioi({{"heads", {{99, 0}}}}).dump()), 400, "unknown_head", "layers 0..");
  expect_refused(f.api.patch(ioi({{"heads", json::array()}}).dump()), 400, "bad_field", "non-empty");
}

// One head's logit lens: its entries are the head's direct logit attribution (pipeline), and a
// followed token's rank is counted among that head's effects on the whole vocabulary.
TEST(ServerHeadLens, EqualsTheHeadsAttributionAndRefusesInWords) {
  const Model& model = smollm2();
  const ModelConfig& c = model.config();
  ApiFixture f(model);
  const HttpReply r = f.api.head_lens(
      json({{"text", kIoi}, {"layer", 23}, {"head", 3}, {"top_k", 5}, {"tokens", {" Mary", " John"}}}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = body_of(r);
  EXPECT_EQ(j["schema"], "headscope.head_lens/1");
  EXPECT_EQ(j["layer"], 23);
  EXPECT_EQ(j["head"], 3);
  EXPECT_EQ(j["kv_head"], 3 / (c.n_head / c.n_kv_head));
  const int T = int(model.encode(kIoi).size());
  EXPECT_EQ(j["position"].get<int>(), T - 1);
  ASSERT_EQ(j["promoted"].size(), 5u);
  ASSERT_EQ(j["suppressed"].size(), 5u);
  ASSERT_EQ(j["followed"].size(), 2u);
  EXPECT_EQ(j["followed"][0]["text"], " Mary");
  const int32_t mary = token_id(model, " Mary"), john = token_id(model, " John");
  LogitAttributionOptions o;
  o.contrast = john;
  const std::vector<analysis::LogitAttribution> dla = attribute_logits(model, model.encode(kIoi), o);
  const analysis::LogitAttribution& last = dla.back();
  ASSERT_EQ(last.target, mary);  // the model predicts " Mary" here
  const double part = last.heads[size_t(23 * c.n_head + 3)];
  EXPECT_NEAR(j["followed"][0]["logit"].get<double>() - j["followed"][1]["logit"].get<double>(), part,
              1e-6 * (1 + std::abs(part)));
  EXPECT_GT(part, 0.5);  // 23.3, the strongest name mover of this pair, writes " Mary" over " John"
  const std::vector<float> logits = last_logits(model, kIoi);
  EXPECT_NEAR(j["followed"][0]["model_logit"].get<double>(), logits[size_t(mary)], 1e-3);
  for (size_t i = 1; i < 5; ++i)
    EXPECT_GE(j["promoted"][i - 1]["logit"].get<double>(), j["promoted"][i]["logit"].get<double>());

  expect_refused(f.api.head_lens(json({{"text", kIoi}, {"layer", 23}}).dump()), 400, "missing_field", "head");
  expect_refused(f.api.head_lens(json({{"text", kIoi}, {"layer", 30}, {"head", 0}}).dump()), 400, "unknown_layer",
                 "layers");
  expect_refused(f.api.head_lens(json({{"text", kIoi}, {"layer", 1}, {"head", 9}}).dump()), 400, "unknown_head",
                 "heads");
  expect_refused(f.api.head_lens(json({{"text", kIoi}, {"layer", 1}, {"head", 0}, {"tokens", {" Parisian"}}}).dump()),
                 400, "bad_token", "one token");
  ApiFixture g(testing::default_model());
  expect_refused(g.api.head_lens(json({{"text", kBig}, {"layer", 0}, {"head", 0}}).dump()), 400, "not_causal",
                 "needs a decoder");
}

TEST(ServerTokenize, CountsAsTheModelEncodes) {
  const Model& model = smollm2();
  ApiFixture f(model);
  const json j = body_of(f.api.tokenize(json({{"text", kIoi}}).dump()));
  EXPECT_EQ(j["n_tokens"].get<size_t>(), model.encode(kIoi).size());
  EXPECT_EQ(j["tokens"][1]["display"], "Mary");
  const json answer = body_of(f.api.tokenize(json({{"text", " Mary"}, {"special", false}}).dump()));
  EXPECT_EQ(answer["n_tokens"], 1);
  EXPECT_EQ(answer["tokens"][0]["id"].get<int>(), token_id(model, " Mary"));
  const Model& encoder = testing::default_model();
  ApiFixture g(encoder);
  const json bert = body_of(g.api.tokenize(json({{"text", kBig}}).dump()));
  EXPECT_EQ(bert["tokens"][0]["text"], "[CLS]");
  EXPECT_EQ(bert["n_tokens"].get<size_t>(), encoder.encode(kBig).size());
}

}  // namespace
}  // namespace headscope::server

namespace headscope::server {
namespace {

// Attribution patching through /api/patch: the reply equals the pipeline's, its estimates are
// base + Σ (o_clean − o_corrupt) · ∂metric/∂o from Model::gradients read here, "both" adds the
// exact sweep and their agreement, and "edges" one edge per sender and later receiver input.
TEST(ServerPatch, AttributionMethodEqualsThePipelineAndTheGradients) {
  const Model& model = smollm2();
  const ModelConfig& c = model.config();
  ApiFixture f(model);
  const HttpReply r = f.api.patch(ioi({{"method", "attribution"}, {"edges", true}}).dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = body_of(r);
  EXPECT_EQ(j["method"], "attribution");
  ASSERT_EQ(j["results"].size(), size_t(c.n_layer * c.n_head));
  EXPECT_EQ(j["results"], j["attribution"]["results"]);
  // Edges: every sender head to every later layer's q (per head), k and v (per key/value head), and the logits.
  size_t edges = 0;
  for (int l = 0; l < c.n_layer; ++l)
    edges += size_t(c.n_head) * (size_t(c.n_layer - 1 - l) * (c.n_head + 2 * c.n_kv_head) + 1);
  EXPECT_EQ(j["attribution"]["edges"].size(), edges);

  const Encoding clean = model.encode(kIoi), corrupt = model.encode(kIoiCorrupt);
  GradientOptions go;
  go.attention = go.queries_keys_values = false;
  go.forward.attention = go.forward.contributions = false;
  const Gradients g = model.gradients(
      corrupt, metric_seed(model, PatchMetric::kLogitDiff, token_id(model, " Mary"), token_id(model, " John")), go);
  CaptureOptions o = CaptureOptions::attention_only();
  o.attention = false, o.head_outputs = true;
  const Capture a = model.run(clean, o), b = model.run(corrupt, o);
  const int64_t per_head = int64_t(a.T) * c.d_head;
  for (const json& e : j["results"]) {
    const int64_t off = (e["layer"].get<int64_t>() * c.n_head + e["head"].get<int64_t>()) * per_head;
    double change = 0;
    for (int64_t i = 0; i < per_head; ++i)
      change += (double(a.head_outputs.ptr()[off + i]) - b.head_outputs.ptr()[off + i]) * g.head_outputs.ptr()[off + i];
    EXPECT_NEAR(e["value"].get<double>(), g.metric + change, 1e-4 * (1 + std::fabs(change))) << e;
  }
  EXPECT_NEAR(j["corrupt"].get<double>(), g.metric, 1e-4);  // its runs record attention: another kernel path

  const json both = body_of(f.api.patch(ioi({{"method", "both"}, {"layers", {20, 23}}}).dump()));
  ASSERT_TRUE(both.contains("agreement")) << both.dump().substr(0, 300);
  EXPECT_EQ(both["agreement"]["sites"], 2 * c.n_head);
  EXPECT_GE(both["agreement"]["spearman"].get<double>(), -1.0);
  EXPECT_NE(both["results"], both["attribution"]["results"]);  // exact beside the estimates
}

TEST(ServerSaliency, IntegratedGradientsEqualThePipelineAndRefuseInWords) {
  const Model& model = smollm2();
  ApiFixture f(model);
  const json request = {{"text", kIoi}, {"answer", " Mary"}, {"wrong", " John"}, {"steps", 8}};
  const HttpReply r = f.api.saliency(request.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = body_of(r);
  SaliencyRequest s;
  s.answer = " Mary", s.wrong = " John", s.steps = 8;
  const SaliencyReport want = saliency(model, kIoi, s);
  ASSERT_EQ(j["tokens"].size(), want.scores.size());
  for (size_t t = 0; t < want.scores.size(); ++t)
    EXPECT_DOUBLE_EQ(j["tokens"][t]["score"].get<double>(), want.scores[t]);
  EXPECT_DOUBLE_EQ(j["completeness_gap"].get<double>(), want.completeness_gap);
  const auto refuse = [&](json extra) {
    json b = request;
    b.update(extra);
    return f.api.saliency(b.dump());
  };
  expect_refused(refuse({{"steps", 0}}), 400, "bad_field", "between 1 and 1000");
  expect_refused(refuse({{"rule", "simpson"}}), 400, "bad_field", "gausslegendre");
  expect_refused(refuse({{"method", "lime"}}), 400, "bad_field", "grad_x_input");
  expect_refused(refuse({{"baseline", 10000000}}), 400, "bad_field", "token id");
  expect_refused(refuse({{"steps", 1000}}), 413, "too_much_work", "fewer steps");
  expect_refused(refuse({{"answer", " Maryanne"}}), 400, "bad_field", "one token");
  expect_refused(f.api.saliency(json({{"text", kBig}}).dump()), 400, "bad_field", "answer");
  expect_refused(refuse({{"colour", 1}}), 400, "unknown_field", "colour");
}

TEST(ServerPatch, AttributionRefusals) {
  ApiFixture f(smollm2());
  expect_refused(f.api.patch(ioi({{"edges", true}}).dump()), 400, "bad_field", "needs \"method\"");
  expect_refused(f.api.patch(ioi({{"method", "guess"}}).dump()), 400, "bad_field", "\"exact\", \"attribution\"");
  expect_refused(f.api.patch(ioi({{"method", "attribution"}, {"senders", {{2, 0}}}}).dump()), 400, "bad_field",
                 "belong to a sweep");
  ApiFixture e(testing::default_model());
  expect_refused(
      e.api.patch(json({{"clean", kBig}, {"corrupt", kSmall}, {"method", "attribution"}, {"edges", true}}).dump()), 400,
      "bad_field", "encoder");
}

}  // namespace
}  // namespace headscope::server
