// The atlas as JSON, Markdown and the description of its grid image; see atlas_report.h.
#include "analysis/atlas_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "analysis/format.h"
#include "headscope/error.h"
#include "headscope/json.h"

namespace headscope::analysis {
namespace {

using nlohmann::json;

std::string pct(double x) { return std::isfinite(x) ? format("%.1f", 100.0 * x) : "–"; }
std::string num(double x, int digits = 2) { return std::isfinite(x) ? format("%.*f", digits, x) : "–"; }

std::string head_name(int index, int n_head) { return format("L%dH%d", index / n_head, index % n_head); }

// A compact label for tables and the grid: "prev", "sink", "nsubj", "+2".
std::string short_label(const RoleScore& r) {
  switch (r.role) {
    case Role::kPreviousToken:
      return "prev";
    case Role::kNextToken:
      return "next";
    case Role::kSelf:
      return "self";
    case Role::kFixedOffset:
      return "offset " + r.detail;
    case Role::kSink:
      return "sink";
    case Role::kBroad:
      return "broad";
    case Role::kLocalWindow:
      return "local";
    case Role::kDuplicateToken:
      return "dup";
    case Role::kInduction:
      return "induction";
    case Role::kSyntactic:
      return r.detail.substr(0, r.detail.find(' '));
    case Role::kCoreference:
      return "coref";
    case Role::kMixed:
      return "mixed";
    case Role::kDormant:
      return "dormant";
  }
  return "?";
}

// The part of the JSON that a control model repeats.
json model_part(const AtlasResult& a) {
  const int H = a.config.n_head;
  json j;
  j["model"] = a.config;
  j["model"]["path"] = a.model_path;
  j["counts"] = {{"corpus_texts", a.corpus_texts},         {"corpus_tokens", a.corpus_tokens},
                 {"skipped_texts", a.skipped_texts},       {"report_sentences", a.report_sentences},
                 {"select_sentences", a.select_sentences}, {"skipped_sentences", a.skipped_sentences}};
  json timing = {{"total", a.seconds_total}};
  for (const auto& [stage, s] : a.seconds_per_stage) timing[stage] = s;
  j["seconds"] = timing;
  json heads = json::array();
  for (int i = 0; i < a.n_heads(); ++i) {
    const auto u = static_cast<size_t>(i);
    // The head object of every run (headscope/json.h), plus the corpus evidence behind its roles.
    json h = head_json(a.config, i / H, i % H, a.stats[u], a.roles[u]);
    h["word_stats"] = a.word_stats[u];
    h["probe"] = a.probe[u];
    const HeadSyntax& hs = a.head_syntax[u];
    if (!hs.relation.empty()) {
      h["syntax"] = {{"relation", hs.relation},
                     {"direction", direction_name(hs.direction)},
                     {"accuracy", hs.accuracy},
                     {"baseline_accuracy", hs.baseline_accuracy},
                     {"baseline_offset", hs.baseline_offset},
                     {"support", hs.support}};
    }
    if (a.coref) h["coref_accuracy"] = a.coref->head_report_accuracies[u];
    if (a.importance) h["importance"] = {{"ablation", a.importance->ablation[u]}, {"proxy", a.importance->proxy[u]}};
    heads.push_back(std::move(h));
  }
  j["heads"] = std::move(heads);
  if (!a.texts.empty()) {  // AtlasOptions::text_roles: each corpus text's own head objects
    json texts = json::array();
    for (const TextRoles& t : a.texts) {
      json text_heads = json::array();
      for (int i = 0; i < a.n_heads(); ++i)
        text_heads.push_back(head_json(a.config, i / H, i % H, t.stats[size_t(i)], t.roles[size_t(i)]));
      texts.push_back({{"text", t.text}, {"heads", std::move(text_heads)}});
    }
    j["texts"] = std::move(texts);
  }
  if (a.importance) {
    j["importance"] = {{"mode", "zero"},
                       {"texts", a.importance->texts},
                       {"measure", a.importance->measure},
                       {"spearman_proxy", json_number(a.importance->spearman)}};
  }
  json rels = json::array();
  for (const RelationResult& r : a.relations) {
    rels.push_back({{"relation", r.relation},
                    {"support_select", r.support_select},
                    {"support_report", r.support_report},
                    {"layer", r.head / H},
                    {"head", r.head % H},
                    {"direction", direction_name(r.direction)},
                    {"head_select_accuracy", r.head_select_accuracy},
                    {"head_report_accuracy", r.head_report_accuracy},
                    {"baseline_offset", r.baseline_offset},
                    {"baseline_select_accuracy", r.baseline_select_accuracy},
                    {"baseline_report_accuracy", r.baseline_report_accuracy}});
  }
  j["relations"] = std::move(rels);
  if (a.coref) {
    const CorefResult& c = *a.coref;
    json baselines = json::object();
    for (int b = 0; b < kCorefBaselineCount; ++b) {
      baselines[std::string(coref_baseline_name(static_cast<CorefBaseline>(b)))] =
          c.baseline_report_accuracies[static_cast<size_t>(b)];
    }
    j["coreference"] = {{"support_select", c.support_select},
                        {"support_report", c.support_report},
                        {"skipped", c.skipped},
                        {"layer", c.head / H},
                        {"head", c.head % H},
                        {"head_select_accuracy", c.head_select_accuracy},
                        {"head_report_accuracy", c.head_report_accuracy},
                        {"baseline", coref_baseline_name(c.baseline)},
                        {"baseline_select_accuracy", c.baseline_select_accuracy},
                        {"baseline_report_accuracy", c.baseline_report_accuracy},
                        {"baselines_report", baselines}};
  }
  return j;
}

std::map<Role, int> role_counts(const AtlasResult& a) {
  std::map<Role, int> n;
  for (const HeadRoles& r : a.roles) ++n[r.primary.role];
  return n;
}

std::string role_count_line(const AtlasResult& a) {
  std::string s;
  const auto counts = role_counts(a);
  std::vector<std::pair<int, Role>> sorted;
  for (const auto& [role, n] : counts) sorted.emplace_back(-n, role);
  std::sort(sorted.begin(), sorted.end());
  for (const auto& [neg, role] : sorted) {
    if (!s.empty()) s += ", ";
    s += std::string(role_info(role).name) + " " + std::to_string(-neg);
  }
  return s;
}

// Index of the head with the largest value of `f`.
template <class F>
int argmax_head(const AtlasResult& a, F f) {
  int best = 0;
  for (int i = 1; i < a.n_heads(); ++i) {
    if (f(static_cast<size_t>(i)) > f(static_cast<size_t>(best))) best = i;
  }
  return best;
}

const RelationResult* find_relation(const AtlasResult& a, const std::string& rel) {
  for (const RelationResult& r : a.relations) {
    if (r.relation == rel) return &r;
  }
  return nullptr;
}

void grid_table(std::string& md, const AtlasResult& a) {
  const int H = a.config.n_head;
  md += "| layer |";
  for (int h = 0; h < H; ++h) md += format(" H%d |", h);
  md += "\n|---|";
  for (int h = 0; h < H; ++h) md += "---|";
  md += "\n";
  for (int l = 0; l < a.config.n_layer; ++l) {
    md += format("| L%d |", l);
    for (int h = 0; h < H; ++h) {
      const HeadRoles& r = a.roles[static_cast<size_t>(l * H + h)];
      const std::string label = short_label(r.primary);
      md += " " + (r.primary.role == Role::kSyntactic ? "*" + label + "*" : label) + " " + num(r.confidence) + " |";
    }
    md += "\n";
  }
}

}  // namespace

json atlas_json(const AtlasResult& a, const AtlasResult* control) {
  json j = model_part(a);
  j["schema"] = "headscope.atlas/2";
  const AtlasOptions& o = a.options;
  j["options"] = {{"report_treebank", o.report_treebank},
                  {"select_treebank", o.select_treebank},
                  {"report_coref", o.report_coref},
                  {"select_coref", o.select_coref},
                  {"corpus", o.corpus},
                  {"probe_length", o.probe_length},
                  {"probe_count", o.probe_count},
                  {"seed", o.seed},
                  {"min_support", o.min_support},
                  {"role_min_support", o.role_min_support}};
  j["roles"] = role_catalogue_json();
  if (control) j["control"] = model_part(*control);
  return j;
}

std::string atlas_markdown(const AtlasResult& a, const AtlasResult* control, const std::string& command_line,
                           const std::string& image) {
  const int H = a.config.n_head;
  const AtlasOptions& o = a.options;
  const bool in_sample_syntax = o.select_treebank.empty();
  std::string md;
  md += "# Head atlas: " + a.config.name + "\n\n";
  md += "Generated by `headscope atlas` (do not edit by hand; regenerate with the command below).\n\n";
  md += "```\n" + command_line + "\n```\n\n";
  md += format("- Model: `%s` (%s, %d layers × %d heads, %s)\n", a.model_path.c_str(), a.config.architecture.c_str(),
               a.config.n_layer, H, a.config.causal ? "causal" : "bidirectional");
  if (control)
    md += format("- Control: `%s`, the same architecture with randomly initialised weights\n",
                 control->model_path.c_str());
  md += format("- Report treebank: `%s`, %lld sentences run", o.report_treebank.c_str(),
               static_cast<long long>(a.report_sentences));
  md += in_sample_syntax ? " (heads also selected on it: in-sample)\n"
                         : format("; heads selected on `%s` (%lld sentences)\n", o.select_treebank.c_str(),
                                  static_cast<long long>(a.select_sentences));
  if (a.skipped_sentences)
    md += format("- %lld sentences skipped as longer than the model allows\n",
                 static_cast<long long>(a.skipped_sentences));
  md += format("- Statistics over %lld texts, %lld tokens (%s)\n", static_cast<long long>(a.corpus_texts),
               static_cast<long long>(a.corpus_tokens),
               o.corpus.empty() ? "the report treebank's sentences" : o.corpus.c_str());
  md += format("- Probe: %d sequences of %d random tokens, each repeated twice\n", o.probe_count, o.probe_length);
  if (a.importance)
    md += format("- Importance: every head zero-ablated alone over the first %lld report-treebank sentences (%s)\n",
                 static_cast<long long>(a.importance->texts), a.importance->measure.c_str());
  md += format("- Wall time: %.1f s", a.seconds_total);
  for (const auto& [stage, s] : a.seconds_per_stage) md += format("; %s %.1f s", stage.c_str(), s);
  md += "\n\nDefinitions of every number: [docs/metrics.md](metrics.md).\n\n";

  // ---- headline ----
  md += "## Headline\n\n";
  md += "- Primary roles: " + role_count_line(a) + ".\n";
  if (control) md += "- Control primary roles: " + role_count_line(*control) + ".\n";
  int beats = 0, rel_count = 0, control_beats = 0;
  for (const RelationResult& r : a.relations) {
    if (r.relation == kAllRelations) continue;
    ++rel_count;
    if (r.head_report_accuracy > r.baseline_report_accuracy) ++beats;
    if (control) {
      const RelationResult* cr = find_relation(*control, r.relation);
      if (cr && cr->head_report_accuracy > cr->baseline_report_accuracy) ++control_beats;
    }
  }
  md += format(
      "- Dependency relations with at least %lld dependents: in %d of %d the best head (chosen on the selection "
      "set) beats the best fixed offset on the report set",
      static_cast<long long>(o.min_support), beats, rel_count);
  md += control ? format("; for the control, %d of %d.\n", control_beats, rel_count) : ".\n";
  if (const RelationResult* all = find_relation(a, std::string(kAllRelations))) {
    md += format(
        "- All relations pooled: the best single head, %s (%s), finds %s %% of gold heads; the best offset (%+d) %s %%",
        head_name(all->head, H).c_str(), std::string(direction_name(all->direction)).c_str(),
        pct(all->head_report_accuracy).c_str(), all->baseline_offset, pct(all->baseline_report_accuracy).c_str());
    const RelationResult* call = control ? find_relation(*control, std::string(kAllRelations)) : nullptr;
    md += call ? format("; control's best head %s %%.\n", pct(call->head_report_accuracy).c_str()) : ".\n";
  }
  if (a.coref) {
    const CorefResult& c = *a.coref;
    md += format(
        "- Coreference (GAP): best head %s puts more attention on the right name in %s %% of %lld examples; "
        "the %s baseline %s %%",
        head_name(c.head, H).c_str(), pct(c.head_report_accuracy).c_str(), static_cast<long long>(c.support_report),
        std::string(coref_baseline_name(c.baseline)).c_str(), pct(c.baseline_report_accuracy).c_str());
    md += control && control->coref
              ? format("; control's best head %s %%.\n", pct(control->coref->head_report_accuracy).c_str())
              : ".\n";
  }
  {
    const int ind = argmax_head(a, [&](size_t i) { return a.probe[i].induction; });
    const int dup = argmax_head(a, [&](size_t i) { return a.probe[i].duplicate; });
    md += format("- Probe: strongest induction score %s %% (%s), strongest duplicate-token score %s %% (%s)",
                 pct(a.probe[static_cast<size_t>(ind)].induction).c_str(), head_name(ind, H).c_str(),
                 pct(a.probe[static_cast<size_t>(dup)].duplicate).c_str(), head_name(dup, H).c_str());
    if (control) {
      const int cind = argmax_head(*control, [&](size_t i) { return control->probe[i].induction; });
      md += format("; control: %s %% induction at best",
                   pct(control->probe[static_cast<size_t>(cind)].induction).c_str());
    }
    md += ".\n\n";
  }

  // ---- grid ----
  md +=
      "## Primary role of every head\n\nEach cell: the primary role (for a syntactic head, its relation in italics) "
      "and the confidence (the role's score, see docs/metrics.md).\n\n";
  if (!image.empty()) md += "![primary role per head, coloured; bottom band: secondary role](" + image + ")\n\n";
  grid_table(md, a);
  if (control) {
    md += "\nControl (random weights):\n\n";
    if (image.size() > 4 && image.substr(image.size() - 4) == ".png") {
      md += "![control: primary role per head](" + image.substr(0, image.size() - 4) + "-control.png)\n\n";
    }
    grid_table(md, *control);
  }

  // ---- relations ----
  md += "\n## Dependency relations\n\n";
  md += in_sample_syntax
            ? "Heads and offsets are selected and scored on the same treebank.\n\n"
            : "For each relation the head (and direction) and the fixed offset are chosen on the selection "
              "treebank; all accuracies in the table except the \"select\" column are on the report "
              "treebank. Accuracy in %.\n\n";
  md += "| relation | n (report) | best head | direction | select acc | report acc | best offset | offset acc |";
  if (control) md += " control head | control acc |";
  md += "\n|---|---|---|---|---|---|---|---|";
  if (control) md += "---|---|";
  md += "\n";
  for (const RelationResult& r : a.relations) {
    md += format("| %s | %lld | %s | %s | %s | **%s** | %+d | %s |", r.relation.c_str(),
                 static_cast<long long>(r.support_report), head_name(r.head, H).c_str(),
                 std::string(direction_name(r.direction)).c_str(), pct(r.head_select_accuracy).c_str(),
                 pct(r.head_report_accuracy).c_str(), r.baseline_offset, pct(r.baseline_report_accuracy).c_str());
    if (control) {
      const RelationResult* cr = find_relation(*control, r.relation);
      md +=
          cr ? format(" %s | %s |", head_name(cr->head, H).c_str(), pct(cr->head_report_accuracy).c_str()) : " – | – |";
    }
    md += "\n";
  }

  // ---- coreference ----
  if (a.coref) {
    const CorefResult& c = *a.coref;
    md += "\n## Coreference (GAP)\n\n";
    md += format(
        "Examples with exactly one correct candidate: %lld in the report file, %lld in the selection file "
        "(%lld skipped for having a mention cut off). Accuracy = share of examples where the pronoun attends "
        "more to the correct name than to the other.\n\n",
        static_cast<long long>(c.support_report), static_cast<long long>(c.support_select),
        static_cast<long long>(c.skipped));
    md += "| predictor | selected on | select acc | report acc |\n|---|---|---|---|\n";
    md += format("| best head %s | selection file | %s | **%s** |\n", head_name(c.head, H).c_str(),
                 pct(c.head_select_accuracy).c_str(), pct(c.head_report_accuracy).c_str());
    if (control && control->coref) {
      const CorefResult& cc = *control->coref;
      md += format("| control best head %s | selection file | %s | %s |\n", head_name(cc.head, H).c_str(),
                   pct(cc.head_select_accuracy).c_str(), pct(cc.head_report_accuracy).c_str());
    }
    for (int b = 0; b < kCorefBaselineCount; ++b) {
      md += format("| %s | – | – | %s |\n", std::string(coref_baseline_name(static_cast<CorefBaseline>(b))).c_str(),
                   pct(c.baseline_report_accuracies[static_cast<size_t>(b)]).c_str());
    }
  }

  // ---- probe ----
  md +=
      "\n## Induction and duplicate-token probe\n\n| rank | induction head | score % | duplicate head | score % "
      "|\n|---|---|---|---|---|\n";
  std::vector<int> by_ind(static_cast<size_t>(a.n_heads())), by_dup(static_cast<size_t>(a.n_heads()));
  for (int i = 0; i < a.n_heads(); ++i) by_ind[static_cast<size_t>(i)] = by_dup[static_cast<size_t>(i)] = i;
  std::stable_sort(by_ind.begin(), by_ind.end(),
                   [&](int x, int y) { return a.probe[size_t(x)].induction > a.probe[size_t(y)].induction; });
  std::stable_sort(by_dup.begin(), by_dup.end(),
                   [&](int x, int y) { return a.probe[size_t(x)].duplicate > a.probe[size_t(y)].duplicate; });
  for (int k = 0; k < std::min(5, a.n_heads()); ++k) {
    const int i = by_ind[static_cast<size_t>(k)], d = by_dup[static_cast<size_t>(k)];
    md += format("| %d | %s | %s | %s | %s |\n", k + 1, head_name(i, H).c_str(),
                 pct(a.probe[size_t(i)].induction).c_str(), head_name(d, H).c_str(),
                 pct(a.probe[size_t(d)].duplicate).c_str());
  }

  // ---- importance ----
  if (a.importance) {
    const AtlasImportance& imp = *a.importance;
    md += format(
        "\n## Importance (zero ablation)\n\nEach head removed alone (its output set to 0 before W_O) over %lld "
        "sentences; importance = mean %s (docs/causal.md). The proxy (‖contribution‖ / ‖residual stream‖, no "
        "ablation) ranks the heads with Spearman ρ = %s.\n\n| rank | most important | role | importance | proxy "
        "| least important | role | importance | proxy |\n|---|---|---|---|---|---|---|---|---|\n",
        static_cast<long long>(imp.texts), imp.measure.c_str(), num(imp.spearman).c_str());
    std::vector<int> order(static_cast<size_t>(a.n_heads()));
    for (int i = 0; i < a.n_heads(); ++i) order[static_cast<size_t>(i)] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](int x, int y) { return imp.ablation[size_t(x)] > imp.ablation[size_t(y)]; });
    const auto cells = [&](int i) {
      return format("%s | %s | %.4g | %.3f", head_name(i, H).c_str(), short_label(a.roles[size_t(i)].primary).c_str(),
                    imp.ablation[size_t(i)], imp.proxy[size_t(i)]);
    };
    for (int k = 0; k < std::min(5, a.n_heads()); ++k)
      md += format("| %d | %s | %s |\n", k + 1, cells(order[size_t(k)]).c_str(),
                   cells(order[size_t(a.n_heads() - 1 - k)]).c_str());
  }

  // ---- every head ----
  md +=
      "\n## Every head: roles and evidence\n\n| head | primary | confidence | secondary | importance | evidence for "
      "the primary role |\n|---|---|---|---|---|---|\n";
  for (int i = 0; i < a.n_heads(); ++i) {
    const HeadRoles& r = a.roles[static_cast<size_t>(i)];
    const std::string primary = role_label(r.primary), secondary = role_label(r.secondary);
    const std::string importance = a.importance ? format("%.4g", a.importance->ablation[size_t(i)]) : "–";
    md += format("| %s | %s | %s | %s (%s) | %s | %s |\n", head_name(i, H).c_str(), primary.c_str(),
                 num(r.confidence).c_str(), secondary.c_str(), num(r.secondary.score).c_str(), importance.c_str(),
                 r.primary.evidence.c_str());
  }

  // ---- statistics ----
  md +=
      "\n## Statistics of every head (token level)\n\nEntropy in bits and normalised; sparsity = share of weights "
      "below a tenth of the uniform share; keys90 = keys holding 90 % of a row; max = mean row maximum; avg = Σa² "
      "(the weight where the attention lands); sink (norm) = the sink's share of what the head moves, "
      "‖α·v W_O‖ (Kobayashi et al. 2020, docs/causal.md); masses in %.\n\n"
      "| head | H | H norm | sparsity | keys90 | max | avg | distance | sink | sink (norm) | [SEP]/EOS | prev | next | "
      "self | punct |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (int i = 0; i < a.n_heads(); ++i) {
    const HeadStats& s = a.stats[static_cast<size_t>(i)];
    md += format("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                 head_name(i, H).c_str(), num(s.entropy_bits).c_str(), num(s.entropy_norm).c_str(),
                 num(s.sparsity).c_str(), num(s.keys_90, 1).c_str(), num(s.max_attention).c_str(),
                 num(s.avg_attention).c_str(), num(s.mean_distance, 1).c_str(), pct(s.sink_mass).c_str(),
                 pct(s.sink_mass_norm).c_str(), pct(s.end_special_mass).c_str(), pct(s.prev_mass).c_str(),
                 pct(s.next_mass).c_str(), pct(s.self_mass).c_str(), pct(s.punct_mass).c_str());
  }
  return md;
}

render::Grid atlas_grid(const AtlasResult& a, const std::string& title) {
  const int L = a.config.n_layer, H = a.config.n_head;
  render::Grid grid;
  grid.title = title;
  for (int l = 0; l < L; ++l) grid.row_labels.push_back(format("L%d", l));
  for (int h = 0; h < H; ++h) grid.column_labels.push_back(format("H%d", h));
  for (int i = 0; i < L * H; ++i) {
    const HeadRoles& r = a.roles[static_cast<size_t>(i)];
    grid.cells.push_back({role_info(r.primary.role).color, role_info(r.secondary.role).color, short_label(r.primary),
                          num(r.confidence)});
  }
  // Legend: every role with its colour, name and how many heads have it as primary.
  const auto counts = role_counts(a);
  for (const RoleInfo& info : role_catalogue()) {
    const auto it = counts.find(info.role);
    grid.legend.push_back({info.color, std::string(info.name) + format(" (%d)", it == counts.end() ? 0 : it->second)});
  }
  grid.note = "bottom band: secondary role";
  return grid;
}

}  // namespace headscope::analysis
