// The server without sockets: the request gate, the heavy-request queue, the UTF-8 tail of
// generation, the run-size rule of --max-tokens, and each endpoint's reply on the default model.
#include <nlohmann/json.hpp>

#include <atomic>
#include <cmath>
#include <cstring>
#include <set>
#include <thread>

#include "headscope/error.h"
#include "headscope/limits.h"
#include "headscope/model.h"
#include "headscope/pipeline.h"
#include "server/api.h"
#include "server/compute_queue.h"
#include "server/gate.h"
#include "server/run_cache.h"
#include "server/wire.h"
#include "test_support.h"

namespace headscope::server {
namespace {

using json = nlohmann::json;

// ---- the request gate ----

RequestHead head(std::string method, std::string path, std::vector<std::pair<std::string, std::string>> headers) {
  return RequestHead{std::move(method), std::move(path), std::move(headers)};
}

GateOptions gate_options() {
  GateOptions o;
  o.bound_host = "127.0.0.1";
  o.port = 8080;
  o.max_body_bytes = 1000;
  return o;
}

// A well-formed POST from the explorer's own page, with one header replaced or added.
RequestHead post_with(const std::string& name, const std::string& value) {
  RequestHead r = head("POST", "/api/run",
                       {{"Host", "127.0.0.1:8080"},
                        {"Content-Type", "application/json"},
                        {"Content-Length", "20"},
                        {"Origin", "http://127.0.0.1:8080"}});
  bool replaced = false;
  for (auto& [k, v] : r.headers)
    if (k == name) v = value, replaced = true;
  if (!replaced) r.headers.emplace_back(name, value);
  return r;
}

int status_of(const RequestHead& r, const GateOptions& o = gate_options()) {
  const auto rejection = check_request(r, o);
  return rejection ? rejection->status : 0;
}

TEST(ServerGate, LoopbackNamesAndTheBoundHostPass) {
  for (const char* host : {"127.0.0.1", "127.0.0.1:8080", "localhost", "LocalHost:8080", "[::1]", "[::1]:8080"})
    EXPECT_EQ(status_of(head("GET", "/api/health", {{"Host", host}})), 0) << host;
  GateOptions lan = gate_options();
  lan.bound_host = "192.168.1.20";
  EXPECT_EQ(status_of(head("GET", "/", {{"Host", "192.168.1.20:8080"}}), lan), 0);
  lan.extra_hosts = {"workstation.lan"};
  EXPECT_EQ(status_of(head("GET", "/", {{"Host", "workstation.lan:8080"}}), lan), 0);
}

TEST(ServerGate, ForeignHostIsRefused) {
  // DNS rebinding: the page's own name arrives in Host even though it resolves to 127.0.0.1.
  const auto r = check_request(head("GET", "/api/model", {{"Host", "attacker.example:8080"}}), gate_options());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_EQ(r->code, "forbidden_host");
  EXPECT_NE(r->message.find("attacker.example"), std::string::npos);
  for (const char* host :
       {"127.0.0.1.attacker.example", "localhost.attacker.example", "::1", "[::1", "127.0.0.1:99999", ""})
    EXPECT_GE(status_of(head("GET", "/", {{"Host", host}})), 400) << host;
  EXPECT_EQ(status_of(head("GET", "/", {})), 400);                                                 // no Host
  EXPECT_EQ(status_of(head("GET", "/", {{"Host", "localhost"}, {"Host", "evil.example"}})), 400);  // two
}

TEST(ServerGate, OriginMustBeThisServer) {
  EXPECT_EQ(status_of(post_with("Origin", "http://localhost:8080")), 0);
  EXPECT_EQ(status_of(post_with("Origin", "http://[::1]:8080")), 0);
  for (const char* origin : {"http://evil.example", "http://127.0.0.1:9999", "http://127.0.0.1", "null",
                             "https://127.0.0.1:8080", "http://127.0.0.1:8080.evil.example"}) {
    const auto r = check_request(post_with("Origin", origin), gate_options());
    ASSERT_TRUE(r) << origin;
    EXPECT_EQ(r->status, 403) << origin;
    EXPECT_EQ(r->code, "forbidden_origin") << origin;
  }
  // A GET carrying a foreign Origin (a cross-site fetch) is refused as well.
  EXPECT_EQ(status_of(head("GET", "/api/model", {{"Host", "localhost:8080"}, {"Origin", "http://evil.example"}})), 403);
}

TEST(ServerGate, WrongMethodOnAKnownPathIs405WithAllow) {
  const auto put = check_request(head("PUT", "/api/run", {{"Host", "localhost"}}), gate_options());
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 405);
  EXPECT_EQ(put->allow, "POST");
  const auto del = check_request(head("DELETE", "/api/model", {{"Host", "localhost"}}), gate_options());
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 405);
  EXPECT_EQ(del->allow, "GET, HEAD");
  const auto get = check_request(head("GET", "/api/attention", {{"Host", "localhost"}}), gate_options());
  ASSERT_TRUE(get);
  EXPECT_EQ(get->allow, "POST");
  // Every POST endpoint is in the table, /api/link included (it once answered a GET with 404).
  for (const char* path : {"/api/link", "/api/ablate", "/api/importance", "/api/tile", "/api/overview", "/api/patch",
                           "/api/logit_lens", "/api/tokenize", "/api/composition"}) {
    const auto wrong = check_request(head("GET", path, {{"Host", "localhost"}}), gate_options());
    ASSERT_TRUE(wrong) << path;
    EXPECT_EQ(wrong->status, 405) << path;
    EXPECT_EQ(wrong->allow, "POST") << path;
  }
  EXPECT_EQ(status_of(head("POST", "/index.html", {{"Host", "localhost"}, {"Content-Length", "0"}})), 405);
  EXPECT_EQ(status_of(head("HEAD", "/api/model", {{"Host", "localhost"}})), 0);
  // An unknown API path is left to the router (404), whatever the method.
  EXPECT_EQ(status_of(head("PUT", "/api/nothing", {{"Host", "localhost"}})), 0);
}

TEST(ServerGate, PostBodiesMustBeJsonOfKnownLength) {
  EXPECT_EQ(status_of(post_with("Content-Type", "application/json; charset=utf-8")), 0);
  EXPECT_EQ(status_of(post_with("Content-Type", "text/plain")), 415);  // a cross-site "simple" request
  EXPECT_EQ(status_of(post_with("Content-Type", "application/x-www-form-urlencoded")), 415);
  EXPECT_EQ(status_of(post_with("Content-Type", "multipart/form-data; boundary=x")), 415);
  EXPECT_EQ(status_of(post_with("Content-Encoding", "gzip")), 415);
  EXPECT_EQ(status_of(post_with("Content-Encoding", "br")), 415);
  EXPECT_EQ(status_of(post_with("Content-Encoding", "identity")), 0);
  EXPECT_EQ(status_of(post_with("Content-Length", "1001")), 413);
  EXPECT_EQ(status_of(post_with("Content-Length", "99999999999999999999999")), 400);
  EXPECT_EQ(status_of(post_with("Content-Length", "-1")), 400);
  EXPECT_EQ(status_of(post_with("Content-Length", "0x10")), 400);
  RequestHead chunked = post_with("Transfer-Encoding", "chunked");
  std::erase_if(chunked.headers, [](const auto& h) { return h.first == "Content-Length"; });
  EXPECT_EQ(status_of(chunked), 0);  // allowed: the body is then read with the limit
  EXPECT_EQ(status_of(post_with("Transfer-Encoding", "chunked")), 400);  // and a Content-Length: ambiguous
  RequestHead gzip_te = chunked;
  gzip_te.headers.back().second = "gzip, chunked";
  EXPECT_EQ(status_of(gzip_te), 400);
  RequestHead no_length = chunked;
  no_length.headers.pop_back();
  EXPECT_EQ(status_of(no_length), 411);
  // An oversized body is reported as such even when its type is wrong too (the e2e test's case).
  EXPECT_EQ(status_of(head("POST", "/api/run", {{"Host", "localhost"}, {"Content-Length", "2097152"}})), 413);
  EXPECT_EQ(status_of(head("GET", "/api/model", {{"Host", "localhost"}, {"Content-Length", "5"}})), 400);
}

TEST(ServerGate, OnlyOneByteRange) {
  EXPECT_EQ(status_of(head("GET", "/app.js", {{"Host", "localhost"}, {"Range", "bytes=0-99"}})), 0);
  EXPECT_EQ(status_of(head("GET", "/app.js", {{"Host", "localhost"}, {"Range", "bytes=0-,0-,0-"}})), 416);
}

// ---- UTF-8 tails ----

TEST(ServerUtf8, IncompleteTailIsMeasured) {
  EXPECT_EQ(incomplete_utf8_tail(""), 0u);
  EXPECT_EQ(incomplete_utf8_tail("caf\xC3\xA9"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("caf\xC3"), 1u);
  EXPECT_EQ(incomplete_utf8_tail("\xE3\x80"), 2u);       // first two bytes of 、 (E3 80 81)
  EXPECT_EQ(incomplete_utf8_tail("x\xF0\x9F\x98"), 3u);  // 😀 is F0 9F 98 80
  EXPECT_EQ(incomplete_utf8_tail("\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("a\x80"), 0u);      // a stray continuation byte: never completes
  EXPECT_EQ(incomplete_utf8_tail("a\xE0\x80"), 0u);  // overlong form: never completes
  EXPECT_EQ(incomplete_utf8_tail("a\xED\xA0"), 0u);  // surrogate: never completes
  EXPECT_EQ(incomplete_utf8_tail("a\xF5"), 0u);      // not a lead byte
  // What is left is valid UTF-8 whenever the rest was.
  const std::string s = "日本\xE3\x80";
  EXPECT_TRUE(is_valid_utf8(s.substr(0, s.size() - incomplete_utf8_tail(s))));
}

// ---- heavy-request queue ----

TEST(ServerQueue, FullQueueTurnsAwayAtOnce) {
  ComputeQueue queue(1, 1, std::chrono::seconds(30));
  auto first = queue.enter();
  ASSERT_TRUE(first);
  std::atomic<bool> waiter_got{false};
  std::thread waiter([&] { waiter_got = queue.enter().has_value(); });
  while (queue.waiting() == 0) std::this_thread::yield();
  EXPECT_FALSE(queue.enter());  // slot taken and the one waiting place too
  EXPECT_EQ(queue.turned_away(), 1);
  first.reset();  // the waiter gets the slot
  waiter.join();
  EXPECT_TRUE(waiter_got);
  EXPECT_EQ(queue.busy(), 0);
}

TEST(ServerQueue, WaitIsBounded) {
  ComputeQueue queue(1, 4, std::chrono::milliseconds(20));
  auto first = queue.enter();
  EXPECT_FALSE(queue.enter());  // waited 20 ms for a slot that never came
  EXPECT_EQ(queue.turned_away(), 1);
}

// ---- the run-size rule of --max-tokens ----

// A model of a given shape that only sizes runs (the tokenizer and weights are the default
// model's; run_bytes 0, so the maps alone decide whether a run streams): the run cache's memory
// rule is the pipeline's analyse_memory(), which asks the model.
class ShapedModel : public Model {
 public:
  explicit ShapedModel(const ModelConfig& config) : config_(config) {}
  const ModelConfig& config() const override { return config_; }
  const Tokenizer& tokenizer() const override { return testing::default_model().tokenizer(); }
  Capture run(const Encoding&, const CaptureOptions&) const override { throw Error("ShapedModel does not run"); }
  uint64_t run_bytes(int64_t, const CaptureOptions&) const override { return 0; }
  Tensor output_projection(int layer) const override { return testing::default_model().output_projection(layer); }
  const Tensor& output_bias(int layer) const override { return testing::default_model().output_bias(layer); }

 private:
  ModelConfig config_;
};

constexpr uint64_t kGiB2 = uint64_t{2048} << 20;  // the server's default --cache-mib

ModelConfig smollm2_shape() {
  ModelConfig c;
  c.n_layer = 30, c.n_head = 9, c.n_kv_head = 3, c.d_head = 64, c.d_model = 576, c.causal = true;
  return c;
}

TEST(ServerLimits, RunBytesCountsTheCapture) {
  ModelConfig c;
  c.n_layer = 6, c.n_head = 12, c.n_kv_head = 12, c.d_head = 32, c.d_model = 384;  // all-MiniLM-L6-v2
  const uint64_t T = 512;
  // every head's pooled maps and profiles (received [T], offsets [2T − 1], in double)
  const uint64_t overviews = 6 * 12 * (2 * 256 * 256 * 4 + (3 * T - 1) * 8);
  // the token and word maps, head outputs, contributions, attention output and value norms
  const uint64_t expected =
      4 * (2 * 6 * 12 * T * T + 6 * 12 * T * 32 + 6 * 12 * T * 384 + 6 * T * 384 + 6 * 12 * T) + overviews;
  const ShapedModel minilm_shape(c);
  EXPECT_FALSE(streams_maps(minilm_shape, 512, kGiB2));  // the explorer's full maps at the model's limit
  EXPECT_EQ(run_bytes(minilm_shape, 512, kGiB2), expected);
  // 2,300 tokens with dense maps needed ~11 GiB and got the server killed; they are streamed now,
  // and a run keeps queries, keys, value norms and overviews, linear in T: 8,192 tokens fit in the
  // default 2 GiB.
  const ShapedModel smollm2(smollm2_shape());
  EXPECT_TRUE(streams_maps(smollm2, 2300, kGiB2));
  const uint64_t T8 = 8192;
  EXPECT_EQ(run_bytes(smollm2, 8192, kGiB2),
            30 * 9 * (2 * 256 * 256 * 4 + (3 * T8 - 1) * 8) + 4 * (30 * 9 * T8 * 64 + 30 * 3 * T8 * 64 + 30 * 9 * T8));
  EXPECT_LT(run_bytes(smollm2, 8192, kGiB2), uint64_t{2048} << 20);
  const int64_t fit = max_tokens_within(smollm2, uint64_t{2048} << 20);
  EXPECT_GT(fit, 8192);
  EXPECT_LE(run_bytes(smollm2, fit, kGiB2), uint64_t{2048} << 20);
  EXPECT_GT(run_bytes(smollm2, fit + 1, kGiB2), uint64_t{2048} << 20);
}

// The default --max-tokens: the model's own limit when a run that long fits the cache (SmolLM2's
// 8,192 and MiniLM's 512 in the default 2 GiB), else the longest that fits.
TEST(ServerLimits, DefaultMaxTokensIsWhatTheModelReadsWhileARunFits) {
  ModelConfig shape = smollm2_shape();
  shape.max_positions = 8192;
  const ShapedModel smollm2(shape);
  EXPECT_EQ(default_max_tokens(smollm2, uint64_t{2048} << 20), 8192);
  shape.max_positions = 0;  // no limit of its own: the longest run that fits, here 20,115 tokens
  EXPECT_EQ(default_max_tokens(ShapedModel(shape), uint64_t{2048} << 20),
            max_tokens_within(ShapedModel(shape), uint64_t{2048} << 20));
  const uint64_t small = uint64_t{64} << 20;
  EXPECT_EQ(default_max_tokens(smollm2, small), max_tokens_within(smollm2, small));
  EXPECT_LT(default_max_tokens(smollm2, small), 8192);
  EXPECT_LE(run_bytes(smollm2, default_max_tokens(smollm2, small), small), small);
}

// kAuto keeps the maps dense while what a dense run keeps fits the cache's budget (not a fixed
// size of maps): SmolLM2's dense run, counted here as RunBytesCountsTheCapture counts MiniLM's,
// decides the switch, which moves with the budget.
TEST(ServerLimits, MapsStayDenseWhileTheRunFitsTheCache) {
  const ShapedModel smollm2(smollm2_shape());
  const uint64_t L = 30, H = 9, dh = 64, D = 576;
  const auto dense_kept = [&](uint64_t T) {
    const uint64_t cells = std::min<uint64_t>(T, 256);
    return 4 * (2 * L * H * T * T + L * H * T * dh + L * H * T * D + L * T * D + L * H * T) +
           L * H * (2 * cells * cells * 4 + (3 * T - 1) * 8);
  };
  for (const uint64_t budget : {kGiB2, uint64_t{1024} << 20, uint64_t{4096} << 20}) {
    uint64_t last = 1;
    while (dense_kept(last + 1) <= budget) ++last;
    EXPECT_FALSE(streams_maps(smollm2, int64_t(last), budget)) << budget;
    EXPECT_EQ(run_bytes(smollm2, int64_t(last), budget), dense_kept(last));
    EXPECT_TRUE(streams_maps(smollm2, int64_t(last) + 1, budget)) << budget;
    if (budget == kGiB2) EXPECT_EQ(last, 802u);  // 498 under the former fixed 512 MiB of maps
  }
  // A run the model's own memory budget refuses dense streams whatever the cache allows.
  EXPECT_TRUE(streams_maps(smollm2, 20000, uint64_t{1} << 50));
}

TEST(ServerLimits, MaxTokensWithinIsTheLongestRunThatFits) {
  // run_bytes drops where the maps start to stream, so a bisection over all lengths could land on
  // either side. With 100 MiB SmolLM2's dense runs fit to a little over a hundred tokens and its
  // streamed ones (overviews growing to 140 MB at 256 tokens) further: the answer is the longest
  // of either kind; with more memory, a streamed one far beyond the dense ones.
  const ShapedModel smollm2(smollm2_shape());
  for (const uint64_t budget : {uint64_t{100} << 20, uint64_t{1024} << 20, kGiB2}) {
    const int64_t fit = max_tokens_within(smollm2, budget);
    ASSERT_GT(fit, 0) << budget;
    EXPECT_LE(run_bytes(smollm2, fit, budget), budget);
    EXPECT_GT(run_bytes(smollm2, fit + 1, budget), budget);
    for (int64_t t = fit + 1; t <= 40000; t += 97) EXPECT_GT(run_bytes(smollm2, t, budget), budget) << t;
    int64_t last_dense = 0;
    while (!streams_maps(smollm2, last_dense + 1, budget)) ++last_dense;
    EXPECT_GT(last_dense, 0) << budget;
    EXPECT_TRUE(streams_maps(smollm2, fit, budget)) << budget;
    EXPECT_GT(fit, last_dense) << budget;
  }
}

TEST(ServerLimits, TheCacheCountsWhatARunKeeps) {
  // The rule the budget checks is the one the run follows: the bytes a cached run holds are
  // analyse_memory()'s kept_bytes for the cache's options, dense and streamed alike.
  const Model& model = testing::default_model();
  for (const AnalyseOptions::Maps maps : {AnalyseOptions::Maps::kDense, AnalyseOptions::Maps::kStream}) {
    RunCache cache(model, 1, size_t{1} << 30, 64, {}, maps);
    const auto run = cache.get("The cat sat on the mat because it was tired.", false);
    const AnalyseMemory m = cached_run_memory(model, run->T(), size_t{1} << 30, maps);
    EXPECT_EQ(m.streamed, run->streamed);
    const uint64_t kept = run->bytes() - run->text.size();
    if (run->streamed) {
      EXPECT_EQ(m.kept_bytes, kept);
    } else {  // the word maps are counted at U = T, the most they can be
      const Tensor& w = run->word_attention;
      const uint64_t T = uint64_t(run->T()), U = uint64_t(w.dim(2));
      EXPECT_EQ(m.kept_bytes, kept + uint64_t(w.dim(0) * w.dim(1)) * (T * T - U * U) * sizeof(float));
    }
  }
}

// ---- the API on the default model ----

const Model& minilm() { return testing::default_model(); }

struct ApiFixture {
  explicit ApiFixture(const Model& model, ApiLimits limits = {},
                      AnalyseOptions::Maps maps = AnalyseOptions::Maps::kAuto)
      : cache(model, 4, size_t{1} << 30, 512, {}, maps), api(model, cache, limits) {}
  RunCache cache;
  Api api;
};

json body_of(const HttpReply& r) { return json::parse(r.body); }
std::string error_code(const HttpReply& r) { return body_of(r)["error"]["code"].get<std::string>(); }

constexpr const char* kSentence = R"({"text": "The animal didn't cross the street because it was too tired."})";

TEST(ServerApi, EndpointsAnswerOnTheDefaultModel) {
  ApiFixture f(minilm());
  const ModelConfig& c = minilm().config();
  const HttpReply run = f.api.run(kSentence);
  ASSERT_EQ(run.status, 200) << run.body;
  const json j = body_of(run);
  const int T = j["n_tokens"].get<int>();
  EXPECT_EQ(T,
            static_cast<int>(minilm().encode("The animal didn't cross the street because it was too tired.").size()));
  EXPECT_EQ(j["heads"].size(), static_cast<size_t>(c.n_layer * c.n_head));

  const HttpReply att =
      f.api.attention(R"({"text": "The animal didn't cross the street because it was too tired.", "layer": 2})");
  ASSERT_EQ(att.status, 200);
  EXPECT_EQ(att.content_type, "application/octet-stream");
  EXPECT_EQ(att.body.size(), 12 + 4 * 4 + sizeof(float) * static_cast<size_t>(c.n_head * T * T));

  const HttpReply dec = f.api.decompose(
      R"({"text": "The animal didn't cross the street because it was too tired.", "layer": 3, "token": 2})");
  ASSERT_EQ(dec.status, 200);
  EXPECT_LT(body_of(dec)["check"]["sum_max_abs_error"].get<double>(), 1e-4);

  const json health = body_of(f.api.health());
  EXPECT_EQ(health["runs_computed"], 1);  // three questions, one forward pass
  EXPECT_EQ(health["busy"], 0);
  EXPECT_EQ(body_of(f.api.model_info())["n_layer"], c.n_layer);
  EXPECT_EQ(error_code(f.api.generate(R"({"text": "x"})")), "not_causal");
}

TEST(ServerApi, MalformedBodiesAre400) {
  ApiFixture f(minilm());
  // nlohmann throws out_of_range (not parse_error) for a number no double holds: was a 500.
  for (const char* body :
       {R"({"text": "a", "layer": 1e999})", R"({"text": "a", "layer": -1e999})", R"({"text": 1e400})"}) {
    const HttpReply r = f.api.attention(body);
    EXPECT_EQ(r.status, 400) << body << " " << r.body;
    EXPECT_EQ(error_code(r), "bad_json");
  }
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const HttpReply r = f.api.run(deep);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(body_of(r)["error"]["message"].get<std::string>().find("deeper than"), std::string::npos);
  EXPECT_EQ(f.api.run(R"({"text": "a", "layer": 18446744073709551615})").status, 400);
  EXPECT_EQ(f.api.run("").status, 400);
}

TEST(ServerApi, ErrorRepliesAreJsonEvenForBytesThatAreNotUtf8) {
  // The 404 of GET /%ff carries the decoded path; dump() used to throw on it and end the process.
  const HttpReply r = Api::error(404, "not_found", "no such path: GET /\xff\xc0\xae");
  EXPECT_EQ(r.status, 404);
  const json j = json::parse(r.body);
  EXPECT_EQ(j["error"]["message"].get<std::string>(), "no such path: GET /\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(ServerApi, FullQueueIs503WithRetryAfter) {
  ApiLimits limits;
  limits.compute_slots = 1;
  limits.max_compute_waiters = 0;
  ApiFixture f(minilm(), limits);
  auto held = f.api.compute_queue().enter();  // another request is computing
  ASSERT_TRUE(held);
  const HttpReply r = f.api.run(kSentence);
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(error_code(r), "busy");
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, "Retry-After");
  // Bad requests are answered without waiting for a slot; light endpoints never wait.
  EXPECT_EQ(f.api.run(R"({"text": ""})").status, 400);
  EXPECT_EQ(f.api.health().status, 200);
  held.reset();
  EXPECT_EQ(f.api.run(kSentence).status, 200);
}

// The real model, except that a forward pass refuses with ResourceError, as Model::run does when
// the capture would not fit in memory.
class OutOfMemoryModel : public Model {
 public:
  explicit OutOfMemoryModel(const Model& real) : real_(real) {}
  const ModelConfig& config() const override { return real_.config(); }
  const Tokenizer& tokenizer() const override { return real_.tokenizer(); }
  Capture run(const Encoding&, const CaptureOptions&) const override {
    throw ResourceError("capture of 9 tokens needs 64 GiB; 2 GiB are available: send a shorter text");
  }
  uint64_t run_bytes(int64_t T, const CaptureOptions& options) const override { return real_.run_bytes(T, options); }
  Tensor output_projection(int layer) const override { return real_.output_projection(layer); }
  const Tensor& output_bias(int layer) const override { return real_.output_bias(layer); }

 private:
  const Model& real_;
};

TEST(ServerApi, ResourceErrorIs413WithItsMessage) {
  OutOfMemoryModel model(minilm());
  ApiFixture f(model);
  const HttpReply r = f.api.run(kSentence);
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(error_code(r), "too_large");
  EXPECT_NE(body_of(r)["error"]["message"].get<std::string>().find("64 GiB"), std::string::npos);
  EXPECT_EQ(f.api.compute_queue().busy(), 0);  // the slot was given back
}

// ---- long texts: streamed runs, overviews and tiles ----

constexpr const char* kText = "The animal didn't cross the street because it was too tired.";

// The binary reply of /api/attention, /api/tile and /api/overview: shape and float32 values,
// read here byte by byte from the documented layout (docs/api.md), not through the server's encoder.
struct Decoded {
  std::vector<int64_t> shape;
  std::vector<float> values;
};
Decoded decode(const HttpReply& r) {
  EXPECT_EQ(r.content_type, "application/octet-stream") << r.body.substr(0, 300);
  Decoded d;
  auto u32 = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, r.body.data() + at, 4);
    return v;
  };
  if (r.body.size() < 12 || r.body.compare(0, 4, "HST1") != 0 || u32(4) != 1) return d;
  const uint32_t rank = u32(8);
  size_t n = 1;
  for (uint32_t i = 0; i < rank; ++i) d.shape.push_back(u32(12 + 4 * i)), n *= d.shape.back();
  EXPECT_EQ(r.body.size(), 12 + 4 * rank + 4 * n);
  d.values.resize(n);
  std::memcpy(d.values.data(), r.body.data() + 12 + 4 * rank, 4 * n);
  return d;
}

std::string tile_body(int layer, int head, int q0, int q1, int k0, int k1) {
  return json{{"text", kText}, {"layer", layer}, {"head", head}, {"q0", q0}, {"q1", q1}, {"k0", k0}, {"k1", k1}}.dump();
}

TEST(ServerLongText, TileEqualsTheDenseMapsSlice) {
  ApiFixture f(minilm());
  const int T = static_cast<int>(minilm().encode(kText).size());
  const Decoded full = decode(f.api.attention(json{{"text", kText}, {"layer", 2}, {"head", 5}}.dump()));
  ASSERT_EQ(full.shape, (std::vector<int64_t>{1, 1, T, T}));
  const HttpReply r = f.api.tile(tile_body(2, 5, 3, 9, 1, T));
  ASSERT_EQ(r.status, 200) << r.body;
  const Decoded tile = decode(r);
  ASSERT_EQ(tile.shape, (std::vector<int64_t>{6, T - 1}));
  for (int q = 3; q < 9; ++q)
    for (int k = 1; k < T; ++k)
      EXPECT_EQ(tile.values[(q - 3) * (T - 1) + (k - 1)], full.values[q * T + k]) << q << "," << k;
  EXPECT_FALSE(body_of(f.api.run(json{{"text", kText}}.dump()))["streamed"].get<bool>());
}

// ---- the views of /api/attention: weights, norm-weighted, rollout ----

TEST(ServerViews, NormAndRolloutEqualThePipelineOnTheSameRun) {
  ApiFixture f(minilm());
  const ModelConfig& c = minilm().config();
  const json run = body_of(f.api.run(json{{"text", kText}}.dump()));
  for (const char* v : {"weights", "norm", "rollout"}) EXPECT_TRUE(run["views"][v].is_null()) << v;
  const auto record = f.cache.cached(kText, false);
  ASSERT_TRUE(record);
  const int T = record->T(), H = c.n_head;
  const Tensor nw = norm_weighted_attention(*record);  // [L, H, T, T]
  const Tensor ro = attention_rollout(*record);        // [L, T, T]

  // norm: each row of the pipeline's map divided by its sum, here in double.
  const Decoded norm = decode(f.api.attention(json{{"text", kText}, {"layer", 3}, {"view", "norm"}}.dump()));
  ASSERT_EQ(norm.shape, (std::vector<int64_t>{1, H, T, T}));
  for (int h = 0; h < H; ++h)
    for (int q = 0; q < T; ++q) {
      const float* row = nw.ptr() + ((int64_t{3} * H + h) * T + q) * T;
      double total = 0;
      for (int k = 0; k < T; ++k) total += row[k];
      for (int k = 0; k < T; ++k)
        EXPECT_NEAR(norm.values[(h * T + q) * T + k], row[k] / total, 1e-6) << h << "," << q << "," << k;
    }
  // ...and differs from the weights (the value norms are not all equal).
  const Decoded weights = decode(f.api.attention(json{{"text", kText}, {"layer", 3}}.dump()));
  double diff = 0;
  for (size_t i = 0; i < weights.values.size(); ++i)
    diff = std::max(diff, double(std::abs(weights.values[i] - norm.values[i])));
  EXPECT_GT(diff, 0.01);

  // rollout: one map per layer, the pipeline's slice as it is.
  const Decoded one = decode(f.api.attention(json{{"text", kText}, {"layer", 4}, {"view", "rollout"}}.dump()));
  ASSERT_EQ(one.shape, (std::vector<int64_t>{1, 1, T, T}));
  for (int i = 0; i < T * T; ++i) EXPECT_EQ(one.values[i], ro.ptr()[int64_t{4} * T * T + i]) << i;
  const Decoded all = decode(f.api.attention(json{{"text", kText}, {"view", "rollout"}}.dump()));
  ASSERT_EQ(all.shape, (std::vector<int64_t>{c.n_layer, 1, T, T}));
  EXPECT_EQ(all.values.back(), ro.ptr()[ro.numel() - 1]);

  // word level: the token map merged like the weights are, so every row still sums to 1.
  const Decoded words =
      decode(f.api.attention(json{{"text", kText}, {"layer", 3}, {"view", "norm"}, {"level", "word"}}.dump()));
  const int64_t U = record->words.n_units;
  ASSERT_EQ(words.shape, (std::vector<int64_t>{1, H, U, U}));
  for (int64_t r = 0; r < H * U; ++r) {
    double total = 0;
    for (int64_t k = 0; k < U; ++k) total += words.values[r * U + k];
    EXPECT_NEAR(total, 1.0, 1e-5) << r;
  }
}

TEST(ServerViews, BadViewsAreClear4xx) {
  ApiFixture f(minilm());
  const HttpReply bad = f.api.attention(json{{"text", kText}, {"view", "gradients"}}.dump());
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("weights, norm, rollout"), std::string::npos) << bad.body;
  EXPECT_EQ(f.api.attention(json{{"text", kText}, {"view", 3}}.dump()).status, 400);
  const HttpReply head = f.api.attention(json{{"text", kText}, {"layer", 1}, {"head", 2}, {"view", "rollout"}}.dump());
  EXPECT_EQ(head.status, 400);
  EXPECT_NE(head.body.find("one map per layer"), std::string::npos) << head.body;

  // A streamed run keeps no whole maps: both views refused, and /api/run says why beforehand.
  ApiFixture streamed(minilm(), {}, AnalyseOptions::Maps::kStream);
  const json run = body_of(streamed.api.run(json{{"text", kText}}.dump()));
  EXPECT_TRUE(run["views"]["weights"].is_null());
  for (const char* v : {"norm", "rollout"}) {
    ASSERT_TRUE(run["views"][v].is_string()) << v;
    EXPECT_NE(run["views"][v].get<std::string>().find("streamed"), std::string::npos);
    const HttpReply r = streamed.api.attention(json{{"text", kText}, {"layer", 1}, {"view", v}}.dump());
    EXPECT_EQ(r.status, 422) << v;
    EXPECT_EQ(error_code(r), "streamed");
    EXPECT_NE(r.body.find("memory budget"), std::string::npos) << r.body;
  }

  // Past the rollout budget (the explorer's default token limit is under it, so the rule is read directly).
  RunRecord longer;
  longer.encoding.tokens.resize(static_cast<size_t>(limits::kMaxRolloutTokens) + 1);
  const auto why = headscope::view_unavailable(longer, AttentionView::kRollout);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("limit of " + std::to_string(limits::kMaxRolloutTokens)), std::string::npos) << *why;
  EXPECT_FALSE(headscope::view_unavailable(longer, AttentionView::kNorm));
}

TEST(ServerLongText, StreamedRunAnswersTilesAndOverviewsAndRefusesFullMaps) {
  ApiFixture dense(minilm(), {}, AnalyseOptions::Maps::kDense);
  ApiFixture streamed(minilm(), {}, AnalyseOptions::Maps::kStream);
  const ModelConfig& c = minilm().config();
  const json run = body_of(streamed.api.run(json{{"text", kText}}.dump()));
  const int T = run["n_tokens"].get<int>();
  ASSERT_TRUE(run["streamed"].get<bool>());
  ASSERT_EQ(run["overview"]["cells"], T);  // shorter than the overview's resolution: one token a cell
  ASSERT_EQ(run["overview"]["starts"].size(), static_cast<size_t>(T + 1));
  EXPECT_EQ(run["overview"]["starts"][3], 3);
  EXPECT_EQ(run["overview"]["starts"][T], T);

  // The full maps are not kept: 422 pointing to the endpoints that answer; the server stays up.
  const HttpReply att = streamed.api.attention(json{{"text", kText}, {"layer", 1}}.dump());
  EXPECT_EQ(att.status, 422);
  EXPECT_EQ(error_code(att), "streamed");
  const std::string message = body_of(att)["error"]["message"].get<std::string>();
  EXPECT_NE(message.find("/api/overview"), std::string::npos);
  EXPECT_NE(message.find("/api/tile"), std::string::npos);
  EXPECT_EQ(streamed.api.decompose(json{{"text", kText}, {"layer", 1}, {"token", 2}}.dump()).status, 422);

  // Tiles recomputed from the kept queries and keys equal the dense map's weights.
  const Decoded full = decode(dense.api.attention(json{{"text", kText}, {"layer", 4}}.dump()));  // [1, H, T, T]
  const HttpReply r = streamed.api.tile(tile_body(4, 7, 0, T, 2, 7));
  ASSERT_EQ(r.status, 200) << r.body;
  const Decoded tile = decode(r);
  ASSERT_EQ(tile.shape, (std::vector<int64_t>{T, 5}));
  for (int q = 0; q < T; ++q)
    for (int k = 2; k < 7; ++k)
      EXPECT_NEAR(tile.values[q * 5 + (k - 2)], full.values[(7 * T + q) * T + k], 1e-6) << q << "," << k;
  // The norm-weighted view, refused whole on a streamed run, answers tile by tile: equal to the
  // dense run's norm-weighted maps (whole rows rescaled, not the tile's part of them).
  json norm_body = json::parse(tile_body(4, 7, 1, T, 2, 7));
  norm_body["view"] = "norm";
  const Decoded dense_norm =
      decode(dense.api.attention(json{{"text", kText}, {"layer", 4}, {"view", "norm"}}.dump()));  // [1, H, T, T]
  const Decoded norm_tile = decode(streamed.api.tile(norm_body.dump()));
  ASSERT_EQ(norm_tile.shape, (std::vector<int64_t>{T - 1, 5}));
  for (int q = 1; q < T; ++q)
    for (int k = 2; k < 7; ++k)
      EXPECT_NEAR(norm_tile.values[(q - 1) * 5 + (k - 2)], dense_norm.values[(7 * T + q) * T + k], 1e-6)
          << q << "," << k;
  norm_body["view"] = "rollout";  // no tile of rollout: it multiplies every layer's whole maps
  const HttpReply rollout = streamed.api.tile(norm_body.dump());
  EXPECT_EQ(rollout.status, 400);
  EXPECT_NE(rollout.body.find("norm"), std::string::npos) << rollout.body;

  // One token a cell: both pooled maps are the map itself, and `received` its column sums.
  const Decoded maps = decode(streamed.api.overview(json{{"text", kText}, {"layer", 4}}.dump()));
  ASSERT_EQ(maps.shape, (std::vector<int64_t>{c.n_head, 2, T, T}));
  const Decoded received =
      decode(streamed.api.overview(json{{"text", kText}, {"layer", 4}, {"head", 7}, {"part", "received"}}.dump()));
  ASSERT_EQ(received.shape, (std::vector<int64_t>{1, T}));
  const Decoded offsets =
      decode(streamed.api.overview(json{{"text", kText}, {"layer", 4}, {"head", 7}, {"part", "offsets"}}.dump()));
  ASSERT_EQ(offsets.shape, (std::vector<int64_t>{1, 2 * T - 1}));
  for (int h : {0, 7})
    for (int k = 0; k < T; ++k) {
      double column = 0;
      for (int q = 0; q < T; ++q) {
        const float a = full.values[(h * T + q) * T + k];
        column += a;
        EXPECT_NEAR(maps.values[((h * 2 + 0) * T + q) * T + k], a, 1e-6);
        EXPECT_NEAR(maps.values[((h * 2 + 1) * T + q) * T + k], a, 1e-6);
      }
      if (h == 7) {
        EXPECT_NEAR(received.values[k], column, 1e-5) << k;
      }
    }
  // Offset 0 (index T − 1): the mean weight of a token on itself.
  double self = 0;
  for (int q = 0; q < T; ++q) self += full.values[(7 * T + q) * T + q];
  EXPECT_NEAR(offsets.values[T - 1], self / T, 1e-6);
}

TEST(ServerLongText, BadTilesAreClear4xx) {
  ApiFixture f(minilm(), {}, AnalyseOptions::Maps::kStream);
  const int T = static_cast<int>(minilm().encode(kText).size());
  auto expect = [&](const std::string& body, int status, const std::string& code, const std::string& says) {
    const HttpReply r = f.api.tile(body);
    EXPECT_EQ(r.status, status) << body << " " << r.body;
    if (r.status < 400) return;
    EXPECT_EQ(error_code(r), code) << body;
    EXPECT_NE(body_of(r)["error"]["message"].get<std::string>().find(says), std::string::npos) << r.body;
  };
  expect(tile_body(0, 0, 0, T + 1, 0, 4), 400, "bad_range", "query rows 0.." + std::to_string(T + 1));  // outside
  expect(tile_body(0, 0, 0, 4, T, T + 3), 400, "bad_range", "keys");
  expect(tile_body(0, 0, 5, 3, 0, 4), 400, "bad_range", "non-empty");  // inverted
  expect(tile_body(0, 0, 2, 4, 3, 3), 400, "bad_range", "keys 3..3");  // empty
  expect(tile_body(0, 0, -1, 4, 0, 4), 400, "bad_range", "inside the text");
  expect(tile_body(6, 0, 0, 4, 0, 4), 400, "unknown_layer", "6 layers");
  expect(tile_body(0, 12, 0, 4, 0, 4), 400, "unknown_head", "12 heads");
  // Over the budget: refused before any forward pass, whatever the text's length.
  expect(tile_body(0, 0, 0, 2048, 0, 1024), 413, "tile_too_large", std::to_string(limits::kMaxTileCells));
  EXPECT_EQ(f.cache.runs_computed(), 1);  // the range checks needed the run; the size check did not
  expect(json{{"text", kText}, {"layer", 0}, {"head", 0}, {"q0", 0}, {"q1", 2}, {"k0", 0}}.dump(), 400, "missing_field",
         "k1");
  expect(json{{"text", kText}, {"layer", 0}, {"head", 0}, {"q0", 0}, {"q1", 2}, {"k0", 0}, {"k1", 2}, {"level", "word"}}
             .dump(),
         400, "unknown_field", "level");
  EXPECT_EQ(f.api.overview(json{{"text", kText}, {"layer", 9}}.dump()).status, 400);
  EXPECT_EQ(f.api.overview(json{{"text", kText}, {"layer", 0}, {"part", "rows"}}.dump()).status, 400);
  EXPECT_EQ(f.api.tile(tile_body(0, 0, 0, 2, 0, 2)).status, 200);  // and the server still answers
}

// Greedy generation on SmolLM2 stops inside a multi-byte character for some prompts: the reply
// used to be 422 "not valid UTF-8". Two new tokens after this prompt end inside the second
// character; three complete it (greedy, so the two-token reply is a prefix of the three-token one).
TEST(ServerApi, GenerateHoldsBackAnIncompleteCharacter) {
  const std::string path =
      std::string(HEADSCOPE_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
  const auto model = Model::load(path);
  ApiFixture f(*model);
  const HttpReply two = f.api.generate(R"({"text": "日本の首都は", "max_new_tokens": 2})");
  ASSERT_EQ(two.status, 200) << two.body;
  const HttpReply three = f.api.generate(R"({"text": "日本の首都は", "max_new_tokens": 3})");
  ASSERT_EQ(three.status, 200) << three.body;
  const json a = body_of(two), b = body_of(three);
  const std::string full = model->tokenizer().decode(a["ids"].get<std::vector<int32_t>>());
  const std::string prompt = model->tokenizer().decode(model->encode("日本の首都は").ids());
  ASSERT_EQ(full.compare(0, prompt.size(), prompt), 0);
  const std::string raw = full.substr(prompt.size());  // the decoded bytes, incomplete tail included
  ASSERT_FALSE(is_valid_utf8(raw)) << "the prompt no longer stops inside a character";
  const std::string continuation = a["continuation"].get<std::string>();
  EXPECT_TRUE(is_valid_utf8(continuation));
  EXPECT_EQ(a["held_back_bytes"].get<size_t>(), raw.size() - continuation.size());
  EXPECT_EQ(raw.compare(0, continuation.size(), continuation), 0);
  EXPECT_EQ(b["continuation"].get<std::string>().rfind(continuation, 0), 0u);
  EXPECT_EQ(b["held_back_bytes"], 0);
  EXPECT_EQ(a["text"].get<std::string>(), "日本の首都は" + continuation);
  EXPECT_FALSE(a["retokenizes_same"].get<bool>());
}

// Roles in /api/run carry the probe's evidence when the cache has it (as in `headscope serve` and
// `headscope run`): only then is any head scored for induction.
TEST(ServerApi, RunRolesUseTheProbeEvidence) {
  auto scored_roles = [](const json& run) {
    std::set<std::string> ids;
    for (const json& head : run["heads"])
      for (const json& score : head["roles"]["scores"]) ids.insert(score["id"].get<std::string>());
    return ids;
  };
  ApiFixture plain(minilm());
  EXPECT_EQ(scored_roles(body_of(plain.api.run(kSentence))).count("induction"), 0u);
  RunCache cache(minilm(), 4, size_t{1} << 30, 512, probe(minilm()));
  Api with_probe(minilm(), cache);
  const std::set<std::string> ids = scored_roles(body_of(with_probe.run(kSentence)));
  EXPECT_EQ(ids.count("induction"), 1u);
  EXPECT_EQ(ids.count("duplicate_token"), 1u);
}

// The text is encoded once per request; the limit check and truncation still answer as before.
TEST(ServerApi, TokenLimitCountsTheTextAndTruncates) {
  ApiLimits limits;
  limits.max_tokens = 5;
  ApiFixture f(minilm(), limits);
  const HttpReply over = f.api.run(kSentence);
  EXPECT_EQ(over.status, 413);
  EXPECT_EQ(error_code(over), "text_too_long");
  const size_t n = minilm().encode("The animal didn't cross the street because it was too tired.").size();
  EXPECT_NE(body_of(over)["error"]["message"].get<std::string>().find("text is " + std::to_string(n) + " tokens"),
            std::string::npos);
  RunCache small(minilm(), 4, size_t{1} << 30, 5);
  Api api(minilm(), small, limits);
  const HttpReply cut =
      api.run(R"({"text": "The animal didn't cross the street because it was too tired.", "truncate": true})");
  ASSERT_EQ(cut.status, 200) << cut.body;
  EXPECT_EQ(body_of(cut)["n_tokens"], 5);
  EXPECT_TRUE(body_of(cut)["truncated"].get<bool>());
  EXPECT_EQ(body_of(cut)["tokens"][4]["text"], "[SEP]");  // truncation keeps the template's end
}

// decompose() on the pipeline: W_O applied by hand here to one head's output gives that head's
// captured contribution, and the pieces add up to the captured attention output.
TEST(Pipeline, DecomposeMatchesAHandMadeProjection) {
  const Model& m = minilm();
  const ModelConfig& c = m.config();
  const Capture cap = m.run(m.encode("Heads add up."));
  const int layer = 4, token = 2, head = 7;
  const Decomposition d = decompose(m, cap, layer, token);
  const Tensor W = m.output_projection(layer);  // [d_model, n_head * d_head]
  for (int o = 0; o < c.d_model; o += 37) {
    double s = 0;
    for (int k = 0; k < c.d_head; ++k)
      s += double(W.ptr()[int64_t(o) * c.n_head * c.d_head + head * c.d_head + k]) *
           d.concat[size_t(head * c.d_head + k)];
    EXPECT_NEAR(d.contributions[size_t(head * c.d_model + o)], s, 1e-4) << o;
  }
  EXPECT_LT(d.sum_max_abs_error, 1e-4);
  EXPECT_LT(d.projection_max_abs_error, 1e-4);
  EXPECT_THROW(decompose(m, cap, c.n_layer, 0), Error);
  EXPECT_THROW(decompose(m, cap, 0, cap.T), Error);
}

// generate() with capture: the rows gathered step by step through the KV cache equal one forward
// pass over prompt + continuation (a causal model's row t does not depend on later tokens).
// A generation that captures attention keeps every step's rows in one [L, H, T_max, T_max] block;
// with a long continuation that block alone was allocated (and zero-filled) before any check. It
// is now refused first, naming the final length, while the prompt itself fits.
TEST(Pipeline, GenerationOverTheMemoryBudgetIsRefusedBeforeAllocating) {
  const std::string path =
      std::string(HEADSCOPE_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
  LoadOptions load;
  load.run_memory_budget = uint64_t{256} << 20;
  const auto model = Model::load(path, load);
  const Encoding prompt = model->encode("The capital of France is");
  ASSERT_LE(model->run_bytes(static_cast<int64_t>(prompt.size()), CaptureOptions::attention_only()),
            load.run_memory_budget);
  GenerateOptions options;
  options.max_new_tokens = 4000;
  options.capture_attention = true;
  try {
    (void)generate(*model, prompt, options);
    FAIL() << "a 4,000-token capture fitted in 256 MiB";
  } catch (const ResourceError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("a run over " + std::to_string(prompt.size() + 4000) + " tokens"), std::string::npos) << what;
  }
}

TEST(Pipeline, GeneratedAttentionEqualsOneForwardPass) {
  const std::string path =
      std::string(HEADSCOPE_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
  const auto model = Model::load(path);
  GenerateOptions options;
  options.max_new_tokens = 3;
  options.capture_attention = true;
  int calls = 0;
  options.on_token = [&](const GeneratedToken& t, const std::vector<int32_t>& ids) {
    ++calls;
    EXPECT_EQ(ids.back(), t.id);
  };
  const Generation g = generate(*model, model->encode("The capital of France is"), options);
  ASSERT_EQ(g.generated.size(), 3u);
  EXPECT_EQ(calls, 3);
  Encoding all;
  for (int32_t id : g.ids) all.tokens.push_back({id, model->tokenizer().token_text(id), 0, 0, false, -1});
  const Capture full = model->run(all, CaptureOptions::attention_only());
  ASSERT_EQ(g.attention.shape, full.attention.shape);
  double worst = 0;
  for (int64_t i = 0; i < full.attention.numel(); ++i)
    worst = std::max(worst, double(std::abs(g.attention.data[size_t(i)] - full.attention.data[size_t(i)])));
  EXPECT_LT(worst, 2e-4);
  EXPECT_THROW(generate(minilm(), minilm().encode("x"), options), Error);  // an encoder
}

}  // namespace
}  // namespace headscope::server
