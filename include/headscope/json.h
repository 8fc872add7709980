// headscope — the JSON of every domain object, written in one place (src/pipeline/json.cc) and
// documented once in docs/schema.md. `headscope run --json`, the server's /api/* replies and the
// atlas all build their objects from these, so a field has one name and one shape everywhere.
//
// Numbers that have no value (a statistic with no sample, NaN) are written as null.
#pragma once
#include <nlohmann/json.hpp>

#include "headscope/analysis.h"
#include "headscope/model.h"
#include "headscope/pipeline.h"

namespace headscope {

// x, or null when x is not finite.
nlohmann::json json_number(double x);

// Model info: name, architecture, n_layer, n_head, n_kv_head, d_model, d_head, d_ff, vocab_size,
// max_positions, causal, kv_head_of [n_head], w_o_shape [d_model, n_head * d_head].
void to_json(nlohmann::json& j, const ModelConfig& config);
// Tokens: [{index, id, text, begin, end, special, word}, ...].
void to_json(nlohmann::json& j, const Encoding& encoding);
// {text, tokens, special}.
void to_json(nlohmann::json& j, const WordUnit& unit);
// {position, id, text, logit}.
void to_json(nlohmann::json& j, const GeneratedToken& token);

// "layer.head" objects and the ablation results (docs/causal.md): {layer, head}; TextEffect
// {tokens, donor, loss_before, loss_after, mean_loss_before, mean_loss_after, top1_changed,
// next_before {id, p}, next_after {id, p} (the top-1 after the last token), embedding_distance, layer_change}; AblationResult {heads, effect, texts}; HeadImportance
// {layer, head, ablation, proxy}; PruningPoint {removed, effect, change}.
void to_json(nlohmann::json& j, const HeadRef& head);
void to_json(nlohmann::json& j, const TextEffect& effect);
void to_json(nlohmann::json& j, const AblationResult& result);
void to_json(nlohmann::json& j, const HeadImportance& importance);
void to_json(nlohmann::json& j, const PruningPoint& point);

namespace analysis {
// The 26 fields of HeadStats, one per entry of statistics_catalogue(); offset_mass is an object
// keyed by the signed offset "-8" … "8".
void to_json(nlohmann::json& j, const HeadStats& stats);
// A statistic's catalogue entry: {key, kind ("mean", "count" or "offsets"), label, unit, help,
// constants {name: value}}.
void to_json(nlohmann::json& j, const StatInfo& info);
void to_json(nlohmann::json& j, const StatConstant& constant);
// {id, name, family, score, detail, label (role_label), evidence}.
void to_json(nlohmann::json& j, const RoleScore& score);
// {primary, secondary, confidence, margin, scores}.
void to_json(nlohmann::json& j, const HeadRoles& roles);
// {id, name, description, typical_function, literature, color "#rrggbb"}.
void to_json(nlohmann::json& j, const RoleInfo& info);
// {induction, duplicate, probe_length}.
void to_json(nlohmann::json& j, const ProbeEvidence& probe);
// {position, target, contrast (null for none), logit, embeddings, heads [n_layer][n_head],
// attention_bias [n_layer], mlp [n_layer], final_norm_bias, rest}.
void to_json(nlohmann::json& j, const LogitAttribution& a);
// {id, name, description}.
void to_json(nlohmann::json& j, const RoleFamilyInfo& family);
// {query, key, weight, raw_weight}.
void to_json(nlohmann::json& j, const TextLink& link);
// {links (the first limits::kMaxTextLinks), links_text, recognised (role id or null), matching,
//  recognised_text}.
void to_json(nlohmann::json& j, const TextEvidence& text);
}  // namespace analysis

// The role catalogue: one RoleInfo object per role, in catalogue order.
nlohmann::json role_catalogue_json();
// The same with each description worded for `config` (analysis::role_description).
nlohmann::json role_catalogue_json(const ModelConfig& config);
// The catalogue of statistics: one StatInfo object per HeadStats field, in catalogue order.
nlohmann::json statistics_catalogue_json();
// The constants of the statistics' formulas: {sparsity_fraction, cover_mass, local_window, max_offset}.
nlohmann::json statistic_constants_json();
// The lesson's role families: one RoleFamilyInfo object each.
nlohmann::json role_families_json();

// One head: {layer, head, kv_head, stats, roles}. The atlas adds its corpus evidence beside these.
nlohmann::json head_json(const ModelConfig& config, int layer, int head, const analysis::HeadStats& stats,
                         const analysis::HeadRoles& roles);

// One analysed text ("headscope.run/2"): schema, model, text, truncated, level, special, n_tokens,
// n_units, tokens, words, heads (layer-major). `hide_special` needs AnalyseOptions::without_specials.
nlohmann::json run_json(const ModelConfig& config, const RunAnalysis& run, Level level, bool hide_special = false);

// Direct logit attribution of one text ("headscope.dla/1"): schema, model, linearisation, tokens,
// attributions (pipeline.h attribute_logits).
nlohmann::json dla_json(const ModelConfig& config, const Encoding& encoding,
                        const std::vector<analysis::LogitAttribution>& attributions);

}  // namespace headscope
