// headscope server — analysed runs and their cache (see run_cache.h).
#include "server/run_cache.h"

#include <utility>

namespace headscope::server {
namespace {

LevelAnalysis analyse(const Tensor& attention, analysis::SequenceInfo units, int n_layer, int n_head) {
  LevelAnalysis out;
  analysis::ModelStatsAccumulator acc(n_layer, n_head);
  acc.add(attention, units);
  out.stats = acc.result();
  // Roles from this text alone: the positional and token-kind evidence of its statistics.
  // Roles that need a probe or gold data (induction, syntax, coreference) are measured by
  // `headscope atlas` over a corpus, not per sentence.
  std::vector<analysis::HeadEvidence> evidence(out.stats.size());
  for (size_t i = 0; i < out.stats.size(); ++i) evidence[i].stats = out.stats[i];
  out.roles = analysis::assign_roles(evidence);
  out.units = std::move(units);
  return out;
}

}  // namespace

size_t RunRecord::bytes() const {
  auto floats = [](const Tensor& t) { return static_cast<size_t>(t.numel()) * sizeof(float); };
  return floats(capture.attention) + floats(capture.head_outputs) + floats(capture.contributions) +
         floats(capture.attn_output) + floats(word_attention) + text.size();
}

RunCache::RunCache(const Model& model, size_t capacity, size_t budget_bytes)
    : model_(model), capacity_(capacity < 1 ? 1 : capacity), budget_bytes_(budget_bytes) {}

std::shared_ptr<const RunRecord> RunCache::find(const std::string& text, bool truncate) {
  std::lock_guard lock(cache_mutex_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if ((*it)->text == text && (*it)->truncate == truncate) {
      auto hit = *it;
      entries_.splice(entries_.begin(), entries_, it);
      return hit;
    }
  }
  return nullptr;
}

std::shared_ptr<const RunRecord> RunCache::get(const std::string& text, bool truncate) {
  if (auto hit = find(text, truncate)) return hit;
  std::lock_guard run_lock(run_mutex_);
  // Another client may have computed the same text while this one waited for the model.
  if (auto hit = find(text, truncate)) return hit;
  auto record = compute(text, truncate);
  std::lock_guard lock(cache_mutex_);
  ++runs_computed_;
  entries_.push_front(record);
  size_t total = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    total += (*it)->bytes();
    const bool keep = it == entries_.begin() ||
                      (static_cast<size_t>(std::distance(entries_.begin(), it)) < capacity_ && total <= budget_bytes_);
    it = keep ? std::next(it) : entries_.erase(it);
  }
  return record;
}

int64_t RunCache::runs_computed() const {
  std::lock_guard lock(cache_mutex_);
  return runs_computed_;
}

std::shared_ptr<const RunRecord> RunCache::compute(const std::string& text, bool truncate) const {
  auto record = std::make_shared<RunRecord>();
  record->text = text;
  record->truncate = truncate;
  record->encoding = model_.encode(text, truncate);

  CaptureOptions options;
  options.hidden_states = false;  // the explorer shows attention and the W_O decomposition only
  record->capture = model_.run(record->encoding, options);

  const ModelConfig& config = model_.config();
  const int n_layer = config.n_layer, n_head = config.n_head;
  analysis::SequenceInfo tokens = analysis::describe_sequence(record->encoding, text, config.causal);
  record->words = analysis::words_from_encoding(record->encoding);
  record->word_attention = analysis::merge_attention(record->capture.attention, record->words);
  record->word_level = analyse(record->word_attention, analysis::describe_units(tokens, record->words), n_layer, n_head);
  record->token_level = analyse(record->capture.attention, std::move(tokens), n_layer, n_head);
  return record;
}

}  // namespace headscope::server
