// headscope server — the HTTP API as plain functions: request body in, status + body out.
//
// Each handler parses the request into a native struct first (TextRequest, AttentionRequest,
// DecomposeRequest), calls the core through RunCache and the pipeline, and replies with the
// result's one JSON writer (headscope/json.h) or the binary tensor format (wire.h). http.cc binds
// these handlers to routes of the Beast transport; keeping them free of HTTP types makes the contract
// (docs/api.md) readable in one file.
#pragma once
#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "headscope/circuits.h"
#include "headscope/limits.h"
#include "headscope/model.h"
#include "headscope/pipeline.h"
#include "server/compute_queue.h"
#include "server/run_cache.h"
#include "server/wire.h"

namespace headscope::server {

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (Retry-After of a 503)
};

struct ApiLimits {
  size_t max_text_bytes = limits::kMaxTextBytes;  // longer text: 413
  int max_tokens = 512;                           // longer encoding: 413 unless truncated (<= the model's limit)
  int max_new_tokens = limits::kMaxNewTokens;     // /api/generate: more is a 400 (each step is a forward pass)
  // Heavy requests working at once, waiting for a slot, and how long one may wait (then 503).
  int compute_slots = limits::kComputeSlots;
  int max_compute_waiters = limits::kMaxComputeWaiters;
  std::chrono::milliseconds max_compute_wait{limits::kMaxComputeWaitSeconds * 1000};
};

// What every endpoint that analyses a text takes.
struct TextRequest {
  std::string text;
  bool truncate = false;  // keep the first max_positions tokens instead of refusing
  Level level = Level::kToken;
  bool hide_special = false;  // statistics and roles without the special tokens (run only)
  Encoding encoding;          // the text encoded once, under the server's token limit
};
// Which quantity /api/attention sends (docs/explorer.md "Views"; headscope/pipeline.h).
using headscope::AttentionView;
using headscope::OverviewPart;

struct AttentionRequest {
  TextRequest text;
  AttentionView view = AttentionView::kWeights;
  std::optional<int> layer;  // absent: every layer
  std::optional<int> head;   // absent: every head
  WireDtype dtype = WireDtype::kFloat32;
};
// One head's exact weights over query rows q0 .. q1 − 1 and keys k0 .. k1 − 1 (token level).
struct TileRequest {
  TextRequest text;
  int layer = 0, head = 0;
  int q0 = 0, q1 = 0, k0 = 0, k1 = 0;
  WireDtype dtype = WireDtype::kFloat32;
  bool norm_weighted = false;  // "view": "norm", the norm-weighted shares (attention_tile)
};
// The pooled overview of one layer (every head, or one), or its per-key / per-offset profile.
struct OverviewRequest {
  TextRequest text;
  int layer = 0;
  std::optional<int> head;  // absent: every head of the layer
  OverviewPart part = OverviewPart::kMaps;
};
struct DecomposeRequest {
  TextRequest text;
  int layer = 0;
  int token = 0;  // token index (W_O acts on token positions, so always token level)
};

// POST /api/ablate: the heads (0-based) replaced in this text's forward pass, and how.
struct AblateRequest {
  TextRequest text;
  std::vector<HeadRef> heads;
  Ablation::Mode mode = Ablation::Mode::kZero;
};

// POST /api/composition: the options of the composition scores (circuits.h) and how many of the
// highest pairs of each kind the reply lists.
struct CompositionRequest {
  CompositionOptions options;
  int top = 10;
};

// The reference corpus of mean and resample ablation on one text: a few plain English sentences
// shipped with the server (the head means and the donor text come from these, never from the
// text itself). Resample draws its donor with seed 0, so a request always gives the same answer.
const std::vector<std::string>& ablation_reference_sentences();

class Api {
 public:
  Api(const Model& model, RunCache& cache, ApiLimits limits = {});

  HttpReply model_info() const;                 // GET  /api/model
  HttpReply health() const;                     // GET  /api/health
  HttpReply run(std::string_view body);         // POST /api/run
  HttpReply attention(std::string_view body);   // POST /api/attention (dense runs; streamed: 422)
  HttpReply tile(std::string_view body);        // POST /api/tile
  HttpReply overview(std::string_view body);    // POST /api/overview
  HttpReply decompose(std::string_view body);   // POST /api/decompose
  HttpReply generate(std::string_view body);    // POST /api/generate (causal models only)
  HttpReply link(std::string_view body);        // POST /api/link: which heads link token q → token k
  HttpReply ablate(std::string_view body);      // POST /api/ablate: the effect of removing a set of heads
  HttpReply importance(std::string_view body);  // POST /api/importance: every head's zero-ablation effect
  HttpReply patch(std::string_view body);       // POST /api/patch: activation or path patching over prompt pairs
  HttpReply logit_lens(
      std::string_view body);  // POST /api/logit_lens: every layer read as the model's logits (decoders)
  HttpReply head_lens(std::string_view body);    // POST /api/head_lens: one head's output read as logits (decoders)
  HttpReply tokenize(std::string_view body);     // POST /api/tokenize: a text's tokens (no model run)
  HttpReply saliency(std::string_view body);     // POST /api/saliency: which tokens move a metric (docs/gradients.md)
  HttpReply composition(std::string_view body);  // POST /api/composition: Q-, K-, V-composition from the weights
  HttpReply head_map(std::string_view body);     // POST /api/head_map: every head placed by how alike its attention is

  // Where the head map's corpus and cache are (pipeline.h, cached_head_map): the model's folder and
  // the evidence options. Without it the head map is measured on the server's reference sentences.
  void set_head_map_source(std::string model_path, EvidenceOptions options) {
    head_map_path_ = std::move(model_path);
    head_map_options_ = std::move(options);
  }

  // What the corpus evidence joined into the roles is (CorpusEvidence::source ...), for /api/model.
  void set_corpus_info(std::string source, bool syntax, bool coreference) {
    corpus_source_ = std::move(source);
    corpus_syntax_ = syntax;
    corpus_coreference_ = coreference;
  }

  // {"error": {"status", "code", "message"}} with that status. Never throws: text that is not
  // UTF-8 (a decoded URL, a header) is written with U+FFFD in place of the bad bytes.
  static HttpReply error(int status, std::string_view code, std::string_view message) noexcept;

  // The admission of heavy requests (run, attention, decompose, generate), for the tests.
  ComputeQueue& compute_queue() { return queue_; }

 private:
  // Wraps a handler: request errors become their 4xx reply, model errors 422, requests over a
  // budget 413, a full compute queue 503; nothing escapes (anything else is a 500).
  template <typename Handler>
  HttpReply guarded(std::string_view body, Handler&& handler);
  // A compute slot for a heavy request; throws (→ 503 with Retry-After) when the queue is full.
  std::optional<ComputeQueue::Ticket> admit();

  // The rollout of the latest run asked for (n_layer · T³ to compute; a layer grid asks once per layer).
  std::shared_ptr<const Tensor> rollout_of(const std::shared_ptr<const RunRecord>& run);

  const Model& model_;
  RunCache& cache_;
  std::mutex rollout_mutex_;
  std::weak_ptr<const RunRecord> rollout_run_;
  std::shared_ptr<const Tensor> rollout_;
  ApiLimits limits_;
  ComputeQueue queue_;
  std::string corpus_source_ = "none: roles come from the text and the probe";
  bool corpus_syntax_ = false, corpus_coreference_ = false;
  // The last kImportanceCacheTexts importance replies, by text and truncate, newest first.
  std::optional<std::string> cached_importance(const std::string& key);  // and marks it newest
  void remember_importance(const std::string& key, std::string reply);
  std::mutex importance_mutex_;
  std::list<std::pair<std::string, std::string>> importance_cache_;
  // The scores of the last kCompositionCacheSets option sets, newest first: a pure function of the
  // weights, so each set is computed once. One set is computed at a time (composition_compute_mutex_),
  // so that a second request for the same set waits for the first instead of computing it again;
  // `computed` says whether this call computed it.
  std::shared_ptr<const CompositionScores> cached_composition(const CompositionOptions& options);
  std::shared_ptr<const CompositionScores> composition_of(const CompositionOptions& options, bool& computed);
  std::mutex composition_mutex_, composition_compute_mutex_;
  std::list<std::shared_ptr<const CompositionScores>> composition_cache_;
  // The head map, measured (or read from its cache) on the first request and kept.
  std::string head_map_path_;
  std::optional<EvidenceOptions> head_map_options_;
  std::mutex head_map_mutex_;
  std::shared_ptr<const std::string> head_map_reply_;
};

}  // namespace headscope::server
