// `headscope run` — one text through one model: tokens, a per-head table, and optional JSON /
// .npy files with everything that was captured (schema: docs/run-json.md).
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/roles.h"
#include "analysis/statistics.h"
#include "analysis/words.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "headscope/headscope.h"
#include "io/npy.h"

namespace headscope::cli {
namespace {

struct RunArgs {
  LoadOptions load;
  std::string model = default_model_dir();
  std::string text;
  std::string text_file;
  bool truncate = false;
  std::string json_path;
  bool json_attention = false;
  std::string npy_dir;
  int threads = 0;
  bool quiet = false;
  bool queries_keys = false;
  bool words = false;
};

nlohmann::json stats_json(const analysis::HeadStats& s) {
  return {{"entropy_bits", s.entropy_bits}, {"entropy_norm", s.entropy_norm}, {"sparsity", s.sparsity},
          {"keys_90", s.keys_90},           {"max_attention", s.max_attention}, {"avg_attention", s.avg_attention},
          {"mean_distance", s.mean_distance}, {"mean_offset", s.mean_offset}, {"self_mass", s.self_mass},
          {"prev_mass", s.prev_mass},       {"next_mass", s.next_mass},       {"first_mass", s.first_mass},
          {"special_mass", s.special_mass}, {"sink_mass", s.sink_mass},       {"punct_mass", s.punct_mass}};
}

nlohmann::json role_json(const analysis::RoleScore& r) {
  const auto& info = analysis::role_info(r.role);
  return {{"id", info.id}, {"name", info.name}, {"score", r.score}, {"detail", r.detail}, {"evidence", r.evidence}};
}

void run(const RunArgs& a) {
  if (a.threads > 0) omp_set_num_threads(a.threads);
  const std::string text = a.text_file.empty() ? a.text : read_text_file(a.text_file);
  auto model = load_model(a.model, a.load);
  const ModelConfig& c = model->config();
  const Encoding enc = model->encode(text, a.truncate);
  if (enc.size() == 0) throw Error("the text produced no tokens");
  CaptureOptions options;
  options.queries_keys = a.queries_keys;
  const Capture cap = model->run(enc, options);
  const int T = cap.T, L = c.n_layer, H = c.n_head;

  // Per-head statistics and roles from this one text, over tokens or (--words) over words:
  // attention to a word is the sum over its pieces, from a word the mean (analysis/words.h).
  const analysis::SequenceInfo token_seq = analysis::describe_sequence(enc, text, c.causal);
  analysis::ModelStatsAccumulator acc(L, H);
  const analysis::WordMap word_map = analysis::words_from_encoding(enc);
  if (a.words) acc.add(analysis::merge_attention(cap.attention, word_map), analysis::describe_units(token_seq, word_map));
  else acc.add(cap.attention, token_seq);
  const std::vector<analysis::HeadStats> stats = acc.result();
  std::vector<analysis::HeadEvidence> evidence(stats.size());
  for (size_t i = 0; i < stats.size(); ++i) evidence[i].stats = stats[i];
  const std::vector<analysis::HeadRoles> roles = analysis::assign_roles(evidence);

  if (!a.quiet) {
    std::printf("model %s: %d layers x %d heads (d_model %d, d_head %d)\n", c.name.c_str(), L, H, c.d_model, c.d_head);
    std::printf("%d tokens%s:", T, enc.truncated ? " (truncated)" : "");
    for (const Token& t : enc.tokens) std::printf(" %s", t.text.c_str());
    if (a.words) {
      std::printf("\n%d words (statistics below are word-level):", word_map.n_units);
      for (int u = 0; u < word_map.n_units; ++u) {
        const Token& first = enc.tokens[size_t(word_map.first_token[size_t(u)])];
        if (first.special) { std::printf(" %s", first.text.c_str()); continue; }
        int64_t end = first.end;
        for (size_t t = 0; t < enc.tokens.size(); ++t)
          if (word_map.unit_of_token[t] == u) end = std::max(end, enc.tokens[t].end);
        std::printf(" %s", text.substr(size_t(first.begin), size_t(end - first.begin)).c_str());
      }
    }
    std::printf("\n\n%-5s %-4s %8s %6s %6s  %-22s %s\n", "layer", "head", "entropy", "norm", "max", "pattern",
                "evidence");
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) {
        const auto& s = stats[size_t(l * H + h)];
        const auto& r = roles[size_t(l * H + h)];
        std::string name(analysis::role_info(r.primary.role).name);
        if (!r.primary.detail.empty()) name += " " + r.primary.detail;
        std::printf("%-5d %-4d %8.3f %6.3f %6.3f  %-22s %s\n", l, h, s.entropy_bits, s.entropy_norm,
                    s.max_attention, name.c_str(), r.primary.evidence.c_str());
      }
  }

  if (!a.npy_dir.empty()) {
    std::filesystem::create_directories(a.npy_dir);
    io::write_npy(a.npy_dir + "/attentions.npy", cap.attention);
    io::write_npy(a.npy_dir + "/head_outputs.npy", cap.head_outputs);
    io::write_npy(a.npy_dir + "/contributions.npy", cap.contributions);
    io::write_npy(a.npy_dir + "/hidden_states.npy", cap.hidden_states);
    if (a.queries_keys) {
      io::write_npy(a.npy_dir + "/queries.npy", cap.queries);
      io::write_npy(a.npy_dir + "/keys.npy", cap.keys);
    }
    std::ofstream(a.npy_dir + "/tokens.json") << tokens_json(enc).dump(1) << "\n";
  }
  if (!a.json_path.empty()) {
    nlohmann::json j;
    j["schema"] = "headscope.run/1";
    j["model"] = model_json(c);
    j["text"] = text;
    j["truncated"] = enc.truncated;
    j["tokens"] = tokens_json(enc);
    j["level"] = a.words ? "word" : "token";
    nlohmann::json heads = nlohmann::json::array();
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) {
        const auto& r = roles[size_t(l * H + h)];
        heads.push_back({{"layer", l},
                         {"head", h},
                         {"kv_head", cap.kv_head_of[size_t(h)]},
                         {"stats", stats_json(stats[size_t(l * H + h)])},
                         {"primary_role", role_json(r.primary)},
                         {"secondary_role", role_json(r.secondary)},
                         {"confidence", r.confidence}});
      }
    j["heads"] = std::move(heads);
    if (a.json_attention) j["attention"] = {{"shape", cap.attention.shape}, {"dtype", "float32"}, {"data", cap.attention.data}};
    std::ofstream out(a.json_path);
    if (!out) throw Error(a.json_path + ": cannot open for writing");
    out << j.dump() << "\n";
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Run a text through a model and show what every head does");
  add_load_flags(cmd, args->load);
  cmd->add_option("--model,-m", args->model, "Hugging Face model directory (default: $HEADSCOPE_MODEL or " +
                                                 std::string(kDefaultModelDir) + ")");
  auto* text_opt = cmd->add_option("--text,-t", args->text, "The text to analyse");
  auto* file_opt = cmd->add_option("--file,-f", args->text_file, "Read the text from a file ('-' for stdin)");
  text_opt->excludes(file_opt);
  cmd->add_flag("--truncate", args->truncate, "Cut texts longer than the model allows instead of failing");
  cmd->add_option("--json", args->json_path, "Write tokens, per-head statistics and roles as JSON (docs/run-json.md)");
  cmd->add_flag("--json-attention", args->json_attention, "Also put the attention tensor into the JSON file");
  cmd->add_option("--npy", args->npy_dir, "Write attentions.npy, head_outputs.npy, contributions.npy, "
                                          "hidden_states.npy and tokens.json into this directory");
  cmd->add_flag("--words", args->words, "Statistics and roles over words instead of tokens (pieces merged)");
  cmd->add_flag("--qk", args->queries_keys, "Also capture each head's queries and keys (queries.npy, keys.npy with --npy)");
  cmd->add_option("--threads", args->threads, "Worker threads (default: all cores)")->check(CLI::Range(1, 1024));
  cmd->add_flag("--quiet,-q", args->quiet, "Print nothing on stdout (with --json / --npy)");
  cmd->callback([args, text_opt, file_opt] {
    if (text_opt->count() == 0 && file_opt->count() == 0) throw CLI::RequiredError("--text or --file");
    run(*args);
  });
}

}  // namespace headscope::cli
