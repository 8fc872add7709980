// headscope pipeline — probe(), analyse() and the word labels (see headscope/pipeline.h).
#include <algorithm>
#include <utility>

#include "analysis/probe.h"
#include "analysis/roles.h"
#include "analysis/statistics.h"
#include "analysis/stream.h"
#include "analysis/without_specials.h"
#include "analysis/words.h"
#include "headscope/error.h"
#include "headscope/pipeline.h"

namespace headscope {
namespace {

// Every head's statistics at one level (`level` picks its accumulator from a HeadStream), then
// roles from them plus the probe's evidence.
LevelAnalysis analyse_level(const std::vector<analysis::HeadStream>& heads,
                            analysis::HeadStatsAccumulator analysis::HeadStream::*level, analysis::SequenceInfo units,
                            std::span<const analysis::ProbeEvidence> probe) {
  LevelAnalysis out;
  out.stats.reserve(heads.size());
  for (const analysis::HeadStream& head : heads) out.stats.push_back((head.*level).result());
  std::vector<analysis::HeadEvidence> evidence(out.stats.size());
  for (size_t i = 0; i < out.stats.size(); ++i) {
    evidence[i].stats = out.stats[i];
    if (i < probe.size()) evidence[i].probe = probe[i];
  }
  out.roles = analysis::assign_roles(evidence);
  out.units = std::move(units);
  return out;
}

}  // namespace

const char* level_name(Level level) { return level == Level::kToken ? "token" : "word"; }

std::vector<int> kv_head_of(const ModelConfig& c) {
  const int kv = c.n_kv_head > 0 ? c.n_kv_head : c.n_head;
  const int group = kv > 0 ? std::max(1, c.n_head / kv) : 1;
  std::vector<int> map(static_cast<size_t>(std::max(c.n_head, 0)));
  for (int h = 0; h < c.n_head; ++h) map[static_cast<size_t>(h)] = h / group;
  return map;
}

std::vector<analysis::ProbeEvidence> probe(const Model& model, const ProbeOptions& options) {
  return analysis::measure_probe(model, options.length, options.count, options.seed);
}

size_t RunAnalysis::bytes() const {
  auto floats = [](const Tensor& t) { return static_cast<size_t>(t.numel()) * sizeof(float); };
  size_t overview_bytes = 0;
  for (const analysis::HeadOverview& o : overviews)
    overview_bytes += (o.sum.size() + o.max.size()) * sizeof(float) + (o.received.size() + o.offset_mass.size()) * sizeof(double);
  return floats(capture.attention) + floats(capture.head_outputs) + floats(capture.contributions) +
         floats(capture.attn_output) + floats(capture.hidden_states) + floats(capture.queries) + floats(capture.keys) +
         floats(word_attention) + text.size() + overview_bytes;
}

RunAnalysis analyse(const Model& model, std::string text, Encoding encoding,
                    std::span<const analysis::ProbeEvidence> probe, const AnalyseOptions& options) {
  if (encoding.size() == 0) throw Error("the text produced no tokens");
  RunAnalysis run;
  run.text = std::move(text);
  run.encoding = std::move(encoding);
  CaptureOptions capture = options.capture;
  capture.attention = true;  // everything below reads it
  run.capture = model.run(run.encoding, capture);

  const ModelConfig& c = model.config();
  run.words = analysis::words_from_encoding(run.encoding);
  const analysis::StreamPlan plan =
      analysis::make_stream_plan(analysis::describe_sequence(run.encoding, run.text, c.causal), run.words,
                                 options.without_specials, options.overview_cells);
  // Every head's rows go through one HeadStream: statistics at both levels, with and without
  // specials, and the overview (analysis/stream.h).
  const int T = run.T();
  const int64_t heads = int64_t(c.n_layer) * c.n_head;
  std::vector<analysis::HeadStream> streams(static_cast<size_t>(heads), analysis::HeadStream(plan));
#pragma omp parallel for schedule(dynamic)
  for (int64_t i = 0; i < heads; ++i)
    streams[static_cast<size_t>(i)].add_rows(run.capture.attention.ptr() + i * T * T, 0, T, T);
  run.word_attention = analysis::merge_attention(run.capture.attention, run.words);

  using analysis::HeadStream;
  run.token_level = analyse_level(streams, &HeadStream::token, plan.tokens, probe);
  run.word_level = analyse_level(streams, &HeadStream::word, plan.word_units, probe);
  if (options.without_specials) {
    run.token_plain = analyse_level(streams, &HeadStream::token_plain, plan.token_plain.units, probe);
    run.word_plain = analyse_level(streams, &HeadStream::word_plain, plan.word_plain.units, probe);
  }
  run.overviews.reserve(streams.size());
  for (const HeadStream& head : streams) run.overviews.push_back(head.result_overview());
  return run;
}

std::vector<WordUnit> word_units(const RunAnalysis& run) {
  const analysis::WordMap& map = run.words;
  std::vector<WordUnit> units(static_cast<size_t>(std::max(map.n_units, 0)));
  for (size_t t = 0; t < map.unit_of_token.size(); ++t)
    if (map.unit_of_token[t] >= 0)
      units[static_cast<size_t>(map.unit_of_token[t])].tokens.push_back(static_cast<int>(t));
  for (WordUnit& u : units) {
    if (u.tokens.empty()) continue;
    const Token& first = run.encoding.tokens[static_cast<size_t>(u.tokens.front())];
    const Token& last = run.encoding.tokens[static_cast<size_t>(u.tokens.back())];
    u.special = first.special;
    u.text = u.special || last.end <= first.begin
                 ? first.text
                 : run.text.substr(static_cast<size_t>(first.begin), static_cast<size_t>(last.end - first.begin));
  }
  return units;
}

}  // namespace headscope
