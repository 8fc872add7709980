// headscope — the one JSON serializer of the domain objects (see headscope/json.h, docs/schema.md).
#include "headscope/json.h"

#include "headscope/limits.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>

namespace headscope {

using nlohmann::json;

json json_number(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

// Per layer, the sliding window (0: none), n_layer entries for every model.
static std::vector<int64_t> layer_windows(const ModelConfig& c) {
  std::vector<int64_t> w(size_t(std::max(0, c.n_layer)), 0);
  for (size_t l = 0; l < w.size() && l < c.window.size(); ++l) w[l] = c.window[l];
  return w;
}

void to_json(json& j, const ModelConfig& c) {
  j = {{"name", c.name},
       {"architecture", c.architecture},
       {"n_layer", c.n_layer},
       {"n_head", c.n_head},
       {"n_kv_head", c.n_kv_head},
       {"d_model", c.d_model},
       {"d_head", c.d_head},
       {"d_ff", c.d_ff},
       {"vocab_size", c.vocab_size},
       {"max_positions", c.max_positions},
       {"causal", c.causal},
       {"kv_head_of", kv_head_of(c)},
       {"window", layer_windows(c)},
       {"w_o_shape", {c.d_model, c.n_head * c.d_head}}};
}

void to_json(json& j, const Encoding& encoding) {
  j = json::array();
  for (size_t i = 0; i < encoding.tokens.size(); ++i) {
    const Token& t = encoding.tokens[i];
    j.push_back({{"index", i},
                 {"id", t.id},
                 {"text", t.text},
                 {"begin", t.begin},
                 {"end", t.end},
                 {"special", t.special},
                 {"word", t.word}});
  }
}

void to_json(json& j, const WordUnit& u) { j = {{"text", u.text}, {"tokens", u.tokens}, {"special", u.special}}; }

void to_json(json& j, const GeneratedToken& t) {
  j = {{"position", t.position}, {"id", t.id}, {"text", t.text}, {"logit", json_number(t.logit)}};
}

void to_json(json& j, const HeadRef& h) { j = {{"layer", h.layer}, {"head", h.head}}; }

void to_json(json& j, const TextEffect& e) {
  j = {{"tokens", e.T}, {"layer_change", e.layer_change}};
  if (e.donor >= 0) j["donor"] = e.donor;
  if (!e.loss_before.empty()) {
    j["loss_before"] = e.loss_before;
    j["loss_after"] = e.loss_after;
    j["mean_loss_before"] = json_number(e.mean_loss_before);
    j["mean_loss_after"] = json_number(e.mean_loss_after);
    j["top1_changed"] = e.top1_changed;
    j["next_before"] = {{"id", e.last_top1_before}, {"p", json_number(e.last_p_before)}};
    j["next_after"] = {{"id", e.last_top1_after}, {"p", json_number(e.last_p_after)}};
  } else {
    j["embedding_distance"] = json_number(e.embedding_distance);
  }
}

void to_json(json& j, const AblationResult& r) {
  j = {{"heads", r.heads}, {"effect", json_number(r.effect)}, {"texts", r.texts}};
}

void to_json(json& j, const HeadImportance& h) {
  j = {{"layer", h.head.layer}, {"head", h.head.head}, {"ablation", json_number(h.ablation)},
       {"proxy", json_number(h.proxy)}};
}

void to_json(json& j, const PruningPoint& p) {
  j = {{"removed", p.removed}, {"effect", json_number(p.effect)}, {"change", json_number(p.change)}};
}

namespace analysis {

void to_json(json& j, const LogitAttribution& a) {
  const size_t L = a.attention_bias.size(), H = L > 0 ? a.heads.size() / L : 0;
  json heads = json::array();
  for (size_t l = 0; l < L; ++l) {
    json row = json::array();
    for (size_t h = 0; h < H; ++h) row.push_back(json_number(a.heads[l * H + h]));
    heads.push_back(std::move(row));
  }
  json bias = json::array(), mlp = json::array();
  for (double v : a.attention_bias) bias.push_back(json_number(v));
  for (double v : a.mlp) mlp.push_back(json_number(v));
  j = {{"position", a.position},
       {"target", a.target},
       {"contrast", a.contrast >= 0 ? json(a.contrast) : json(nullptr)},
       {"logit", json_number(a.logit)},
       {"embeddings", json_number(a.embeddings)},
       {"heads", std::move(heads)},
       {"attention_bias", std::move(bias)},
       {"mlp", std::move(mlp)},
       {"final_norm_bias", json_number(a.final_norm_bias)},
       {"rest", json_number(a.rest)}};
}

void to_json(json& j, const HeadStats& s) {
  j = json::object();
  for (const StatInfo& info : statistics_catalogue()) {
    json& v = j[std::string(info.key)];
    switch (info.kind) {
      case StatKind::kMean:
        v = json_number(s.*info.mean);
        break;
      case StatKind::kCount:
        v = s.*info.count;
        break;
      case StatKind::kOffsets:
        v = json::object();
        for (int d = -kMaxOffset; d <= kMaxOffset; ++d) v[std::to_string(d)] = json_number(s.offset(d));
        break;
    }
  }
}

void to_json(json& j, const StatConstant& c) { j = c.integer ? json(static_cast<int64_t>(c.value)) : json(c.value); }

void to_json(json& j, const StatInfo& info) {
  static constexpr const char* kKinds[] = {"mean", "count", "offsets"};
  json constants = json::object();
  for (const StatConstant& c : info.constants) constants[std::string(c.name)] = c;
  j = {{"key", info.key},     {"kind", kKinds[static_cast<size_t>(info.kind)]},
       {"label", info.label}, {"unit", info.unit},
       {"help", info.help},   {"constants", std::move(constants)}};
}

void to_json(json& j, const RoleScore& r) {
  const RoleInfo& info = role_info(r.role);
  j = {{"id", info.id},
       {"name", info.name},
       {"family", role_family_info(info.family).id},
       {"score", json_number(r.score)},
       {"detail", r.detail},
       {"label", role_label(r)},
       {"evidence", r.evidence}};
}

void to_json(json& j, const HeadRoles& r) {
  j = {{"primary", r.primary},
       {"secondary", r.secondary},
       {"confidence", json_number(r.confidence)},
       {"margin", json_number(r.margin)},
       {"scores", r.scores}};
}

void to_json(json& j, const RoleInfo& r) {
  char colour[8];
  std::snprintf(colour, sizeof colour, "#%06x", r.color & 0xFFFFFFu);
  j = {{"id", r.id},
       {"name", r.name},
       {"description", r.description},
       {"typical_function", r.typical_function},
       {"literature", r.literature},
       {"color", colour},
       {"family", role_family_info(r.family).id}};
}

void to_json(json& j, const RoleFamilyInfo& f) {
  j = {{"id", f.id}, {"name", f.name}, {"description", f.description}};
}

void to_json(json& j, const TextLink& l) {
  j = {{"query", l.query}, {"key", l.key}, {"weight", json_number(l.weight)}, {"raw_weight", json_number(l.raw_weight)}};
}

void to_json(json& j, const TextEvidence& t) {
  const size_t n = static_cast<size_t>(limits::kMaxTextLinks);
  const auto first = [n](const std::vector<TextLink>& v) {
    return std::vector<TextLink>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(std::min(n, v.size())));
  };
  j = {{"links", first(t.links)},
       {"links_text", t.links_text},
       {"recognised", t.recognised ? json(role_info(*t.recognised).id) : json(nullptr)},
       {"matching", first(t.matching)},
       {"recognised_text", t.recognised_text}};
}

void to_json(json& j, const ProbeEvidence& p) {
  j = {{"induction", json_number(p.induction)},
       {"duplicate", json_number(p.duplicate)},
       {"probe_length", p.probe_length}};
}

}  // namespace analysis

json role_catalogue_json() {
  json out = json::array();
  for (const analysis::RoleInfo& r : analysis::role_catalogue()) out.push_back(r);
  return out;
}

json role_catalogue_json(const ModelConfig& config) {
  json out = role_catalogue_json();
  for (json& r : out) r["description"] = analysis::role_description(analysis::role_from_id(r["id"].get<std::string>()), config.causal);
  return out;
}

json statistics_catalogue_json() {
  json out = json::array();
  for (const analysis::StatInfo& s : analysis::statistics_catalogue()) out.push_back(s);
  return out;
}

json statistic_constants_json() {
  json out = json::object();
  for (const analysis::StatConstant& c : analysis::statistic_constants()) out[std::string(c.name)] = c;
  return out;
}

json role_families_json() {
  json out = json::array();
  for (const analysis::RoleFamilyInfo& f : analysis::role_families()) out.push_back(f);
  return out;
}

json head_json(const ModelConfig& c, int layer, int head, const analysis::HeadStats& stats,
               const analysis::HeadRoles& roles) {
  const std::vector<int> kv = kv_head_of(c);
  return {{"layer", layer},
          {"head", head},
          {"kv_head", head >= 0 && static_cast<size_t>(head) < kv.size() ? kv[static_cast<size_t>(head)] : head},
          {"stats", stats},
          {"roles", roles}};
}

json run_json(const ModelConfig& c, const RunAnalysis& run, Level level, bool hide_special) {
  const LevelAnalysis& a = run.analysis(level, hide_special);
  json heads = json::array();
  for (int l = 0; l < c.n_layer; ++l)
    for (int h = 0; h < c.n_head; ++h) {
      const auto i = static_cast<size_t>(l * c.n_head + h);
      heads.push_back(head_json(c, l, h, a.stats.at(i), a.roles.at(i)));
      if (i < run.on_text.size()) heads.back()["on_text"] = run.on_text[i];
    }
  json tokens = run.encoding;
  for (size_t i = 0; i < run.encoding.tokens.size(); ++i)
    tokens[i]["display"] = token_display(run.text, run.encoding.tokens[i]);
  return {{"schema", "headscope.run/2"},
          {"model", c},
          {"text", run.text},
          {"truncated", run.encoding.truncated},
          {"level", level_name(level)},
          {"special", hide_special ? "hide" : "keep"},
          {"n_tokens", run.T()},
          {"n_units", a.units.T()},
          {"tokens", std::move(tokens)},
          {"words", word_units(run)},
          {"sink_columns", run.sink_columns},
          {"heads", std::move(heads)}};
}

json dla_json(const ModelConfig& config, const Encoding& encoding,
              const std::vector<analysis::LogitAttribution>& attributions) {
  return {{"schema", "headscope.dla/1"},
          {"model", config},
          {"linearisation",
           "final norm frozen at the full residual's scale: each part c adds (c / rms(x)) * gamma . u "
           "(LayerNorm: (c - mean c) / std(x) * gamma . u, and beta . u on its own)"},
          {"tokens", encoding},
          {"attributions", attributions}};
}

}  // namespace headscope
