// headscope — head ablation over a set of texts (headscope/pipeline.h; formulas in docs/causal.md).
// The ablation itself happens inside the forward pass (Ablation, applied by the capture's
// Recorder before W_O); this file runs the clean texts once, prepares what a mode needs from the
// reference corpus, reruns each text from the first ablated layer and measures the change.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <exception>
#include <numeric>
#include <random>
#include <string>

#include "headscope/error.h"
#include "headscope/limits.h"
#include "headscope/pipeline.h"
#include "ops/exp.h"

namespace headscope {
namespace {

// What every ablation pass records: the residual stream and, for decoders, the logits.
CaptureOptions stream_only(const Model& model) {
  CaptureOptions o;
  o.attention = o.head_outputs = o.contributions = false;
  o.hidden_states = true;
  o.logits = model.config().causal;
  return o;
}

int parse_index(std::string_view s, std::string_view item) {
  int value = -1;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || value < 0)
    throw Error("head list: \"" + std::string(item) + "\" is not layer.head (two numbers from 0, e.g. 3.1)");
  return value;
}

// Mean over the rows of x [T, D]: the sentence-transformers mean pooling (every token is
// attended to in a single unpadded text, so the attention-masked mean is the plain mean).
std::vector<double> mean_pool(const float* x, int64_t T, int64_t D) {
  std::vector<double> m(size_t(D), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < D; ++i) m[size_t(i)] += x[t * D + i];
  for (double& v : m) v /= double(T);
  return m;
}

// body(i) for i = 0 .. n − 1, the texts spread over the OpenMP threads (one text per thread: a
// sentence is too short for the GEMMs inside one pass to keep the threads busy, and passes inside
// this region run single-threaded). The first exception thrown is rethrown here.
template <class Body>
void for_each_text(size_t n, Body body) {
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t i = 0; i < n; ++i) {
    try {
      body(i);
    } catch (...) {
#pragma omp critical(headscope_ablation_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

// The texts in packed passes (Model::run_batch / resume_batch), [begin, end) in text order: at
// most kAblationBatchRows rows, and for a decoder at most kAblationBatchLogitBytes of logits
// (every row's, [rows, vocab], held twice while the unembedding's output is handed out).
// A packed pass gives each text the same numbers whatever its companions, so the clean runs and
// every ablated pass agree bit for bit where nothing was ablated.
constexpr int64_t kAblationBatchRows = 4096;
constexpr uint64_t kAblationBatchLogitBytes = uint64_t{1} << 30;

std::vector<std::pair<size_t, size_t>> packed_batches(const Model& model, const std::vector<Encoding>& texts) {
  const ModelConfig& c = model.config();
  int64_t max_rows = kAblationBatchRows;
  if (c.causal)
    max_rows = std::clamp<int64_t>(int64_t(kAblationBatchLogitBytes / (2 * sizeof(float) * uint64_t(c.vocab_size))), 1,
                                   kAblationBatchRows);
  std::vector<std::pair<size_t, size_t>> out;
  int64_t rows = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const int64_t T = int64_t(texts[i].size());
    if (out.empty() || rows + T > max_rows) {
      out.push_back({i, i});
      rows = 0;
    }
    out.back().second = i + 1;
    rows += T;
  }
  return out;
}

}  // namespace

std::vector<HeadRef> parse_heads(std::string_view spec, const ModelConfig& c) {
  if (spec.size() > limits::kMaxHeadSpecBytes)
    throw ResourceError("head list: it is " + std::to_string(spec.size()) + " characters; at most " +
                        std::to_string(limits::kMaxHeadSpecBytes));
  std::vector<HeadRef> heads;
  size_t begin = 0;
  while (true) {
    const size_t comma = std::min(spec.find(',', begin), spec.size());
    const std::string_view item = spec.substr(begin, comma - begin);
    const size_t dot = item.find('.');
    if (item.empty()) throw Error("head list: an empty item in \"" + std::string(spec) + "\" (write e.g. 3.1,2.8)");
    if (dot == std::string_view::npos)
      throw Error("head list: \"" + std::string(item) + "\" is not layer.head (two numbers from 0, e.g. 3.1)");
    const HeadRef ref{parse_index(item.substr(0, dot), item), parse_index(item.substr(dot + 1), item)};
    if (ref.layer >= c.n_layer || ref.head >= c.n_head)
      throw Error("head list: " + std::string(item) + " is not a head of " + c.name + " (layers 0.." +
                  std::to_string(c.n_layer - 1) + ", heads 0.." + std::to_string(c.n_head - 1) + ")");
    if (std::find(heads.begin(), heads.end(), ref) != heads.end())
      throw Error("head list: " + std::string(item) + " is named twice");
    heads.push_back(ref);
    if (comma == spec.size()) break;
    begin = comma + 1;
  }
  return heads;
}

Ablation::Mode parse_ablation_mode(std::string_view name) {
  if (name == "zero") return Ablation::Mode::kZero;
  if (name == "mean") return Ablation::Mode::kMean;
  if (name == "resample") return Ablation::Mode::kResample;
  throw Error("\"" + std::string(name) + "\" is not an ablation mode (zero, mean or resample)");
}

const char* ablation_mode_name(Ablation::Mode mode) {
  switch (mode) {
    case Ablation::Mode::kZero:
      return "zero";
    case Ablation::Mode::kMean:
      return "mean";
    case Ablation::Mode::kResample:
      return "resample";
  }
  return "?";
}

Ablator::Ablator(const Model& model, std::vector<Encoding> texts, AblateOptions options)
    : model_(model), texts_(std::move(texts)), options_(std::move(options)) {
  const ModelConfig& c = model_.config();
  if (texts_.empty()) throw Error("ablation: no texts");
  if (texts_.size() > limits::kMaxAblationTexts || options_.reference.size() > limits::kMaxAblationTexts)
    throw ResourceError("ablation: at most " + std::to_string(limits::kMaxAblationTexts) +
                        " texts and as many reference texts (split the corpus)");
  for (size_t i = 0; i < texts_.size(); ++i)
    if (c.causal && texts_[i].size() < 2)
      throw Error("ablation: text " + std::to_string(i) + " has " + std::to_string(texts_[i].size()) +
                  " token(s); a next-token loss needs at least 2");
  clean_.resize(texts_.size());
  batches_ = packed_batches(model_, texts_);
  const CaptureOptions stream = stream_only(model_);
  for (const auto& batch : batches_) {
    const size_t begin = batch.first, end = batch.second;  // not a structured binding: lambdas capture them
    std::vector<Capture> caps = model_.run_batch(std::span(texts_).subspan(begin, end - begin), {&stream, 1});
    for_each_text(end - begin, [&](size_t j) { clean_[begin + j] = summarise(texts_[begin + j], std::move(caps[j])); });
  }
  const bool own_texts = options_.reference.empty();
  const std::vector<Encoding>& reference = own_texts ? texts_ : options_.reference;
  if (options_.mode == Ablation::Mode::kZero) return;
  if (options_.mode == Ablation::Mode::kResample && reference.size() < (own_texts ? 2u : 1u))
    throw Error("resample ablation needs a second text to take head outputs from (a reference corpus, or more texts)");

  CaptureOptions outputs;  // the head outputs o_h of the plain model
  outputs.attention = outputs.contributions = outputs.hidden_states = false;
  outputs.head_outputs = true;
  const int64_t L = c.n_layer, H = c.n_head, Dh = c.d_head;
  if (options_.mode == Ablation::Mode::kMean) {
    // mean[l, h] = Σ over reference texts and their positions of o_h(t) / (number of positions)
    std::vector<double> sum(size_t(L * H * Dh), 0.0);
    int64_t positions = 0;
    for (const Encoding& e : reference) {
      const Capture cap = model_.run(e, outputs);
      const int64_t T = cap.T;
      for (int64_t lh = 0; lh < L * H; ++lh)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t i = 0; i < Dh; ++i) sum[size_t(lh * Dh + i)] += cap.head_outputs.ptr()[(lh * T + t) * Dh + i];
      positions += T;
    }
    mean_ = Tensor({L, H, Dh});
    for (size_t i = 0; i < sum.size(); ++i) mean_.data[i] = float(sum[i] / double(positions));
    return;
  }
  // Resample: each text draws one donor from the reference (never itself when the reference is the
  // texts), with a generator seeded by options.seed.
  std::mt19937_64 rng(options_.seed);
  donors_.resize(reference.size());
  for_each_text(reference.size(), [&](size_t i) { donors_[i] = model_.run(reference[i], outputs).head_outputs; });
  for (size_t i = 0; i < texts_.size(); ++i) {
    const size_t n = own_texts ? reference.size() - 1 : reference.size();
    size_t j = std::uniform_int_distribution<size_t>(0, n - 1)(rng);
    if (own_texts && j >= i) ++j;  // skip the text itself
    donor_of_.push_back(int(j));
  }
}

Ablator::Clean Ablator::summarise(const Encoding& text, Capture&& cap) const {
  const int64_t T = cap.T, D = cap.d_model, L = cap.n_layer;
  Clean clean;
  clean.hidden = std::move(cap.hidden_states);
  if (!model_.config().causal) {
    clean.pooled = mean_pool(clean.hidden.ptr() + L * T * D, T, D);
    return clean;
  }
  const int64_t V = cap.logits.dim(1);
  for (int64_t t = 0; t < T; ++t) {
    const float* row = cap.logits.ptr() + t * V;
    clean.top1.push_back(int(std::max_element(row, row + V) - row));
    // −log softmax(row)[next] = logsumexp(row) − row[next], in double; softmax(row)[top] = 1 / z
    // (exp_approx: within 2 ulp of std::exp and vectorised; the vocabulary-wide sum of every row
    // of every ablated pass was a tenth of a decoder's ablation time with std::exp in double)
    const float top = row[clean.top1.back()];
    double z = 0;
#pragma omp simd reduction(+ : z)
    for (int64_t v = 0; v < V; ++v) z += double(ops::exp_approx(row[v] - top));
    if (t + 1 == T) {
      clean.last_p = 1.0 / z;
      break;
    }
    clean.loss.push_back(float(std::log(z) + top - row[text.tokens[size_t(t + 1)].id]));
  }
  return clean;
}

TextEffect Ablator::compare(size_t i, Capture&& ablated) const {
  const int64_t T = ablated.T, D = ablated.d_model, L = ablated.n_layer;
  const Clean& before = clean_[i];
  const Clean after = summarise(texts_[i], std::move(ablated));
  TextEffect e;
  e.T = int(T);
  if (options_.mode == Ablation::Mode::kResample) e.donor = donor_of_[i];
  for (int64_t l = 1; l <= L; ++l) {
    double diff = 0, norm = 0;
    const float *a = after.hidden.ptr() + l * T * D, *b = before.hidden.ptr() + l * T * D;
    for (int64_t k = 0; k < T * D; ++k) {
      diff += (double(a[k]) - b[k]) * (double(a[k]) - b[k]);
      norm += double(b[k]) * b[k];
    }
    e.layer_change.push_back(std::sqrt(diff / norm));
  }
  if (model_.config().causal) {
    e.loss_before = before.loss;
    e.loss_after = after.loss;
    e.mean_loss_before = std::accumulate(before.loss.begin(), before.loss.end(), 0.0) / double(before.loss.size());
    e.mean_loss_after = std::accumulate(after.loss.begin(), after.loss.end(), 0.0) / double(after.loss.size());
    for (int64_t t = 0; t < T; ++t)
      if (after.top1[size_t(t)] != before.top1[size_t(t)]) e.top1_changed.push_back(int(t));
    e.last_top1_before = before.top1.back(), e.last_top1_after = after.top1.back();
    e.last_p_before = before.last_p, e.last_p_after = after.last_p;
    e.last_text_before = model_.tokenizer().decode({static_cast<int32_t>(e.last_top1_before)});
    e.last_text_after = model_.tokenizer().decode({static_cast<int32_t>(e.last_top1_after)});
  } else {
    double dot = 0, na = 0, nb = 0;
    for (int64_t k = 0; k < D; ++k) {
      dot += after.pooled[size_t(k)] * before.pooled[size_t(k)];
      na += after.pooled[size_t(k)] * after.pooled[size_t(k)];
      nb += before.pooled[size_t(k)] * before.pooled[size_t(k)];
    }
    e.embedding_distance = 1.0 - dot / std::sqrt(na * nb);
  }
  return e;
}

AblationResult Ablator::ablate(const std::vector<HeadRef>& heads) const {
  const ModelConfig& c = model_.config();
  for (const HeadRef& h : heads)
    if (h.layer < 0 || h.layer >= c.n_layer || h.head < 0 || h.head >= c.n_head)
      throw Error("ablation: " + std::to_string(h.layer) + "." + std::to_string(h.head) + " is not a head of " +
                  c.name);
  AblationResult result;
  result.heads = heads;
  Ablation ablation;
  ablation.mode = options_.mode;
  ablation.heads = heads;
  ablation.mean = &mean_;
  ablation.seed = options_.seed;
  CaptureOptions options = stream_only(model_);
  options.ablation = &ablation;
  // Layers before the first ablated one are the clean run's: start from its residual stream there.
  int first = c.n_layer;
  for (const HeadRef& h : heads) first = std::min(first, h.layer);
  result.texts.resize(texts_.size());
  // Per text: its own Ablation (the donor is per text) and the clean run's residual stream.
  std::vector<Ablation> mine(texts_.size(), ablation);
  std::vector<CaptureOptions> per_text(texts_.size(), options);
  std::vector<const Tensor*> prefixes(texts_.size());
  for (size_t i = 0; i < texts_.size(); ++i) {
    if (options_.mode == Ablation::Mode::kResample) mine[i].donor = &donors_[size_t(donor_of_[i])];
    per_text[i].ablation = &mine[i];
    prefixes[i] = &clean_[i].hidden;
  }
  // Nothing ablated: the whole pass again, which must give the clean run (every effect 0).
  const int from = first == c.n_layer ? 0 : first;
  for (const auto& batch : batches_) {
    const size_t begin = batch.first, end = batch.second;  // not a structured binding: lambdas capture them
    const size_t n = end - begin;
    std::vector<Capture> caps =
        model_.resume_batch(std::span(texts_).subspan(begin, n), from, std::span(prefixes).subspan(begin, n),
                            std::span(per_text).subspan(begin, n));
    for_each_text(n, [&](size_t j) { result.texts[begin + j] = compare(begin + j, std::move(caps[j])); });
  }
  for (const TextEffect& e : result.texts)  // summed in text order: the same total on any thread count
    result.effect += c.causal ? e.mean_loss_after - e.mean_loss_before : e.embedding_distance;
  result.effect /= double(texts_.size());
  return result;
}

ImportanceParts Ablator::importance_parts() const {
  const ModelConfig& c = model_.config();
  const int64_t L = c.n_layer, H = c.n_head, D = c.d_model, N = L * H, n = int64_t(texts_.size());
  ImportanceParts parts;
  parts.n_layer = c.n_layer, parts.n_head = c.n_head, parts.causal = c.causal;
  parts.effect.resize(size_t(n * N));
  parts.proxy.resize(size_t(n * N));
  for (const Encoding& e : texts_) parts.tokens.push_back(int64_t(e.size()));
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      const AblationResult r = ablate({{l, h}});
      for (int64_t i = 0; i < n; ++i) {
        const TextEffect& e = r.texts[size_t(i)];
        parts.effect[size_t(i * N + l * H + h)] =
            c.causal ? e.mean_loss_after - e.mean_loss_before : e.embedding_distance;
      }
    }
  // The proxy from one plain run per text with the contributions: ‖O_h W_O,hᵀ (t)‖ / ‖x_l(t)‖.
  CaptureOptions contributions;
  contributions.attention = contributions.head_outputs = false;
  contributions.contributions = contributions.hidden_states = true;
  for (int64_t i = 0; i < n; ++i) {
    const Capture cap = model_.run(texts_[size_t(i)], contributions);
    const int64_t T = cap.T;
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < H; ++h) {
        double ratio = 0;
        for (int64_t t = 0; t < T; ++t) {
          const float* o = cap.contributions.ptr() + ((l * H + h) * T + t) * D;
          const float* x = cap.hidden_states.ptr() + (l * T + t) * D;
          double no = 0, nx = 0;
          for (int64_t k = 0; k < D; ++k) no += double(o[k]) * o[k], nx += double(x[k]) * x[k];
          ratio += std::sqrt(no / nx);
        }
        parts.proxy[size_t(i * N + l * H + h)] = ratio / double(T);
      }
  }
  return parts;
}

std::vector<HeadImportance> Ablator::importance() const { return head_importance(importance_parts()); }

void ImportanceParts::append(const ImportanceParts& more) {
  if (more.n_layer != n_layer || more.n_head != n_head || more.causal != causal)
    throw Error("importance parts of a " + std::to_string(more.n_layer) + " x " + std::to_string(more.n_head) +
                " model cannot join parts of a " + std::to_string(n_layer) + " x " + std::to_string(n_head) + " one");
  effect.insert(effect.end(), more.effect.begin(), more.effect.end());
  proxy.insert(proxy.end(), more.proxy.begin(), more.proxy.end());
  tokens.insert(tokens.end(), more.tokens.begin(), more.tokens.end());
}

std::vector<HeadImportance> head_importance(const ImportanceParts& parts) {
  const int64_t N = int64_t(parts.n_layer) * parts.n_head, n = int64_t(parts.texts());
  if (n == 0) throw Error("importance: no text");
  if (N <= 0 || parts.effect.size() != size_t(n * N) || parts.proxy.size() != size_t(n * N))
    throw Error("importance: the parts hold " + std::to_string(parts.effect.size()) + " effects and " +
                std::to_string(parts.proxy.size()) + " proxies for " + std::to_string(n) + " texts x " +
                std::to_string(N) + " heads");
  std::vector<HeadImportance> out;
  for (int l = 0; l < parts.n_layer; ++l)
    for (int h = 0; h < parts.n_head; ++h) {
      const int64_t k = int64_t(l) * parts.n_head + h;
      HeadImportance head{{l, h}, 0.0, 0.0};
      for (int64_t i = 0; i < n; ++i) head.ablation += parts.effect[size_t(i * N + k)];  // in text order
      head.ablation /= double(n);
      for (int64_t i = 0; i < n; ++i) head.proxy += parts.proxy[size_t(i * N + k)] / double(n);
      out.push_back(head);
    }
  return out;
}

std::vector<PruningPoint> Ablator::pruning_curve(const std::vector<HeadRef>& order, int step) const {
  if (step < 1) throw Error("pruning curve: the step must be at least 1 head");
  double before = 0;  // the corpus's mean loss, for the relative change (decoders)
  for (const Clean& clean : clean_)
    if (!clean.loss.empty())
      before += std::accumulate(clean.loss.begin(), clean.loss.end(), 0.0) / double(clean.loss.size()) /
                double(clean_.size());
  std::vector<PruningPoint> curve;
  const int n = int(order.size());
  for (int k = 0; k <= n; k = (k == n ? n + 1 : std::min(n, k + step))) {
    const double effect = ablate({order.begin(), order.begin() + k}).effect;
    curve.push_back({k, effect, model_.config().causal ? effect / before : effect});
  }
  return curve;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 2) return NAN;
  const auto ranks = [](const std::vector<double>& v) {
    std::vector<size_t> idx(v.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
    std::vector<double> r(v.size());
    for (size_t i = 0; i < idx.size();) {  // ties share their mean rank
      size_t j = i;
      while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
      for (size_t k = i; k <= j; ++k) r[idx[k]] = (double(i) + double(j)) / 2.0 + 1.0;
      i = j + 1;
    }
    return r;
  };
  const std::vector<double> rx = ranks(x), ry = ranks(y);
  const double mx = std::accumulate(rx.begin(), rx.end(), 0.0) / double(rx.size());
  const double my = std::accumulate(ry.begin(), ry.end(), 0.0) / double(ry.size());
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < rx.size(); ++i) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  return sxy / std::sqrt(sxx * syy);
}

}  // namespace headscope
