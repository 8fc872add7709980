// `headscope run` — one text through one model: tokens, a per-head table, and optional JSON /
// .npy files with everything that was captured (schema: docs/run-json.md, docs/schema.md).
// The analysis is the pipeline's (headscope/pipeline.h), with the model's induction probe, so a
// head gets the same role here as in the explorer.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
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
  bool no_probe = false;  // skip the induction probe (~1 s on the default model): no induction roles
};

void run(const RunArgs& a) {
  if (a.threads > 0) omp_set_num_threads(a.threads);
  const std::string text = a.text_file.empty() ? a.text : read_text_file(a.text_file);
  auto model = load_model(a.model, a.load);
  const ModelConfig& c = model->config();
  Encoding encoding = model->encode(text, a.truncate);
  if (encoding.size() == 0) throw Error("the text produced no tokens");
  const std::vector<analysis::ProbeEvidence> probe =
      a.no_probe ? std::vector<analysis::ProbeEvidence>{} : headscope::probe(*model);
  AnalyseOptions options;
  options.capture.queries_keys = a.queries_keys;
  // Statistics and roles over tokens or (--words) over words: attention to a word is the sum over
  // its pieces, from a word the mean (docs/metrics.md).
  const RunAnalysis analysed = analyse(*model, text, std::move(encoding), probe, options);
  const Encoding& enc = analysed.encoding;
  const Capture& cap = analysed.capture;
  const Level level = a.words ? Level::kWord : Level::kToken;
  const std::vector<analysis::HeadStats>& stats = analysed.analysis(level).stats;
  const std::vector<analysis::HeadRoles>& roles = analysed.analysis(level).roles;
  const int T = cap.T, L = c.n_layer, H = c.n_head;

  if (!a.quiet) {
    std::printf("model %s: %d layers x %d heads (d_model %d, d_head %d)\n", c.name.c_str(), L, H, c.d_model, c.d_head);
    std::printf("%d tokens%s:", T, enc.truncated ? " (truncated)" : "");
    for (const Token& t : enc.tokens) std::printf(" %s", t.text.c_str());
    if (a.words) {
      const std::vector<WordUnit> units = word_units(analysed);
      std::printf("\n%zu words (statistics below are word-level):", units.size());
      for (const WordUnit& u : units) std::printf(" %s", u.text.c_str());
    }
    std::printf("\n\n%-5s %-4s %8s %6s %6s  %-22s %s\n", "layer", "head", "entropy", "norm", "max", "pattern",
                "evidence");
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) {
        const auto& s = stats[size_t(l * H + h)];
        const auto& r = roles[size_t(l * H + h)];
        std::string name(analysis::role_info(r.primary.role).name);
        if (!r.primary.detail.empty()) name += " " + r.primary.detail;
        std::printf("%-5d %-4d %8.3f %6.3f %6.3f  %-22s %s\n", l, h, s.entropy_bits, s.entropy_norm, s.max_attention,
                    name.c_str(), r.primary.evidence.c_str());
      }
  }

  if (!a.npy_dir.empty()) {
    std::filesystem::create_directories(a.npy_dir);
    write_npy(a.npy_dir + "/attentions.npy", cap.attention);
    write_npy(a.npy_dir + "/head_outputs.npy", cap.head_outputs);
    write_npy(a.npy_dir + "/contributions.npy", cap.contributions);
    write_npy(a.npy_dir + "/hidden_states.npy", cap.hidden_states);
    if (a.queries_keys) {
      write_npy(a.npy_dir + "/queries.npy", cap.queries);
      write_npy(a.npy_dir + "/keys.npy", cap.keys);
    }
    std::ofstream(a.npy_dir + "/tokens.json") << nlohmann::json(enc).dump(1) << "\n";
  }
  if (!a.json_path.empty()) {
    nlohmann::json j = run_json(c, analysed, level);
    if (a.json_attention)
      j["attention"] = {{"shape", cap.attention.shape}, {"dtype", "float32"}, {"data", cap.attention.data}};
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
  cmd->add_option("--model,-m", args->model,
                  "Hugging Face model directory (default: $HEADSCOPE_MODEL or " + std::string(kDefaultModelDir) + ")");
  auto* text_opt = cmd->add_option("--text,-t", args->text, "The text to analyse");
  auto* file_opt = cmd->add_option("--file,-f", args->text_file, "Read the text from a file ('-' for stdin)");
  text_opt->excludes(file_opt);
  cmd->add_flag("--truncate", args->truncate, "Cut texts longer than the model allows instead of failing");
  cmd->add_option("--json", args->json_path, "Write tokens, per-head statistics and roles as JSON (docs/run-json.md)");
  cmd->add_flag("--json-attention", args->json_attention, "Also put the attention tensor into the JSON file");
  cmd->add_option("--npy", args->npy_dir,
                  "Write attentions.npy, head_outputs.npy, contributions.npy, "
                  "hidden_states.npy and tokens.json into this directory");
  cmd->add_flag("--words", args->words, "Statistics and roles over words instead of tokens (pieces merged)");
  cmd->add_flag("--no-probe", args->no_probe,
                "Skip the induction probe (about 1 s per model): faster, but no head is labelled induction or "
                "duplicate token, and labels can then differ from the explorer's");
  cmd->add_flag("--qk", args->queries_keys,
                "Also capture each head's queries and keys (queries.npy, keys.npy with --npy)");
  cmd->add_option("--threads", args->threads, "Worker threads (default: all cores)")->check(CLI::Range(1, 1024));
  cmd->add_flag("--quiet,-q", args->quiet, "Print nothing on stdout (with --json / --npy)");
  cmd->callback([args, text_opt, file_opt] {
    if (text_opt->count() == 0 && file_opt->count() == 0) throw CLI::RequiredError("--text or --file");
    run(*args);
  });
}

}  // namespace headscope::cli
