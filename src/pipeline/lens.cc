// headscope — the logit lens of one text as the frontends ask for it (pipeline.h, docs/circuits.md):
// one run keeping the residual stream, every layer read at one position through the final norm
// and the unembedding (circuits/logit_lens.cc), its top tokens and the followed tokens' ranks.
// text_logit_lens gives numbers (Python); logit_lens_text adds the tokens' text (the server).
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <utility>

#include "headscope/error.h"
#include "headscope/json.h"
#include "headscope/limits.h"
#include "headscope/pipeline.h"

#include "analysis/attribution.h"

namespace headscope {

TextLens text_logit_lens(const Model& model, const Encoding& encoding, const TextLensOptions& options) {
  const ModelConfig& c = model.config();
  if (!c.causal)
    throw Error(c.name +
                " is an encoder: the logit lens reads the residual stream as next-token logits, and an encoder "
                "predicts no next token: the logit lens needs a decoder (Llama, GPT-2, Gemma, ...)");
  const int64_t T = static_cast<int64_t>(encoding.size());
  if (options.position < -T || options.position >= T)
    throw Error("logit lens: position " + std::to_string(options.position) + " is outside the text's " +
                std::to_string(T) + " tokens (0 to " + std::to_string(T - 1) + ", or -1 for the last)");
  if (options.top_k < 1) throw Error("logit lens: top_k must be at least 1, got " + std::to_string(options.top_k));
  for (const int32_t id : options.tokens)
    if (id < 0 || id >= c.vocab_size)
      throw Error("logit lens: token id " + std::to_string(id) + " is outside the vocabulary of " + c.name + " (0.." +
                  std::to_string(c.vocab_size - 1) + ")");
  TextLens out;
  out.encoding = encoding;
  out.position = options.position < 0 ? T + options.position : options.position;
  CaptureOptions capture;
  capture.attention = capture.head_outputs = capture.contributions = false;
  capture.hidden_states = true;
  const Capture cap = model.run(encoding, capture);
  Tensor logits = logit_lens(cap, model.final_readout(), static_cast<int>(out.position));
  out.n_rows = static_cast<int>(logits.dim(0));
  out.vocab = logits.dim(1);
  for (int row = 0; row < out.n_rows; ++row) {
    const float* r = logits.ptr() + row * out.vocab;
    out.top.push_back(lens_top(r, out.vocab, options.top_k));
    std::vector<LensToken> tracked;
    for (const int32_t id : options.tokens) tracked.push_back(lens_token(r, out.vocab, id));
    out.tokens.push_back(std::move(tracked));
  }
  if (options.keep_logits) out.logits = std::move(logits);
  return out;
}

int32_t lens_token_id(const Model& model, const std::string& text) {
  EncodeOptions plain;
  plain.add_special_tokens = false;
  const Encoding e = model.tokenizer().encode(text, plain);
  if (e.size() != 1)
    throw Error("logit lens: \"" + text + "\" is " + std::to_string(e.size()) + " tokens for " + model.config().name +
                "; name one token (write it as it follows the text, usually with its leading space), or give its id");
  return e.tokens[0].id;
}

namespace {
LensEntry entry(const Model& model, const LensToken& token) { return {token, model.tokenizer().decode({token.id})}; }
}  // namespace

namespace {
// A frontend's top_k and followed tokens (written as text), checked against the server's limits and
// turned into ids (an encoder's are left for the lens to refuse in its own words).
std::vector<int32_t> followed_ids(const Model& model, int top_k, const std::vector<std::string>& tokens,
                                  const std::string& what) {
  if (top_k < 1 || top_k > limits::kMaxLensTopK)
    throw Error(what + ": top_k must be between 1 and " + std::to_string(limits::kMaxLensTopK));
  if (tokens.size() > static_cast<size_t>(limits::kMaxLensTokens))
    throw Error(what + ": at most " + std::to_string(limits::kMaxLensTokens) + " tokens can be followed");
  std::vector<int32_t> ids;
  if (model.config().causal)
    for (const std::string& t : tokens) ids.push_back(lens_token_id(model, t));
  return ids;
}
}  // namespace

LogitLensResult logit_lens_text(const Model& model, std::string text, Encoding encoding, const LensRequest& request) {
  TextLensOptions o;
  o.position = request.position;
  o.top_k = request.top_k;
  o.tokens = followed_ids(model, request.top_k, request.tokens, "logit lens");
  o.keep_logits = o.tokens.empty();  // the prediction is followed: found in the last row first
  const TextLens lens = text_logit_lens(model, encoding, o);
  LogitLensResult r;
  r.model = model.config();
  r.position = static_cast<int>(lens.position);
  r.top_k = request.top_k;
  r.followed_prediction = o.tokens.empty();
  for (int l = 0; l < lens.n_rows; ++l) {
    LensLayer layer;
    layer.layer = l;
    for (const LensToken& t : lens.top[size_t(l)]) layer.top.push_back(entry(model, t));
    if (r.followed_prediction) {
      const int32_t predicted = lens.top.back().front().id;
      layer.followed.push_back(
          entry(model, lens_token(lens.logits.ptr() + int64_t{l} * lens.vocab, lens.vocab, predicted)));
    } else {
      for (const LensToken& t : lens.tokens[size_t(l)]) layer.followed.push_back(entry(model, t));
    }
    r.layers.push_back(std::move(layer));
  }
  r.text = std::move(text);
  r.encoding = std::move(encoding);
  return r;
}

// ---- one head's logit lens ----

namespace {

HeadLensToken head_token(const std::vector<double>& logits, int32_t id, double model_logit) {
  const double v = logits[size_t(id)];
  int64_t above = 0;
  for (const double x : logits) above += x > v;
  return {id, v, above, model_logit};
}

// The top_k ids of `logits`, largest first (sign +1) or most negative first (sign −1); ties by id.
std::vector<int32_t> extreme_ids(const std::vector<double>& logits, int top_k, double sign) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const auto n = static_cast<std::ptrdiff_t>(std::min<size_t>(size_t(top_k), ids.size()));
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
    const double x = sign * logits[size_t(a)], y = sign * logits[size_t(b)];
    return x > y || (x == y && a < b);
  });
  ids.resize(size_t(n));
  return ids;
}

}  // namespace

HeadLens text_head_lens(const Model& model, const Encoding& encoding, const HeadLensOptions& options) {
  const ModelConfig& c = model.config();
  const LogitReadout readout = model.final_readout();  // throws for an encoder
  const int64_t T = static_cast<int64_t>(encoding.size());
  if (T == 0) throw Error("head logit lens: the text produced no tokens");
  if (options.layer < 0 || options.layer >= c.n_layer || options.head < 0 || options.head >= c.n_head)
    throw Error("head logit lens: " + c.name + " has no head " + std::to_string(options.layer) + "." +
                std::to_string(options.head) + " (layers 0.." + std::to_string(c.n_layer - 1) + ", heads 0.." +
                std::to_string(c.n_head - 1) + ")");
  if (options.position < -T || options.position >= T)
    throw Error("head logit lens: position " + std::to_string(options.position) + " is outside the text's " +
                std::to_string(T) + " tokens (0 to " + std::to_string(T - 1) + ", or -1 for the last)");
  if (options.top_k < 1) throw Error("head logit lens: top_k must be at least 1, got " + std::to_string(options.top_k));
  for (const int32_t id : options.tokens)
    if (id < 0 || id >= c.vocab_size)
      throw Error("head logit lens: token id " + std::to_string(id) + " is outside the vocabulary of " + c.name +
                  " (0.." + std::to_string(c.vocab_size - 1) + ")");
  CaptureOptions capture = CaptureOptions::attention_only();
  capture.attention = false;  // the head's contribution and the scales of the norms only
  capture.contributions = capture.hidden_states = capture.mlp_outputs = true;
  const Capture cap = model.run(encoding, capture);
  HeadLens out;
  out.encoding = encoding;
  out.position = options.position < 0 ? T + options.position : options.position;
  out.layer = options.layer;
  out.head = options.head;
  out.kv_head = options.head / (c.n_head / c.n_kv_head);
  std::vector<double> logits =
      analysis::head_logits(cap, readout, options.layer, options.head, static_cast<int>(out.position));
  out.vocab = static_cast<int64_t>(logits.size());
  // The model's own logits at the position, before a soft-cap: its final normalised stream · U.
  const int64_t D = c.d_model;
  const float* final_stream = cap.hidden_states.ptr() + (int64_t(c.n_layer) * T + out.position) * D;
  const auto model_logit = [&](int32_t id) {
    double s = 0;
    for (int64_t i = 0; i < D; ++i) s += double(final_stream[i]) * readout.unembedding->ptr()[int64_t(id) * D + i];
    return s;
  };
  for (const int32_t id : extreme_ids(logits, options.top_k, 1.0))
    out.promoted.push_back(head_token(logits, id, model_logit(id)));
  for (const int32_t id : extreme_ids(logits, options.top_k, -1.0))
    out.suppressed.push_back(head_token(logits, id, model_logit(id)));
  std::vector<int32_t> followed = options.tokens;
  if (followed.empty()) {  // the model's prediction: its largest logit at the position
    out.followed_prediction = true;
    int32_t best = 0;
    double best_logit = -INFINITY;
    for (int64_t v = 0; v < out.vocab; ++v) {
      const double l = model_logit(int32_t(v));
      if (l > best_logit) best_logit = l, best = int32_t(v);
    }
    followed.push_back(best);
  }
  for (const int32_t id : followed) out.tokens.push_back(head_token(logits, id, model_logit(id)));
  if (options.keep_logits) out.logits = std::move(logits);
  return out;
}

HeadLensResult head_lens_text(const Model& model, std::string text, Encoding encoding, const HeadLensRequest& request) {
  HeadLensOptions o;
  o.layer = request.layer;
  o.head = request.head;
  o.position = request.position;
  o.top_k = request.top_k;
  o.tokens = followed_ids(model, request.top_k, request.tokens, "head logit lens");
  const HeadLens lens = text_head_lens(model, encoding, o);
  HeadLensResult r;
  r.model = model.config();
  r.position = static_cast<int>(lens.position);
  r.layer = lens.layer;
  r.head = lens.head;
  r.kv_head = lens.kv_head;
  r.top_k = request.top_k;
  r.followed_prediction = lens.followed_prediction;
  const auto entries = [&](const std::vector<HeadLensToken>& tokens) {
    std::vector<HeadLensEntry> e;
    for (const HeadLensToken& t : tokens) e.push_back({t, model.tokenizer().decode({t.id})});
    return e;
  };
  r.promoted = entries(lens.promoted);
  r.suppressed = entries(lens.suppressed);
  r.followed = entries(lens.tokens);
  r.text = std::move(text);
  r.encoding = std::move(encoding);
  return r;
}

void to_json(nlohmann::json& j, const LensEntry& e) {
  j = {{"id", e.token.id},
       {"text", e.text},
       {"logit", json_number(e.token.logit)},
       {"probability", json_number(e.token.probability)},
       {"rank", e.token.rank}};
}

void to_json(nlohmann::json& j, const LogitLensResult& r) {
  nlohmann::json layers = nlohmann::json::array();
  for (const LensLayer& l : r.layers) layers.push_back({{"layer", l.layer}, {"top", l.top}, {"followed", l.followed}});
  const Token& at = r.encoding.tokens.at(static_cast<size_t>(r.position));
  j = {{"schema", "headscope.lens/1"},
       {"model", r.model},
       {"tokens", tokens_json(r.text, r.encoding)},
       {"position", r.position},
       {"token", {{"id", at.id}, {"text", at.text}, {"display", token_display(r.text, at)}}},
       {"top_k", r.top_k},
       {"followed_prediction", r.followed_prediction},
       {"layers", std::move(layers)}};
}

void to_json(nlohmann::json& j, const HeadLensEntry& e) {
  j = {{"id", e.token.id},
       {"text", e.text},
       {"logit", json_number(e.token.logit)},
       {"rank", e.token.rank},
       {"model_logit", json_number(e.token.model_logit)}};
}

void to_json(nlohmann::json& j, const HeadLensResult& r) {
  const Token& at = r.encoding.tokens.at(static_cast<size_t>(r.position));
  j = {{"schema", "headscope.head_lens/1"},
       {"model", r.model},
       {"tokens", tokens_json(r.text, r.encoding)},
       {"position", r.position},
       {"token", {{"id", at.id}, {"text", at.text}, {"display", token_display(r.text, at)}}},
       {"layer", r.layer},
       {"head", r.head},
       {"kv_head", r.kv_head},
       {"top_k", r.top_k},
       {"followed_prediction", r.followed_prediction},
       {"readout",
        "the head's output through W_O, its layer's output norm (if any) and the final norm, each divided by the "
        "scale the model divided by at this position, then the unembedding; before any final soft-cap"},
       {"promoted", r.promoted},
       {"suppressed", r.suppressed},
       {"followed", r.followed}};
}

}  // namespace headscope
