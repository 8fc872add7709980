// headscope server — analysed runs and their cache (see run_cache.h).
#include "server/run_cache.h"

#include <algorithm>
#include <utility>

#include "headscope/limits.h"

namespace headscope::server {

bool streams_maps(const ModelConfig& c, int64_t T) {
  const uint64_t heads = uint64_t(std::max(c.n_layer, 0)) * uint64_t(std::max(c.n_head, 0));
  const uint64_t t = uint64_t(std::max<int64_t>(T, 0));
  return 2 * heads * t * t * sizeof(float) > limits::kDenseMapsBytes;  // as analyse_memory() decides kAuto
}

uint64_t run_bytes(const ModelConfig& c, int64_t T, int overview_cells) {
  const uint64_t L = static_cast<uint64_t>(std::max(c.n_layer, 0)), H = static_cast<uint64_t>(std::max(c.n_head, 0));
  const uint64_t KV = c.n_kv_head > 0 ? static_cast<uint64_t>(c.n_kv_head) : H;
  const uint64_t t = static_cast<uint64_t>(std::max<int64_t>(T, 0));
  const uint64_t dh = static_cast<uint64_t>(std::max(c.d_head, 0)), D = static_cast<uint64_t>(std::max(c.d_model, 0));
  const uint64_t cells = std::min<uint64_t>(t, static_cast<uint64_t>(std::max(overview_cells, 0)));
  const uint64_t overviews = L * H * (2 * cells * cells * sizeof(float) + (t + 2 * t) * sizeof(double));
  if (streams_maps(c, T)) return overviews + (L * H * t * dh + L * KV * t * dh) * sizeof(float);
  const uint64_t floats = 2 * L * H * t * t + L * H * t * dh + L * H * t * D + L * t * D;
  return floats * sizeof(float) + overviews;
}

int64_t max_tokens_within(const ModelConfig& config, uint64_t budget_bytes) {
  // run_bytes grows with T on each side of the switch to streamed maps (where it drops): the
  // largest T that fits is searched among the streamed lengths first, then the dense ones.
  auto largest = [&](int64_t lo, int64_t hi) {  // largest T in [lo, hi] that fits, lo − 1 if none
    int64_t best = lo - 1;
    while (lo <= hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (run_bytes(config, mid) <= budget_bytes)
        best = mid, lo = mid + 1;
      else
        hi = mid - 1;
    }
    return best;
  };
  const int64_t top = int64_t{1} << 20;
  int64_t first_streamed = 1;
  while (first_streamed <= top && !streams_maps(config, first_streamed)) first_streamed *= 2;
  if (first_streamed <= top) {
    // The exact first streamed length, between the last power of two that was dense and this one.
    int64_t lo = first_streamed / 2 + 1, hi = first_streamed;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (streams_maps(config, mid)) hi = mid; else lo = mid + 1;
    }
    first_streamed = lo;
    const int64_t streamed = largest(first_streamed, top);
    if (streamed >= first_streamed) return streamed;
  }
  return std::max<int64_t>(largest(0, std::min(first_streamed - 1, top)), 0);
}

RunCache::RunCache(const Model& model, size_t capacity, size_t budget_bytes, int max_tokens,
                   std::vector<analysis::ProbeEvidence> probe, AnalyseOptions::Maps maps,
                   std::vector<analysis::HeadEvidence> corpus)
    : model_(model),
      probe_(std::move(probe)),
      corpus_(std::move(corpus)),
      capacity_(capacity < 1 ? 1 : capacity),
      budget_bytes_(budget_bytes),
      max_tokens_(max_tokens),
      maps_(maps) {}

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
  // A request that found the text cached skipped its encoding; the run was evicted since.
  if (encoding.size() == 0) encoding = encode(text, truncate);
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
  options.corpus = corpus_;
  // Dense maps for short texts (the explorer reads them whole from /api/attention); streamed
  // beyond, and then read through /api/overview and /api/tile. A streamed run keeps no head
  // outputs or contributions: at 8,192 tokens those alone are gigabytes, and /api/decompose
  // answers only for dense runs.
  options.maps = maps_;
  if (analyse_memory(model_, static_cast<int64_t>(encoding.size()), options).streamed)
    options.capture.head_outputs = options.capture.contributions = false;
  RunRecord run = analyse(model_, text, std::move(encoding), probe_, options);
  run.truncate = truncate;
  return std::make_shared<const RunRecord>(std::move(run));
}

}  // namespace headscope::server
