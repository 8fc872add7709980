// headscope — the logit lens of one text as the frontends ask for it (pipeline.h, docs/circuits.md):
// one run keeping the residual stream, every layer read at one position through the final norm
// and the unembedding (circuits/logit_lens.cc), its top tokens and the followed tokens' ranks.
// text_logit_lens gives numbers (Python); logit_lens_text adds the tokens' text (the server).
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "headscope/error.h"
#include "headscope/json.h"
#include "headscope/limits.h"
#include "headscope/pipeline.h"

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

LogitLensResult logit_lens_text(const Model& model, std::string text, Encoding encoding, const LensRequest& request) {
  if (request.top_k < 1 || request.top_k > limits::kMaxLensTopK)
    throw Error("logit lens: top_k must be between 1 and " + std::to_string(limits::kMaxLensTopK));
  if (request.tokens.size() > static_cast<size_t>(limits::kMaxLensTokens))
    throw Error("logit lens: at most " + std::to_string(limits::kMaxLensTokens) + " tokens can be followed");
  TextLensOptions o;
  o.position = request.position;
  o.top_k = request.top_k;
  if (model.config().causal)
    for (const std::string& t : request.tokens) o.tokens.push_back(lens_token_id(model, t));
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

}  // namespace headscope
