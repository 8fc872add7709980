// headscope — a corpus's statistics in mergeable parts (CorpusStats in headscope/analysis.h).
// Sums are 128-bit fixed-point numbers (analysis/fixed_point.h): a text's double sum enters once,
// and integer addition is associative, so the total does not depend on how the texts were split or
// merged.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/fixed_point.h"
#include "analysis/statistics.h"
#include "headscope/analysis.h"
#include "headscope/error.h"

namespace headscope::analysis {
namespace {

int bin_of(double x) {  // kHistogramBins equal bins over [0, 1]; NaN (no sample) counts nowhere
  if (std::isnan(x)) return -1;
  const int b = static_cast<int>(std::floor(std::clamp(x, 0.0, 1.0) * CorpusStats::kHistogramBins));
  return std::min(b, CorpusStats::kHistogramBins - 1);
}

constexpr const char* kSchema = "headscope.corpus_partial/1";

}  // namespace

CorpusStats::CorpusStats(std::string model, int n_layer, int n_head, int n_kv_head)
    : model_(std::move(model)), n_layer_(n_layer), n_head_(n_head), n_kv_head_(n_kv_head > 0 ? n_kv_head : n_head) {
  if (n_layer < 1 || n_head < 1 || n_head % n_kv_head_ != 0)
    throw Error(
        "corpus statistics need at least one layer and one head, and query heads that share key/value heads "
        "evenly (" +
        std::to_string(n_layer) + " layers, " + std::to_string(n_head) + " heads, " + std::to_string(n_kv_head_) +
        " key/value heads)");
  const StatSums zero = HeadStatsAccumulator{}.sums();
  Head h;
  h.sums.assign(zero.sums.size(), {0, 0});
  h.counts.assign(zero.counts.size(), 0);
  h.roles.assign(kRoleCount, 0);
  h.entropy.assign(kHistogramBins, 0);
  h.max_attention.assign(kHistogramBins, 0);
  heads_.assign(size_t(n_layer) * size_t(n_head), h);
}

void CorpusStats::check_shape(size_t n, const char* what) const {
  if (n != heads_.size())
    throw Error(std::string("corpus statistics: ") + what + " for " + std::to_string(n) + " heads; the model has " +
                std::to_string(heads_.size()));
}

void CorpusStats::add(std::span<const StatSums> sums, std::span<const HeadStats> stats,
                      std::span<const HeadRoles> roles, int64_t tokens) {
  check_shape(sums.size(), "sums");
  check_shape(stats.size(), "statistics");
  check_shape(roles.size(), "roles");
  for (size_t i = 0; i < heads_.size(); ++i) {
    Head& h = heads_[i];
    if (sums[i].sums.size() != h.sums.size() || sums[i].counts.size() != h.counts.size())
      throw Error("corpus statistics: head " + std::to_string(i) + " has sums of another shape");
    for (size_t k = 0; k < h.sums.size(); ++k) h.sums[k] = split(join(h.sums[k]) + to_fixed(sums[i].sums[k]));
    for (size_t k = 0; k < h.counts.size(); ++k) h.counts[k] += sums[i].counts[k];
    h.roles[size_t(roles[i].primary.role)] += 1;
    if (const int b = bin_of(stats[i].entropy_norm); b >= 0) h.entropy[size_t(b)] += 1;
    if (const int b = bin_of(stats[i].max_attention); b >= 0) h.max_attention[size_t(b)] += 1;
  }
  texts_ += 1;
  tokens_ += tokens;
}

void CorpusStats::merge(const CorpusStats& o) {
  if (o.model_ != model_ || o.n_layer_ != n_layer_ || o.n_head_ != n_head_ || o.n_kv_head_ != n_kv_head_)
    throw Error("corpus statistics: cannot merge a partial of " + o.model_ + " (" + std::to_string(o.n_layer_) + " × " +
                std::to_string(o.n_head_) + " heads) into one of " + model_ + " (" + std::to_string(n_layer_) + " × " +
                std::to_string(n_head_) + ")");
  for (size_t i = 0; i < heads_.size(); ++i) {
    Head& h = heads_[i];
    const Head& g = o.heads_[i];
    for (size_t k = 0; k < h.sums.size(); ++k) h.sums[k] = split(join(h.sums[k]) + join(g.sums[k]));
    const auto add = [](std::vector<int64_t>& a, const std::vector<int64_t>& b) {
      for (size_t k = 0; k < a.size(); ++k) a[k] += b[k];
    };
    add(h.counts, g.counts);
    add(h.roles, g.roles);
    add(h.entropy, g.entropy);
    add(h.max_attention, g.max_attention);
  }
  texts_ += o.texts_;
  tokens_ += o.tokens_;
}

HeadStats CorpusStats::stats(size_t head) const {
  const Head& h = heads_.at(head);
  StatSums s;
  for (const auto& p : h.sums) s.sums.push_back(to_double(join(p)));
  s.counts = h.counts;
  return HeadStatsAccumulator::from_sums(s).result();
}
std::span<const int64_t> CorpusStats::role_counts(size_t head) const { return heads_.at(head).roles; }
std::span<const int64_t> CorpusStats::entropy_histogram(size_t head) const { return heads_.at(head).entropy; }
std::span<const int64_t> CorpusStats::max_attention_histogram(size_t head) const {
  return heads_.at(head).max_attention;
}

std::string CorpusStats::to_bytes() const {
  nlohmann::json heads = nlohmann::json::array();
  for (const Head& h : heads_) {
    nlohmann::json sums = nlohmann::json::array();
    for (const auto& [hi, lo] : h.sums) sums.push_back({hi, lo});
    heads.push_back({{"sums", sums},
                     {"counts", h.counts},
                     {"roles", h.roles},
                     {"entropy", h.entropy},
                     {"max_attention", h.max_attention}});
  }
  const nlohmann::json j = {{"schema", kSchema},       {"model", model_}, {"n_layer", n_layer_}, {"n_head", n_head_},
                            {"n_kv_head", n_kv_head_}, {"texts", texts_}, {"tokens", tokens_},   {"heads", heads}};
  const std::vector<uint8_t> cbor = nlohmann::json::to_cbor(j);
  return std::string(cbor.begin(), cbor.end());
}

CorpusStats CorpusStats::from_bytes(std::string_view bytes) {
  const nlohmann::json j = nlohmann::json::from_cbor(bytes, /*strict=*/true, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || j.value("schema", "") != kSchema)
    throw Error(std::string("corpus statistics: not a ") + kSchema + " partial (CBOR)");
  try {
    CorpusStats c(j.at("model").get<std::string>(), j.at("n_layer").get<int>(), j.at("n_head").get<int>(),
                  j.at("n_kv_head").get<int>());
    c.texts_ = j.at("texts").get<int64_t>();
    c.tokens_ = j.at("tokens").get<int64_t>();
    const nlohmann::json& heads = j.at("heads");
    c.check_shape(heads.size(), "the partial holds entries");
    for (size_t i = 0; i < c.heads_.size(); ++i) {
      Head& h = c.heads_[i];
      const nlohmann::json& e = heads[i];
      const auto read = [&](const char* key, std::vector<int64_t>& into) {
        const auto v = e.at(key).get<std::vector<int64_t>>();
        if (v.size() != into.size())
          throw Error(std::string("head ") + std::to_string(i) + " has " + std::to_string(v.size()) + " " + key);
        into = v;
      };
      const auto sums = e.at("sums").get<std::vector<std::pair<int64_t, uint64_t>>>();
      if (sums.size() != h.sums.size()) throw Error("head " + std::to_string(i) + " has sums of another shape");
      h.sums = sums;
      read("counts", h.counts);
      read("roles", h.roles);
      read("entropy", h.entropy);
      read("max_attention", h.max_attention);
    }
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("corpus statistics: a malformed partial: ") + e.what());
  } catch (const Error& e) {
    throw Error(std::string("corpus statistics: a malformed partial: ") + e.what());
  }
}

}  // namespace headscope::analysis
