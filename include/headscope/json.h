// headscope — the JSON of every domain object, written in one place (src/pipeline/json.cc) and
// documented once in docs/schema.md. `headscope run --json`, the server's /api/* replies and the
// atlas all build their objects from these, so a field has one name and one shape everywhere.
//
// Numbers that have no value (a statistic with no sample, NaN) are written as null.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "headscope/analysis.h"
#include "headscope/circuits.h"
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
// The same tokens, each with "display": how it reads in `text` (token_display, tokenizer.h).
nlohmann::json tokens_json(std::string_view text, const Encoding& encoding);
// {text, tokens, special}.
void to_json(nlohmann::json& j, const WordUnit& unit);
// {position, id, text, logit}.
void to_json(nlohmann::json& j, const GeneratedToken& token);

// ---- the causal results (docs/causal.md, docs/schema.md); written by the CLI, the server and
// Python alike ----
// {layer, head}.
void to_json(nlohmann::json& j, const HeadRef& head);
// {tokens, donor, loss_before, loss_after, mean_loss_before, mean_loss_after, top1_changed,
// next_before {id, text, p}, next_after {id, text, p} (the top-1 after the last token),
// embedding_distance, layer_change}.
void to_json(nlohmann::json& j, const TextEffect& effect);
// {heads [{layer, head}], effect, texts}.
void to_json(nlohmann::json& j, const AblationResult& result);
// {layer, head, ablation, proxy, rank}.
void to_json(nlohmann::json& j, const HeadImportance& importance);
// {removed, effect, change}.
void to_json(nlohmann::json& j, const PruningPoint& point);
// {wall, cpu}.
void to_json(nlohmann::json& j, const Seconds& seconds);
// POST /api/ablate: the TextEffect's fields plus heads [[layer, head]], mode, reference (null for
// zero ablation), effect and unit ("nats" or "1 - cos").
void to_json(nlohmann::json& j, const TextAblation& ablation);
// POST /api/importance: {shape [n_layer, n_head], tokens, mode, measure ("delta_loss" or
// "embedding_distance"), unit, importance [HeadImportance, layer-major], spearman, seconds (wall)}.
void to_json(nlohmann::json& j, const ImportanceResult& importance);
// {texts, held_out, importance_order, random_order (the first random order), random_orders,
// random_summary [{removed, change_mean, change_sd}], removable_share_importance,
// removable_share_random (the first order's), removable_shares_random, seconds {wall, cpu}}.
void to_json(nlohmann::json& j, const PruningResult& pruning);
// "headscope.ablate/1": {schema, model, mode, seed, texts, measure} and either result or
// importance [HeadImportance], importance_seconds {wall, cpu}, spearman_proxy and (with pruning) pruning.
void to_json(nlohmann::json& j, const AblationExperiment& experiment);
// ---- circuits (docs/circuits.md) ----
// {site, layer, head (null when none), position (null when none), group (k, v only), value, normalised}.
void to_json(nlohmann::json& j, const PatchEffect& effect);
// "headscope.patch/1": {schema, model, task, seed, n_pairs, n_tokens, metric, direction, clean,
// corrupt, seconds} and either results [PatchEffect] and passes (a sweep), or path {senders,
// receivers, input, results [{receivers, value, normalised}], value and normalised (of the first
// result)}, or set {heads [[l, h]], value, normalised} (heads patched together); method "exact",
// "attribution" or "both", with attribution {results, clean, corrupt, edges [EdgeEffect],
// forward_passes, backward_passes, seconds} and (both) agreement {spearman, pearson, top10_shared,
// sites, misranked [PatchEffect]}; with attribution alone, results are the estimates.
void to_json(nlohmann::json& j, const PatchExperiment& experiment);
// {sender [l, h], receiver [l, h] (a key/value head for k and v; null for the logits), input, value, normalised}.
void to_json(nlohmann::json& j, const EdgeEffect& edge);
// "headscope.grad/1" (docs/gradients.md).
void to_json(nlohmann::json& j, const TextGradients& grads);
// "headscope.saliency/1" (docs/gradients.md).
void to_json(nlohmann::json& j, const SaliencyExperiment& saliency);
// {id, text, logit, probability, rank}.
void to_json(nlohmann::json& j, const LensEntry& entry);
// "headscope.lens/1": {schema, model, tokens, position, token (the token read there), top_k,
// followed_prediction, layers [{layer, top [LensEntry], followed [LensEntry]}]} (n_layer + 1
// layers, 0 the embeddings).
void to_json(nlohmann::json& j, const LogitLensResult& lens);
// "headscope.head_lens/1": {schema, model, tokens, position, token, layer, head, kv_head, top_k,
// followed_prediction, readout (how the norms are linearised), promoted, suppressed, followed: each
// a list of {id, text, logit (the head's direct effect), rank, model_logit}} (docs/schema.md).
void to_json(nlohmann::json& j, const HeadLensEntry& entry);
void to_json(nlohmann::json& j, const HeadLensResult& lens);
// ---- end of the causal results ----

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
// "headscope.head_map/1" (pipeline.h, head_map): n_layer, n_head, texts, rows, explained,
// eigenvalues, heads [{layer, head, kv_head, x, y}], distance [N][N]; and back (Error for JSON of
// another shape).
nlohmann::json head_map_json(const analysis::HeadMap& map, const ModelConfig& config);
analysis::HeadMap head_map_from_json(const nlohmann::json& j);

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

// One head of one text of a corpus run (`headscope run --corpus`, one JSON Lines record per text
// × head, docs/corpus.md): {text (its index in the corpus), id, layer, head, kv_head, n_tokens,
// stats (at `level`), role, role_id, role_score, evidence, secondary, secondary_score, on_text
// (token level: the head's links on this text, as run_json)}.
nlohmann::json corpus_head_json(const ModelConfig& config, size_t index, const std::string& id, const RunAnalysis& run,
                                Level level, int layer, int head);

// A corpus's statistics ("headscope.corpus_stats/1", docs/corpus.md): schema, model, n_layer,
// n_head, n_kv_head, texts, tokens, histogram_bins, heads [{layer, head, kv_head, stats (pooled over every
// query row), top_role (the most frequent primary role's id), role_counts {role id: texts},
// entropy_histogram, max_attention_histogram}].
nlohmann::json corpus_stats_json(const analysis::CorpusStats& stats);

// Direct logit attribution of one text ("headscope.dla/1"): schema, model, linearisation, tokens,
// attributions (pipeline.h attribute_logits).
nlohmann::json dla_json(const ModelConfig& config, const Encoding& encoding,
                        const std::vector<analysis::LogitAttribution>& attributions);

// ---- the replies of the explorer, the CLI and Python beyond runs and heads ----
// (Written in src/pipeline/json.cc's block of the same name; docs/api.md describes each.)

// Standard base64 (RFC 4648, with padding) of raw bytes, and of float32 values' little-endian bytes.
std::string base64_encode(std::string_view bytes);
std::string base64_floats(std::span<const float> values);
// {"shape": [...], "dtype": "float32", "data": base64}: a small tensor inside a JSON reply.
nlohmann::json typed_array(std::span<const float> values, std::vector<int64_t> shape);

// The model's JSON (to_json(ModelConfig)) plus statistics (the constants and min_role_score),
// statistics_catalogue, roles (worded for the model) and role_families.
void to_json(nlohmann::json& j, const ModelDescription& description);
// {weights, norm, rollout}: each null (the view can be shown) or why not.
void to_json(nlohmann::json& j, const ViewAvailability& views);
// {cells, T, starts [cells + 1], max_tile_cells}.
void to_json(nlohmann::json& j, const OverviewGrid& grid);
// run_json() plus streamed, overview (when kept) and views (when asked for): /api/run's reply and
// the Python Result's json().
void to_json(nlohmann::json& j, const RunDocument& document);
// /api/decompose: {layer, token, n_head, d_head, d_model, w_o_shape, head_outputs, head_output_norms,
// concat, projection, bias, contributions, contribution_norms, attn_output, attention_rows, check
// {sum_max_abs_error, projection_max_abs_error}}, the vectors as typed arrays.
void to_json(nlohmann::json& j, const Decomposition& d);
// /api/link: {q, k, query, key, sink_columns, heads [{layer, head, weight, weight_no_sink, roles}]}.
void to_json(nlohmann::json& j, const LinkSearch& search);
// /api/generate: {prompt, prompt_tokens, ids, generated, continuation, text, held_back_bytes,
// retokenizes_same, stopped_at_eos, stopped_at_limit}.
void to_json(nlohmann::json& j, const GenerationResult& result);
// The file of `headscope generate --json`: {model, prompt, prompt_tokens, tokens, generated,
// kv_head_of, stopped_at_eos, text (every id decoded, prompt included)}: the generation with its
// tokens and the model, for reading beside the attention .npy.
nlohmann::json generation_file_json(const ModelConfig& config, const GenerationResult& result);

// ---- composition scores (circuits.h; docs/circuits.md, "Composition scores") ----
// {mean, std}.
void to_json(nlohmann::json& j, const CompositionBaseline& baseline);
// {sender {layer, head}, receiver {layer, head}, score}.
void to_json(nlohmann::json& j, const CompositionPair& pair);
// "headscope.composition/1": {schema, model, definition, folded, rope, axes, shape [n_layer, n_head,
// n_layer, n_head], masked, scores {Q, K, V} (nested lists in that shape, 0 where the receiver's layer
// is not after the sender's), baseline {draws, seed, Q, K, V}, top {Q, K, V} (the `top` highest
// pairs of each kind), seconds {scores, baseline (wall), cpu (both)}}.
nlohmann::json composition_json(const CompositionScores& scores, int top);

}  // namespace headscope
