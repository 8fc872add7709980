// `headscope ablate` — what a head contributes, measured by removing it (docs/causal.md).
// Ablates a set of heads together (--heads 3.1,2.8) or every head alone (--all-heads: importance,
// the proxy and its rank correlation; --prune adds the pruning curves) over one text or a corpus,
// in zero, mean or resample mode. Parses, calls the pipeline (ablate.cc, ablate_results.cc), prints.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "headscope/headscope.h"
#include "headscope/input.h"
#include "headscope/json.h"
#include "headscope/pipeline.h"

namespace headscope::cli {
namespace {

struct AblateArgs {
  LoadOptions load;
  std::string model = default_model_dir();
  std::string text, text_file, corpus, reference, held_out;
  std::string heads;
  bool all_heads = false;
  bool prune = false;
  int prune_step = 1;
  int random_orders = 1;
  std::string mode = "zero";
  uint64_t seed = 0;
  std::string json_path, csv_path;
  int threads = 0;
};

// The non-empty lines of a file, each one text.
std::vector<std::string> read_lines(const std::string& path) {
  std::istringstream in(read_input_file(path, "text file"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
  if (lines.empty()) throw Error(path + ": no non-empty lines (one text per line)");
  return lines;
}

std::vector<Encoding> encode_all(const Model& model, const std::vector<std::string>& texts) {
  std::vector<Encoding> out;
  for (const std::string& t : texts) out.push_back(model.encode(t));
  return out;
}

std::string head_name(const HeadRef& h) { return std::to_string(h.layer) + "." + std::to_string(h.head); }

AblateOptions ablate_options(const Model& model, const AblateArgs& a) {
  AblateOptions options;
  options.mode = parse_ablation_mode(a.mode);
  options.seed = a.seed;
  if (!a.reference.empty()) options.reference = encode_all(model, read_lines(a.reference));
  return options;
}

std::vector<std::string> read_texts(const AblateArgs& a) {
  if (!a.text.empty()) return {a.text};
  if (!a.text_file.empty()) return {read_text_file(a.text_file)};
  if (!a.corpus.empty()) return read_lines(a.corpus);
  throw Error("give a text: --text, --file or --corpus");
}

// --heads: the effect per text, one CSV row each.
std::string print_result(const AblationExperiment& x) {
  const AblationResult& r = *x.result;
  std::printf("ablated %zu head(s) (%s) over %zu text(s): %s = %.6g\n", r.heads.size(), ablation_mode_name(x.mode),
              x.texts, ablation_measure(x.model), r.effect);
  std::string csv =
      x.model.causal ? "text,tokens,loss_before,loss_after,top1_changed\n" : "text,tokens,embedding_distance\n";
  for (size_t i = 0; i < r.texts.size(); ++i) {
    const TextEffect& e = r.texts[i];
    char line[160];
    if (x.model.causal)
      std::snprintf(line, sizeof line, "%zu,%d,%.8g,%.8g,%zu\n", i, e.T, e.mean_loss_before, e.mean_loss_after,
                    e.top1_changed.size());
    else
      std::snprintf(line, sizeof line, "%zu,%d,%.8g\n", i, e.T, e.embedding_distance);
    csv += line;
  }
  return csv;
}

// --all-heads: the ten most important heads, one CSV row per head.
std::string print_importance(const AblationExperiment& x) {
  const ImportanceResult& imp = *x.importance;
  std::printf("importance of %zu heads over %zu text(s) (%s, %s) in %.1f s wall, %.1f s CPU; Spearman vs proxy %.3f\n",
              imp.heads.size(), x.texts, ablation_measure(x.model), ablation_mode_name(x.mode), imp.seconds.wall,
              imp.seconds.cpu, imp.spearman);
  const std::vector<HeadImportance> ranked = by_rank(imp.heads);
  for (size_t i = 0; i < std::min<size_t>(10, ranked.size()); ++i)
    std::printf("  %-6s %.6g  (proxy %.4f)\n", head_name(ranked[i].head).c_str(), ranked[i].ablation, ranked[i].proxy);
  std::string csv = "layer,head,ablation,proxy\n";
  for (const HeadImportance& h : imp.heads) {
    char line[120];
    std::snprintf(line, sizeof line, "%d,%d,%.8g,%.8g\n", h.head.layer, h.head.head, h.ablation, h.proxy);
    csv += line;
  }
  return csv;
}

void print_pruning(const PruningResult& p, int random_orders) {
  std::printf(
      "pruning over %zu %s text(s): %.1f %% of heads removable at < 1 %% change in importance order, "
      "%.1f %% ± %.1f %% in %d random order(s) in %.1f s wall, %.1f s CPU\n",
      p.texts, p.held_out ? "held-out" : "", 100 * p.removable_share_importance, 100 * p.removable_share_mean,
      100 * p.removable_share_sd, random_orders, p.seconds.wall, p.seconds.cpu);
  for (size_t k = 0; k < p.importance_order.size(); ++k)
    std::printf("  %4d removed: %.4g importance order, %.4g ± %.4g random\n", p.importance_order[k].removed,
                p.importance_order[k].change, p.random_summary[k].change_mean, p.random_summary[k].change_sd);
}

void ablate(const AblateArgs& a) {
  if (a.threads > 0) omp_set_num_threads(a.threads);
  if (a.heads.empty() == !a.all_heads) throw Error("give either --heads (e.g. 3.1,2.8) or --all-heads");
  if (a.prune && !a.all_heads) throw Error("--prune needs --all-heads (the order comes from every head's importance)");
  if (!a.held_out.empty() && !a.prune)
    throw Error("--held-out needs --prune (it is where the pruning curves are measured)");
  const Ablation::Mode mode = parse_ablation_mode(a.mode);
  auto model = load_model(a.model, a.load);
  const std::vector<HeadRef> heads = a.all_heads ? std::vector<HeadRef>{} : parse_heads(a.heads, model->config());
  const std::vector<std::string> texts = read_texts(a);
  const Ablator ablator(*model, encode_all(*model, texts), ablate_options(*model, a));
  AblationExperiment x;
  x.model = model->config(), x.mode = mode, x.seed = a.seed, x.texts = texts.size();
  std::string csv;
  if (!a.all_heads) {
    x.result = ablator.ablate(heads);
    csv = print_result(x);
  } else {
    x.importance = measure_importance(ablator);
    csv = print_importance(x);
    if (a.prune) {
      // The curves are measured on --held-out when given, else on the texts.
      std::unique_ptr<Ablator> held_out;
      if (!a.held_out.empty())
        held_out =
            std::make_unique<Ablator>(*model, encode_all(*model, read_lines(a.held_out)), ablate_options(*model, a));
      const PruneOptions options{a.prune_step, a.random_orders, a.seed, held_out != nullptr};
      x.pruning = prune_heads(held_out ? *held_out : ablator, *x.importance, options);
      print_pruning(*x.pruning, a.random_orders);
    }
  }
  if (!a.json_path.empty()) write_file(a.json_path, nlohmann::json(x).dump(1) + "\n");
  if (!a.csv_path.empty()) write_file(a.csv_path, csv);
}

}  // namespace

void add_ablate_command(CLI::App& app) {
  auto args = std::make_shared<AblateArgs>();
  CLI::App* cmd = app.add_subcommand("ablate", "remove heads inside the forward pass and measure what changes");
  add_load_flags(cmd, args->load);
  cmd->add_option("--model,-m", args->model, "model folder (config.json, *.safetensors, tokenizer.json) or .gguf file");
  auto* text = cmd->add_option("--text,-t", args->text, "one text");
  auto* file = cmd->add_option("--file,-f", args->text_file, "one text read from a file ('-' for stdin)");
  auto* corpus = cmd->add_option("--corpus", args->corpus, "a file of texts, one per line");
  text->excludes(file, corpus);
  file->excludes(corpus);
  auto* heads = cmd->add_option("--heads", args->heads, "heads to ablate together, layer.head from 0: 3.1,2.8");
  auto* all = cmd->add_flag("--all-heads", args->all_heads, "ablate every head alone: importance and its proxy");
  heads->excludes(all);
  cmd->add_flag("--prune", args->prune, "with --all-heads: pruning curves in importance and random order");
  cmd->add_option(
         "--held-out", args->held_out,
         "with --prune: texts (one per line) the pruning curves are measured on; the order comes from --corpus")
      ->check(CLI::ExistingFile);
  cmd->add_option("--random-orders", args->random_orders,
                  "with --prune: random orders (seeds --seed, --seed + 1, ...), reported as mean and sd")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--prune-step", args->prune_step, "heads added between two points of a pruning curve")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--mode", args->mode, "zero | mean | resample")->capture_default_str();
  cmd->add_option("--reference", args->reference,
                  "texts (one per line) for the mean outputs and resample donors (default: the texts themselves)");
  cmd->add_option("--seed", args->seed, "resample donors and the random pruning order")->capture_default_str();
  cmd->add_option("--json", args->json_path, "write the effects as JSON (docs/causal.md)");
  cmd->add_option("--csv", args->csv_path, "write one row per text (--heads) or per head (--all-heads)");
  cmd->add_option("--threads", args->threads, "OpenMP threads (default: all cores)")->check(CLI::Range(1, 1024));
  cmd->callback([args] { ablate(*args); });
}

}  // namespace headscope::cli
