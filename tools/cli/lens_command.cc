// `headscope lens` — the logit lens of one text at one position (decoders): every layer's residual
// stream read through the final norm and the unembedding, or with --head one head's output read the
// same way, each norm linearised at the run's own scale (docs/circuits.md, "Logit lens"). Parses,
// calls logit_lens_text / head_lens_text (src/pipeline/lens.cc), prints a table and writes the same
// JSON as POST /api/logit_lens and /api/head_lens.
#include <omp.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/common.h"
#include "headscope/headscope.h"
#include "headscope/json.h"

namespace headscope::cli {
namespace {

struct LensArgs {
  LoadOptions load;
  std::string model = default_model_dir();
  std::string text, text_file, head, json_path;
  int position = -1, top_k = 10, threads = 0;
  std::vector<std::string> tokens;
  bool truncate = false;
};

// A token as it prints on one line: quoted, control characters escaped; a token that is part of a
// UTF-8 character (byte-level BPE) shows U+FFFD for the bytes it holds.
std::string shown(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void print_layers(const LogitLensResult& r) {
  std::printf("logit lens of %s at token %d (%s), %d layers; top %d per layer\n", r.model.name.c_str(), r.position,
              shown(r.encoding.tokens.at(size_t(r.position)).text).c_str(), r.model.n_layer, r.top_k);
  for (const LensLayer& l : r.layers) {
    std::printf("%s %2d:", l.layer == 0 ? "embed" : "layer", l.layer);
    for (const LensEntry& e : l.top) std::printf(" %s %.3f", shown(e.text).c_str(), e.token.probability);
    for (const LensEntry& e : l.followed)
      std::printf("  | %s rank %lld p %.4f", shown(e.text).c_str(), static_cast<long long>(e.token.rank),
                  e.token.probability);
    std::printf("\n");
  }
}

void print_head(const HeadLensResult& r) {
  std::printf("head %d.%d of %s (key/value head %d) at token %d (%s): its output read through the unembedding\n",
              r.layer, r.head, r.model.name.c_str(), r.kv_head, r.position,
              shown(r.encoding.tokens.at(size_t(r.position)).text).c_str());
  const auto list = [](const char* what, const std::vector<HeadLensEntry>& entries) {
    std::printf("%s:", what);
    for (const HeadLensEntry& e : entries) std::printf(" %s %+.3f", shown(e.text).c_str(), e.token.logit);
    std::printf("\n");
  };
  list("raises", r.promoted);
  list("lowers", r.suppressed);
  for (const HeadLensEntry& e : r.followed)
    std::printf("%s %s: %+.4f of the logit %.4f (rank %lld of this head's effects)\n",
                r.followed_prediction ? "the prediction" : "token", shown(e.text).c_str(), e.token.logit,
                e.token.model_logit, static_cast<long long>(e.token.rank));
}

void lens(const LensArgs& a) {
  if (a.threads > 0) omp_set_num_threads(a.threads);
  if (a.text.empty() == a.text_file.empty()) throw Error("give one text: --text or --file");
  auto model = load_model(a.model, a.load);
  std::string text = a.text.empty() ? read_text_file(a.text_file) : a.text;
  Encoding encoding = model->encode(text, a.truncate);
  nlohmann::json out;
  if (a.head.empty()) {
    LensRequest r;
    r.position = a.position, r.top_k = a.top_k, r.tokens = a.tokens;
    const LogitLensResult result = logit_lens_text(*model, std::move(text), std::move(encoding), r);
    print_layers(result);
    out = result;
  } else {
    const std::vector<HeadRef> heads = parse_heads(a.head, model->config());
    if (heads.size() != 1) throw Error("--head: name one head, e.g. 23.3");
    HeadLensRequest r;
    r.layer = heads[0].layer, r.head = heads[0].head;
    r.position = a.position, r.top_k = a.top_k, r.tokens = a.tokens;
    const HeadLensResult result = head_lens_text(*model, std::move(text), std::move(encoding), r);
    print_head(result);
    out = result;
  }
  if (!a.json_path.empty())
    write_file(a.json_path, out.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace

void add_lens_command(CLI::App& app) {
  auto args = std::make_shared<LensArgs>();
  CLI::App* cmd = app.add_subcommand(
      "lens", "the logit lens (decoders): every layer, or one head (--head), read through the unembedding");
  add_load_flags(cmd, args->load);
  cmd->add_option("--model,-m", args->model, "model folder (config.json, *.safetensors, tokenizer.json) or .gguf file");
  cmd->add_option("--text,-t", args->text, "the text");
  cmd->add_option("--file,-f", args->text_file, "read the text from a file ('-' for stdin)");
  cmd->add_flag("--truncate", args->truncate, "cut a text longer than the model allows instead of refusing it");
  cmd->add_option("--position,-p", args->position, "the token read, from 0 (default -1: the last)")
      ->capture_default_str();
  cmd->add_option("--top-k", args->top_k, "tokens listed per layer (or raised and lowered by the head)")
      ->check(CLI::Range(1, 50))
      ->capture_default_str();
  cmd->add_option("--token", args->tokens,
                  "follow this token (one token as it follows the text, e.g. \" Paris\"); repeat for more; "
                  "default: the model's prediction");
  cmd->add_option("--head", args->head, "one head, layer.head from 0 (e.g. 23.3): what its output writes");
  cmd->add_option("--json", args->json_path, "write the result as JSON (headscope.lens/1 or headscope.head_lens/1)");
  cmd->add_option("--threads", args->threads, "OpenMP threads (default: all cores)")->check(CLI::Range(1, 1024));
  cmd->callback([args] { lens(*args); });
}

}  // namespace headscope::cli
