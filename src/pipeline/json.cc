// headscope — the one JSON serializer of the domain objects (see headscope/json.h, docs/schema.md).
#include "headscope/json.h"

#include "headscope/limits.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

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

json tokens_json(std::string_view text, const Encoding& encoding) {
  json tokens = encoding;
  for (size_t i = 0; i < encoding.tokens.size(); ++i) tokens[i]["display"] = token_display(text, encoding.tokens[i]);
  return tokens;
}

void to_json(json& j, const WordUnit& u) { j = {{"text", u.text}, {"tokens", u.tokens}, {"special", u.special}}; }

void to_json(json& j, const GeneratedToken& t) {
  j = {{"position", t.position}, {"id", t.id}, {"text", t.text}, {"logit", json_number(t.logit)}};
}

// ---- the causal results (headscope/json.h; docs/causal.md) ----

void to_json(json& j, const HeadRef& h) { j = {{"layer", h.layer}, {"head", h.head}}; }

static json next_token_json(int id, const std::string& text, double p) {
  return {{"id", id}, {"text", text}, {"p", json_number(p)}};
}

void to_json(json& j, const TextEffect& e) {
  j = {{"tokens", e.T}, {"layer_change", e.layer_change}};
  if (e.donor >= 0) j["donor"] = e.donor;
  if (!e.loss_before.empty()) {
    j["loss_before"] = e.loss_before;
    j["loss_after"] = e.loss_after;
    j["mean_loss_before"] = json_number(e.mean_loss_before);
    j["mean_loss_after"] = json_number(e.mean_loss_after);
    j["top1_changed"] = e.top1_changed;
    j["next_before"] = next_token_json(e.last_top1_before, e.last_text_before, e.last_p_before);
    j["next_after"] = next_token_json(e.last_top1_after, e.last_text_after, e.last_p_after);
  } else {
    j["embedding_distance"] = json_number(e.embedding_distance);
  }
}

void to_json(json& j, const AblationResult& r) {
  j = {{"heads", r.heads}, {"effect", json_number(r.effect)}, {"texts", r.texts}};
}

void to_json(json& j, const HeadImportance& h) {
  j = {{"layer", h.head.layer},
       {"head", h.head.head},
       {"ablation", json_number(h.ablation)},
       {"proxy", json_number(h.proxy)},
       {"rank", h.rank}};
}

void to_json(json& j, const PruningPoint& p) {
  j = {{"removed", p.removed}, {"effect", json_number(p.effect)}, {"change", json_number(p.change)}};
}

void to_json(json& j, const Seconds& s) { j = {{"wall", s.wall}, {"cpu", s.cpu}}; }

static const char* ablation_unit(bool causal) { return causal ? "nats" : "1 - cos"; }

void to_json(json& j, const TextAblation& a) {
  j = a.text;
  j["heads"] = json::array();
  for (const HeadRef& h : a.heads) j["heads"].push_back({h.layer, h.head});
  j["mode"] = ablation_mode_name(a.mode);
  j["reference"] = a.reference.empty() ? json(nullptr) : json(a.reference);
  j["effect"] = json_number(a.effect);
  j["unit"] = ablation_unit(a.causal);
}

void to_json(json& j, const ImportanceResult& r) {
  j = {{"shape", {r.n_layer, r.n_head}},      {"tokens", r.tokens},
       {"mode", ablation_mode_name(r.mode)},  {"measure", r.causal ? "delta_loss" : "embedding_distance"},
       {"unit", ablation_unit(r.causal)},     {"importance", r.heads},
       {"spearman", json_number(r.spearman)}, {"seconds", json_number(r.seconds.wall)}};
}

void to_json(json& j, const PruningResult& r) {
  json summary = json::array();
  for (const PruningResult::Point& p : r.random_summary)
    summary.push_back({{"removed", p.removed}, {"change_mean", p.change_mean}, {"change_sd", p.change_sd}});
  j = {{"texts", r.texts},
       {"held_out", r.held_out},
       {"importance_order", r.importance_order},
       {"random_order", r.random_orders.empty() ? json::array() : json(r.random_orders.front())},
       {"random_orders", r.random_orders},
       {"random_summary", std::move(summary)},
       {"removable_share_importance", r.removable_share_importance},
       {"removable_share_random",
        r.removable_shares_random.empty() ? json(nullptr) : json(r.removable_shares_random.front())},
       {"removable_shares_random", r.removable_shares_random},
       {"seconds", r.seconds}};
}

void to_json(json& j, const AblationExperiment& x) {
  j = {{"schema", "headscope.ablate/1"},
       {"model", x.model},
       {"mode", ablation_mode_name(x.mode)},
       {"seed", x.seed},
       {"texts", x.texts},
       {"measure", ablation_measure(x.model)}};
  if (x.result) j["result"] = *x.result;
  if (x.importance) {
    j["importance"] = x.importance->heads;
    j["importance_seconds"] = x.importance->seconds;
    j["spearman_proxy"] = json_number(x.importance->spearman);
  }
  if (x.pruning) j["pruning"] = *x.pruning;
}

// ---- end of the causal results ----

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

void to_json(json& j, const RoleFamilyInfo& f) { j = {{"id", f.id}, {"name", f.name}, {"description", f.description}}; }

void to_json(json& j, const TextLink& l) {
  j = {
      {"query", l.query}, {"key", l.key}, {"weight", json_number(l.weight)}, {"raw_weight", json_number(l.raw_weight)}};
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
  for (json& r : out)
    r["description"] = analysis::role_description(analysis::role_from_id(r["id"].get<std::string>()), config.causal);
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

void to_json(json& j, const ModelDescription& d) {
  j = d.config;
  j["statistics"] = statistic_constants_json();
  j["statistics"]["min_role_score"] = analysis::kMinRoleScore;
  j["statistics_catalogue"] = statistics_catalogue_json();
  j["roles"] = role_catalogue_json(d.config);
  j["role_families"] = role_families_json();
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

json corpus_head_json(const ModelConfig& c, size_t index, const std::string& id, const RunAnalysis& run, Level level,
                      int layer, int head) {
  const LevelAnalysis& a = run.analysis(level);
  const size_t i = size_t(layer) * size_t(c.n_head) + size_t(head);
  const analysis::HeadRoles& r = a.roles.at(i);
  const std::vector<int> kv = kv_head_of(c);
  json j = {{"text", index},
            {"id", id},
            {"layer", layer},
            {"head", head},
            {"kv_head", kv.at(size_t(head))},
            {"n_tokens", run.T()},
            {"stats", a.stats.at(i)},
            {"role", analysis::role_label(r.primary)},
            {"role_id", analysis::role_info(r.primary.role).id},
            {"role_score", json_number(r.primary.score)},
            {"evidence", r.primary.evidence},
            {"secondary", analysis::role_label(r.secondary)},
            {"secondary_score", json_number(r.secondary.score)}};
  if (level == Level::kToken && i < run.on_text.size()) j["on_text"] = run.on_text[i];
  return j;
}

json corpus_stats_json(const analysis::CorpusStats& s) {
  const int group = s.n_head() / s.n_kv_head();
  json heads = json::array();
  for (int l = 0; l < s.n_layer(); ++l)
    for (int h = 0; h < s.n_head(); ++h) {
      const size_t i = size_t(l) * size_t(s.n_head()) + size_t(h);
      json roles = json::object();
      const auto counts = s.role_counts(i);
      size_t top = 0;
      for (size_t r = 0; r < counts.size(); ++r) {
        if (counts[r] > 0) roles[analysis::role_info(analysis::Role(r)).id] = counts[r];
        if (counts[r] > counts[top]) top = r;
      }
      heads.push_back({{"layer", l},
                       {"head", h},
                       {"kv_head", h / group},
                       {"stats", s.stats(i)},
                       {"top_role", s.texts() > 0 ? json(analysis::role_info(analysis::Role(top)).id) : json(nullptr)},
                       {"role_counts", roles},
                       {"entropy_histogram", s.entropy_histogram(i)},
                       {"max_attention_histogram", s.max_attention_histogram(i)}});
    }
  return {{"schema", "headscope.corpus_stats/1"},
          {"model", s.model()},
          {"n_layer", s.n_layer()},
          {"n_head", s.n_head()},
          {"n_kv_head", s.n_kv_head()},
          {"texts", s.texts()},
          {"tokens", s.tokens()},
          {"histogram_bins", analysis::CorpusStats::kHistogramBins},
          {"heads", heads}};
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
  json tokens = tokens_json(run.text, run.encoding);
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
           "(LayerNorm: (c - mean c) / std(x) * gamma . u, and beta . u on its own); where a norm follows each "
           "attention block (Gemma 2/3, OLMo 2) an attention part first goes through it frozen at that block's own "
           "scale, c -> gamma_l * c / rms(attention output); the logit is the one before any final soft-cap"},
          {"tokens", encoding},
          {"attributions", attributions}};
}

// ---- the replies of the explorer, the CLI and Python beyond runs and heads ----

std::string base64_encode(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t n = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  const size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t n = uint8_t(bytes[i]) << 16;
    if (rest == 2) n |= uint8_t(bytes[i + 1]) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += rest == 2 ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string base64_floats(std::span<const float> values) {
  return base64_encode(std::string_view(reinterpret_cast<const char*>(values.data()), values.size() * 4));
}

json typed_array(std::span<const float> values, std::vector<int64_t> shape) {
  return {{"shape", std::move(shape)}, {"dtype", "float32"}, {"data", base64_floats(values)}};
}

static json reason(const std::optional<std::string>& why) { return why ? json(*why) : json(nullptr); }

void to_json(json& j, const ViewAvailability& v) {
  j = {{"weights", reason(v.weights)}, {"norm", reason(v.norm)}, {"rollout", reason(v.rollout)}};
}

void to_json(json& j, const OverviewGrid& g) {
  j = {{"cells", g.cells}, {"T", g.T}, {"starts", g.starts}, {"max_tile_cells", g.max_tile_cells}};
}

void to_json(json& j, const RunDocument& d) {
  j = run_json(*d.config, *d.run, d.level, d.hide_special);
  j["streamed"] = d.run->streamed;
  if (d.views) j["views"] = *d.views;
  if (d.overview) j["overview"] = *d.overview;
}

void to_json(json& j, const Decomposition& d) {
  const int H = d.n_head, dh = d.d_head, D = d.d_model;
  j = {
      {"layer", d.layer},
      {"token", d.token},
      {"n_head", H},
      {"d_head", dh},
      {"d_model", D},
      {"w_o_shape", {D, H * dh}},
      {"head_outputs", typed_array(d.concat, {H, dh})},
      {"head_output_norms", typed_array(d.head_output_norms, {H})},
      {"concat", typed_array(d.concat, {H * dh})},
      {"projection", typed_array(d.projection, {D})},
      {"bias", typed_array(d.bias, {D})},
      {"contributions", typed_array(d.contributions, {H, D})},
      {"contribution_norms", typed_array(d.contribution_norms, {H})},
      {"attn_output", typed_array(d.attn_output, {D})},
      {"attention_rows", typed_array(d.attention_rows, {H, d.T})},
      {"check", {{"sum_max_abs_error", d.sum_max_abs_error}, {"projection_max_abs_error", d.projection_max_abs_error}}},
  };
}

void to_json(json& j, const LinkSearch& s) {
  json heads = json::array();
  for (const LinkSearch::Head& h : s.heads)
    heads.push_back({{"layer", h.link.layer},
                     {"head", h.link.head},
                     {"weight", json_number(h.link.weight)},
                     {"weight_no_sink", json_number(h.link.weight_no_sink)},
                     {"roles", h.roles}});
  j = {{"q", s.q},
       {"k", s.k},
       {"query", s.query},
       {"key", s.key},
       {"sink_columns", s.sink_columns},
       {"heads", std::move(heads)}};
}

void to_json(json& j, const GenerationResult& r) {
  const Generation& g = r.generation;
  j = {
      {"prompt", r.prompt},
      {"prompt_tokens", g.prompt_tokens},
      {"ids", g.ids},
      {"generated", g.generated},
      {"continuation", r.continuation},
      {"text", r.text},
      {"held_back_bytes", r.held_back_bytes},
      {"retokenizes_same", r.retokenizes_same},
      {"stopped_at_eos", g.stopped_at_eos},
      {"stopped_at_limit", g.stopped_at_limit},
  };
}

json generation_file_json(const ModelConfig& config, const GenerationResult& r) {
  const Generation& g = r.generation;
  return {{"model", config},
          {"prompt", r.prompt},
          {"prompt_tokens", g.prompt_tokens},
          {"tokens", r.tokens},
          {"generated", g.generated},
          {"kv_head_of", kv_head_of(config)},
          {"stopped_at_eos", g.stopped_at_eos},
          {"text", r.decoded}};
}

// ---- composition scores ----

void to_json(json& j, const CompositionBaseline& b) {
  j = {{"mean", json_number(b.mean)}, {"std", json_number(b.std)}};
}

void to_json(json& j, const CompositionPair& p) {
  j = {{"sender", p.sender}, {"receiver", p.receiver}, {"score", json_number(p.score)}};
}

json composition_json(const CompositionScores& s, int top) {
  const int64_t L = s.model.n_layer, H = s.model.n_head;
  json scores = json::object(), best = json::object(),
       baseline = {{"draws", s.options.baseline_draws}, {"seed", s.options.seed}};
  for (const CompositionKind kind : kCompositionKinds) {
    const Tensor& t = s.scores(kind);
    t.expect_shape({L, H, L, H}, "composition scores");
    json senders = json::array();  // [l1][h1][l2][h2]
    for (int64_t l1 = 0; l1 < L; ++l1) {
      json heads = json::array();
      for (int64_t h1 = 0; h1 < H; ++h1) {
        json receivers = json::array();
        for (int64_t l2 = 0; l2 < L; ++l2) {
          const float* row = t.ptr() + ((l1 * H + h1) * L + l2) * H;
          receivers.push_back(std::vector<float>(row, row + H));
        }
        heads.push_back(std::move(receivers));
      }
      senders.push_back(std::move(heads));
    }
    const std::string name = composition_kind_name(kind);
    scores[name] = std::move(senders);
    best[name] = top_composition_pairs(s, kind, top);
    baseline[name] = s.baseline(kind);
  }
  return {{"schema", "headscope.composition/1"},
          {"model", s.model},
          {"definition",
           "sender s in an earlier layer than receiver r, Frobenius norms: Q = |W_QK(r)^T W_OV(s)| / (|W_QK(r)| "
           "|W_OV(s)|), K = |W_QK(r) W_OV(s)| / (|W_QK(r)| |W_OV(s)|), V = |W_OV(r) W_OV(s)| / (|W_OV(r)| |W_OV(s)|); "
           "W_QK = W_Q^T W_K (rows read the query's residual stream, columns the key's), W_OV = W_O W_V (columns "
           "read the key's stream, rows write into the stream); under GQA head h reads key/value head "
           "h / (n_head / n_kv_head)"},
          {"folded", s.options.fold_gains
                         ? "norm gains folded in, the norms' scalar division left out: the input norm's gamma into "
                           "W_Q, W_K and W_V, QK-norm's into W_Q and W_K, a post-attention norm's into W_O; biases "
                           "left out"
                         : "none: the weights as stored, every norm left out; biases left out"},
          {"rope", "not included: W_QK is the bilinear form at relative position 0"},
          {"axes", {"sender_layer", "sender_head", "receiver_layer", "receiver_head"}},
          {"shape", {L, H, L, H}},
          {"masked", "0 where receiver_layer <= sender_layer"},
          {"scores", std::move(scores)},
          {"baseline", std::move(baseline)},
          {"top", std::move(best)},
          {"seconds", {{"scores", s.seconds}, {"baseline", s.baseline_seconds}, {"cpu", s.cpu_seconds}}}};
}

}  // namespace headscope
