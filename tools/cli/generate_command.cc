// `headscope generate` — greedy continuation of a prompt by a causal model, with every attention
// row captured along the way. The prompt is run once; then each new token is one step of the
// model's KV cache (Model::extend), which records that token's attention over all earlier ones.
// The rows of all steps together form the full causal attention of prompt + continuation.
// --chat renders the model's own chat template around the prompt. The decoding loop is the
// pipeline's generate() (headscope/pipeline.h), shared with the server's /api/generate.
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
#include "headscope/json.h"
#include "headscope/npy.h"
#include "headscope/pipeline.h"

namespace headscope::cli {
namespace {

struct GenerateArgs {
  LoadOptions load;
  std::string model = default_model_dir();
  std::string prompt;
  int max_new_tokens = 20;
  bool ignore_eos = false;
  bool chat = false;      // wrap the prompt with the model's chat template
  std::string system;     // optional system message for --chat
  std::string json_path;  // tokens and per-step summary
  std::string npy_path;   // attention [n_layer, n_head, T, T] of prompt + continuation
  int threads = 0;
};

void generate(const GenerateArgs& a) {
  if (a.threads > 0) omp_set_num_threads(a.threads);
  if (a.max_new_tokens < 0) throw Error("--max-new-tokens must be 0 or more");
  auto model = load_model(a.model, a.load);
  const ModelConfig& c = model->config();
  if (!c.causal)
    throw Error(a.model + " is an encoder (" + c.architecture +
                "); generate needs a causal model such as Llama or GPT-2");
  Encoding prompt;
  if (a.chat) {
    prompt = encode_chat(*model, a.model, a.prompt, a.system);
  } else {
    if (!a.system.empty()) throw Error("--system needs --chat");
    prompt = model->encode(a.prompt);
  }
  if (prompt.size() == 0) throw Error("the prompt produced no tokens");
  const int64_t L = c.n_layer, H = c.n_head;

  // Print what the decoded text gains with each token (decoding the whole sequence keeps
  // multi-byte characters and SentencePiece spaces right).
  std::string printed = model->tokenizer().decode(prompt.ids());
  std::cout << printed << std::flush;
  GenerateOptions options;
  options.max_new_tokens = a.max_new_tokens;
  options.stop_at_eos = !a.ignore_eos;
  options.capture_attention = true;
  options.on_token = [&](const GeneratedToken&, const std::vector<int32_t>& ids) {
    const std::string text = model->tokenizer().decode(ids);
    if (text.size() > printed.size() && text.compare(0, printed.size(), printed) == 0)
      std::cout << text.substr(printed.size()) << std::flush;
    printed = text;
  };
  const GenerationResult r = describe_generation(*model, a.prompt, prompt, generate(*model, prompt, options),
                                                 /*check_retokenizes=*/false);
  const Generation& g = r.generation;
  std::cout << "\n";
  const int64_t T0 = g.prompt_tokens, T = static_cast<int64_t>(g.ids.size());
  std::fprintf(stderr, "headscope: %lld prompt tokens, %lld generated%s; attention captured at every step (KV cache)\n",
               static_cast<long long>(T0), static_cast<long long>(T - T0),
               g.stopped_at_eos ? " (stopped at end-of-text)"
               : g.stopped_at_limit
                   ? (" (stopped at the model's limit of " + std::to_string(c.max_positions) + " positions)").c_str()
                   : "");

  if (!a.npy_path.empty()) write_npy(a.npy_path, g.attention);
  if (!a.json_path.empty()) {
    nlohmann::json j = generation_file_json(c, r);
    if (!a.npy_path.empty())
      j["attention_npy"] = {{"path", a.npy_path}, {"shape", {L, H, T, T}}, {"axes", "layer, head, q, k"}};
    std::ofstream out(a.json_path);
    if (!out) throw Error(a.json_path + ": cannot write");
    out << j.dump(1) << "\n";
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "generate", "greedy continuation of a prompt by a causal model, capturing attention at every step");
  add_load_flags(cmd, args->load);
  cmd->add_option("--model", args->model, "model folder (config.json, *.safetensors, tokenizer.json) or .gguf file");
  cmd->add_option("--prompt", args->prompt, "text to continue")->required();
  cmd->add_option("--max-new-tokens", args->max_new_tokens, "tokens to add (greedy)")->capture_default_str();
  cmd->add_flag("--ignore-eos", args->ignore_eos, "keep going after the end-of-text token");
  cmd->add_flag("--chat", args->chat, "send the prompt as a user turn through the model's chat template");
  cmd->add_option("--system", args->system, "system message for --chat");
  cmd->add_option("--json", args->json_path, "write tokens, generated steps and head groups as JSON");
  cmd->add_option("--attention-npy", args->npy_path,
                  "write the attention of prompt + continuation, [layer, head, q, k], as .npy");
  cmd->add_option("--threads", args->threads, "OpenMP threads (default: all cores)");
  cmd->callback([args] { generate(*args); });
}

}  // namespace headscope::cli
