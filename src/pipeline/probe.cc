// headscope pipeline — the repeated-random-tokens probe through a model; see probe.h.
#include "pipeline/probe.h"

#include <algorithm>
#include <random>
#include <set>
#include <string>

#include "headscope/error.h"

namespace headscope {
namespace {

// Vocabulary entries that are markup rather than text: "[CLS]", "[unused12]", "<s>", "<|endoftext|>".
bool looks_special(const std::string& s) {
  if (s.size() < 3) return false;
  return (s.front() == '[' && s.back() == ']') || (s.front() == '<' && s.back() == '>');
}

}  // namespace

analysis::ProbeLayout make_repeated_probe(const Tokenizer& tokenizer, int length, uint32_t seed) {
  if (length < 2) throw Error("induction probe: length must be at least 2, got " + std::to_string(length));
  const int32_t vocab = tokenizer.vocab_size();
  if (vocab < 4 * length) {
    throw Error("induction probe: the vocabulary (" + std::to_string(vocab) + " entries) is too small for " +
                std::to_string(length) + " distinct random tokens; use a shorter probe");
  }
  // The template's special tokens, taken from a one-word text.
  const Encoding templ = tokenizer.encode("a", EncodeOptions{});
  size_t first_text = templ.size(), last_text = 0;
  std::set<int32_t> special_ids;
  for (size_t i = 0; i < templ.size(); ++i) {
    if (templ.tokens[i].special) {
      special_ids.insert(templ.tokens[i].id);
    } else {
      first_text = std::min(first_text, i);
      last_text = i;
    }
  }
  if (first_text == templ.size()) throw Error("induction probe: the tokenizer produced no token for the text 'a'");

  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> pick(0, vocab - 1);
  std::vector<int32_t> ids;
  std::set<int32_t> used;
  int attempts = 0;
  while (static_cast<int>(ids.size()) < length) {
    if (++attempts > 100 * length) {
      throw Error("induction probe: could not draw " + std::to_string(length) + " ordinary tokens from the vocabulary");
    }
    const int32_t id = pick(rng);
    if (special_ids.count(id) || used.count(id) || looks_special(tokenizer.token_text(id))) continue;
    used.insert(id);
    ids.push_back(id);
  }

  analysis::ProbeLayout layout;
  layout.length = length;
  for (size_t i = 0; i < first_text; ++i) layout.encoding.tokens.push_back(templ.tokens[i]);
  layout.prefix = static_cast<int>(first_text);
  for (int copy = 0; copy < 2; ++copy) {
    for (int i = 0; i < length; ++i) {
      Token t;
      t.id = ids[static_cast<size_t>(i)];
      t.text = tokenizer.token_text(t.id);
      t.word = copy * length + i;
      layout.encoding.tokens.push_back(std::move(t));
    }
  }
  for (size_t i = last_text + 1; i < templ.size(); ++i) layout.encoding.tokens.push_back(templ.tokens[i]);
  return layout;
}

std::vector<analysis::ProbeEvidence> run_probe(const Model& model, const analysis::ProbeLayout& layout) {
  const ModelConfig& c = model.config();
  analysis::ProbeRowScorer scorer(layout, c.n_layer, c.n_head);
  CaptureOptions capture = CaptureOptions::attention_only();
  capture.attention = false;
  capture.attention_sink = [&](int layer, int64_t q0, int64_t q1, int64_t width, const float* probs) {
    scorer.add_block(layer, q0, q1, width, probs);
  };
  model.run(layout.encoding, capture);
  return scorer.result();
}

std::vector<analysis::ProbeEvidence> measure_probe(const Model& model, int length, int count, uint32_t seed,
                                                   const std::function<void(int done)>& progress) {
  const ModelConfig& c = model.config();
  std::vector<std::vector<analysis::ProbeEvidence>> runs;
  for (int i = 0; i < count; ++i) {
    const analysis::ProbeLayout layout =
        make_repeated_probe(model.tokenizer(), length, seed + static_cast<uint32_t>(i));
    if (c.max_positions > 0 && static_cast<int64_t>(layout.encoding.size()) > c.max_positions)
      throw Error("the induction probe (" + std::to_string(layout.encoding.size()) + " tokens) is longer than " +
                  c.name + " allows (" + std::to_string(c.max_positions) + " positions); use a shorter probe length");
    runs.push_back(run_probe(model, layout));
    if (progress) progress(i + 1);
  }
  return analysis::average_probes(runs);
}

}  // namespace headscope
