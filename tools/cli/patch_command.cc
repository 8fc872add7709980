// `headscope patch` — which heads carry a behaviour, by activation patching between a clean and a
// corrupted prompt, and through whom, by path patching (docs/circuits.md). Parses, calls the
// pipeline (src/pipeline/patch.cc), prints.
#include <omp.h>

#include <algorithm>
#include <cmath>
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

struct PatchArgs {
  LoadOptions load;
  std::string model = default_model_dir();
  PairSource pairs;
  std::string pairs_file, write_pairs;
  std::string sites = "head", direction, metric, layers;
  std::string senders, receivers, input = "q", heads;
  std::string json_path, csv_path, method = "exact";
  bool edges = false;
  int top = 10;
  int threads = 0;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

std::vector<int> parse_layers(const std::string& s) {
  std::vector<int> out;
  for (const std::string& item : split(s)) {
    size_t used = 0;
    int l = -1;
    try {
      l = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || item.empty() || l < 0) throw Error("--layers: \"" + item + "\" is not a layer number");
    out.push_back(l);
  }
  return out;
}

// The normalised value of a patch that changes nothing: the corrupt run's 0 when denoising, the
// clean run's 1 when noising. Effects are listed by their distance from it.
double effect_origin(PatchDirection d) { return d == PatchDirection::kDenoise ? 0.0 : 1.0; }
double effect_size(double normalised, double origin) {
  return std::isnan(normalised) ? 0.0 : std::fabs(normalised - origin);
}

std::string effect_name(const PatchEffect& e) {
  std::string s = std::string(patch_sweep_name(e.sweep)) + " L" + std::to_string(e.layer);
  if (e.head >= 0)
    s += (e.sweep == PatchSweep::kKey || e.sweep == PatchSweep::kValue ? " kv" : " H") + std::to_string(e.head);
  if (e.position >= 0) s += " @" + std::to_string(e.position);
  return s;
}

void print_sweep(const PatchExperiment& x, int top) {
  const PatchReport& r = *x.sweep;
  std::printf("%s: %d pair(s) of %lld tokens, %s, %s: clean %.6g, corrupt %.6g; %lld resumed passes in %.2f s\n",
              x.model.name.c_str(), r.n_pairs, static_cast<long long>(r.n_tokens), patch_direction_name(r.direction),
              patch_metric_name(r.metric), r.clean, r.corrupt, static_cast<long long>(r.passes), x.seconds.wall);
  std::vector<const PatchEffect*> order;
  for (const PatchEffect& e : r.effects) order.push_back(&e);
  const double none = effect_origin(r.direction);
  std::stable_sort(order.begin(), order.end(), [none](const PatchEffect* a, const PatchEffect* b) {
    return effect_size(a->normalised, none) > effect_size(b->normalised, none);
  });
  std::printf("largest effects (normalised (patched - corrupt) / (clean - corrupt); no effect reads %g):\n", none);
  for (size_t i = 0; i < std::min(order.size(), size_t(std::max(top, 0))); ++i)
    std::printf("  %-22s %+8.4f  (%s %.6g)\n", effect_name(*order[i]).c_str(), order[i]->normalised,
                patch_metric_name(r.metric), order[i]->value);
}

void print_path(const PatchExperiment& x, int top) {
  const PathPatchReport& r = *x.path;
  std::vector<const PathEffect*> order;
  for (const PathEffect& e : r.effects) order.push_back(&e);
  const double none = effect_origin(r.request.direction);
  std::stable_sort(order.begin(), order.end(), [none](const PathEffect* a, const PathEffect* b) {
    return effect_size(a->normalised, none) > effect_size(b->normalised, none);
  });
  std::printf("%s: path patching over %d pair(s), %s, %s: clean %.6g, corrupt %.6g, in %.2f s\n", x.model.name.c_str(),
              r.n_pairs, patch_direction_name(r.request.direction), patch_metric_name(r.request.metric), r.clean,
              r.corrupt, x.seconds.wall);
  for (size_t i = 0; i < std::min(order.size(), size_t(std::max(top, 1))); ++i) {
    std::string who;
    for (const HeadRef& h : order[i]->receivers)
      who += (who.empty() ? "" : ",") + std::to_string(h.layer) + "." + std::to_string(h.head);
    std::printf("  -> %-16s via %-6s %+8.4f  (%.6g)\n", who.empty() ? "logits" : who.c_str(),
                path_input_name(r.request.input), order[i]->normalised, order[i]->value);
  }
}

void print_edges(const AttributionReport& r, int top) {
  std::vector<const EdgeEffect*> order;
  for (const EdgeEffect& e : r.edges) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(),
                   [](const EdgeEffect* a, const EdgeEffect* b) { return std::fabs(a->value) > std::fabs(b->value); });
  std::printf("largest edges (estimated change of the metric; %zu edges):\n", r.edges.size());
  for (size_t i = 0; i < std::min(order.size(), size_t(std::max(top, 0))); ++i) {
    const EdgeEffect& e = *order[i];
    const std::string to = e.input == PathPatchRequest::Input::kLogits
                               ? std::string("logits")
                               : std::to_string(e.receiver.layer) +
                                     (e.input == PathPatchRequest::Input::kQuery ? "." : ".kv") +
                                     std::to_string(e.receiver.head) + " " + path_input_name(e.input);
    std::printf("  %d.%d -> %-14s %+10.5f  (normalised %+.4f)\n", e.sender.layer, e.sender.head, to.c_str(), e.value,
                e.normalised);
  }
}

// --method attribution | both: the first-order estimate of the sweep (and edges), with the exact
// sweep and their agreement for both.
PatchExperiment attribution_sweep(const Model& model, PromptPairs& pairs, const PatchRequest& r, const PatchArgs& a) {
  if (a.method != "attribution" && a.method != "both")
    throw Error("--method: exact, attribution or both, not \"" + a.method + "\"");
  AttributionRequest q;
  q.sweeps = r.sweeps, q.direction = r.direction, q.metric = r.metric, q.layers = r.layers, q.edges = a.edges;
  PatchExperiment x = run_attribution_patch(model, pairs, q, a.method == "both");
  PatchExperiment shown = x;
  shown.sweep = x.attribution->sites;
  shown.seconds = x.attribution_seconds;
  std::printf("attribution patching: %lld forward and %lld backward passes\n",
              static_cast<long long>(x.attribution->forward_passes),
              static_cast<long long>(x.attribution->backward_passes));
  print_sweep(shown, a.top);
  if (x.agreement) {
    std::printf("exact patching of the same sites in %.2f s:\n", x.seconds.wall);
    print_sweep(x, a.top);
    std::printf("agreement over %lld sites: Spearman %.4f, Pearson %.4f, %d of the exact top 10 in the estimate's\n",
                static_cast<long long>(x.agreement->sites), x.agreement->spearman, x.agreement->pearson,
                x.agreement->top10_shared);
  }
  if (a.edges) print_edges(*x.attribution, a.top);
  return x;
}

void patch(PatchArgs& a) {
  if (a.threads > 0) omp_set_num_threads(a.threads);
  auto model = load_model(a.model, a.load);
  if (!a.pairs_file.empty()) {
    a.pairs.pairs_json = read_input_file(a.pairs_file, "pairs file");
    a.pairs.pairs_name = a.pairs_file;
  }
  PromptPairs pairs = load_prompt_pairs(*model, a.pairs);
  if (!a.write_pairs.empty()) write_file(a.write_pairs, prompt_pairs_to_json(pairs));
  const PatchMetric metric = a.metric.empty()
                                 ? (model->config().causal ? PatchMetric::kLogitDiff : PatchMetric::kCosine)
                                 : patch_metric_from_name(a.metric);
  PatchExperiment x;
  if (!a.heads.empty()) {
    if (!a.senders.empty()) throw Error("--heads (patched together) and --senders (path patching) are two experiments");
    const PatchDirection d = a.direction.empty() ? PatchDirection::kDenoise : patch_direction_from_name(a.direction);
    x = run_head_set_patch(*model, pairs, parse_heads(a.heads, model->config()), d, metric);
    std::printf(
        "%s: %zu head(s) patched together over %d pair(s), %s, %s: clean %.6g, corrupt %.6g, patched %.6g, "
        "normalised %+.4f\n",
        x.model.name.c_str(), x.set->heads.size(), x.set->n_pairs, patch_direction_name(d), patch_metric_name(metric),
        x.set->clean, x.set->corrupt, x.set->value, x.set->normalised);
  } else if (!a.senders.empty()) {
    PathPatchRequest r;
    r.senders = parse_heads(a.senders, model->config());
    if (!a.receivers.empty()) r.receivers = parse_heads(a.receivers, model->config());
    r.input = path_input_from_name(a.input);
    r.direction = a.direction.empty() ? PatchDirection::kNoise : patch_direction_from_name(a.direction);
    r.metric = metric;
    x = run_path_patch(*model, pairs, r);
    print_path(x, a.top);
  } else {
    if (!a.receivers.empty()) throw Error("--receivers needs --senders (path patching)");
    PatchRequest r;
    r.sweeps.clear();
    for (const std::string& s : split(a.sites)) r.sweeps.push_back(patch_sweep_from_name(s));
    if (r.sweeps.empty()) throw Error("--site: name at least one site (head, q, k, v, pattern, resid, attn, mlp, ...)");
    r.direction = a.direction.empty() ? PatchDirection::kDenoise : patch_direction_from_name(a.direction);
    r.metric = metric;
    if (!a.layers.empty()) r.layers = parse_layers(a.layers);
    if (a.method == "exact") {
      if (a.edges) throw Error("--edges needs --method attribution (or both)");
      x = run_patch_sweep(*model, pairs, r);
      print_sweep(x, a.top);
    } else {
      x = attribution_sweep(*model, pairs, r, a);
    }
  }
  if (!a.json_path.empty()) write_file(a.json_path, nlohmann::json(x).dump(1) + "\n");
  if (!a.csv_path.empty()) write_file(a.csv_path, patch_csv(x));
}

}  // namespace

void add_patch_command(CLI::App& app) {
  auto args = std::make_shared<PatchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "patch", "activation patching between a clean and a corrupted prompt; path patching between heads");
  add_load_flags(cmd, args->load);
  cmd->add_option("--model,-m", args->model, "model folder (config.json, *.safetensors, tokenizer.json) or .gguf file");
  cmd->add_option("--clean", args->pairs.clean, "the prompt on which the behaviour shows");
  cmd->add_option("--corrupt", args->pairs.corrupt, "the same number of tokens, the behaviour's information replaced");
  cmd->add_option("--answer", args->pairs.answer,
                  "decoders: the token the clean prompt continues with, e.g. \" Mary\"");
  cmd->add_option("--wrong", args->pairs.wrong, "decoders: the competing token, e.g. \" John\"");
  cmd->add_option("--pairs", args->pairs_file, "a prompt-pairs JSON file (as --write-pairs writes)");
  cmd->add_option("--task", args->pairs.task, "generate pairs: ioi | induction | greater_than");
  cmd->add_option("--n", args->pairs.n, "pairs a task generates")->check(CLI::Range(1, 100000))->capture_default_str();
  cmd->add_option("--length", args->pairs.length, "induction: random tokens per half")
      ->check(CLI::Range(2, 256))
      ->capture_default_str();
  cmd->add_option("--seed", args->pairs.seed, "the task generator's seed")->capture_default_str();
  cmd->add_option("--write-pairs", args->write_pairs, "write the pairs used as JSON, to run them again");
  cmd->add_option("--site", args->sites,
                  "what to patch, comma-separated: head, head_position, q, k, v, pattern, resid, attn, mlp")
      ->capture_default_str();
  cmd->add_option("--layers", args->layers, "only these layers, comma-separated (default: all)");
  cmd->add_option("--direction", args->direction,
                  "denoise (corrupt run, clean values; default for sweeps) | noise (clean run, corrupt values; "
                  "default for path patching)");
  cmd->add_option("--metric", args->metric, "logit_diff (default) | prob | loss; encoders: cosine");
  cmd->add_option("--method", args->method,
                  "exact (resumed passes) | attribution (first-order estimate from one backward pass per pair) | "
                  "both (and their agreement)")
      ->capture_default_str();
  cmd->add_flag("--edges", args->edges,
                "with --method attribution: every edge sender head -> receiver head's q, k, v (and -> logits)");
  cmd->add_option("--heads", args->heads, "patch these heads' outputs together instead of a sweep, e.g. 9.6,9.9");
  cmd->add_option("--senders", args->senders, "path patching: sender heads, layer.head, e.g. 9.6,9.9");
  cmd->add_option("--receivers", args->receivers,
                  "path patching: receiver heads together (default: every later head, one at a time)");
  cmd->add_option("--receiver-input", args->input, "path patching: q | k | v | logits")->capture_default_str();
  cmd->add_option("--top", args->top, "results printed")->check(CLI::Range(0, 100000))->capture_default_str();
  cmd->add_option("--json", args->json_path, "write the results as JSON (docs/circuits.md)");
  cmd->add_option("--csv", args->csv_path, "write one row per result");
  cmd->add_option("--threads", args->threads, "OpenMP threads (default: all cores)")->check(CLI::Range(1, 1024));
  cmd->callback([args] { patch(*args); });
}

}  // namespace headscope::cli
