// headscope server — one analysed forward pass per text, and a small cache of the latest ones.
//
// The explorer asks several questions about the same sentence (attention of a layer, the
// statistics, the W_O decomposition of a token), so a run is computed once and kept: the last
// `capacity` texts stay in memory, most recently used first. The model runs one text at a time
// (runs are serialised by a mutex: the model is shared read-only, and one run already uses every
// core); cache look-ups do not wait for a run in progress of another text.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "headscope/model.h"
#include "headscope/pipeline.h"

namespace headscope::server {

// An analysed run (headscope/pipeline.h), with every level and the special-free variants.
using RunRecord = RunAnalysis;
using headscope::Level;
using headscope::LevelAnalysis;

// How the cache analyses a T-token text: no hidden states, the special-free variants, the maps as
// `maps` says. kAuto keeps them dense while such a run fits: the bytes it keeps (kept_bytes) within
// the cache's `budget_bytes` and its peak (dense_bytes) within the model's run memory budget, so
// that the explorer's norm-weighted, rollout and W_O views stay on as long as memory allows
// (SmolLM2 dense up to 802 tokens in the default 2 GiB); streamed beyond. A run whose maps are
// streamed keeps no head outputs or contributions: at 8,192 tokens those alone are gigabytes, and
// /api/decompose answers only for dense runs. The corpus evidence is added by the cache.
AnalyseOptions cache_analyse_options(const Model& model, int64_t T, uint64_t budget_bytes,
                                     AnalyseOptions::Maps maps = AnalyseOptions::Maps::kAuto);
// analyse_memory() of such a run: whether its maps stream, and the bytes it keeps (kept_bytes),
// which the cache's budget counts. The pipeline's estimate; nothing here re-derives it.
AnalyseMemory cached_run_memory(const Model& model, int64_t T, uint64_t budget_bytes,
                                AnalyseOptions::Maps maps = AnalyseOptions::Maps::kAuto);
// The same under kAuto, as --max-tokens is checked against --cache-mib before any run is made:
// whether the maps of a T-token run are streamed, and the bytes it keeps.
bool streams_maps(const Model& model, int64_t T, uint64_t budget_bytes);
uint64_t run_bytes(const Model& model, int64_t T, uint64_t budget_bytes);
// The largest T whose run_bytes fits in `budget_bytes` (0 when not even one token fits).
int64_t max_tokens_within(const Model& model, uint64_t budget_bytes);
// The server's default --max-tokens: as long as the model reads (its position limit; 65,536 when it
// has none) while one run of that length fits the cache's budget, else the longest that fits.
int64_t default_max_tokens(const Model& model, uint64_t budget_bytes);

// Gives the memory the allocator holds free back to the system (glibc's malloc_trim; nothing
// elsewhere). RunCache::get calls it after each new run, once the runs it evicted are released.
void return_free_memory() noexcept;

class RunCache {
 public:
  // `capacity`: texts kept; `budget_bytes`: the cache evicts older runs beyond this total
  // (the latest run is always kept, whatever its size). `max_tokens`: longest encoding run
  // (special tokens included). `probe`: [n_layer * n_head] from headscope::probe(), added to the
  // evidence of every run's roles, or empty.
  // `maps`: how runs hold their attention maps (kAuto in the server: dense while a run fits the
  // budget, see cache_analyse_options; tests force kStream or kDense).
  // `corpus`: [n_layer * n_head] corpus evidence (headscope::corpus_evidence) joined into every
  // run's roles, or empty.
  RunCache(const Model& model, size_t capacity, size_t budget_bytes, int max_tokens,
           std::vector<analysis::ProbeEvidence> probe = {}, AnalyseOptions::Maps maps = AnalyseOptions::Maps::kAuto,
           std::vector<analysis::HeadEvidence> corpus = {});

  // The analysed run of `text`, from the cache or computed now. Throws Error on text the model
  // cannot take (invalid UTF-8, more than max_tokens tokens without `truncate`).
  std::shared_ptr<const RunRecord> get(const std::string& text, bool truncate);
  // The same for a text already encoded by encode() below (on a cache miss the encoding is used
  // as it is: the text is tokenised once per request; an empty one is encoded here).
  std::shared_ptr<const RunRecord> get(const std::string& text, bool truncate, Encoding encoding);
  // The cached run of `text`, or null (a request about a cached text need not tokenise it again).
  std::shared_ptr<const RunRecord> cached(const std::string& text, bool truncate) { return find(text, truncate); }
  // `text` with the model's template and this cache's token limit (truncated when asked).
  Encoding encode(const std::string& text, bool truncate) const;

  // Number of forward passes computed so far (a cache hit does not count).
  int64_t runs_computed() const;

  // Holds the forward-pass lock for work outside the cache (generation): one pass at a time,
  // since one already uses every core.
  std::unique_lock<std::mutex> exclusive_model() { return std::unique_lock<std::mutex>(run_mutex_); }

 private:
  std::shared_ptr<const RunRecord> find(const std::string& text, bool truncate);
  std::shared_ptr<const RunRecord> compute(const std::string& text, bool truncate, Encoding encoding) const;

  const Model& model_;
  const std::vector<analysis::ProbeEvidence> probe_;
  const std::vector<analysis::HeadEvidence> corpus_;
  const size_t capacity_;
  const size_t budget_bytes_;
  const int max_tokens_;
  const AnalyseOptions::Maps maps_;
  mutable std::mutex cache_mutex_;                       // guards entries_ and runs_computed_
  std::mutex run_mutex_;                                 // one forward pass at a time
  std::list<std::shared_ptr<const RunRecord>> entries_;  // most recently used first
  int64_t runs_computed_ = 0;
};

}  // namespace headscope::server
