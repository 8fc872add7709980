// `headscope generate` — greedy continuation of a prompt by a causal model, with every attention
// row captured along the way. The prompt is run once; then each new token is one step of the
// model's KV cache (Model::extend), which records that token's attention over all earlier ones.
// The rows of all steps together form the full causal attention of prompt + continuation.
// --chat renders the model's own chat template (tokenizer/chat_template.h) around the prompt.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "headscope/headscope.h"
#include "io/npy.h"
#include "tokenizer/chat_template.h"

namespace headscope::cli {
namespace {

struct GenerateArgs {
  LoadOptions load;
  std::string model = default_model_dir();
  std::string prompt;
  int max_new_tokens = 20;
  bool ignore_eos = false;
  bool chat = false;       // wrap the prompt with the model's chat template
  std::string system;      // optional system message for --chat
  std::string json_path;   // tokens and per-step summary
  std::string npy_path;    // attention [n_layer, n_head, T, T] of prompt + continuation
  int threads = 0;
};

int32_t argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

void generate(const GenerateArgs& a) {
  if (a.threads > 0) omp_set_num_threads(a.threads);
  if (a.max_new_tokens < 0) throw Error("--max-new-tokens must be 0 or more");
  auto model = load_model(a.model, a.load);
  const ModelConfig& c = model->config();
  if (!c.causal) throw Error(a.model + " is an encoder (" + c.architecture + "); generate needs a causal model such as Llama or GPT-2");
  Encoding prompt;
  if (a.chat) {
    // As transformers' apply_chat_template: render the template, then encode the result without
    // the tokenizer's own special-token template (the chat template writes what it needs).
    const std::string tmpl = tokenizer::read_chat_template(a.model);
    if (tmpl.empty()) throw Error(a.model + ": the model's files declare no chat template; drop --chat and write the prompt out");
    std::vector<tokenizer::ChatMessage> messages;
    if (!a.system.empty()) messages.push_back({"system", a.system});
    messages.push_back({"user", a.prompt});
    const std::string eos = c.eos_token_id >= 0 ? model->tokenizer().token_text(c.eos_token_id) : std::string();
    EncodeOptions options;
    options.add_special_tokens = false;
    options.max_length = c.max_positions;
    prompt = model->tokenizer().encode(tokenizer::render_chat_template(tmpl, messages, true, "", eos), options);
  } else {
    if (!a.system.empty()) throw Error("--system needs --chat");
    prompt = model->encode(a.prompt);
  }
  if (prompt.size() == 0) throw Error("the prompt produced no tokens");
  const int64_t T0 = static_cast<int64_t>(prompt.size());
  const int64_t T_max = std::min<int64_t>(T0 + a.max_new_tokens, c.max_positions);
  const int64_t L = c.n_layer, H = c.n_head;

  const CaptureOptions only_attention = CaptureOptions::attention_only();
  auto state = model->start();
  std::vector<float> logits;
  // full: the attention rows of every token so far, assembled as [L, H, T_max, T_max].
  Tensor full({L, H, T_max, T_max});
  const Capture first = model->extend(*state, prompt.ids(), only_attention, &logits);
  for (int64_t l = 0; l < L; ++l)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t q = 0; q < T0; ++q)
        std::copy_n(first.attention.ptr() + ((l * H + h) * T0 + q) * T0, T0, full.ptr() + ((l * H + h) * T_max + q) * T_max);

  std::vector<int32_t> ids = prompt.ids();
  std::string printed = model->tokenizer().decode(ids);
  std::cout << printed << std::flush;
  nlohmann::json steps = nlohmann::json::array();
  bool stopped_at_eos = false;
  while (static_cast<int64_t>(ids.size()) < T_max) {
    const int32_t next = argmax(logits);
    const float best = logits[size_t(next)];
    ids.push_back(next);
    // One step of the cache: the new token's row over all tokens so far, and the next logits.
    const int64_t t = static_cast<int64_t>(ids.size()) - 1;
    const Capture step = model->extend(*state, {next}, only_attention, &logits);
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < H; ++h)
        std::copy_n(step.attention.ptr() + (l * H + h) * (t + 1), t + 1, full.ptr() + ((l * H + h) * T_max + t) * T_max);
    // Print what the decoded text gained (decoding the whole sequence keeps multi-byte characters
    // and SentencePiece spaces right).
    const std::string text = model->tokenizer().decode(ids);
    if (text.size() > printed.size() && text.compare(0, printed.size(), printed) == 0) std::cout << text.substr(printed.size()) << std::flush;
    printed = text;
    steps.push_back({{"position", t}, {"id", next}, {"text", model->tokenizer().token_text(next)}, {"logit", best}});
    if (next == c.eos_token_id && !a.ignore_eos) {
      stopped_at_eos = true;
      break;
    }
  }
  std::cout << "\n";
  const int64_t T = static_cast<int64_t>(ids.size());
  const bool at_limit = !stopped_at_eos && T - T0 < a.max_new_tokens;  // the model's position limit came first
  std::fprintf(stderr, "headscope: %lld prompt tokens, %lld generated%s; attention captured at every step (KV cache)\n",
               static_cast<long long>(T0), static_cast<long long>(T - T0),
               stopped_at_eos ? " (stopped at end-of-text)"
               : at_limit    ? (" (stopped at the model's limit of " + std::to_string(c.max_positions) + " positions)").c_str()
                             : "");

  if (!a.npy_path.empty()) {
    // Trim the preallocated square to the tokens actually produced.
    Tensor out({L, H, T, T});
    for (int64_t lh = 0; lh < L * H; ++lh)
      for (int64_t q = 0; q < T; ++q) std::copy_n(full.ptr() + (lh * T_max + q) * T_max, T, out.ptr() + (lh * T + q) * T);
    io::write_npy(a.npy_path, out);
  }
  if (!a.json_path.empty()) {
    Encoding all = prompt;
    for (int64_t t = T0; t < T; ++t) {
      all.tokens.push_back({ids[size_t(t)], model->tokenizer().token_text(ids[size_t(t)]), 0, 0, false, -1});
    }
    nlohmann::json j = {{"model", model_json(c)},
                        {"prompt", a.prompt},
                        {"prompt_tokens", T0},
                        {"tokens", tokens_json(all)},
                        {"generated", steps},
                        {"kv_head_of", first.kv_head_of},
                        {"stopped_at_eos", stopped_at_eos},
                        {"text", printed}};
    if (!a.npy_path.empty()) j["attention_npy"] = {{"path", a.npy_path}, {"shape", {L, H, T, T}}, {"axes", "layer, head, q, k"}};
    std::ofstream out(a.json_path);
    if (!out) throw Error(a.json_path + ": cannot write");
    out << j.dump(1) << "\n";
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "greedy continuation of a prompt by a causal model, capturing attention at every step");
  add_load_flags(cmd, args->load);
  cmd->add_option("--model", args->model, "model folder (config.json, *.safetensors, tokenizer.json) or .gguf file");
  cmd->add_option("--prompt", args->prompt, "text to continue")->required();
  cmd->add_option("--max-new-tokens", args->max_new_tokens, "tokens to add (greedy)")->capture_default_str();
  cmd->add_flag("--ignore-eos", args->ignore_eos, "keep going after the end-of-text token");
  cmd->add_flag("--chat", args->chat, "send the prompt as a user turn through the model's chat template");
  cmd->add_option("--system", args->system, "system message for --chat");
  cmd->add_option("--json", args->json_path, "write tokens, generated steps and head groups as JSON");
  cmd->add_option("--attention-npy", args->npy_path, "write the attention of prompt + continuation, [layer, head, q, k], as .npy");
  cmd->add_option("--threads", args->threads, "OpenMP threads (default: all cores)");
  cmd->callback([args] { generate(*args); });
}

}  // namespace headscope::cli
