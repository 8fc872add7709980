// headscope pipeline — probe(), analyse() and the word labels (see headscope/pipeline.h).
#include <algorithm>
#include <utility>

#include "analysis/probe.h"
#include "analysis/roles.h"
#include "analysis/statistics.h"
#include "analysis/without_specials.h"
#include "analysis/words.h"
#include "headscope/error.h"
#include "headscope/pipeline.h"

namespace headscope {
namespace {

// Statistics of every head over `units`, then roles from them plus the probe's evidence.
LevelAnalysis analyse_level(const Tensor& attention, analysis::SequenceInfo units, int n_layer, int n_head,
                            std::span<const analysis::ProbeEvidence> probe) {
  LevelAnalysis out;
  analysis::ModelStatsAccumulator acc(n_layer, n_head);
  acc.add(attention, units);
  out.stats = acc.result();
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
  return floats(capture.attention) + floats(capture.head_outputs) + floats(capture.contributions) +
         floats(capture.attn_output) + floats(capture.hidden_states) + floats(capture.queries) + floats(capture.keys) +
         floats(word_attention) + text.size();
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
  analysis::SequenceInfo tokens = analysis::describe_sequence(run.encoding, run.text, c.causal);
  run.words = analysis::words_from_encoding(run.encoding);
  run.word_attention = analysis::merge_attention(run.capture.attention, run.words);
  analysis::SequenceInfo word_units = analysis::describe_units(tokens, run.words);
  if (options.without_specials) {
    analysis::WithoutSpecials plain = analysis::drop_special_units(run.capture.attention, tokens);
    run.token_plain = analyse_level(plain.attention, std::move(plain.units), c.n_layer, c.n_head, probe);
    plain = analysis::drop_special_units(run.word_attention, word_units);
    run.word_plain = analyse_level(plain.attention, std::move(plain.units), c.n_layer, c.n_head, probe);
  }
  run.word_level = analyse_level(run.word_attention, std::move(word_units), c.n_layer, c.n_head, probe);
  run.token_level = analyse_level(run.capture.attention, std::move(tokens), c.n_layer, c.n_head, probe);
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
