// headscope server — analysed runs and their cache (see run_cache.h).
#include "server/run_cache.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <utility>

#include "headscope/limits.h"

namespace headscope::server {

AnalyseOptions cache_analyse_options(const Model& model, int64_t T, uint64_t budget_bytes, AnalyseOptions::Maps maps) {
  using Maps = AnalyseOptions::Maps;
  AnalyseOptions options;
  options.capture.hidden_states = false;  // the explorer shows attention and the W_O decomposition only
  options.without_specials = true;        // "hide special tokens"
  options.maps = maps;
  if (maps == Maps::kAuto) {
    options.maps = Maps::kDense;
    const AnalyseMemory dense = analyse_memory(model, T, options);
    if (dense.kept_bytes > budget_bytes || dense.dense_bytes > model.run_memory_budget()) options.maps = Maps::kStream;
  }
  if (options.maps == Maps::kStream) options.capture.head_outputs = options.capture.contributions = false;
  return options;
}

AnalyseMemory cached_run_memory(const Model& model, int64_t T, uint64_t budget_bytes, AnalyseOptions::Maps maps) {
  return analyse_memory(model, T, cache_analyse_options(model, T, budget_bytes, maps));
}

bool streams_maps(const Model& model, int64_t T, uint64_t budget_bytes) {
  return cached_run_memory(model, T, budget_bytes).streamed;
}

uint64_t run_bytes(const Model& model, int64_t T, uint64_t budget_bytes) {
  return cached_run_memory(model, T, budget_bytes).kept_bytes;
}

int64_t default_max_tokens(const Model& model, uint64_t budget_bytes) {
  const int64_t reads = model.config().max_positions > 0 ? model.config().max_positions : int64_t{1} << 16;
  return std::max<int64_t>(2, std::min({reads, int64_t{1} << 16, max_tokens_within(model, budget_bytes)}));
}

int64_t max_tokens_within(const Model& model, uint64_t budget_bytes) {
  // run_bytes grows with T on each side of the switch to streamed maps (where it drops; dense runs
  // up to the switch fit by construction): the largest T that fits is searched among the streamed
  // lengths first, then the dense ones.
  auto largest = [&](int64_t lo, int64_t hi) {  // largest T in [lo, hi] that fits, lo − 1 if none
    int64_t best = lo - 1;
    while (lo <= hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (run_bytes(model, mid, budget_bytes) <= budget_bytes)
        best = mid, lo = mid + 1;
      else
        hi = mid - 1;
    }
    return best;
  };
  const int64_t top = int64_t{1} << 20;
  int64_t first_streamed = 1;
  while (first_streamed <= top && !streams_maps(model, first_streamed, budget_bytes)) first_streamed *= 2;
  if (first_streamed <= top) {
    // The exact first streamed length, between the last power of two that was dense and this one.
    int64_t lo = first_streamed / 2 + 1, hi = first_streamed;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (streams_maps(model, mid, budget_bytes))
        hi = mid;
      else
        lo = mid + 1;
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
  std::vector<std::shared_ptr<const RunRecord>> evicted;  // released below, outside the cache's lock
  {
    std::lock_guard lock(cache_mutex_);
    ++runs_computed_;
    entries_.push_front(record);
    size_t total = 0;
    for (auto it = entries_.begin(); it != entries_.end();) {
      total += (*it)->bytes();
      const bool keep =
          it == entries_.begin() ||
          (static_cast<size_t>(std::distance(entries_.begin(), it)) < capacity_ && total <= budget_bytes_);
      if (keep) {
        ++it;
      } else {
        evicted.push_back(std::move(*it));
        it = entries_.erase(it);
      }
    }
  }
  evicted.clear();
  return_free_memory();
  return record;
}

void return_free_memory() noexcept {
  // Each thread that serves a request allocates from one of glibc's arenas (up to 8 per core),
  // and an arena keeps what its requests freed: over many texts of new lengths every arena grows
  // to the largest request it served, and the server's RSS with them, although the memory is
  // free. Giving the free pages back after each new run keeps RSS at what is in use (the model,
  // the cached runs, the requests in progress). A few milliseconds beside a forward pass.
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

int64_t RunCache::runs_computed() const {
  std::lock_guard lock(cache_mutex_);
  return runs_computed_;
}

std::shared_ptr<const RunRecord> RunCache::compute(const std::string& text, bool truncate, Encoding encoding) const {
  // Dense maps while the run fits the budget (the explorer reads them whole from /api/attention);
  // streamed beyond, and then read through /api/overview and /api/tile (cache_analyse_options).
  AnalyseOptions options = cache_analyse_options(model_, static_cast<int64_t>(encoding.size()), budget_bytes_, maps_);
  options.corpus = corpus_;
  RunRecord run = analyse(model_, text, std::move(encoding), probe_, options);
  run.truncate = truncate;
  return std::make_shared<const RunRecord>(std::move(run));
}

}  // namespace headscope::server
