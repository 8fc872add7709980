// headscope — the logit lens of one text as the frontends ask for it (pipeline.h, docs/circuits.md):
// one run keeping the residual stream, every layer read at one position through the final norm
// and the unembedding (circuits/logit_lens.cc), its top tokens and the followed tokens' ranks.
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "headscope/error.h"
#include "headscope/json.h"
#include "headscope/limits.h"
#include "headscope/pipeline.h"

namespace headscope {
namespace {

// The id of `text` when it is exactly one token on its own (no special tokens added).
int32_t one_token(const Model& model, const std::string& text) {
  EncodeOptions plain;
  plain.add_special_tokens = false;
  const Encoding e = model.tokenizer().encode(text, plain);
  if (e.size() != 1)
    throw Error("logit lens: \"" + text + "\" is " + std::to_string(e.size()) +
                " tokens for this model; name one token as it would follow the text, usually with its leading "
                "space (\" Paris\")");
  return e.tokens[0].id;
}

LensEntry entry(const Model& model, const LensToken& token) { return {token, model.tokenizer().decode({token.id})}; }

}  // namespace

LogitLensResult logit_lens_text(const Model& model, std::string text, Encoding encoding, const LensRequest& request) {
  const ModelConfig& c = model.config();
  if (!c.causal)
    throw Error(c.name + " is an encoder (" + c.architecture +
                "): it predicts no next token, so it has no logits to read the layers through; the logit lens "
                "needs a decoder");
  const int T = static_cast<int>(encoding.size());
  if (T == 0) throw Error("logit lens: the text has no tokens");
  const int position = request.position < 0 ? T - 1 : request.position;
  if (position >= T)
    throw Error("logit lens: position " + std::to_string(position) + " is not one of the text's " + std::to_string(T) +
                " tokens (0 to " + std::to_string(T - 1) + ")");
  if (request.top_k < 1 || request.top_k > limits::kMaxLensTopK)
    throw Error("logit lens: top_k must be between 1 and " + std::to_string(limits::kMaxLensTopK));
  if (request.tokens.size() > static_cast<size_t>(limits::kMaxLensTokens))
    throw Error("logit lens: at most " + std::to_string(limits::kMaxLensTokens) + " tokens can be followed");
  std::vector<int32_t> ids;
  for (const std::string& t : request.tokens) ids.push_back(one_token(model, t));

  CaptureOptions o;
  o.attention = o.head_outputs = o.contributions = false;
  o.hidden_states = true;
  const Capture cap = model.run(encoding, o);
  const Tensor lens = logit_lens(cap, model.final_readout(), position);  // [n_layer + 1, vocab]
  const int64_t vocab = lens.dim(1);

  LogitLensResult r;
  r.model = c;
  r.position = position;
  r.top_k = request.top_k;
  r.followed_prediction = ids.empty();
  if (ids.empty()) ids.push_back(lens_top(lens.ptr() + int64_t{c.n_layer} * vocab, vocab, 1).front().id);
  for (int l = 0; l <= c.n_layer; ++l) {
    const float* row = lens.ptr() + int64_t{l} * vocab;
    LensLayer layer;
    layer.layer = l;
    for (const LensToken& t : lens_top(row, vocab, request.top_k)) layer.top.push_back(entry(model, t));
    for (int32_t id : ids) layer.followed.push_back(entry(model, lens_token(row, vocab, id)));
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
