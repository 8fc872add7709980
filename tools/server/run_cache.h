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

// Whether the server streams the maps of a T-token run under AnalyseOptions::Maps::kAuto: when
// the dense maps (token and word level, 2·n_layer·n_head·T² floats) exceed limits::kDenseMapsBytes.
bool streams_maps(const ModelConfig& config, int64_t T);
// Bytes one analysed run of T tokens holds (what RunRecord::bytes() will count) with the maps
// chosen as kAuto chooses them. Dense: the attention n_layer·n_head·T² floats at token level and
// again at word level (at most T units), which dominate, plus head outputs n_layer·n_head·T·d_head,
// contributions n_layer·n_head·T·d_model and the attention output n_layer·T·d_model. Streamed: the
// queries n_layer·n_head·T·d_head and keys n_layer·n_kv_head·T·d_head that tiles are computed from
// (no head outputs or contributions: /api/decompose needs the dense maps). Both: every head's
// overview (two [cells, cells] float maps, received [T] and offsets [2T − 1] in double). Used to
// refuse a --max-tokens whose run would not fit in --cache-mib before any run is made.
uint64_t run_bytes(const ModelConfig& config, int64_t T, int overview_cells = AnalyseOptions{}.overview_cells);
// The largest T whose run_bytes fits in `budget_bytes` (0 when not even one token fits).
int64_t max_tokens_within(const ModelConfig& config, uint64_t budget_bytes);

class RunCache {
 public:
  // `capacity`: texts kept; `budget_bytes`: the cache evicts older runs beyond this total
  // (the latest run is always kept, whatever its size). `max_tokens`: longest encoding run
  // (special tokens included). `probe`: [n_layer * n_head] from headscope::probe(), added to the
  // evidence of every run's roles, or empty.
  // `maps`: how runs hold their attention maps (kAuto in the server: dense for short texts,
  // streamed beyond limits::kDenseMapsBytes; tests force kStream or kDense).
  // `corpus`: [n_layer * n_head] corpus evidence (headscope::corpus_evidence) joined into every
  // run's roles, or empty.
  RunCache(const Model& model, size_t capacity, size_t budget_bytes, int max_tokens,
           std::vector<analysis::ProbeEvidence> probe = {},
           AnalyseOptions::Maps maps = AnalyseOptions::Maps::kAuto, std::vector<analysis::HeadEvidence> corpus = {});

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
