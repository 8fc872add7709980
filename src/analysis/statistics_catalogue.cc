// The catalogue of per-head statistics (headscope/analysis.h): one entry per HeadStats field, with
// the words every frontend shows for it. The formulas (statistics.cc) and these words read the same
// constants, kSparsityFraction, kCoverMass, kLocalWindow and kMaxOffset; docs/metrics.md has the
// maths.
#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "headscope/analysis.h"

namespace headscope::analysis {
namespace {

// A constant as a person reads it: 0.1 → "0.1", 3 → "3".
std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}
// A share as a percentage: 0.9 → "90 %".
std::string percent(double x) { return number(x * 100) + " %"; }

constexpr StatConstant kSparsity{"sparsity_fraction", kSparsityFraction, false};
constexpr StatConstant kCover{"cover_mass", kCoverMass, false};
constexpr StatConstant kLocal{"local_window", kLocalWindow, true};
constexpr StatConstant kOffsets{"max_offset", kMaxOffset, true};
constexpr std::array kConstants{kSparsity, kCover, kLocal, kOffsets};

StatInfo mean(std::string_view key, double HeadStats::*field, std::string label, std::string_view unit,
              std::string help, std::vector<StatConstant> constants = {}) {
  StatInfo s{key, StatKind::kMean, std::move(label), unit, std::move(help), std::move(constants)};
  s.mean = field;
  return s;
}

StatInfo count(std::string_view key, int64_t HeadStats::*field, std::string label, std::string help) {
  StatInfo s{key, StatKind::kCount, std::move(label), "queries", std::move(help), {}};
  s.count = field;
  return s;
}

std::vector<StatInfo> make_catalogue() {
  const std::string cover = percent(kCoverMass), local = number(kLocalWindow);
  std::vector<StatInfo> c;
  c.push_back(count("n_queries", &HeadStats::n_queries, "Queries",
                    "The queries the means are taken over: every query with at least one key it may attend to."));
  c.push_back(mean("entropy_bits", &HeadStats::entropy_bits, "Entropy", "bits",
                   "How spread out a query’s attention is, in bits (−Σ a·log₂ a over its row), averaged over the "
                   "rows. 0 bits: all of it on one key. High entropy = spread out over many keys; the most is log₂ "
                   "n, when all n keys get the same weight."));
  c.push_back(mean("entropy_norm", &HeadStats::entropy_norm, "Normalised entropy", "ratio",
                   "The entropy divided by its largest possible value, log₂ n: 0 for one key, 1 for a uniform row "
                   "(queries that see one key only are left out)."));
  c.push_back(mean("sparsity", &HeadStats::sparsity, "Sparsity", "share",
                   "The share of weights below the sparsity threshold: " + percent(kSparsityFraction) +
                       " of what a key would get if the row were uniform (a weight under " + number(kSparsityFraction) +
                       " / n, for n keys the query may see). High sparsity = the head ignores most keys.",
                   {kSparsity}));
  c.push_back(mean("keys_90", &HeadStats::keys_90, "Keys for " + cover, "keys",
                   "The fewest keys whose largest weights add up to " + cover + " of the row, averaged over the rows.",
                   {kCover}));
  c.push_back(mean("keys_90_share", &HeadStats::keys_90_share, "Share of keys for " + cover, "share",
                   "The keys covering " + cover + " of the row as a share of the n keys the query may see.", {kCover}));
  c.push_back(mean("max_attention", &HeadStats::max_attention, "Max attention", "weight",
                   "The largest weight in each query’s row, averaged over the rows. Near 1: every query picks one "
                   "key; near 1 / n: no key stands out."));
  c.push_back(mean("avg_attention", &HeadStats::avg_attention, "Avg attention", "weight",
                   "Average attention measures how much weight a key typically has where the attention goes: Σ a² "
                   "over a row (each weight weighted by itself), averaged over the rows. 1 / n for a uniform row, 1 "
                   "when all of it is on one key; unlike a plain mean of the weights (always 1 / n), it tells "
                   "focused heads from diffuse ones."));
  c.push_back(mean("uniform_overlap", &HeadStats::uniform_overlap, "Overlap with a uniform row", "share",
                   "Σ min(a, 1 / n): the share of the row that a uniform row would also put there; 1 for a uniform "
                   "row, 1 / n for one key."));
  c.push_back(mean("mean_distance", &HeadStats::mean_distance, "Mean distance (positions)", "positions",
                   "Σ a·|k − q|: how far from the query, in positions, its attention lands on average."));
  c.push_back(mean("mean_offset", &HeadStats::mean_offset, "Mean signed offset (− = looks back)", "positions",
                   "Σ a·(k − q): where the attention lands relative to the query; negative looks back."));
  c.push_back(
      mean("self_mass", &HeadStats::self_mass, "On itself", "share", "The weight a query puts on its own position."));
  c.push_back(mean("prev_mass", &HeadStats::prev_mass, "On the previous token", "share",
                   "The weight on the position just before the query, over the queries that may see it."));
  c.push_back(mean("next_mass", &HeadStats::next_mass, "On the next token", "share",
                   "The weight on the position just after the query, over the queries that may see it (none in a "
                   "causal model)."));
  c.push_back(mean("local_mass", &HeadStats::local_mass, "Within ±" + local + " positions (not itself)", "share",
                   "The weight on the neighbours at most " + local + " positions away, the query itself left out.",
                   {kLocal}));
  c.push_back(StatInfo{"offset_mass",
                       StatKind::kOffsets,
                       "Weight by offset",
                       "share",
                       "For each signed offset d = k − q from −" + number(kMaxOffset) + " to +" + number(kMaxOffset) +
                           ", the weight on position q + d, over the queries that may see it.",
                       {kOffsets}});
  c.push_back(count("n_sink_queries", &HeadStats::n_sink_queries, "Queries that see the first position",
                    "The queries whose window holds the first position (all of them without a sliding window): the "
                    "first and sink shares are means over these."));
  c.push_back(mean("first_mass", &HeadStats::first_mass, "On the first position", "share",
                   "The weight on position 0: [CLS], BOS, or the first word when the template adds none."));
  c.push_back(mean("special_mass", &HeadStats::special_mass, "On special tokens", "share",
                   "The weight on the tokens the template adds ([CLS], [SEP], BOS, EOS)."));
  c.push_back(mean("end_special_mass", &HeadStats::end_special_mass, "On the closing special token", "share",
                   "The weight on special tokens after position 0 ([SEP], EOS)."));
  c.push_back(mean("sink_mass", &HeadStats::sink_mass, "On first or special tokens (sink)", "share",
                   "The weight on the first position and every special token, where heads park attention they do "
                   "not use."));
  c.push_back(mean("sink_mass_norm", &HeadStats::sink_mass_norm, "Sink share of what is moved (‖α·vW_O‖)", "share",
                   "The sink share with each weight times the norm of what the head moves from that key; token "
                   "level of a model run only."));
  c.push_back(
      mean("punct_mass", &HeadStats::punct_mass, "On punctuation", "share", "The weight on punctuation tokens."));
  c.push_back(mean("content_mass", &HeadStats::content_mass, "On other content tokens", "share",
                   "The weight on ordinary text tokens other than the query itself."));
  c.push_back(mean("duplicate_mass", &HeadStats::duplicate_mass, "On other copies of the same token", "share",
                   "The weight on other positions holding the same token, over the queries whose token occurs "
                   "again."));
  c.push_back(count("n_duplicate_queries", &HeadStats::n_duplicate_queries, "Queries with a repeated token",
                    "The queries whose token occurs at another position they may see: duplicate_mass is a mean over "
                    "these."));
  return c;
}

}  // namespace

std::span<const StatInfo> statistics_catalogue() {
  static const std::vector<StatInfo> catalogue = make_catalogue();
  return catalogue;
}

std::span<const StatConstant> statistic_constants() { return kConstants; }

}  // namespace headscope::analysis
