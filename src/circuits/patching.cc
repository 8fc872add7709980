// headscope — activation patching and path patching (include/headscope/circuits.h, docs/circuits.md).
// Each pair's clean and corrupted prompts run once with every activation kept; each patch is then
// a resumed pass (Model::resume) from the patched site's layer, with the site replaced inside the
// pass (Patch, src/capture/patching.cc). Independent patches run side by side on the threads.
#include <algorithm>
#include <array>
#include <cmath>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include "circuits/patching_common.h"
#include "headscope/circuits.h"
#include "headscope/error.h"

namespace headscope {
namespace circuits {

constexpr std::array<std::pair<PatchMetric, const char*>, 4> kMetrics = {{{PatchMetric::kLogitDiff, "logit_diff"},
                                                                          {PatchMetric::kProbability, "prob"},
                                                                          {PatchMetric::kLoss, "loss"},
                                                                          {PatchMetric::kCosine, "cosine"}}};
constexpr std::array<std::pair<PatchDirection, const char*>, 2> kDirections = {
    {{PatchDirection::kDenoise, "denoise"}, {PatchDirection::kNoise, "noise"}}};
constexpr std::array<std::pair<PatchSweep, const char*>, 9> kSweeps = {{{PatchSweep::kHead, "head"},
                                                                        {PatchSweep::kHeadPosition, "head_position"},
                                                                        {PatchSweep::kQuery, "q"},
                                                                        {PatchSweep::kKey, "k"},
                                                                        {PatchSweep::kValue, "v"},
                                                                        {PatchSweep::kPattern, "pattern"},
                                                                        {PatchSweep::kResidual, "resid"},
                                                                        {PatchSweep::kAttention, "attn"},
                                                                        {PatchSweep::kMlp, "mlp"}}};
constexpr std::array<std::pair<PathPatchRequest::Input, const char*>, 4> kInputs = {
    {{PathPatchRequest::Input::kQuery, "q"},
     {PathPatchRequest::Input::kKey, "k"},
     {PathPatchRequest::Input::kValue, "v"},
     {PathPatchRequest::Input::kLogits, "logits"}}};

// Refuses a metric the model cannot give.
void check_metric(const Model& model, PatchMetric metric) {
  const bool causal = model.config().causal;
  if (causal && metric == PatchMetric::kCosine)
    throw Error(model.config().name +
                " is a decoder: its metrics are logit_diff, prob and loss (cosine is for encoders)");
  if (!causal && metric != PatchMetric::kCosine)
    throw Error(model.config().name +
                " is an encoder: it has no next-token logits, so its patching metric is cosine "
                "(1 − cos of the sentence embedding); ask for the cosine metric");
}

// Mean over positions of the last hidden state [T, d_model] (the sentence embedding of
// mean-pooling sentence encoders).
std::vector<double> mean_pooled(const Capture& cap) {
  const int64_t T = cap.T, D = cap.d_model;
  const float* h = cap.hidden_states.ptr() + int64_t(cap.n_layer) * T * D;
  std::vector<double> e(size_t(D), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < D; ++i) e[size_t(i)] += h[t * D + i];
  for (double& x : e) x /= double(T);
  return e;
}

// The metric of one run (model.h: logits of the last row for decoders, hidden states for encoders).
double read_metric(PatchMetric metric, const Capture& cap, const PromptPair& pair,
                   const std::vector<double>& clean_embedding) {
  if (metric == PatchMetric::kCosine) {
    const std::vector<double> e = mean_pooled(cap);
    double dot = 0, a = 0, b = 0;
    for (size_t i = 0; i < e.size(); ++i) {
      dot += e[i] * clean_embedding[i];
      a += e[i] * e[i];
      b += clean_embedding[i] * clean_embedding[i];
    }
    return 1.0 - dot / std::sqrt(a * b);
  }
  const int64_t V = cap.logits.dim(1);
  const float* row = cap.logits.ptr() + (cap.logits.dim(0) - 1) * V;  // the last position
  if (metric == PatchMetric::kLogitDiff) return double(row[pair.answer_id]) - double(row[pair.wrong_id]);
  double top = row[0];
  for (int64_t i = 1; i < V; ++i) top = std::max(top, double(row[i]));
  double sum = 0;
  for (int64_t i = 0; i < V; ++i) sum += std::exp(double(row[i]) - top);
  const double log_p = double(row[pair.answer_id]) - top - std::log(sum);
  return metric == PatchMetric::kLoss ? -log_p : std::exp(log_p);
}

CaptureOptions full_options(const Model& model) {
  CaptureOptions o;
  o.attention = o.head_outputs = o.hidden_states = o.queries_keys = o.values = o.mlp_outputs = true;
  o.contributions = false;
  o.logits = o.last_logits = model.config().causal;
  return o;
}

// What a patched pass records: the last row's logits (decoders) or the hidden states (encoders).
CaptureOptions metric_options(const Model& model, const std::vector<Patch>* patches) {
  CaptureOptions o;
  o.attention = o.head_outputs = o.contributions = false;
  o.hidden_states = !model.config().causal;
  o.logits = o.last_logits = model.config().causal;
  o.patches = patches;
  return o;
}

PairRuns run_pair(const Model& model, const PromptPair& pair, PatchDirection direction, PatchMetric metric) {
  PairRuns r;
  const Encoding clean = model.encode(pair.clean), corrupt = model.encode(pair.corrupt);
  if (clean.size() != corrupt.size())
    throw Error("the clean prompt is " + std::to_string(clean.size()) + " tokens and the corrupted one " +
                std::to_string(corrupt.size()) + ": patching needs the same number of tokens");
  const CaptureOptions o = full_options(model);
  Capture c = model.run(clean, o), x = model.run(corrupt, o);
  if (metric == PatchMetric::kCosine) r.clean_embedding = mean_pooled(c);
  r.clean = read_metric(metric, c, pair, r.clean_embedding);
  r.corrupt = read_metric(metric, x, pair, r.clean_embedding);
  const bool denoise = direction == PatchDirection::kDenoise;
  r.base_encoding = denoise ? corrupt : clean;
  r.base = denoise ? std::move(x) : std::move(c);
  r.source = denoise ? std::move(c) : std::move(x);
  return r;
}

// The metric after `patches` (all read from layers ≥ first), resumed from `first`.
double patched_metric(const Model& model, const PairRuns& runs, const PromptPair& pair, PatchMetric metric,
                      const std::vector<Patch>& patches, int first) {
  const Capture out = model.resume(runs.base_encoding, first, runs.base.hidden_states, metric_options(model, &patches));
  return read_metric(metric, out, pair, runs.clean_embedding);
}

// Runs f(i) for i in 0 .. n − 1 on the threads, one resumed pass each (the passes' own products
// then run on one thread each); the first exception is rethrown after the loop.
template <class F>
void for_each_parallel(int64_t n, F&& f) {
  std::exception_ptr failure;
  std::mutex m;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) {
    try {
      f(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(m);
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

// The sites of one sweep, each a patch with no source yet.
std::vector<PatchEffect> sites_of(PatchSweep sweep, const Model& model, const std::vector<int>& layers, int64_t T,
                                  const std::vector<int>& kv_head_of) {
  const ModelConfig& c = model.config();
  std::vector<PatchEffect> out;
  for (int l : layers) {
    const auto add = [&](int head, int64_t position) {
      PatchEffect e;
      e.sweep = sweep;
      e.layer = l;
      e.head = head;
      e.position = position;
      out.push_back(e);
    };
    switch (sweep) {
      case PatchSweep::kHead:
      case PatchSweep::kQuery:
      case PatchSweep::kPattern:
        for (int h = 0; h < c.n_head; ++h) add(h, -1);
        break;
      case PatchSweep::kHeadPosition:
        for (int h = 0; h < c.n_head; ++h)
          for (int64_t t = 0; t < T; ++t) add(h, t);
        break;
      case PatchSweep::kKey:
      case PatchSweep::kValue:
        for (int g = 0; g < c.n_kv_head; ++g) {
          add(g, -1);
          for (int h = 0; h < c.n_head; ++h)
            if (kv_head_of[size_t(h)] == g) out.back().group.push_back(h);
        }
        break;
      case PatchSweep::kResidual:
        for (int64_t t = 0; t < T; ++t) add(-1, t);
        break;
      case PatchSweep::kAttention:
      case PatchSweep::kMlp:
        add(-1, -1);
        break;
    }
  }
  return out;
}

Patch::Site site_of(PatchSweep sweep) {
  switch (sweep) {
    case PatchSweep::kHead:
    case PatchSweep::kHeadPosition:
      return Patch::Site::kHeadOutput;
    case PatchSweep::kQuery:
      return Patch::Site::kQuery;
    case PatchSweep::kKey:
      return Patch::Site::kKey;
    case PatchSweep::kValue:
      return Patch::Site::kValue;
    case PatchSweep::kPattern:
      return Patch::Site::kPattern;
    case PatchSweep::kResidual:
      return Patch::Site::kResidual;
    case PatchSweep::kAttention:
      return Patch::Site::kAttention;
    case PatchSweep::kMlp:
      return Patch::Site::kMlp;
  }
  return Patch::Site::kHeadOutput;
}

// The metric after each site's patch alone. Sites resumed from the same layer share one packed
// pass (resume_batch) of up to kPatchBatchRows rows, each with its own patch, as its own resume()
// would record it (to float rounding): a short prompt's passes are too small to keep the threads
// and the dequantising kernels busy one by one.
constexpr int64_t kPatchBatchRows = 1024;
std::vector<double> patched_metrics(const Model& model, const PairRuns& runs, const PromptPair& pair,
                                    PatchMetric metric, const std::vector<PatchEffect>& effects) {
  std::vector<std::vector<Patch>> patches;
  patches.reserve(effects.size());
  for (const PatchEffect& e : effects)
    patches.push_back({{site_of(e.sweep), e.layer, e.head, e.position, &runs.source}});
  const size_t per_pass = size_t(std::max<int64_t>(1, kPatchBatchRows / std::max<int64_t>(runs.base.T, 1)));
  std::vector<double> values(effects.size());
  for (size_t i = 0; i < effects.size();) {
    size_t j = i;
    while (j < effects.size() && effects[j].layer == effects[i].layer && j - i < per_pass) ++j;
    const std::vector<Encoding> encodings(j - i, runs.base_encoding);
    const std::vector<const Tensor*> prefixes(j - i, &runs.base.hidden_states);
    std::vector<CaptureOptions> options;
    for (size_t k = i; k < j; ++k) options.push_back(metric_options(model, &patches[k]));
    const std::vector<Capture> outs = model.resume_batch(encodings, effects[i].layer, prefixes, options);
    for (size_t k = i; k < j; ++k) values[k] = read_metric(metric, outs[k - i], pair, runs.clean_embedding);
    i = j;
  }
  return values;
}

double normalised(double value, double clean, double corrupt) {
  return clean == corrupt ? std::nan("") : (value - corrupt) / (clean - corrupt);
}

void check_pair_set(const Model& model, PromptPairs& pairs, PatchMetric metric) {
  check_metric(model, metric);
  if (pairs.pairs.empty()) throw Error("patching needs at least one prompt pair");
  check_pairs(model, pairs);
}

void check_head(const ModelConfig& c, const HeadRef& h, const char* role) {
  if (h.layer < 0 || h.layer >= c.n_layer || h.head < 0 || h.head >= c.n_head)
    throw Error(std::string(role) + " " + std::to_string(h.layer) + "." + std::to_string(h.head) + ": " + c.name +
                " has layers 0.." + std::to_string(c.n_layer - 1) + " and heads 0.." + std::to_string(c.n_head - 1));
}

// The layers a sweep patches: those asked for, or every layer.
std::vector<int> sweep_layers(const ModelConfig& c, const PatchRequest& request) {
  std::vector<int> layers = request.layers;
  if (layers.empty())
    for (int l = 0; l < c.n_layer; ++l) layers.push_back(l);
  for (int l : layers)
    if (l < 0 || l >= c.n_layer)
      throw Error("patching: " + c.name + " has layers 0.." + std::to_string(c.n_layer - 1) + ", not " +
                  std::to_string(l));
  return layers;
}

// The senders checked; the receiver groups of a path patch: the named receivers together, every
// head after the last sender alone, or one empty group for the logits.
std::vector<std::vector<HeadRef>> receiver_groups(const ModelConfig& c, const PathPatchRequest& request) {
  if (request.senders.empty()) throw Error("path patching needs at least one sender head");
  int last_sender = 0;
  for (const HeadRef& s : request.senders) {
    check_head(c, s, "sender");
    last_sender = std::max(last_sender, s.layer);
  }
  std::vector<std::vector<HeadRef>> groups;
  if (request.input == PathPatchRequest::Input::kLogits) {
    if (!request.receivers.empty()) throw Error("path patching to the logits takes no receivers");
    groups.push_back({});
  } else if (request.receivers.empty()) {
    for (int l = last_sender + 1; l < c.n_layer; ++l)
      for (int h = 0; h < c.n_head; ++h) groups.push_back({{l, h}});
    if (groups.empty())
      throw Error("path patching: no head comes after layer " + std::to_string(last_sender) +
                  "; choose senders in an earlier layer or the logits as receiver");
  } else {
    for (const HeadRef& r : request.receivers) {
      check_head(c, r, "receiver");
      if (r.layer <= last_sender)
        throw Error("receiver " + std::to_string(r.layer) + "." + std::to_string(r.head) +
                    " is not after every sender (the last sender is in layer " + std::to_string(last_sender) + ")");
    }
    groups.push_back(request.receivers);
  }
  return groups;
}

// Σ over pairs of `passes` resumed passes of the pair's tokens.
PatchCost cost_over(const PromptPairs& pairs, int64_t passes) {
  PatchCost cost;
  for (const PromptPair& p : pairs.pairs) {
    cost.passes += passes;
    cost.token_passes += passes * std::max<int64_t>(p.n_tokens, 1);
  }
  return cost;
}

}  // namespace circuits
using namespace circuits;  // NOLINT: the helpers above, shared with attribution patching (patching_common.h)

const char* patch_metric_name(PatchMetric m) { return to_name(m, kMetrics); }
const char* patch_direction_name(PatchDirection d) { return to_name(d, kDirections); }
const char* patch_sweep_name(PatchSweep s) { return to_name(s, kSweeps); }
const char* path_input_name(PathPatchRequest::Input i) { return to_name(i, kInputs); }
PatchMetric patch_metric_from_name(const std::string& n) { return from_name(n, kMetrics, "patching metric"); }
PatchDirection patch_direction_from_name(const std::string& n) { return from_name(n, kDirections, "direction"); }
PatchSweep patch_sweep_from_name(const std::string& n) { return from_name(n, kSweeps, "patching site"); }
PathPatchRequest::Input path_input_from_name(const std::string& n) { return from_name(n, kInputs, "receiver input"); }

PatchParts patch_sweep_parts(const Model& model, PromptPairs& pairs, const PatchRequest& request) {
  check_pair_set(model, pairs, request.metric);
  const std::vector<int> layers = sweep_layers(model.config(), request);
  PatchParts parts;
  parts.metric = request.metric;
  parts.direction = request.direction;
  parts.n_tokens = pairs.pairs[0].n_tokens;
  for (const PromptPair& pair : pairs.pairs) {
    const PairRuns runs = run_pair(model, pair, request.direction, request.metric);
    std::vector<PatchEffect> effects;
    for (PatchSweep s : request.sweeps) {
      std::vector<PatchEffect> more = sites_of(s, model, layers, runs.base.T, runs.base.kv_head_of);
      effects.insert(effects.end(), more.begin(), more.end());
    }
    if (parts.clean.empty()) {  // the first pair sets the sites; later pairs must give the same
      parts.sites = effects;
    } else if (effects.size() != parts.sites.size()) {
      throw Error("patching per position needs every pair to have the same number of tokens (pair \"" + pair.clean +
                  "\" differs from the first)");
    }
    const std::vector<double> values = patched_metrics(model, runs, pair, request.metric, effects);
    parts.values.insert(parts.values.end(), values.begin(), values.end());
    parts.clean.push_back(runs.clean);
    parts.corrupt.push_back(runs.corrupt);
    parts.passes += int64_t(effects.size());
  }
  return parts;
}

void PatchParts::append(const PatchParts& more) {
  const auto same_site = [](const PatchEffect& a, const PatchEffect& b) {
    return a.sweep == b.sweep && a.layer == b.layer && a.head == b.head && a.position == b.position;
  };
  if (more.metric != metric || more.direction != direction || more.sites.size() != sites.size() ||
      !std::equal(sites.begin(), sites.end(), more.sites.begin(), same_site))
    throw Error(
        "patching parts: these pairs patched other sites (or with another metric or direction) than the first "
        "ones; parts merge only from the same request over prompts of the same token count");
  clean.insert(clean.end(), more.clean.begin(), more.clean.end());
  corrupt.insert(corrupt.end(), more.corrupt.begin(), more.corrupt.end());
  values.insert(values.end(), more.values.begin(), more.values.end());
  passes += more.passes;
}

PatchReport patch_report(const PatchParts& parts) {
  const size_t n = parts.pairs(), S = parts.sites.size();
  if (n == 0) throw Error("patching: no pair");
  if (parts.corrupt.size() != n || parts.values.size() != n * S)
    throw Error("patching parts: " + std::to_string(parts.values.size()) + " values for " + std::to_string(n) +
                " pairs x " + std::to_string(S) + " sites");
  PatchReport report;
  report.metric = parts.metric;
  report.direction = parts.direction;
  report.n_pairs = int(n);
  report.n_tokens = parts.n_tokens;
  report.effects = parts.sites;
  report.passes = parts.passes;
  std::vector<double> sums(S, 0.0);
  for (size_t p = 0; p < n; ++p) {  // in pair order: the same sums whatever the shards were
    for (size_t i = 0; i < S; ++i) sums[i] += parts.values[p * S + i];
    report.clean += parts.clean[p];
    report.corrupt += parts.corrupt[p];
  }
  report.clean /= double(n);
  report.corrupt /= double(n);
  for (size_t i = 0; i < S; ++i) {
    report.effects[i].value = sums[i] / double(n);
    report.effects[i].normalised = normalised(report.effects[i].value, report.clean, report.corrupt);
  }
  return report;
}

PatchReport patch_sweep(const Model& model, PromptPairs& pairs, const PatchRequest& request) {
  return patch_report(patch_sweep_parts(model, pairs, request));
}

HeadSetEffect patch_heads_together(const Model& model, PromptPairs& pairs, const std::vector<HeadRef>& heads,
                                   PatchDirection direction, PatchMetric metric) {
  const ModelConfig& c = model.config();
  check_pair_set(model, pairs, metric);
  if (heads.empty()) throw Error("name at least one head to patch");
  int first = c.n_layer;
  for (const HeadRef& h : heads) {
    check_head(c, h, "head");
    first = std::min(first, h.layer);
  }
  HeadSetEffect r;
  r.heads = heads;
  r.n_pairs = int(pairs.pairs.size());
  for (const PromptPair& pair : pairs.pairs) {
    const PairRuns runs = run_pair(model, pair, direction, metric);
    std::vector<Patch> patches;
    for (const HeadRef& h : heads) patches.push_back({Patch::Site::kHeadOutput, h.layer, h.head, -1, &runs.source});
    r.value += patched_metric(model, runs, pair, metric, patches, first);
    r.clean += runs.clean;
    r.corrupt += runs.corrupt;
  }
  const double n = double(r.n_pairs);
  r.value /= n, r.clean /= n, r.corrupt /= n;
  r.normalised = normalised(r.value, r.clean, r.corrupt);
  return r;
}

PatchCost patch_sweep_cost(const Model& model, const PromptPairs& pairs, const PatchRequest& request) {
  const ModelConfig& c = model.config();
  check_metric(model, request.metric);
  const std::vector<int> layers = sweep_layers(c, request);
  if (pairs.pairs.empty()) return {};
  // The sites of the first pair's length (sites_of: one pass each); a key/value head's group does
  // not change the count, so any map of query heads to key/value heads will do.
  std::vector<int> kv_head_of(size_t(c.n_head));
  for (int h = 0; h < c.n_head; ++h) kv_head_of[size_t(h)] = h * c.n_kv_head / c.n_head;
  PatchCost cost;
  for (const PromptPair& p : pairs.pairs) {
    const int64_t T = std::max<int64_t>(p.n_tokens, 1);
    int64_t sites = 0;
    for (PatchSweep s : request.sweeps) sites += int64_t(sites_of(s, model, layers, T, kv_head_of).size());
    cost.passes += sites;
    cost.token_passes += sites * T;
  }
  return cost;
}

PatchCost path_patch_cost(const Model& model, const PromptPairs& pairs, const PathPatchRequest& request) {
  check_metric(model, request.metric);
  const std::vector<std::vector<HeadRef>> groups = receiver_groups(model.config(), request);
  const bool logits = request.input == PathPatchRequest::Input::kLogits;
  return cost_over(pairs, 1 + (logits ? 0 : int64_t(groups.size())));
}

PathPatchReport path_patch(const Model& model, PromptPairs& pairs, const PathPatchRequest& request) {
  const ModelConfig& c = model.config();
  check_pair_set(model, pairs, request.metric);
  using Input = PathPatchRequest::Input;
  const std::vector<std::vector<HeadRef>> groups = receiver_groups(c, request);
  int first_sender = c.n_layer;
  for (const HeadRef& s : request.senders) first_sender = std::min(first_sender, s.layer);
  PathPatchReport report;
  report.request = request;
  report.n_pairs = int(pairs.pairs.size());
  std::vector<double> sums(groups.size(), 0.0);
  for (const PromptPair& pair : pairs.pairs) {
    const PairRuns runs = run_pair(model, pair, request.direction, request.metric);
    // Run 2: senders from the source; every other head and every feed-forward block frozen.
    std::vector<Patch> run2;
    for (int l = first_sender; l < c.n_layer; ++l) {
      for (int h = 0; h < c.n_head; ++h) {
        const bool sender =
            std::find(request.senders.begin(), request.senders.end(), HeadRef{l, h}) != request.senders.end();
        run2.push_back({Patch::Site::kHeadOutput, l, h, -1, sender ? &runs.source : &runs.base});
      }
      run2.push_back({Patch::Site::kMlp, l, -1, -1, &runs.base});
    }
    CaptureOptions o2 = metric_options(model, &run2);
    o2.queries_keys = o2.values = request.input != Input::kLogits;
    o2.hidden_states = true;  // an encoder's metric; the shapes a source must have
    const Capture frozen = model.resume(runs.base_encoding, first_sender, runs.base.hidden_states, o2);
    std::vector<double> values(groups.size());
    if (request.input == Input::kLogits) {
      values[0] = read_metric(request.metric, frozen, pair, runs.clean_embedding);
    } else {
      for_each_parallel(int64_t(groups.size()), [&](int64_t i) {
        std::vector<Patch> run3;
        int first = c.n_layer;
        for (const HeadRef& r : groups[size_t(i)]) {
          first = std::min(first, r.layer);
          if (request.input == Input::kQuery) {
            run3.push_back({Patch::Site::kQuery, r.layer, r.head, -1, &frozen});
          } else {  // the key/value head the receiver reads (its whole group), once
            const int g = runs.base.kv_head_of[size_t(r.head)];
            const Patch::Site site = request.input == Input::kKey ? Patch::Site::kKey : Patch::Site::kValue;
            const bool seen = std::any_of(run3.begin(), run3.end(),
                                          [&](const Patch& p) { return p.layer == r.layer && p.head == g; });
            if (!seen) run3.push_back({site, r.layer, g, -1, &frozen});
          }
        }
        values[size_t(i)] = patched_metric(model, runs, pair, request.metric, run3, first);
      });
    }
    for (size_t i = 0; i < values.size(); ++i) sums[i] += values[i];
    report.clean += runs.clean;
    report.corrupt += runs.corrupt;
  }
  const double n = double(report.n_pairs);
  report.clean /= n;
  report.corrupt /= n;
  for (size_t i = 0; i < groups.size(); ++i)
    report.effects.push_back({groups[i], sums[i] / n, normalised(sums[i] / n, report.clean, report.corrupt)});
  return report;
}

}  // namespace headscope
