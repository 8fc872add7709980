// headscope — the logit lens of one text as the frontends ask for it (pipeline.h): one run, then
// the top tokens and the tracked ones of every layer at one position.
#include <string>
#include <utility>

#include "headscope/error.h"
#include "headscope/pipeline.h"

namespace headscope {

TextLens text_logit_lens(const Model& model, const Encoding& encoding, const TextLensOptions& options) {
  const ModelConfig& c = model.config();
  if (!c.causal)
    throw Error(c.name +
                " is an encoder: the logit lens reads the residual stream as next-token logits, which needs a "
                "decoder (Llama, GPT-2, Gemma, ...)");
  const int64_t T = static_cast<int64_t>(encoding.size());
  if (options.position < -T || options.position >= T)
    throw Error("logit lens: position " + std::to_string(options.position) + " is outside the text's " +
                std::to_string(T) + " tokens (0.." + std::to_string(T - 1) + ", or -1 for the last)");
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

}  // namespace headscope
