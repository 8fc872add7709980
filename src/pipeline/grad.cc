// headscope — the gradients of one text and its token saliency (pipeline.h): the metric's tokens
// checked, the model's backward pass run and timed, and their JSON documents.
#include <chrono>
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>
#include <tuple>

#include "headscope/error.h"
#include "headscope/json.h"
#include "headscope/pipeline.h"
#include "pipeline/timed.h"

namespace headscope {
namespace {

double max_abs(const Tensor& t) {
  double m = 0;
  for (float x : t.data) m = std::max(m, double(std::fabs(x)));
  return m;
}

}  // namespace

std::vector<std::pair<std::string, const Tensor*>> TextGradients::tensors() const {
  std::vector<std::pair<std::string, const Tensor*>> out;
  for (const auto& [name, t] :
       std::initializer_list<std::pair<const char*, const Tensor*>>{{"embeddings", &grads.embeddings},
                                                                    {"hidden_states", &grads.hidden_states},
                                                                    {"final_residual", &grads.final_residual},
                                                                    {"head_outputs", &grads.head_outputs},
                                                                    {"attn_output", &grads.attn_output},
                                                                    {"mlp_outputs", &grads.mlp_outputs},
                                                                    {"attention", &grads.attention},
                                                                    {"queries", &grads.queries},
                                                                    {"keys", &grads.keys},
                                                                    {"values", &grads.values},
                                                                    {"receivers", &grads.receivers}})
    if (!t->data.empty()) out.emplace_back(name, t);
  return out;
}

TextGradients text_gradients(const Model& model, const std::string& text, const GradientRequest& request) {
  TextGradients r;
  r.model = model.config();
  r.text = text;
  r.request = request;
  r.encoding = model.encode(text);
  std::vector<double> reference;
  if (model.config().causal) {
    std::tie(r.answer_id, r.wrong_id) = metric_token_ids(model, text, request.metric, request.answer, request.wrong);
  } else if (!request.reference.empty()) {
    reference = reference_embedding(model, request.reference);
  } else {
    throw Error(
        "gradients of an encoder's metric need a reference text (--reference): the metric is 1 − cos of "
        "the two sentence embeddings");
  }
  GradientOptions go;
  go.attention = request.attention;
  go.queries_keys_values = request.queries_keys_values;
  go.receivers = request.receivers;
  go.forward = CaptureOptions::attention_only();
  go.forward.attention = false;
  r.seconds = timed([&] {
    r.grads = model.gradients(r.encoding, metric_seed(model, request.metric, r.answer_id, r.wrong_id, reference), go);
  });
  return r;
}

SaliencyExperiment run_saliency(const Model& model, const std::string& text, const SaliencyRequest& request) {
  SaliencyExperiment x;
  x.model = model.config();
  x.text = text;
  x.seconds = timed([&] { x.report = saliency(model, text, request); });
  return x;
}

void to_json(nlohmann::json& j, const TextGradients& g) {
  const int64_t T = int64_t(g.encoding.size()), D = g.model.d_model;
  nlohmann::json tensors = nlohmann::json::object();
  for (const auto& [name, t] : g.tensors())
    tensors[name] = {{"shape", t->shape}, {"max_abs", json_number(max_abs(*t))}};
  nlohmann::json layers = nlohmann::json::array(), tokens = nlohmann::json::array();
  for (int64_t l = 0; l <= g.model.n_layer; ++l) {
    double s = 0;
    for (int64_t i = 0; i < T * D; ++i) s += std::pow(double(g.grads.hidden_states.ptr()[l * T * D + i]), 2);
    layers.push_back(json_number(std::sqrt(s)));
  }
  nlohmann::json display = tokens_json(g.text, g.encoding);
  for (int64_t t = 0; t < T; ++t) {
    double n = 0, gxi = 0;
    for (int64_t i = 0; i < D; ++i) {
      const double d = g.grads.embeddings.ptr()[t * D + i];
      n += d * d;
      gxi += d * g.grads.token_embeddings.ptr()[t * D + i];
    }
    display[size_t(t)]["grad_norm"] = json_number(std::sqrt(n));
    display[size_t(t)]["grad_x_input"] = json_number(gxi);
  }
  j = {{"schema", "headscope.grad/1"},
       {"model", g.model},
       {"text", g.text},
       {"tokens", display},
       {"metric", patch_metric_name(g.request.metric)},
       {"value", json_number(g.grads.metric)},
       {"answer_id", g.answer_id},
       {"wrong_id", g.wrong_id},
       {"tensors", tensors},
       {"hidden_state_norms", layers},
       {"seconds", g.seconds}};
}

void to_json(nlohmann::json& j, const SaliencyExperiment& x) {
  const SaliencyReport& r = x.report;
  nlohmann::json tokens = tokens_json(x.text, r.encoding);
  for (size_t t = 0; t < r.scores.size(); ++t) tokens[t]["score"] = json_number(r.scores[t]);
  const bool ig = r.request.method == SaliencyMethod::kIntegratedGradients;
  j = {{"schema", "headscope.saliency/1"},
       {"model", x.model},
       {"text", x.text},
       {"tokens", tokens},
       {"method", saliency_method_name(r.request.method)},
       {"metric", patch_metric_name(r.request.metric)},
       {"answer_id", r.answer_id},
       {"wrong_id", r.wrong_id},
       {"value", json_number(r.metric)},
       {"total", json_number(r.total)},
       {"backward_passes", r.backward_passes},
       {"seconds", x.seconds}};
  if (ig) {
    j["steps"] = r.request.steps;
    j["rule"] = integration_rule_name(r.request.rule);
    j["baseline"] = r.request.baseline_token < 0 ? nlohmann::json("zero") : nlohmann::json(r.request.baseline_token);
    j["keep_special"] = r.request.keep_special;
    j["baseline_value"] = json_number(r.baseline_metric);
    j["completeness_gap"] = json_number(r.completeness_gap);
  }
}

}  // namespace headscope
