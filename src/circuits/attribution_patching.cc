// headscope — attribution patching (circuits.h): every patch of a sweep, and every edge between
// heads, estimated to first order from one forward pass per prompt and one backward pass.
#include <algorithm>
#include <cmath>
#include <vector>

#include "circuits/patching_common.h"
#include "headscope/circuits.h"
#include "headscope/error.h"
#include "ops/backward.h"
#include "ops/matmul.h"

namespace headscope {

GradientSeed metric_seed(const Model& model, PatchMetric metric, int32_t answer_id, int32_t wrong_id,
                         std::vector<double> reference) {
  circuits::check_metric(model, metric);
  GradientSeed seed;
  if (metric == PatchMetric::kCosine) {
    // 1 − cos(e, r), e = mean_t out[t]: ∂/∂e = −(r / (|e||r|) − cos · e / |e|²), shared by every row.
    seed.metric = [ref = std::move(reference)](const float* out, int64_t rows, int64_t width, float* d) {
      std::vector<double> e(size_t(width), 0.0);
      for (int64_t t = 0; t < rows; ++t)
        for (int64_t i = 0; i < width; ++i) e[size_t(i)] += out[t * width + i];
      for (double& x : e) x /= double(rows);
      const std::vector<double>& r = ref.empty() ? e : ref;
      if (int64_t(r.size()) != width) throw Error("the cosine metric's reference has the wrong width");
      double dot = 0, ee = 0, rr = 0;
      for (int64_t i = 0; i < width; ++i)
        dot += e[size_t(i)] * r[size_t(i)], ee += e[size_t(i)] * e[size_t(i)], rr += r[size_t(i)] * r[size_t(i)];
      const double ne = std::sqrt(ee), nr = std::sqrt(rr), c = dot / (ne * nr);
      for (int64_t i = 0; i < width; ++i) {
        const double de = -(r[size_t(i)] / (ne * nr) - c * e[size_t(i)] / ee) / double(rows);
        for (int64_t t = 0; t < rows; ++t) d[t * width + i] = static_cast<float>(de);
      }
      return 1.0 - c;
    };
    return seed;
  }
  const int64_t V = model.config().vocab_size;
  if (answer_id < 0 || answer_id >= V || (metric == PatchMetric::kLogitDiff && (wrong_id < 0 || wrong_id >= V)))
    throw Error("the metric needs an answer token (and a wrong one for logit_diff) in the vocabulary");
  seed.metric = [metric, answer_id, wrong_id](const float* out, int64_t rows, int64_t width, float* d) {
    const float* row = out + (rows - 1) * width;  // the last position
    float* drow = d + (rows - 1) * width;
    if (metric == PatchMetric::kLogitDiff) {
      drow[answer_id] += 1.0f;
      drow[wrong_id] -= 1.0f;
      return double(row[answer_id]) - double(row[wrong_id]);
    }
    double top = row[0];
    for (int64_t i = 1; i < width; ++i) top = std::max(top, double(row[i]));
    double sum = 0;
    for (int64_t i = 0; i < width; ++i) sum += std::exp(double(row[i]) - top);
    const double log_p = double(row[answer_id]) - top - std::log(sum), p = std::exp(log_p);
    // ∂ log p_a / ∂ z_j = δ_aj − p_j;  ∂ p_a / ∂ z_j = p_a (δ_aj − p_j)
    const double k = metric == PatchMetric::kLoss ? -1.0 : p;
    for (int64_t j = 0; j < width; ++j) drow[j] = static_cast<float>(-k * std::exp(double(row[j]) - top) / sum);
    drow[answer_id] += static_cast<float>(k);
    return metric == PatchMetric::kLoss ? -log_p : p;
  };
  return seed;
}

std::pair<int32_t, int32_t> metric_token_ids(const Model& model, const std::string& text, PatchMetric metric,
                                             const std::string& answer, const std::string& wrong) {
  if (answer.empty()) throw Error("a decoder's metric needs the answer token that follows the text (--answer)");
  if (metric == PatchMetric::kLogitDiff && wrong.empty())
    throw Error("the logit_diff metric needs a wrong token too (--wrong), or choose prob or loss");
  PromptPairs one;
  one.pairs.push_back({text, text, answer, wrong.empty() ? answer : wrong, ""});
  check_pairs(model, one);
  return {one.pairs[0].answer_id, one.pairs[0].wrong_id};
}

std::vector<double> reference_embedding(const Model& model, const std::string& reference) {
  CaptureOptions o = CaptureOptions::attention_only();
  o.attention = false, o.hidden_states = true;
  return circuits::mean_pooled(model.run(model.encode(reference), o));
}

namespace {

// Σ (a − b) ⊙ g over n elements.
double dot_difference(const float* a, const float* b, const float* g, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += (double(a[i]) - b[i]) * g[i];
  return s;
}

// The first-order change of the metric for one site: the difference of the two runs' values at the
// site times the gradient there.
double site_change(const PatchEffect& e, const Capture& src, const Capture& base, const Gradients& g) {
  const int64_t T = base.T, Dh = base.d_head, D = base.d_model, H = base.n_head, Hkv = base.n_kv_head, l = e.layer;
  const auto head_block = [&](const Tensor& a, const Tensor& b, const Tensor& d, int64_t heads, int64_t width) {
    const int64_t off = (l * heads + e.head) * T * width;
    return dot_difference(a.ptr() + off, b.ptr() + off, d.ptr() + off, T * width);
  };
  switch (e.sweep) {
    case PatchSweep::kHead:
      return head_block(src.head_outputs, base.head_outputs, g.head_outputs, H, Dh);
    case PatchSweep::kHeadPosition: {
      const int64_t off = ((l * H + e.head) * T + e.position) * Dh;
      return dot_difference(src.head_outputs.ptr() + off, base.head_outputs.ptr() + off, g.head_outputs.ptr() + off,
                            Dh);
    }
    case PatchSweep::kQuery:
      return head_block(src.queries, base.queries, g.queries, H, Dh);
    case PatchSweep::kKey:
      return head_block(src.keys, base.keys, g.keys, Hkv, Dh);
    case PatchSweep::kValue:
      return head_block(src.values, base.values, g.values, Hkv, Dh);
    case PatchSweep::kPattern:
      return head_block(src.attention, base.attention, g.attention, H, T);
    case PatchSweep::kResidual: {
      const int64_t off = (l * T + e.position) * D;
      return dot_difference(src.hidden_states.ptr() + off, base.hidden_states.ptr() + off, g.hidden_states.ptr() + off,
                            D);
    }
    case PatchSweep::kAttention:
      return dot_difference(src.attn_output.ptr() + l * T * D, base.attn_output.ptr() + l * T * D,
                            g.attn_output.ptr() + l * T * D, T * D);
    case PatchSweep::kMlp:
      return dot_difference(src.mlp_outputs.ptr() + l * T * D, base.mlp_outputs.ptr() + l * T * D,
                            g.mlp_outputs.ptr() + l * T * D, T * D);
  }
  return 0;
}

// One receiver input: its layer (n_layer for the logits), slot in Gradients::receivers, and result.
struct Receiver {
  int layer;
  int64_t slot;  // −1: the logits (Gradients::final_residual)
  HeadRef head;
  PathPatchRequest::Input input;
};

std::vector<Receiver> receivers_of(const ModelConfig& c) {
  std::vector<Receiver> out;
  const int H = c.n_head, Hkv = c.n_kv_head;
  for (int l = 1; l < c.n_layer; ++l) {
    for (int h = 0; h < H; ++h) out.push_back({l, h, {l, h}, PathPatchRequest::Input::kQuery});
    for (int k = 0; k < Hkv; ++k) out.push_back({l, H + k, {l, k}, PathPatchRequest::Input::kKey});
    for (int k = 0; k < Hkv; ++k) out.push_back({l, H + Hkv + k, {l, k}, PathPatchRequest::Input::kValue});
  }
  out.push_back({c.n_layer, -1, {c.n_layer, -1}, PathPatchRequest::Input::kLogits});
  return out;
}

// Every edge's change for one pair, added to `sum` [senders, receivers] (senders in (layer, head)
// order, receivers as receivers_of): Δc_s · ∂metric/∂(receiver input), Δc_s = Δo_s W_O[:, s]ᵀ,
// through the sandwich norm's Jacobian at the base run when the model has one. Without one every
// sender layer meets the same receiver gradients, so the senders of kEdgeSenderLayers layers are
// scored together (one product for the receivers after all of them, one per layer among them);
// with one, each sender layer has its own.
constexpr int kEdgeSenderLayers = 10;
void add_edges(const Model& model, const Capture& src, const Capture& base, const Gradients& g,
               const std::vector<Receiver>& recv, const std::vector<Tensor>& w_o, std::vector<double>& sum) {
  const ModelConfig& c = model.config();
  const int64_t T = base.T, D = c.d_model, Dh = c.d_head, H = c.n_head, TD = T * D, R = int64_t(recv.size());
  const int64_t slots = H + 2 * int64_t(c.n_kv_head), L = c.n_layer;
  const std::vector<const Tensor*> gains = model.attention_output_gains();
  const bool sandwich = !gains.empty();
  const int64_t group = sandwich ? 1 : kEdgeSenderLayers;
  // Receiver r's gradient: a slot of Gradients::receivers (receivers_of runs through them in order
  // from layer 1), the logits' the final residual; under a sandwich norm, taken back through
  // layer lu's into rmat.
  const auto gradient_of = [&](int64_t r) {
    const Receiver& v = recv[size_t(r)];
    return v.slot < 0 ? g.final_residual.ptr() : g.receivers.ptr() + (v.layer * slots + v.slot) * TD;
  };
  std::vector<float> dc(size_t(group * H * TD)), rmat(sandwich ? size_t(R * TD) : 0), scores(size_t(group * H * R));
  for (int64_t l0 = 0; l0 < L; l0 += group) {
    const int64_t layers = std::min(group, L - l0), senders = layers * H;
    // Δc of every head of layers l0 .. l0 + layers: [senders, T·D], one head per thread.
#pragma omp parallel
    {
      std::vector<float> delta(size_t(T * Dh));
#pragma omp for schedule(static)
      for (int64_t s = 0; s < senders; ++s) {
        const int64_t lu = l0 + s / H, h = s % H, off = (lu * H + h) * T * Dh;
        for (int64_t i = 0; i < T * Dh; ++i)
          delta[size_t(i)] = src.head_outputs.ptr()[off + i] - base.head_outputs.ptr()[off + i];
        // [T, Dh] · W_O[:, h·Dh .. (h+1)·Dh)ᵀ: W_O is [D, H·Dh]
        ops::matmul(delta.data(), Dh, w_o[size_t(lu)].ptr() + h * Dh, H * Dh, dc.data() + s * TD, D, T, D, Dh,
                    /*trans_b=*/true);
      }
    }
    // The receivers after layer l0.
    int64_t r0 = 0;
    while (r0 < R && recv[size_t(r0)].layer <= l0) ++r0;
    const int64_t n = R - r0;
    if (n == 0) continue;
    if (sandwich) {
#pragma omp parallel for schedule(static)
      for (int64_t r = r0; r < R; ++r)
        ops::rms_norm_backward(base.attn_output.ptr() + l0 * TD, T, D, gains[size_t(l0)]->ptr(), c.norm_eps,
                               gradient_of(r), rmat.data() + r * TD, nullptr);
      ops::matmul(rmat.data() + r0 * TD, TD, dc.data(), TD, scores.data(), senders, n, senders, TD, /*trans_b=*/true);
    } else {
      // Receivers r0 .. R − 2 lie in order in Gradients::receivers, the logits' row after them.
      // Those after the group's last layer meet every sender of the group: one product
      // (receivers × senders: sgemm ran this shape 15 % faster than its transpose); those of a layer
      // inside the group only the senders before it.
      int64_t r1 = r0;
      while (r1 < R - 1 && recv[size_t(r1)].layer < l0 + layers) ++r1;
      if (r1 < R - 1)
        ops::matmul(gradient_of(r1), TD, dc.data(), TD, scores.data() + (r1 - r0) * senders, senders, R - 1 - r1,
                    senders, TD, /*trans_b=*/true);
      for (int64_t r = r0; r < r1; r += slots) {
        const int64_t before = (recv[size_t(r)].layer - l0) * H;  // the senders of layers l0 .. this one
        ops::matmul(gradient_of(r), TD, dc.data(), TD, scores.data() + (r - r0) * senders, senders, slots, before, TD,
                    /*trans_b=*/true);
      }
      ops::matmul(gradient_of(R - 1), TD, dc.data(), TD, scores.data() + (n - 1) * senders, senders, 1, senders, TD,
                  /*trans_b=*/true);
    }
    for (int64_t s = 0; s < senders; ++s) {
      const int64_t lu = l0 + s / H, h = s % H;
      for (int64_t r = r0; r < R; ++r)
        if (recv[size_t(r)].layer > lu) sum[size_t((lu * H + h) * R + r)] += scores[size_t((r - r0) * senders + s)];
    }
  }
}

}  // namespace

AttributionReport attribution_patch(const Model& model, PromptPairs& pairs, const AttributionRequest& request) {
  circuits::check_pair_set(model, pairs, request.metric);
  const ModelConfig& c = model.config();
  if (request.edges && !c.causal)
    throw Error(c.name +
                " is a post-norm encoder: each layer's LayerNorm rescales the whole stream, so there is no "
                "residual stream for edges to run along; edge attribution needs a decoder (sites work)");
  PatchRequest as_sweep;
  as_sweep.sweeps = request.sweeps;
  as_sweep.layers = request.layers;
  const std::vector<int> layers = circuits::sweep_layers(c, as_sweep);
  AttributionReport out;
  PatchReport& rep = out.sites;
  rep.metric = request.metric;
  rep.direction = request.direction;
  rep.n_pairs = int(pairs.pairs.size());
  const std::vector<Receiver> recv = request.edges ? receivers_of(c) : std::vector<Receiver>{};
  std::vector<Tensor> w_o;
  for (int l = 0; request.edges && l < c.n_layer; ++l) w_o.push_back(model.output_projection(l));
  std::vector<double> edge_sum(request.edges ? size_t(c.n_layer) * size_t(c.n_head) * recv.size() : 0, 0.0);
  std::vector<double> change;  // per site, summed over pairs
  double base_sum = 0, clean_sum = 0, corrupt_sum = 0;
  const bool denoise = request.direction == PatchDirection::kDenoise;
  for (const PromptPair& pair : pairs.pairs) {
    const Encoding clean = model.encode(pair.clean), corrupt = model.encode(pair.corrupt);
    // The source prompt runs forward beside the base one (Model::gradients' companion: one pass
    // over the weights for both when they are short); the base one gets the backward.
    const Encoding& source_encoding = denoise ? clean : corrupt;
    GradientOptions go;
    go.forward = circuits::full_options(model);
    go.attention = go.queries_keys_values = true;
    go.receivers = request.edges;
    std::vector<double> reference;  // the cosine's: the clean embedding, the source's when denoising
    Capture early;                  // then the source runs first, its embedding seeding the metric
    if (request.metric == PatchMetric::kCosine && denoise) {
      early = model.run(source_encoding, go.forward);
      reference = circuits::mean_pooled(early);
    } else {
      go.companion = &source_encoding;
    }
    Gradients g = model.gradients(denoise ? corrupt : clean,
                                  metric_seed(model, request.metric, pair.answer_id, pair.wrong_id, reference), go);
    const Capture& source = go.companion != nullptr ? g.companion : early;
    out.forward_passes += 2;
    out.backward_passes += 1;
    const std::vector<double> ref =
        request.metric == PatchMetric::kCosine && !denoise ? circuits::mean_pooled(g.forward) : reference;
    const double source_metric = circuits::read_metric(request.metric, source, pair, ref);
    base_sum += g.metric;
    clean_sum += denoise ? source_metric : g.metric;
    corrupt_sum += denoise ? g.metric : source_metric;
    if (rep.effects.empty()) {
      rep.n_tokens = g.forward.T;
      for (PatchSweep s : request.sweeps) {
        const std::vector<PatchEffect> sites = circuits::sites_of(s, model, layers, g.forward.T, g.forward.kv_head_of);
        rep.effects.insert(rep.effects.end(), sites.begin(), sites.end());
      }
      change.assign(rep.effects.size(), 0.0);
    }
    for (size_t i = 0; i < rep.effects.size(); ++i) change[i] += site_change(rep.effects[i], source, g.forward, g);
    if (request.edges) add_edges(model, source, g.forward, g, recv, w_o, edge_sum);
  }
  const double n = double(pairs.pairs.size());
  rep.clean = clean_sum / n;
  rep.corrupt = corrupt_sum / n;
  const double base = base_sum / n;
  for (size_t i = 0; i < rep.effects.size(); ++i) {
    rep.effects[i].value = base + change[i] / n;
    rep.effects[i].normalised = circuits::normalised(rep.effects[i].value, rep.clean, rep.corrupt);
  }
  const double span = rep.clean - rep.corrupt;
  for (int lu = 0; lu < c.n_layer; ++lu)
    for (int h = 0; h < c.n_head; ++h)
      for (size_t r = 0; r < recv.size(); ++r) {
        if (recv[r].layer <= lu) continue;
        EdgeEffect e;
        e.sender = {lu, h};
        e.receiver = recv[r].head;
        e.input = recv[r].input;
        e.value = edge_sum[(size_t(lu) * size_t(c.n_head) + size_t(h)) * recv.size() + r] / n;
        e.normalised = span == 0 ? std::nan("") : e.value / span;
        out.edges.push_back(e);
      }
  return out;
}

}  // namespace headscope
