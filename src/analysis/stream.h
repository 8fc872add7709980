// headscope analysis — a head's attention consumed block by block, so that a long text's
// [layer, head, T, T] maps never exist at once.
//
// The forward pass hands each layer's probabilities over in blocks of query rows
// ([n_head, q1 − q0, width], see CaptureOptions::attention_sink in headscope/model.h); a HeadStream
// per head feeds every row, once and in order, to everything the analysis keeps:
//   - the statistics at token level and at word level, each also without special tokens
//     (HeadStatsAccumulator; word rows are merged as analysis/words.h does, special tokens dropped
//     as analysis/without_specials.h does — the same functions, so the results equal the dense
//     path's, not merely approximate them);
//   - an overview map: the text pooled into at most `cells` × `cells` blocks, each holding the
//     summed and the largest weight of its block (what a screen can show of an 8K × 8K map);
//   - the attention each key receives (column sums) and the mass at every relative offset.
// Memory per head: 2·cells² + 3·T floats plus one open word row, whatever T is.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "analysis/statistics.h"
#include "analysis/without_specials.h"
#include "analysis/words.h"
#include "headscope/analysis.h"

namespace headscope::analysis {

// What every head of one text shares: the units of each level and the overview's grid.
struct StreamPlan {
  SequenceInfo tokens;                      // [T]
  WordMap words;                            // token → unit
  UnitGather gather;                        // token rows into unit rows (gather_token_row)
  SequenceInfo word_units;                  // [U]
  std::vector<int32_t> last_token;          // [U] the token after which unit u's row is complete
  std::vector<int32_t> pieces;              // [U] tokens of unit u
  bool without_specials = false;            // the statistics without special tokens are asked for
  bool has_specials = false;                // ... and the text has some (else they are the statistics themselves)
  WithoutSpecials token_plain, word_plain;  // kept positions and their units (no attention)
  std::vector<int32_t> token_plain_index, word_plain_index;  // [T], [U] kept index, −1 for a special
  int cells = 0;                                             // overview rows = columns = min(T, the requested cells)
  std::vector<int32_t> cell_of;                              // [T] overview row (and column) of each token
  std::vector<int32_t> cell_start;    // [cells + 1] first token of each cell; cell_start[cells] = T
  std::vector<int64_t> offset_count;  // [2T − 1] queries q whose key q + d is attendable, index d + T − 1
  // `tokens` under each sliding window of the model's layers (SequenceInfo::window > 0), for the
  // token-level statistics of those layers' heads. The tokens without specials
  // (token_plain.units) under the same windows, index for index: exact when the kept tokens are
  // one run of positions (specials only before and after the text: BOS, EOS), else the plain
  // causal mask. The word level keeps the plain causal mask (a window does not cut along words).
  std::vector<SequenceInfo> windowed_tokens, windowed_token_plain;
  // Causal models: every position but the first (the attention sink) and the specials, at both
  // levels — the rows roles are read from (renormalised, as the links on the text are), with the
  // windows as for token_plain (the kept tokens are one run unless a special sits inside the text).
  bool sink_free = false;
  WithoutSpecials token_free, word_free;
  std::vector<int32_t> token_free_index, word_free_index;  // [T], [U] kept index, −1 for the sink or a special
  std::vector<SequenceInfo> windowed_token_free;

  int T() const { return tokens.T(); }
  // `tokens` under `window` (0: tokens itself); throws Error for a window the plan was not made with.
  const SequenceInfo& tokens_under(int64_t window) const;
  // token_plain.units and token_free.units under `window`, as above.
  const SequenceInfo& token_plain_under(int64_t window) const;
  const SequenceInfo& token_free_under(int64_t window) const;
};
// layer_window: ModelConfig::window (may be empty), the windows the heads will ask for.
StreamPlan make_stream_plan(SequenceInfo tokens, WordMap words, bool without_specials, int overview_cells,
                            std::span<const int64_t> layer_window = {});

class HeadStream {
 public:
  // window: the sliding window of the head's layer (0 = none), one the plan was made with.
  explicit HeadStream(const StreamPlan& plan, int64_t window = 0);
  // Query rows q0 .. q1−1: rows[(q − q0) · width + k]; width = T for a bidirectional model, at
  // least q1 for a causal one (keys after q are masked and never read).
  void add_rows(const float* rows, int q0, int q1, int width);
  // add_rows is these three, which touch disjoint parts of the stream and may run at once on
  // three threads: the token-level statistics, the overview (with column sums and offsets), and
  // the word level. add_token_rows is the first two.
  void add_token_rows(const float* rows, int q0, int q1, int width);
  void add_stat_rows(const float* rows, int q0, int q1, int width);
  void add_overview_rows(const float* rows, int q0, int q1, int width);
  void add_word_rows(const float* rows, int q0, int q1, int width);
  // The three parts of add_rows as tasks, by cost: 0 the overview, 1 the word level, 2 the
  // token-level statistics (a 2K SmolLM2 run: ~3 %, ~13 %, ~15 % of the samples).
  static constexpr int kParts = 3;
  void add_part(int part, const float* rows, int q0, int q1, int width);
  // True once every query row has been added.
  bool complete() const {
    return next_row_ == plan_->T() && next_overview_row_ == plan_->T() && next_word_row_ == plan_->T();
  }
  // The overview with its offset means (offset sums over the plan's offset counts), moved out:
  // the stream is done with it.
  HeadOverview take_overview();

  HeadStatsAccumulator token, token_plain, word, word_plain;
  HeadStatsAccumulator token_free, word_free;  // StreamPlan::sink_free only (causal models): rows without the sink

 private:
  void check_block(int next, int q0, int q1, int width) const;
  void allocate_overview();
  const StreamPlan* plan_;
  const SequenceInfo* tokens_;       // plan_->tokens under this head's window
  const SequenceInfo* token_plain_;  // plan_->token_plain.units under this head's window
  const SequenceInfo* token_free_;   // plan_->token_free.units under this head's window
  int next_row_ = 0, next_overview_row_ = 0, next_word_row_ = 0;
  HeadOverview overview_;                              // sum, max and received as they accumulate
  std::vector<double> offset_sum_;                     // [2T − 1] Σ_q a_{q, q+d}, index d + T − 1
  std::vector<float> token_row_;                       // [T] a token row without specials (when the text has some)
  std::vector<float> unit_row_;                        // [U] a unit row without specials (when the text has some)
  std::vector<float> free_token_row_, free_unit_row_;  // [T], [U] rows without the sink (sink_free)
  std::vector<std::pair<int32_t, std::vector<float>>> open_;  // units with rows still being merged
  std::vector<std::vector<float>> spare_rows_;                // [U] rows of finished units, for reuse
};

// One HeadStream per head ([n_layer · n_head], index layer · n_head + head); a forward pass feeds
// them through the pipeline's run_streamed (src/pipeline/stream.h), stored maps through feed_stored.
// layer_window [n_layer] (ModelConfig::window, may be empty; n_heads a multiple of its size): the
// heads of layer l = i / (n_heads / n_layer) get window layer_window[l].
std::vector<HeadStream> make_head_streams(const StreamPlan& plan, int n_heads,
                                          std::span<const int64_t> layer_window = {});
// Feeds stored maps [n_layer, n_head, T, T] to the head streams, every head at once.
// With value_norms [n_layer, n_head, T] (may be empty) the token-level statistics also get the
// norm-weighted sink share.
void feed_stored(std::vector<HeadStream>& heads, const Tensor& attention, const Tensor& value_norms = {});

}  // namespace headscope::analysis
