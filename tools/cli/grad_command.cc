// `headscope grad` — the gradient of a metric of one text with respect to every activation the
// forward pass captures (docs/gradients.md), and `headscope saliency` — which tokens move it
// (gradient × input, integrated gradients). Parse, call text_gradients / run_saliency
// (src/pipeline/grad.cc), print, write the JSON and (grad --npy DIR) one .npy per tensor.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "headscope/headscope.h"
#include "headscope/json.h"
#include "headscope/npy.h"

namespace headscope::cli {
namespace {

struct GradArgs {
  LoadOptions load;
  std::string model = default_model_dir();
  std::string text, text_file, metric, answer, wrong, reference, json_path, npy_dir;
  std::string method = "integrated_gradients", rule = "gausslegendre", baseline = "zero";
  int steps = 50, threads = 0;
  bool receivers = false, all_special = false;
};

std::string text_of(const GradArgs& a) {
  if (a.text.empty() == a.text_file.empty()) throw Error("give one text: --text or --file");
  return a.text.empty() ? read_text_file(a.text_file) : a.text;
}

PatchMetric metric_of(const GradArgs& a, const Model& m) {
  if (!a.metric.empty()) return patch_metric_from_name(a.metric);
  return m.config().causal ? PatchMetric::kLogitDiff : PatchMetric::kCosine;
}

void grad(const GradArgs& a) {
  if (a.threads > 0) omp_set_num_threads(a.threads);
  auto model = load_model(a.model, a.load);
  GradientRequest r;
  r.metric = metric_of(a, *model);
  r.answer = a.answer, r.wrong = a.wrong, r.reference = a.reference, r.receivers = a.receivers;
  const TextGradients g = text_gradients(*model, text_of(a), r);
  std::printf("%s: %zu tokens, %s = %.6g; forward and backward in %.2f s\n", g.model.name.c_str(), g.encoding.size(),
              patch_metric_name(r.metric), g.grads.metric, g.seconds.wall);
  for (const auto& [name, t] : g.tensors()) {
    double m = 0;
    for (float x : t->data) m = std::max(m, double(std::fabs(x)));
    std::string shape;
    for (int64_t d : t->shape) shape += (shape.empty() ? "" : " x ") + std::to_string(d);
    std::printf("  d/d %-15s [%s]  max |g| %.4g\n", name.c_str(), shape.c_str(), m);
  }
  if (!a.npy_dir.empty()) {
    std::filesystem::create_directories(a.npy_dir);
    for (const auto& [name, t] : g.tensors()) write_npy(a.npy_dir + "/" + name + ".npy", *t);
    write_npy(a.npy_dir + "/token_embeddings.npy", g.grads.token_embeddings);
  }
  if (!a.json_path.empty()) write_file(a.json_path, nlohmann::json(g).dump(1) + "\n");
}

int32_t baseline_of(const std::string& s, const Model& m) {
  (void)m;
  if (s == "zero") return -1;
  size_t used = 0;
  int id = -1;
  try {
    id = std::stoi(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || id < 0) throw Error("--baseline: zero or a token id, not \"" + s + "\"");
  return id;
}

void salience(const GradArgs& a) {
  if (a.threads > 0) omp_set_num_threads(a.threads);
  auto model = load_model(a.model, a.load);
  SaliencyRequest r;
  r.method = saliency_method_from_name(a.method);
  r.metric = metric_of(a, *model);
  r.answer = a.answer, r.wrong = a.wrong, r.reference = a.reference;
  r.steps = a.steps;
  r.rule = integration_rule_from_name(a.rule);
  r.baseline_token = baseline_of(a.baseline, *model);
  r.keep_special = !a.all_special;
  const SaliencyExperiment x = run_saliency(*model, text_of(a), r);
  const SaliencyReport& s = x.report;
  std::printf("%s: %s of %s = %.6g over %zu tokens, %lld backward passes in %.2f s\n", x.model.name.c_str(),
              a.method.c_str(), patch_metric_name(r.metric), s.metric, s.encoding.size(),
              static_cast<long long>(s.backward_passes), x.seconds.wall);
  for (size_t t = 0; t < s.scores.size(); ++t)
    std::printf("  %3zu %-20s %+10.5f\n", t + 1, token_display(x.text, s.encoding.tokens[t]).c_str(), s.scores[t]);
  if (r.method == SaliencyMethod::kIntegratedGradients)
    std::printf("sum %.6g; metric at the text minus at the baseline %.6g; completeness gap %.3g\n", s.total,
                s.metric - s.baseline_metric, s.completeness_gap);
  if (!a.json_path.empty()) write_file(a.json_path, nlohmann::json(x).dump(1) + "\n");
}

void add_common(CLI::App* cmd, GradArgs& a) {
  add_load_flags(cmd, a.load);
  cmd->add_option("--model,-m", a.model, "model folder (config.json, *.safetensors, tokenizer.json) or .gguf file");
  cmd->add_option("--text,-t", a.text, "the text");
  cmd->add_option("--file,-f", a.text_file, "read the text from a file");
  cmd->add_option("--metric", a.metric, "decoders: logit_diff (default) | prob | loss; encoders: cosine");
  cmd->add_option("--answer", a.answer, "decoders: the token that follows the text, e.g. \" Mary\"");
  cmd->add_option("--wrong", a.wrong, "decoders, logit_diff: the competing token, e.g. \" John\"");
  cmd->add_option("--reference", a.reference, "encoders: the text whose embedding the cosine compares with");
  cmd->add_option("--json", a.json_path, "write the result as JSON (docs/gradients.md)");
  cmd->add_option("--threads", a.threads, "OpenMP threads (default: all cores)")->check(CLI::Range(1, 1024));
}

}  // namespace

void add_grad_command(CLI::App& app) {
  auto args = std::make_shared<GradArgs>();
  CLI::App* cmd = app.add_subcommand(
      "grad", "the gradient of a metric with respect to every captured activation (one backward pass)");
  add_common(cmd, *args);
  cmd->add_option("--npy", args->npy_dir, "write every gradient as DIR/<name>.npy");
  cmd->add_flag("--receivers", args->receivers,
                "also the gradient through each head's query, key and value input alone (edge attribution)");
  cmd->callback([args] { grad(*args); });

  auto sal = std::make_shared<GradArgs>();
  CLI::App* s = app.add_subcommand("saliency", "which tokens move a metric: gradient x input or integrated gradients");
  add_common(s, *sal);
  s->add_option("--method", sal->method, "grad_x_input | integrated_gradients")->capture_default_str();
  s->add_option("--steps", sal->steps, "integrated gradients: points on the path")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  s->add_option("--rule", sal->rule,
                "integration rule: gausslegendre | riemann_left | riemann_right | riemann_middle | riemann_trapezoid")
      ->capture_default_str();
  s->add_option("--baseline", sal->baseline, "zero | a token id (its embedding at every position)")
      ->capture_default_str();
  s->add_flag("--baseline-specials", sal->all_special,
              "replace special tokens (BOS, [CLS], [SEP]) in the baseline too (default: kept as they are)");
  s->callback([sal] { salience(*sal); });
}

}  // namespace headscope::cli
