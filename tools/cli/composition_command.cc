// `headscope composition` — Q-, K- and V-composition between the heads of different layers, from
// the weights alone (Elhage et al. 2021; docs/circuits.md, "Composition scores"). Parses, calls
// composition_scores (src/circuits/composition.cc), prints the highest pairs of each kind beside
// the random baseline, and writes the JSON (src/pipeline/json.cc) or one CSV row per pair.
#include <omp.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "headscope/circuits.h"
#include "headscope/headscope.h"
#include "headscope/json.h"

namespace headscope::cli {
namespace {

struct CompositionArgs {
  LoadOptions load;
  std::string model = default_model_dir();
  std::string json_path, csv_path;
  int top = 10;
  CompositionOptions options;
  bool no_gains = false;
  int threads = 0;
};

// sender_layer,sender_head,receiver_layer,receiver_head,q,k,v: one row per pair, receiver after sender.
std::string csv_rows(const CompositionScores& s) {
  const int L = s.model.n_layer, H = s.model.n_head;
  std::string csv = "sender_layer,sender_head,receiver_layer,receiver_head,q,k,v\n";
  for (int l1 = 0; l1 < L; ++l1)
    for (int h1 = 0; h1 < H; ++h1)
      for (int l2 = l1 + 1; l2 < L; ++l2)
        for (int h2 = 0; h2 < H; ++h2) {
          const int64_t at = ((int64_t(l1) * H + h1) * L + l2) * H + h2;
          char line[160];
          std::snprintf(line, sizeof line, "%d,%d,%d,%d,%.7g,%.7g,%.7g\n", l1, h1, l2, h2, s.q.ptr()[at], s.k.ptr()[at],
                        s.v.ptr()[at]);
          csv += line;
        }
  return csv;
}

void print_scores(const CompositionScores& s, int top) {
  const ModelConfig& c = s.model;
  std::printf(
      "composition of %s: %d layers x %d heads (%d key/value heads), d_model %d, d_head %d; %.2f s, "
      "baseline %.2f s (%.2f s CPU)\n",
      c.name.c_str(), c.n_layer, c.n_head, c.n_kv_head, c.d_model, c.d_head, s.seconds, s.baseline_seconds,
      s.cpu_seconds);
  std::printf("W_QK without RoPE; norm gains %s; sender -> receiver as layer.head\n",
              s.options.fold_gains ? "folded" : "left out");
  for (const CompositionKind kind : kCompositionKinds) {
    const CompositionBaseline& b = s.baseline(kind);
    std::printf("%s-composition (random heads of the same shapes: %.4f +- %.4f over %d draws)\n",
                composition_kind_name(kind), b.mean, b.std, s.options.baseline_draws);
    for (const CompositionPair& p : top_composition_pairs(s, kind, top))
      std::printf("  %3d.%-3d -> %3d.%-3d %.4f  (%+.1f sd)\n", p.sender.layer, p.sender.head, p.receiver.layer,
                  p.receiver.head, p.score, b.std > 0 ? (p.score - b.mean) / b.std : 0.0);
  }
}

void composition(CompositionArgs a) {
  if (a.threads > 0) omp_set_num_threads(a.threads);
  a.options.fold_gains = !a.no_gains;
  auto model = load_model(a.model, a.load);
  const CompositionScores scores = composition_scores(*model, a.options);
  print_scores(scores, a.top);
  if (!a.json_path.empty()) write_file(a.json_path, composition_json(scores, a.top).dump(1) + "\n");
  if (!a.csv_path.empty()) write_file(a.csv_path, csv_rows(scores));
}

}  // namespace

void add_composition_command(CLI::App& app) {
  auto args = std::make_shared<CompositionArgs>();
  CLI::App* cmd =
      app.add_subcommand("composition", "Q-, K- and V-composition between heads of different layers, from the weights");
  add_load_flags(cmd, args->load);
  cmd->add_option("--model,-m", args->model, "model folder (config.json, *.safetensors, tokenizer.json) or .gguf file");
  cmd->add_option("--top", args->top, "pairs to print (and to list in the JSON) per kind")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--draws", args->options.baseline_draws, "random draws of the baseline")
      ->check(CLI::Range(2, 100000))
      ->capture_default_str();
  cmd->add_option("--seed", args->options.seed, "seed of the baseline's draws")->capture_default_str();
  cmd->add_flag("--no-gains", args->no_gains,
                "leave the norm gains out: the weights as stored (default: folded into W_Q, W_K, W_V and W_O)");
  cmd->add_option("--json", args->json_path, "write every score, the baseline and the top pairs as JSON");
  cmd->add_option("--csv", args->csv_path, "write one row per pair of heads: q, k, v");
  cmd->add_option("--threads", args->threads, "OpenMP threads (default: all cores)")->check(CLI::Range(1, 1024));
  cmd->callback([args] { composition(*args); });
}

}  // namespace headscope::cli
