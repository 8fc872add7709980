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

#include "analysis/probe.h"
#include "analysis/roles.h"
#include "analysis/statistics.h"
#include "analysis/without_specials.h"
#include "analysis/words.h"
#include "headscope/model.h"

namespace headscope::server {

// Token level: the model's own positions. Word level: pieces merged into words, each special
// token a unit of its own (analysis/words.h).
enum class Level { kToken, kWord };

// Statistics and roles of every head over the units of one level.
struct LevelAnalysis {
  analysis::SequenceInfo units;                // [U] kinds of the units
  std::vector<analysis::HeadStats> stats;      // [n_layer * n_head], index layer * n_head + head
  std::vector<analysis::HeadRoles> roles;      // [n_layer * n_head]
};

struct RunRecord {
  std::string text;
  bool truncate = false;
  Encoding encoding;                 // T tokens
  Capture capture;                   // attention, head outputs, contributions, attn_output
  analysis::WordMap words;           // token → unit
  Tensor word_attention;             // [n_layer, n_head, U, U]
  LevelAnalysis token_level, word_level;
  // The same with special tokens removed and rows renormalised (analysis/without_specials.h).
  LevelAnalysis token_plain, word_plain;

  int T() const { return static_cast<int>(encoding.size()); }
  const Tensor& attention(Level level) const { return level == Level::kToken ? capture.attention : word_attention; }
  const LevelAnalysis& analysis(Level level, bool hide_special = false) const {
    if (level == Level::kToken) return hide_special ? token_plain : token_level;
    return hide_special ? word_plain : word_level;
  }
  // Bytes held, for the cache budget.
  size_t bytes() const;
};

// Bytes one analysed run of T tokens holds (what RunRecord::bytes() will count): the attention
// n_layer·n_head·T² floats at token level and again at word level (at most T units), which
// dominate, plus head outputs n_layer·n_head·T·d_head, contributions n_layer·n_head·T·d_model and
// the attention output n_layer·T·d_model. Used to refuse a --max-tokens whose run would not fit
// in --cache-mib before any run is made.
uint64_t run_bytes(const ModelConfig& config, int64_t T);
// The largest T whose run_bytes fits in `budget_bytes` (0 when not even one token fits).
int64_t max_tokens_within(const ModelConfig& config, uint64_t budget_bytes);

// Induction and duplicate-token evidence cannot be read off an ordinary sentence: it comes from
// the repeated-random-tokens probe (analysis/probe.h), run once per model with the atlas's
// settings (AtlasOptions defaults), and is added to the evidence of every head of every run.
std::vector<analysis::ProbeEvidence> measure_probe(const Model& model);

class RunCache {
 public:
  // `capacity`: texts kept; `budget_bytes`: the cache evicts older runs beyond this total
  // (the latest run is always kept, whatever its size). `max_tokens`: longest encoding run
  // (special tokens included). `probe`: [n_layer * n_head] or empty.
  RunCache(const Model& model, size_t capacity, size_t budget_bytes, int max_tokens,
           std::vector<analysis::ProbeEvidence> probe = {});

  // The analysed run of `text`, from the cache or computed now. Throws Error on text the model
  // cannot take (invalid UTF-8, more than max_tokens tokens without `truncate`).
  std::shared_ptr<const RunRecord> get(const std::string& text, bool truncate);

  // Number of forward passes computed so far (a cache hit does not count).
  int64_t runs_computed() const;

  // Holds the forward-pass lock for work outside the cache (generation): one pass at a time,
  // since one already uses every core.
  std::unique_lock<std::mutex> exclusive_model() { return std::unique_lock<std::mutex>(run_mutex_); }

 private:
  std::shared_ptr<const RunRecord> find(const std::string& text, bool truncate);
  std::shared_ptr<const RunRecord> compute(const std::string& text, bool truncate) const;

  const Model& model_;
  const std::vector<analysis::ProbeEvidence> probe_;
  const size_t capacity_;
  const size_t budget_bytes_;
  const int max_tokens_;
  mutable std::mutex cache_mutex_;  // guards entries_ and runs_computed_
  std::mutex run_mutex_;            // one forward pass at a time
  std::list<std::shared_ptr<const RunRecord>> entries_;  // most recently used first
  int64_t runs_computed_ = 0;
};

}  // namespace headscope::server
