// headscope — token saliency (circuits.h): gradient × input and integrated gradients over the
// token embeddings, with Captum's integration rules.
#include <array>
#include <cmath>
#include <numbers>
#include <tuple>
#include <vector>

#include "circuits/patching_common.h"
#include "headscope/circuits.h"
#include "headscope/error.h"

namespace headscope {
namespace {

constexpr std::array<std::pair<SaliencyMethod, const char*>, 2> kMethods = {
    {{SaliencyMethod::kGradientTimesInput, "grad_x_input"},
     {SaliencyMethod::kIntegratedGradients, "integrated_gradients"}}};
constexpr std::array<std::pair<IntegrationRule, const char*>, 5> kRules = {
    {{IntegrationRule::kGaussLegendre, "gausslegendre"},
     {IntegrationRule::kRiemannLeft, "riemann_left"},
     {IntegrationRule::kRiemannRight, "riemann_right"},
     {IntegrationRule::kRiemannMiddle, "riemann_middle"},
     {IntegrationRule::kRiemannTrapezoid, "riemann_trapezoid"}}};

// Gauss–Legendre nodes and weights on [−1, 1] (Newton's method on P_n from the three-term
// recurrence), as numpy.polynomial.legendre.leggauss gives them, ascending.
void gauss_legendre(int n, std::vector<double>& x, std::vector<double>& w) {
  x.assign(size_t(n), 0.0);
  w.assign(size_t(n), 0.0);
  for (int i = 0; i < (n + 1) / 2; ++i) {
    double z = std::cos(std::numbers::pi * (i + 0.75) / (n + 0.5)), dp = 0;
    for (int it = 0; it < 100; ++it) {
      double p0 = 1, p1 = z;  // P_0, P_1
      for (int k = 2; k <= n; ++k) {
        const double p2 = ((2.0 * k - 1) * z * p1 - (k - 1.0) * p0) / k;
        p0 = p1, p1 = p2;
      }
      if (n == 1) p1 = z, p0 = 1;
      dp = n * (z * p1 - p0) / (z * z - 1);
      const double step = p1 / dp;
      z -= step;
      if (std::abs(step) < 1e-16) break;
    }
    // Recompute P'_n at the converged node for the weight.
    double p0 = 1, p1 = z;
    for (int k = 2; k <= n; ++k) {
      const double p2 = ((2.0 * k - 1) * z * p1 - (k - 1.0) * p0) / k;
      p0 = p1, p1 = p2;
    }
    dp = n == 1 ? 1.0 : n * (z * p1 - p0) / (z * z - 1);
    const double weight = 2.0 / ((1 - z * z) * dp * dp);
    x[size_t(i)] = -z, x[size_t(n - 1 - i)] = z;
    w[size_t(i)] = w[size_t(n - 1 - i)] = weight;
  }
}

}  // namespace

const char* saliency_method_name(SaliencyMethod m) { return circuits::to_name(m, kMethods); }
const char* integration_rule_name(IntegrationRule r) { return circuits::to_name(r, kRules); }
SaliencyMethod saliency_method_from_name(const std::string& n) {
  return circuits::from_name(n, kMethods, "saliency method");
}
IntegrationRule integration_rule_from_name(const std::string& n) {
  return circuits::from_name(n, kRules, "integration rule");
}

void integration_points(IntegrationRule rule, int n, std::vector<double>& alphas, std::vector<double>& weights) {
  if (n < 1 || n > 1000) throw Error("integrated gradients: steps must be 1 .. 1000, not " + std::to_string(n));
  if (rule == IntegrationRule::kGaussLegendre) {
    gauss_legendre(n, alphas, weights);
    for (size_t i = 0; i < alphas.size(); ++i) alphas[i] = 0.5 * (1 + alphas[i]), weights[i] *= 0.5;
    return;
  }
  if (n < 2) throw Error("integrated gradients: a Riemann rule needs at least 2 steps");
  alphas.assign(size_t(n), 0.0);
  weights.assign(size_t(n), 1.0 / n);
  // Captum builds these with torch.linspace in fp32: the same values rounded to float.
  for (int i = 0; i < n; ++i) {
    double a = 0;
    switch (rule) {
      case IntegrationRule::kRiemannTrapezoid:
        a = double(i) / (n - 1);
        break;
      case IntegrationRule::kRiemannLeft:
        a = (1.0 - 1.0 / n) * i / (n - 1);
        break;
      case IntegrationRule::kRiemannMiddle:
        a = 1.0 / (2 * n) + (1.0 - 1.0 / n) * i / (n - 1);
        break;
      case IntegrationRule::kRiemannRight:
        a = 1.0 / n + (1.0 - 1.0 / n) * i / (n - 1);
        break;
      case IntegrationRule::kGaussLegendre:
        break;
    }
    alphas[size_t(i)] = double(float(a));
  }
  if (rule == IntegrationRule::kRiemannTrapezoid) weights.front() /= 2, weights.back() /= 2;
}

SaliencyReport saliency(const Model& model, const std::string& text, const SaliencyRequest& request) {
  const ModelConfig& c = model.config();
  SaliencyReport r;
  r.request = request;
  circuits::check_metric(model, request.metric);
  r.encoding = model.encode(text);
  const int64_t T = int64_t(r.encoding.size()), D = c.d_model;
  std::vector<double> reference;
  if (c.causal) {
    std::tie(r.answer_id, r.wrong_id) = metric_token_ids(model, text, request.metric, request.answer, request.wrong);
  } else {
    if (request.reference.empty())
      throw Error(
          "saliency on an encoder needs a reference text: its metric is 1 − cos of the two sentence embeddings");
    reference = reference_embedding(model, request.reference);
  }
  if (request.baseline_token >= c.vocab_size) throw Error("the baseline token is outside the vocabulary");
  const GradientSeed seed = metric_seed(model, request.metric, r.answer_id, r.wrong_id, reference);
  GradientOptions go;
  go.attention = go.queries_keys_values = false;
  go.forward = CaptureOptions{false, false, false, true};
  Gradients at_input = model.gradients(r.encoding, seed, go);
  r.backward_passes = 1;
  r.metric = at_input.metric;
  const Tensor& e = at_input.token_embeddings;
  r.attributions = Tensor({T, D});
  if (request.method == SaliencyMethod::kGradientTimesInput) {
    for (int64_t i = 0; i < T * D; ++i) r.attributions.ptr()[i] = e.ptr()[i] * at_input.embeddings.ptr()[i];
  } else {
    // The baseline: zeros or a token's embedding per position (special tokens kept).
    Tensor base({T, D});
    if (request.baseline_token >= 0) {
      Encoding one_token = r.encoding;
      for (Token& t : one_token.tokens) t.id = request.baseline_token;
      const Gradients b = model.gradients(one_token, seed, go);  // only its token embeddings are read
      base = b.token_embeddings;
    }
    for (int64_t t = 0; request.keep_special && t < T; ++t)
      if (r.encoding.tokens[size_t(t)].special) std::copy_n(e.ptr() + t * D, D, base.ptr() + t * D);
    std::vector<double> alphas, weights, acc(size_t(T * D), 0.0);
    integration_points(request.rule, request.steps, alphas, weights);
    Tensor point({T, D});
    go.embeddings = &point;
    for (size_t i = 0; i < alphas.size(); ++i) {
      for (int64_t k = 0; k < T * D; ++k)
        point.ptr()[k] = static_cast<float>(base.ptr()[k] + alphas[i] * (double(e.ptr()[k]) - base.ptr()[k]));
      const Gradients gi = model.gradients(r.encoding, seed, go);
      for (int64_t k = 0; k < T * D; ++k) {
        if (!std::isfinite(gi.embeddings.ptr()[k]))
          throw Error("integrated gradients: the gradient at α = " + std::to_string(alphas[i]) +
                      " is not finite (a zero baseline sends zeros through the model's norms, whose gradient there is "
                      "1/√eps); choose a rule that does not evaluate α = 0 (gausslegendre, riemann_middle, "
                      "riemann_right) or a token baseline");
        acc[size_t(k)] += weights[i] * gi.embeddings.ptr()[k];
      }
      ++r.backward_passes;
    }
    for (int64_t k = 0; k < T * D; ++k)
      r.attributions.ptr()[k] = static_cast<float>((double(e.ptr()[k]) - base.ptr()[k]) * acc[size_t(k)]);
    go.embeddings = &base;
    r.baseline_metric = model.gradients(r.encoding, seed, go).metric;
    ++r.backward_passes;
  }
  r.scores.assign(size_t(T), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < D; ++i) r.scores[size_t(t)] += r.attributions.ptr()[t * D + i];
  for (double s : r.scores) r.total += s;
  if (request.method == SaliencyMethod::kIntegratedGradients)
    r.completeness_gap = std::abs(r.total - (r.metric - r.baseline_metric));
  return r;
}

}  // namespace headscope
