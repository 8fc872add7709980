// headscope — the results of the causal experiments (headscope/pipeline.h; docs/causal.md): a set
// of heads ablated in one text, every head's importance ranked against its proxy, and the pruning
// curves. The CLI, the server and the Python package call these and only print the result.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <numeric>
#include <random>

#include "headscope/pipeline.h"

namespace headscope {
namespace {

// Wall and CPU seconds since construction.
class Stopwatch {
 public:
  Seconds elapsed() const {
    return {std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_).count(),
            double(std::clock() - cpu_) / CLOCKS_PER_SEC};
  }

 private:
  std::chrono::steady_clock::time_point wall_ = std::chrono::steady_clock::now();
  std::clock_t cpu_ = std::clock();
};

// Mean and sample standard deviation (0 for fewer than two values).
std::pair<double, double> mean_sd(const std::vector<double>& v) {
  double mean = 0, sd = 0;
  for (double x : v) mean += x / double(v.size());
  for (double x : v) sd += std::pow(x - mean, 2);
  return {mean, v.size() > 1 ? std::sqrt(sd / double(v.size() - 1)) : 0.0};
}

}  // namespace

void rank_importance(std::vector<HeadImportance>& heads) {
  std::vector<size_t> order(heads.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return heads[a].ablation > heads[b].ablation; });
  for (size_t r = 0; r < order.size(); ++r) heads[order[r]].rank = static_cast<int>(r) + 1;
}

std::vector<HeadImportance> by_rank(const std::vector<HeadImportance>& heads) {
  std::vector<HeadImportance> ranked = heads;
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const HeadImportance& x, const HeadImportance& y) { return x.ablation > y.ablation; });
  return ranked;
}

ImportanceResult importance_from_parts(const ImportanceParts& parts) {
  ImportanceResult r;
  r.n_layer = parts.n_layer, r.n_head = parts.n_head, r.causal = parts.causal;
  r.mode = Ablation::Mode::kZero;
  for (const int64_t t : parts.tokens) r.tokens += t;
  r.heads = head_importance(parts);
  rank_importance(r.heads);
  std::vector<double> ablation, proxy;
  for (const HeadImportance& h : r.heads) ablation.push_back(h.ablation), proxy.push_back(h.proxy);
  r.spearman = spearman(ablation, proxy);
  return r;
}

ImportanceResult measure_importance(const Ablator& ablator) {
  const Stopwatch clock;
  ImportanceResult r = importance_from_parts(ablator.importance_parts());
  r.mode = ablator.options().mode;
  r.seconds = clock.elapsed();
  return r;
}

TextAblation ablate_text(const Model& model, const Encoding& text, const std::vector<HeadRef>& heads,
                         Ablation::Mode mode, const std::vector<std::string>& reference,
                         const std::string& reference_name) {
  AblateOptions options;
  options.mode = mode;
  if (mode != Ablation::Mode::kZero)
    for (const std::string& s : reference) options.reference.push_back(model.encode(s));
  const Ablator ablator(model, {text}, std::move(options));
  AblationResult result = ablator.ablate(heads);
  TextAblation out;
  out.heads = heads;
  out.mode = mode;
  out.causal = model.config().causal;
  out.reference = mode == Ablation::Mode::kZero ? std::string() : reference_name;
  out.effect = result.effect;
  out.text = std::move(result.texts.front());
  return out;
}

int removable_heads(const std::vector<PruningPoint>& curve) {
  int k = 0;
  for (const PruningPoint& p : curve) {
    if (std::abs(p.change) >= 0.01) break;
    k = p.removed;
  }
  return k;
}

PruningResult prune_heads(const Ablator& curves, const ImportanceResult& importance, const PruneOptions& options) {
  const Stopwatch clock;
  PruningResult r;
  r.texts = curves.texts().size();
  r.held_out = options.held_out;
  const std::vector<HeadImportance> ranked = by_rank(importance.heads);
  std::vector<HeadRef> least_first;
  for (auto it = ranked.rbegin(); it != ranked.rend(); ++it) least_first.push_back(it->head);
  r.importance_order = curves.pruning_curve(least_first, options.step);
  const double n = double(importance.heads.size());
  for (int k = 0; k < options.random_orders; ++k) {
    std::vector<HeadRef> random;
    for (const HeadImportance& h : importance.heads) random.push_back(h.head);
    std::mt19937_64 rng(options.seed + uint64_t(k));
    std::shuffle(random.begin(), random.end(), rng);
    r.random_orders.push_back(curves.pruning_curve(random, options.step));
    r.removable_shares_random.push_back(removable_heads(r.random_orders.back()) / n);
  }
  std::tie(r.removable_share_mean, r.removable_share_sd) = mean_sd(r.removable_shares_random);
  for (size_t p = 0; p < r.importance_order.size(); ++p) {
    std::vector<double> change;
    for (const auto& curve : r.random_orders) change.push_back(curve[p].change);
    const auto [mean, sd] = mean_sd(change);
    r.random_summary.push_back({r.importance_order[p].removed, mean, sd});
  }
  r.removable_share_importance = removable_heads(r.importance_order) / n;
  r.seconds = clock.elapsed();
  return r;
}

const char* ablation_measure(const ModelConfig& c) {
  return c.causal ? "delta mean next-token loss" : "1 - cos of the mean-pooled embedding";
}

}  // namespace headscope
