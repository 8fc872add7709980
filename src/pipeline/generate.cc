// headscope pipeline — generate() and encode_chat() (see headscope/pipeline.h).
#include <algorithm>

#include "headscope/error.h"
#include "headscope/pipeline.h"
#include "tokenizer/chat_template.h"

namespace headscope {

Generation generate(const Model& model, const Encoding& prompt, const GenerateOptions& options) {
  const ModelConfig& c = model.config();
  if (!c.causal)
    throw Error(c.name + " is an encoder (" + c.architecture +
                "); generation needs a causal model such as Llama or GPT-2");
  if (prompt.size() == 0) throw Error("the prompt produced no tokens");
  if (options.max_new_tokens < 0) throw Error("max_new_tokens must be 0 or more");
  const int64_t T0 = static_cast<int64_t>(prompt.size());
  const int64_t limit =
      options.max_length > 0 ? std::min<int64_t>(options.max_length, c.max_positions) : c.max_positions;
  const int64_t T_max = std::max(T0, std::min<int64_t>(T0 + options.max_new_tokens, limit));
  const int64_t L = c.n_layer, H = c.n_head;

  Generation g;
  g.prompt_tokens = T0;
  g.ids = prompt.ids();
  const CaptureOptions step_capture = CaptureOptions::attention_only();
  // full: the attention rows of every token so far, [L, H, T_max, T_max]; trimmed at the end.
  // Checked before anything is allocated: the steps' own needs (run_bytes at the final length and
  // the KV cache, state_bytes), plus `full` and the trimmed copy handed back, L·H·T_max² floats each.
  if (options.capture_attention) {
    const uint64_t maps = uint64_t{4} * uint64_t(L) * uint64_t(H) * uint64_t(T_max) * uint64_t(T_max);
    model.check_run_memory(T_max, model.run_bytes(T_max, step_capture) + model.state_bytes(T_max) + 2 * maps,
                           step_capture);
  }
  Tensor full;
  if (options.capture_attention) full = Tensor({L, H, T_max, T_max});
  // Each step's capture has `t + n` keys for its n new rows starting at row t (all tokens so far).
  auto keep_rows = [&](const Capture& step, int64_t t, int64_t n) {
    if (!options.capture_attention) return;
    const int64_t keys = t + n;
    for (int64_t lh = 0; lh < L * H; ++lh)
      for (int64_t q = 0; q < n; ++q)
        std::copy_n(step.attention.ptr() + (lh * n + q) * keys, keys, full.ptr() + (lh * T_max + t + q) * T_max);
  };

  auto state = model.start();
  std::vector<float> logits;
  keep_rows(model.extend(*state, g.ids, step_capture, &logits), 0, T0);
  while (static_cast<int64_t>(g.ids.size()) < T_max) {
    const auto best = std::max_element(logits.begin(), logits.end());
    const int32_t next = static_cast<int32_t>(best - logits.begin());
    g.ids.push_back(next);
    const int64_t t = static_cast<int64_t>(g.ids.size()) - 1;
    g.generated.push_back({t, next, model.tokenizer().token_text(next), *best});
    const bool stop = options.stop_at_eos && next == c.eos_token_id;
    // One step of the cache gives the new token's attention row and the next logits; skipped when
    // neither is needed any more.
    if (options.capture_attention || (!stop && static_cast<int64_t>(g.ids.size()) < T_max))
      keep_rows(model.extend(*state, {next}, step_capture, &logits), t, 1);
    if (options.on_token) options.on_token(g.generated.back(), g.ids);
    if (stop) {
      g.stopped_at_eos = true;
      break;
    }
  }
  g.stopped_at_limit = !g.stopped_at_eos && static_cast<int64_t>(g.generated.size()) < options.max_new_tokens;
  if (options.capture_attention) {
    const int64_t T = static_cast<int64_t>(g.ids.size());
    g.attention = Tensor({L, H, T, T});
    for (int64_t lh = 0; lh < L * H; ++lh)
      for (int64_t q = 0; q < T; ++q)
        std::copy_n(full.ptr() + (lh * T_max + q) * T_max, T, g.attention.ptr() + (lh * T + q) * T);
  }
  return g;
}

Encoding encode_chat(const Model& model, const std::string& model_path, const std::string& user,
                     const std::string& system) {
  // As transformers' apply_chat_template: render the template, then encode the result without
  // the tokenizer's own special-token template (the chat template writes what it needs).
  const std::string tmpl = tokenizer::read_chat_template(model_path);
  if (tmpl.empty())
    throw Error(model_path +
                ": the model's files declare no chat template to wrap the prompt in; give the prompt as plain text");
  std::vector<tokenizer::ChatMessage> messages;
  if (!system.empty()) messages.push_back({"system", system});
  messages.push_back({"user", user});
  const ModelConfig& c = model.config();
  const std::string eos = c.eos_token_id >= 0 ? model.tokenizer().token_text(c.eos_token_id) : std::string();
  EncodeOptions options;
  options.add_special_tokens = false;
  options.max_length = c.max_positions;
  return model.tokenizer().encode(tokenizer::render_chat_template(tmpl, messages, true, "", eos), options);
}

}  // namespace headscope
