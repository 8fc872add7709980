// headscope server — analysed runs and their cache (see run_cache.h).
#include "server/run_cache.h"

#include <algorithm>
#include <utility>

namespace headscope::server {

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
    if (run_bytes(config, mid) <= budget_bytes)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
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

Encoding RunCache::encode(const std::string& text, bool truncate) const {
  // The model's template with the explorer's length limit, which may be below the model's own
  // (a capture grows with n_layer · n_head · T²).
  EncodeOptions encode;
  encode.add_special_tokens = true;
  encode.max_length = max_tokens_;
  encode.truncate = truncate;
  return model_.tokenizer().encode(text, encode);
}

std::shared_ptr<const RunRecord> RunCache::get(const std::string& text, bool truncate) {
  if (auto hit = find(text, truncate)) return hit;
  return get(text, truncate, encode(text, truncate));
}

std::shared_ptr<const RunRecord> RunCache::get(const std::string& text, bool truncate, Encoding encoding) {
  if (auto hit = find(text, truncate)) return hit;
  std::lock_guard run_lock(run_mutex_);
  // Another client may have computed the same text while this one waited for the model.
  if (auto hit = find(text, truncate)) return hit;
  auto record = compute(text, truncate, std::move(encoding));
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

std::shared_ptr<const RunRecord> RunCache::compute(const std::string& text, bool truncate, Encoding encoding) const {
  AnalyseOptions options;
  options.capture.hidden_states = false;  // the explorer shows attention and the W_O decomposition only
  options.without_specials = true;        // "hide special tokens"
  // The explorer draws every map from /api/attention: the maps stay dense (the run memory budget
  // and --cache-mib bound them) until it reads streamed runs through tiles.
  options.maps = AnalyseOptions::Maps::kDense;
  RunRecord run = analyse(model_, text, std::move(encoding), probe_, options);
  run.truncate = truncate;
  return std::make_shared<const RunRecord>(std::move(run));
}

}  // namespace headscope::server
