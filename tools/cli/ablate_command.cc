// `headscope ablate` — what a head contributes, measured by removing it (docs/causal.md).
// Ablates a set of heads together (--heads 3.1,2.8) or every head alone (--all-heads: importance,
// the proxy and its rank correlation; --prune adds the pruning curves) over one text or a corpus,
// in zero, mean or resample mode. Parses, calls the pipeline's Ablator, formats.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "headscope/headscope.h"
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
  std::istringstream in(read_text_file(path));
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

void write_file(const std::string& path, const std::string& contents) {
  std::ofstream out(path);
  if (!out || !(out << contents)) throw Error(path + ": cannot write");
}

// Wall and CPU seconds (all threads) since construction: the machine may be shared, so both.
struct Stopwatch {
  std::chrono::steady_clock::time_point wall = std::chrono::steady_clock::now();
  std::clock_t cpu = std::clock();
  nlohmann::json seconds() const {
    return {{"wall", std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count()},
            {"cpu", double(std::clock() - cpu) / CLOCKS_PER_SEC}};
  }
};

// The number of heads removed before the first point at ≥ 1 % change (Michel et al.'s share × n).
int removable(const std::vector<PruningPoint>& curve) {
  int k = 0;
  for (const PruningPoint& p : curve) {
    if (std::abs(p.change) >= 0.01) break;
    k = p.removed;
  }
  return k;
}

void ablate(const AblateArgs& a) {
  if (a.threads > 0) omp_set_num_threads(a.threads);
  if (a.heads.empty() == !a.all_heads) throw Error("give either --heads (e.g. 3.1,2.8) or --all-heads");
  if (a.prune && !a.all_heads) throw Error("--prune needs --all-heads (the order comes from every head's importance)");
  if (!a.held_out.empty() && !a.prune) throw Error("--held-out needs --prune (it is where the pruning curves are measured)");
  const Ablation::Mode mode = parse_ablation_mode(a.mode);
  auto model = load_model(a.model, a.load);
  const ModelConfig& c = model->config();
  const std::vector<HeadRef> heads = a.all_heads ? std::vector<HeadRef>{} : parse_heads(a.heads, c);
  std::vector<std::string> texts;
  if (!a.text.empty()) texts = {a.text};
  else if (!a.text_file.empty()) texts = {read_text_file(a.text_file)};
  else if (!a.corpus.empty()) texts = read_lines(a.corpus);
  else throw Error("give a text: --text, --file or --corpus");
  AblateOptions options;
  options.mode = mode;
  options.seed = a.seed;
  if (!a.reference.empty()) options.reference = encode_all(*model, read_lines(a.reference));
  const Ablator ablator(*model, encode_all(*model, texts), std::move(options));
  const char* measure = c.causal ? "delta mean next-token loss" : "1 - cos of the mean-pooled embedding";

  nlohmann::json j = {{"schema", "headscope.ablate/1"}, {"model", c}, {"mode", ablation_mode_name(mode)},
                      {"seed", a.seed}, {"texts", texts.size()}, {"measure", measure}};
  std::string csv;
  if (!a.all_heads) {
    const AblationResult r = ablator.ablate(heads);
    j["result"] = r;
    std::printf("ablated %zu head(s) (%s) over %zu text(s): %s = %.6g\n", heads.size(), ablation_mode_name(mode),
                texts.size(), measure, r.effect);
    csv = c.causal ? "text,tokens,loss_before,loss_after,top1_changed\n" : "text,tokens,embedding_distance\n";
    for (size_t i = 0; i < r.texts.size(); ++i) {
      const TextEffect& e = r.texts[i];
      char line[160];
      if (c.causal)
        std::snprintf(line, sizeof line, "%zu,%d,%.8g,%.8g,%zu\n", i, e.T, e.mean_loss_before, e.mean_loss_after,
                      e.top1_changed.size());
      else
        std::snprintf(line, sizeof line, "%zu,%d,%.8g\n", i, e.T, e.embedding_distance);
      csv += line;
    }
  } else {
    const Stopwatch importance_time;
    const std::vector<HeadImportance> imp = ablator.importance();
    j["importance_seconds"] = importance_time.seconds();
    std::vector<double> effect, proxy;
    for (const HeadImportance& h : imp) effect.push_back(h.ablation), proxy.push_back(h.proxy);
    const double rho = spearman(effect, proxy);
    j["importance"] = imp;
    j["spearman_proxy"] = json_number(rho);
    csv = "layer,head,ablation,proxy\n";
    for (const HeadImportance& h : imp) {
      char line[120];
      std::snprintf(line, sizeof line, "%d,%d,%.8g,%.8g\n", h.head.layer, h.head.head, h.ablation, h.proxy);
      csv += line;
    }
    std::vector<HeadImportance> ranked = imp;
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const HeadImportance& x, const HeadImportance& y) { return x.ablation > y.ablation; });
    std::printf("importance of %zu heads over %zu text(s) (%s, %s) in %.1f s wall, %.1f s CPU; Spearman vs proxy %.3f\n",
                imp.size(), texts.size(), measure, ablation_mode_name(mode),
                j["importance_seconds"]["wall"].get<double>(), j["importance_seconds"]["cpu"].get<double>(), rho);
    for (size_t i = 0; i < std::min<size_t>(10, ranked.size()); ++i)
      std::printf("  %-6s %.6g  (proxy %.4f)\n", head_name(ranked[i].head).c_str(), ranked[i].ablation,
                  ranked[i].proxy);
    if (a.prune) {
      // Michel et al. 2019: least important first, against random orders of the same heads (seeds
      // seed, seed + 1, ...). The curves are measured on --held-out when given, else on the texts.
      const Stopwatch prune_time;
      std::unique_ptr<Ablator> held_out;
      if (!a.held_out.empty()) {
        AblateOptions o;
        o.mode = mode;
        o.seed = a.seed;
        if (!a.reference.empty()) o.reference = encode_all(*model, read_lines(a.reference));
        held_out = std::make_unique<Ablator>(*model, encode_all(*model, read_lines(a.held_out)), std::move(o));
      }
      const Ablator& curves = held_out ? *held_out : ablator;
      std::vector<HeadRef> by_importance;
      for (auto it = ranked.rbegin(); it != ranked.rend(); ++it) by_importance.push_back(it->head);
      const auto curve_a = curves.pruning_curve(by_importance, a.prune_step);
      nlohmann::json randoms = nlohmann::json::array(), shares = nlohmann::json::array();
      std::vector<std::vector<PruningPoint>> curve_r;
      const double n = double(imp.size());
      for (int r = 0; r < a.random_orders; ++r) {
        std::vector<HeadRef> random;
        for (const HeadImportance& h : imp) random.push_back(h.head);
        std::mt19937_64 rng(a.seed + uint64_t(r));
        std::shuffle(random.begin(), random.end(), rng);
        curve_r.push_back(curves.pruning_curve(random, a.prune_step));
        randoms.push_back(curve_r.back());
        shares.push_back(removable(curve_r.back()) / n);
      }
      // Per point: mean and sample sd of the change over the random orders.
      nlohmann::json summary = nlohmann::json::array();
      double share_mean = 0, share_sd = 0;
      for (const auto& s : shares) share_mean += s.get<double>() / double(shares.size());
      for (const auto& s : shares) share_sd += std::pow(s.get<double>() - share_mean, 2);
      share_sd = shares.size() > 1 ? std::sqrt(share_sd / double(shares.size() - 1)) : 0.0;
      for (size_t p = 0; p < curve_a.size(); ++p) {
        double mean = 0, sd = 0;
        for (const auto& c : curve_r) mean += c[p].change / double(curve_r.size());
        for (const auto& c : curve_r) sd += std::pow(c[p].change - mean, 2);
        sd = curve_r.size() > 1 ? std::sqrt(sd / double(curve_r.size() - 1)) : 0.0;
        summary.push_back({{"removed", curve_a[p].removed}, {"change_mean", mean}, {"change_sd", sd}});
      }
      j["pruning"] = {{"texts", curves.texts().size()},
                      {"held_out", !a.held_out.empty()},
                      {"importance_order", curve_a},
                      {"random_order", curve_r.front()},
                      {"random_orders", randoms},
                      {"random_summary", summary},
                      {"removable_share_importance", removable(curve_a) / n},
                      {"removable_share_random", shares.front()},
                      {"removable_shares_random", shares},
                      {"seconds", prune_time.seconds()}};
      std::printf("pruning over %zu %s text(s): %.1f %% of heads removable at < 1 %% change in importance order, "
                  "%.1f %% ± %.1f %% in %d random order(s) in %.1f s wall, %.1f s CPU\n",
                  curves.texts().size(), held_out ? "held-out" : "", 100 * removable(curve_a) / n, 100 * share_mean,
                  100 * share_sd, a.random_orders, j["pruning"]["seconds"]["wall"].get<double>(),
                  j["pruning"]["seconds"]["cpu"].get<double>());
      for (size_t p = 0; p < curve_a.size(); ++p)
        std::printf("  %4d removed: %.4g importance order, %.4g ± %.4g random\n", curve_a[p].removed, curve_a[p].change,
                    summary[p]["change_mean"].get<double>(), summary[p]["change_sd"].get<double>());
    }
  }
  if (!a.json_path.empty()) write_file(a.json_path, j.dump(1) + "\n");
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
  cmd->add_option("--held-out", args->held_out,
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
