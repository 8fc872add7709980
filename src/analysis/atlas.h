// headscope analysis — the head atlas: one model over a corpus, the gold data and the probe, every
// head's statistics, role scores and evidence in one result.
//
// Stages, run by the pipeline's build_atlas (src/pipeline/atlas.h); each reports progress
// through AtlasOptions::progress:
//   1. statistics: token- and word-level HeadStats over the corpus (a text file, one text a line;
//      by default the sentences of the report treebank);
//   2. probe: `probe_count` repeated-random-token sequences (probe.h) for induction/duplicate scores;
//   3. syntax: Clark et al. dependency scoring on the selection treebank (UD EWT dev) and the
//      report treebank (UD PUD) (syntax.h); heads, directions and offsets chosen on the first;
//   4. coreference: GAP pronoun → candidate (coref.h), chosen on one file, reported on the other;
//   5. roles: assign_roles() per head with all the evidence above (and, with text_roles, per
//      corpus text with that text's statistics).
// A sentence longer than the model's position limit is skipped and counted, never truncated
// (truncation would cut dependency arcs). The only file access is through the data readers.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/coref.h"
#include "analysis/probe.h"
#include "analysis/roles.h"
#include "analysis/statistics.h"
#include "analysis/syntax.h"
#include "headscope/model.h"

namespace headscope::analysis {

// AtlasOptions is public (headscope/analysis.h): the atlas command fills it in.

struct CorefResult {
  int64_t support_select = 0, support_report = 0, skipped = 0;
  int head = -1;  // best on the selection file
  double head_select_accuracy = 0, head_report_accuracy = 0;
  CorefBaseline baseline = CorefBaseline::kNearest;           // best on the selection file
  CorefBaseline evidence_baseline = CorefBaseline::kNearest;  // the stronger on the report file: heads' evidence
  double baseline_select_accuracy = 0, baseline_report_accuracy = 0;
  std::vector<double> head_report_accuracies;      // [n_layer * n_head]
  std::vector<double> baseline_report_accuracies;  // [kCorefBaselineCount]
};

// One corpus text seen on its own (AtlasOptions::text_roles).
struct TextRoles {
  std::string text;
  std::vector<HeadStats> stats;       // [n_layer * n_head], token level
  std::vector<HeadStats> free_stats;  // causal models: without the sink (AtlasResult::free_stats)
  std::vector<HeadRoles> roles;       // [n_layer * n_head]
};

// Every head ablated alone (zero ablation) over a few sentences, and the proxy (docs/causal.md).
// Filled by the pipeline's make_atlas (the Ablator lives above this layer); absent when off.
struct AtlasImportance {
  int64_t texts = 0;             // the first report-treebank sentences that fit the model
  std::string measure;           // what `ablation` is: Δ mean next-token loss or 1 − cos
  std::vector<double> ablation;  // [n_layer * n_head] mean effect of ablating the head alone
  std::vector<double> proxy;     // [n_layer * n_head] mean ‖contribution‖ / ‖residual stream‖
  double spearman = 0;           // Spearman's ρ between the two
};

struct AtlasResult {
  ModelConfig config;
  std::string model_path;
  AtlasOptions options;  // as used (progress callback cleared)
  int64_t corpus_texts = 0, corpus_tokens = 0, skipped_texts = 0;
  int64_t select_sentences = 0, report_sentences = 0, skipped_sentences = 0;
  std::vector<HeadStats> stats;       // [n_layer * n_head], token level
  std::vector<HeadStats> word_stats;  // [n_layer * n_head], word level (words.h)
  // A causal model's token-level rows without the sink (StreamPlan::sink_free: the first position
  // and the specials dropped, each row renormalised), which its roles are read from as every
  // frontend's are, the sink shares of `stats` kept as their evidence; empty for an encoder.
  std::vector<HeadStats> free_stats;
  std::vector<ProbeEvidence> probe;  // [n_layer * n_head]
  std::vector<RelationResult> relations;
  DependencyScorer select_counts{0}, report_counts{0};  // raw counts behind `relations`
  std::vector<HeadSyntax> head_syntax;                  // [n_layer * n_head] best relation per head
  std::optional<CorefResult> coref;
  std::vector<HeadEvidence> evidence;  // [n_layer * n_head]
  std::vector<HeadRoles> roles;        // [n_layer * n_head]
  std::vector<TextRoles> texts;        // AtlasOptions::text_roles: [corpus texts run]
  std::optional<AtlasImportance> importance;
  double seconds_total = 0;
  std::vector<std::pair<std::string, double>> seconds_per_stage;

  int n_heads() const { return config.n_layer * config.n_head; }
};

// The stages run in the pipeline (build_atlas, src/pipeline/atlas.h); these are its pure steps.
// The best head and baseline on the selection GAP file, reported on the report file.
CorefResult summarise_coref(const CorefScorer& select, const CorefScorer& report, int n_heads);
// Relations, each head's best relation and evidence (or AtlasOptions::evidence, when given, with
// the statistics measured here), then roles for every head and every TextRoles entry: fills
// relations, select_counts, report_counts, head_syntax, evidence, roles and texts[].roles of `r`
// from its stats (a causal model's free_stats, with the sink shares of stats), probe and coref.
void join_evidence(AtlasResult& r, const DependencyScorer& select, const DependencyScorer& report);

}  // namespace headscope::analysis
