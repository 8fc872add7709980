// headscope server — analysed runs and their cache (see run_cache.h).
#include "server/run_cache.h"

#include <algorithm>
#include <utility>

#include "analysis/atlas.h"
#include "headscope/error.h"

namespace headscope::server {
namespace {

LevelAnalysis analyse(const Tensor& attention, analysis::SequenceInfo units, int n_layer, int n_head,
                      const std::vector<analysis::ProbeEvidence>& probe) {
  LevelAnalysis out;
  analysis::ModelStatsAccumulator acc(n_layer, n_head);
  acc.add(attention, units);
  out.stats = acc.result();
  // Roles from this text's statistics (positional and token-kind evidence) plus the model's probe
  // (induction, duplicate token). Syntactic and coreference roles need gold data and a corpus:
  // `headscope atlas` measures those.
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

std::vector<analysis::ProbeEvidence> measure_probe(const Model& model) {
  const analysis::AtlasOptions settings;  // the atlas's probe length, count and seed
  const ModelConfig& c = model.config();
  const CaptureOptions capture = CaptureOptions::attention_only();
  std::vector<std::vector<analysis::ProbeEvidence>> runs;
  for (int i = 0; i < settings.probe_count; ++i) {
    const analysis::ProbeLayout layout =
        analysis::make_repeated_probe(model.tokenizer(), settings.probe_length, settings.seed + static_cast<uint32_t>(i));
    if (c.max_positions > 0 && static_cast<int64_t>(layout.encoding.size()) > c.max_positions)
      throw Error("serve: the induction probe (" + std::to_string(layout.encoding.size()) +
                  " tokens) is longer than the model's position limit");
    runs.push_back(analysis::score_probe(model.run(layout.encoding, capture).attention, layout));
  }
  return analysis::average_probes(runs);
}

uint64_t run_bytes(const ModelConfig& c, int64_t T) {
  const uint64_t L = static_cast<uint64_t>(std::max(c.n_layer, 0)), H = static_cast<uint64_t>(std::max(c.n_head, 0));
  const uint64_t t = static_cast<uint64_t>(std::max<int64_t>(T, 0));
  const uint64_t floats = 2 * L * H * t * t + L * H * t * static_cast<uint64_t>(std::max(c.d_head, 0)) +
                          L * H * t * static_cast<uint64_t>(std::max(c.d_model, 0)) +
                          L * t * static_cast<uint64_t>(std::max(c.d_model, 0));
  return floats * sizeof(float);
}

int64_t max_tokens_within(const ModelConfig& config, uint64_t budget_bytes) {
  // run_bytes grows with T, so a binary search over [0, 2^20] finds the largest T that fits.
  int64_t lo = 0, hi = int64_t{1} << 20;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (run_bytes(config, mid) <= budget_bytes) lo = mid; else hi = mid - 1;
  }
  return lo;
}

size_t RunRecord::bytes() const {
  auto floats = [](const Tensor& t) { return static_cast<size_t>(t.numel()) * sizeof(float); };
  return floats(capture.attention) + floats(capture.head_outputs) + floats(capture.contributions) +
         floats(capture.attn_output) + floats(word_attention) + text.size();
}

RunCache::RunCache(const Model& model, size_t capacity, size_t budget_bytes, int max_tokens,
                   std::vector<analysis::ProbeEvidence> probe)
    : model_(model),
      probe_(std::move(probe)),
      capacity_(capacity < 1 ? 1 : capacity),
      budget_bytes_(budget_bytes),
      max_tokens_(max_tokens) {}

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
  // The model's template with the explorer's length limit, which may be below the model's own
  // (a capture grows with n_layer · n_head · T²).
  EncodeOptions encode;
  encode.add_special_tokens = true;
  encode.max_length = max_tokens_;
  encode.truncate = truncate;
  record->encoding = model_.tokenizer().encode(text, encode);

  CaptureOptions options;
  options.hidden_states = false;  // the explorer shows attention and the W_O decomposition only
  record->capture = model_.run(record->encoding, options);

  const ModelConfig& config = model_.config();
  const int n_layer = config.n_layer, n_head = config.n_head;
  analysis::SequenceInfo tokens = analysis::describe_sequence(record->encoding, text, config.causal);
  record->words = analysis::words_from_encoding(record->encoding);
  record->word_attention = analysis::merge_attention(record->capture.attention, record->words);
  analysis::SequenceInfo word_units = analysis::describe_units(tokens, record->words);
  {
    analysis::WithoutSpecials plain = analysis::drop_special_units(record->capture.attention, tokens);
    record->token_plain = analyse(plain.attention, std::move(plain.units), n_layer, n_head, probe_);
    plain = analysis::drop_special_units(record->word_attention, word_units);
    record->word_plain = analyse(plain.attention, std::move(plain.units), n_layer, n_head, probe_);
  }
  record->word_level = analyse(record->word_attention, std::move(word_units), n_layer, n_head, probe_);
  record->token_level = analyse(record->capture.attention, std::move(tokens), n_layer, n_head, probe_);
  return record;
}

}  // namespace headscope::server
