// `headscope atlas` — every head of a model over a corpus, gold treebanks, GAP and the induction
// probe: statistics, role scores and evidence, written as atlas.json, atlas.md and atlas.png
// (method: src/analysis/atlas.h; numbers: docs/metrics.md). The work is the pipeline's
// make_atlas(); this file parses the options, draws the progress bar and writes the files.
#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "headscope/headscope.h"
#include "headscope/pipeline.h"

namespace headscope::cli {
namespace {

struct AtlasArgs {
  LoadOptions load;
  std::string model = default_model_dir();
  std::string control;
  std::string out = "atlas";
  std::string name = "atlas";
  analysis::AtlasOptions options;
  int threads = 0;
  bool quiet = false;
};

// A one-line bar on stderr, redrawn when the whole percentage changes.
class ProgressBar {
 public:
  explicit ProgressBar(std::string prefix) : prefix_(std::move(prefix)), tty_(isatty(fileno(stderr)) != 0) {}
  void update(std::string_view stage, int64_t done, int64_t total) {
    const int percent = total > 0 ? static_cast<int>(100 * done / total) : 100;
    if (stage == stage_ && percent == percent_) return;
    stage_ = std::string(stage);
    percent_ = percent;
    if (!tty_ && percent != 100 && percent % 25 != 0) return;  // a log file gets a few lines, not a hundred
    constexpr int kWidth = 30;
    const int filled = percent * kWidth / 100;
    std::fprintf(stderr, "%s%s%-22s [%s%s] %3d%% %lld/%lld", tty_ ? "\r" : "", prefix_.c_str(), stage_.c_str(),
                 std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(kWidth - filled), '.').c_str(), percent, static_cast<long long>(done),
                 static_cast<long long>(total));
    if (!tty_) std::fputc('\n', stderr);
    if (tty_ && done == total) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  std::string prefix_, stage_;
  int percent_ = -1;
  bool tty_;
};

std::string command_line(const AtlasArgs& a) {
  const auto& o = a.options;
  std::string s = "headscope atlas --model " + a.model;
  if (!a.control.empty()) s += " --control " + a.control;
  s += " --treebank " + o.report_treebank;
  if (!o.select_treebank.empty()) s += " --select-treebank " + o.select_treebank;
  if (!o.report_coref.empty()) s += " --coref " + o.report_coref;
  if (!o.select_coref.empty()) s += " --select-coref " + o.select_coref;
  if (!o.corpus.empty()) s += " --corpus " + o.corpus;
  if (o.text_roles) s += " --text-roles";
  if (o.importance_texts >= 0) s += " --importance " + std::to_string(o.importance_texts);
  s += " --out " + a.out;
  if (a.name != "atlas") s += " --name " + a.name;
  return s;
}

void write_file(const std::filesystem::path& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error(path.string() + ": cannot open for writing (is --out a writable folder?)");
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) throw Error(path.string() + ": write failed (disk full?)");
}

void run(const AtlasArgs& a) {
  if (a.threads > 0) omp_set_num_threads(a.threads);
  // The output folder first: a typo in --out should not cost a whole run.
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(a.out, ec);
  if (ec) throw Error(a.out + ": cannot create the output folder (" + ec.message() + ")");
  analysis::AtlasOptions options = a.options;
  auto bar = std::make_shared<ProgressBar>("");
  if (!a.quiet) options.progress = [bar](std::string_view s, int64_t d, int64_t t) { bar->update(s, d, t); };
  const AtlasFiles files = make_atlas(a.model, a.control, options, command_line(a), a.name + ".png", a.load);
  for (const std::string& w : files.warnings) std::fprintf(stderr, "headscope: warning: %s\n", w.c_str());

  const fs::path out(a.out);
  write_file(out / (a.name + ".json"), files.json.data(), files.json.size());
  write_file(out / (a.name + ".md"), files.markdown.data(), files.markdown.size());
  write_file(out / (a.name + ".png"), files.png.data(), files.png.size());
  if (!files.control_png.empty())
    write_file(out / (a.name + "-control.png"), files.control_png.data(), files.control_png.size());
  std::printf("atlas of %s (%d x %d heads) in %.1f s: %s/%s.{json,md,png}%s\n", files.config.name.c_str(),
              files.config.n_layer, files.config.n_head, files.seconds, a.out.c_str(), a.name.c_str(),
              files.control_png.empty() ? "" : " and the control's grid");
}

}  // namespace

void add_atlas_command(CLI::App& app) {
  auto args = std::make_shared<AtlasArgs>();
  CLI::App* cmd = app.add_subcommand("atlas", "Map what every head of a model does, checked on gold-annotated data");
  add_load_flags(cmd, args->load);
  cmd->add_option("--model,-m", args->model,
                  "Hugging Face model directory (default: $HEADSCOPE_MODEL or " + std::string(kDefaultModelDir) + ")");
  cmd->add_option("--treebank", args->options.report_treebank,
                  "CoNLL-U treebank to report dependency accuracy on (e.g. ../shared/data/ud/en_pud-ud-test.conllu)")
      ->required();
  cmd->add_option(
      "--select-treebank", args->options.select_treebank,
      "CoNLL-U treebank to choose heads and offsets on (e.g. ud/en_ewt-ud-dev.conllu); default: --treebank");
  cmd->add_option("--coref", args->options.report_coref,
                  "GAP TSV to report coreference accuracy on (e.g. gap/gap-validation.tsv)");
  cmd->add_option("--select-coref", args->options.select_coref,
                  "GAP TSV to choose the coreference head on (default: --coref)");
  auto* corpus = cmd->add_option("--corpus", args->options.corpus,
                                 "Text file, one text a line, for the statistics (default: the treebank's sentences)");
  cmd->add_flag("--text-roles", args->options.text_roles,
                "Also write each --corpus text's own roles (its statistics with the atlas's evidence: what `run` "
                "gives the text) under \"texts\" in the JSON")
      ->needs(corpus);
  cmd->add_option("--control", args->control,
                  "A second model directory (e.g. random weights) reported beside the first");
  cmd->add_option("--out,-o", args->out, "Output folder (default: atlas)");
  cmd->add_option("--name", args->name,
                  "Base name of the files written: NAME.json, NAME.md, NAME.png (default: atlas)");
  cmd->add_option("--probe-length", args->options.probe_length, "Random tokens per copy in the induction probe")
      ->check(CLI::Range(2, 1000));
  cmd->add_option("--probes", args->options.probe_count, "Number of probe sequences averaged")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--seed", args->options.seed, "Seed of the probe's random tokens");
  cmd->add_option("--min-support", args->options.min_support, "Report relations with at least this many dependents")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--importance", args->options.importance_texts,
                  "Zero-ablate every head over the first N report-treebank sentences (0: off; default: 50 for models "
                  "with at most 144 heads, else off)")
      ->check(CLI::Range(int64_t{0}, int64_t{1000}));
  cmd->add_option("--threads", args->threads, "Threads for the forward pass (default: all cores)");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress bar");
  cmd->callback([args]() { run(*args); });
}

}  // namespace headscope::cli
