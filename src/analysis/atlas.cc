// The head atlas's pure steps: the coreference summary and the join of every stage's evidence
// into roles (atlas.h). The stages that run the model are the pipeline's (src/pipeline/atlas.h).
#include "analysis/atlas.h"

namespace headscope::analysis {

CorefResult summarise_coref(const CorefScorer& select, const CorefScorer& report, int n_heads) {
  const int N = n_heads;
  CorefResult cr;
  cr.support_report = report.support();
  cr.support_select = select.support();
  cr.skipped = report.skipped();
  cr.head = 0;
  for (int h = 1; h < N; ++h) {
    if (select.correct(h) > select.correct(cr.head)) cr.head = h;
  }
  cr.head_select_accuracy = select.accuracy(cr.head);
  cr.head_report_accuracy = report.accuracy(cr.head);
  for (int b = 1; b < kCorefBaselineCount; ++b) {
    const auto cb = static_cast<CorefBaseline>(b);
    if (select.baseline_correct(cb) > select.baseline_correct(cr.baseline)) cr.baseline = cb;
  }
  cr.baseline_select_accuracy = select.baseline_accuracy(cr.baseline);
  cr.baseline_report_accuracy = report.baseline_accuracy(cr.baseline);
  for (int h = 0; h < N; ++h) cr.head_report_accuracies.push_back(report.accuracy(h));
  for (int b = 0; b < kCorefBaselineCount; ++b) {
    cr.baseline_report_accuracies.push_back(report.baseline_accuracy(static_cast<CorefBaseline>(b)));
  }
  // A head's coreference skill is judged against the stronger simple baseline on the report
  // file: on a few hundred GAP rows the one chosen on the selection file can be the weaker one,
  // which would make half the heads look like coreference heads.
  for (int b = 0; b < kCorefBaselineCount; ++b)
    if (cr.baseline_report_accuracies[size_t(b)] > cr.baseline_report_accuracies[size_t(cr.evidence_baseline)])
      cr.evidence_baseline = static_cast<CorefBaseline>(b);
  return cr;
}

void join_evidence(AtlasResult& r, const DependencyScorer& select_scorer, const DependencyScorer& report_scorer) {
  const AtlasOptions& options = r.options;
  const int N = r.n_heads();
  const bool given = !options.evidence.empty();
  r.relations = select_and_report(select_scorer, report_scorer, options.min_support);
  r.select_counts = select_scorer;
  r.report_counts = report_scorer;
  r.head_syntax.resize(static_cast<size_t>(N));
  r.evidence.resize(static_cast<size_t>(N));
  for (int h = 0; h < N; ++h) {
    const auto i = static_cast<size_t>(h);
    r.head_syntax[i] = best_relation_of_head(select_scorer, report_scorer, h, options.role_min_support);
    HeadEvidence& e = r.evidence[i];
    e.stats = r.stats[i];
    e.probe = r.probe[i];
    const HeadSyntax& hs = r.head_syntax[i];
    if (!hs.relation.empty()) {
      e.syntax = SyntaxEvidence{hs.relation,        hs.direction == Direction::kHeadToDependent,
                                hs.accuracy,        hs.baseline_accuracy,
                                hs.baseline_offset, hs.support,
                                r.report_sentences};
    }
    if (r.coref && r.coref->support_report > 0) {
      const CorefBaseline b = r.coref->evidence_baseline;
      e.coref = CorefEvidence{r.coref->head_report_accuracies[i], r.coref->baseline_report_accuracies[size_t(b)],
                              std::string(coref_baseline_name(b)), r.coref->support_report};
    }
  }
  if (given)
    for (int h = 0; h < N; ++h) {
      const auto i = static_cast<size_t>(h);
      r.evidence[i] = options.evidence[i];
      r.evidence[i].stats = r.stats[i];
    }
  // A causal model's roles come from the rows without the sink; the sink's shares stay as evidence.
  const auto read_without_sink = [](HeadEvidence& e, const HeadStats& whole, const std::vector<HeadStats>& free,
                                    size_t i) {
    if (i >= free.size()) return;
    e.stats = free[i];
    e.sink = SinkEvidence{whole.sink_mass, whole.first_mass, whole.sink_mass_norm};
  };
  for (size_t i = 0; i < r.evidence.size(); ++i) read_without_sink(r.evidence[i], r.stats[i], r.free_stats, i);
  r.roles = assign_roles(r.evidence);
  for (TextRoles& t : r.texts) {
    std::vector<HeadEvidence> evidence = r.evidence;
    for (size_t i = 0; i < evidence.size(); ++i) {
      evidence[i].stats = t.stats[i];
      evidence[i].sink.reset();
      read_without_sink(evidence[i], t.stats[i], t.free_stats, i);
    }
    t.roles = assign_roles(evidence);
  }
}

}  // namespace headscope::analysis
