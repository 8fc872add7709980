// headscope analysis — per-head attention statistics.
//
// Input: one head's attention over one sequence, a row-major [T, T] fp32 matrix A where row q is
// the distribution of query token q over the keys (capture axes [layer, head, q, k], see
// headscope/model.h), plus a SequenceInfo saying which keys each query may attend to and what kind
// of token each position holds. Output: HeadStats, every field a mean over the queries that have
// at least one attendable key. The formulas are written out in docs/metrics.md; this header only
// names them.
//
// Statistics accumulate over many sequences (a corpus): HeadStatsAccumulator::add() once per
// sequence, result() at the end. A query is one sample, so long sentences weigh more than short
// ones, which is what "mean over all queries of the corpus" means.
#pragma once
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "analysis/fixed_point.h"
#include "headscope/analysis.h"
#include "headscope/tensor.h"
#include "headscope/tokenizer.h"

namespace headscope::analysis {

// The types (TokenKind, SequenceInfo, HeadStats, the constants) are public: headscope/analysis.h.

// Token kinds from an encoding: special flag from the tokenizer, punctuation decided on the
// original text span (ICU u_ispunct on every code point), ids copied for duplicate detection.
SequenceInfo describe_sequence(const Encoding& encoding, std::string_view text, bool causal);

// Sums per-query terms over any number of sequences; result() turns them into means.
class HeadStatsAccumulator {
 public:
  // attention: [T, T] row-major, T == seq.T(). Throws Error on a size mismatch.
  void add(const float* attention, int T, const SequenceInfo& seq);
  // Query rows q0 .. q1-1 of the same [T, T] matrix, rows[(q - q0) * T + k]: a long text's
  // attention streamed block by block. Feeding every row once, in order, gives exactly add()'s sums.
  void add_rows(const float* rows, int q0, int q1, const SequenceInfo& seq);
  void merge(const HeadStatsAccumulator& other);
  HeadStats result() const;
  // Its sums and counts as plain data (analysis.h StatSums), and back: from_sums(sums()).result()
  // is result() exactly.
  StatSums sums() const;
  static HeadStatsAccumulator from_sums(const StatSums& sums);
  // This head's value norms for the sequence whose rows come next: [T] ‖v_k W_O,hᵀ‖ per key
  // (Capture::value_norms), kept by pointer until the rows are in; null stops. With them the rows
  // also add to sink_mass_norm.
  void set_value_norms(const float* norms) { norms_ = norms; }

 private:
  int64_t n_ = 0, n_norm_ = 0, n_dup_ = 0, n_sink_norm_ = 0, n_sink_ = 0;
  double sink_norm_ = 0;
  const float* norms_ = nullptr;  // [T] value norms of the current sequence, or null
  double entropy_ = 0, entropy_norm_ = 0, sparsity_ = 0, keys90_ = 0, keys90_share_ = 0, max_ = 0, avg_ = 0,
         uniform_ = 0, distance_ = 0, offset_ = 0, local_ = 0, first_ = 0, special_ = 0, end_special_ = 0, sink_ = 0,
         punct_ = 0, content_ = 0, dup_ = 0;
  std::array<double, kOffsetSlots> offset_sum_{};
  std::array<int64_t, kOffsetSlots> offset_n_{};
  void add_contiguous_row(const float* row, int q, const SequenceInfo& seq);
  void add_norm_row(const float* row, int q, const SequenceInfo& seq);
  void add_norm_share(const float* row, int n, const SequenceInfo& seq, double total);
  std::vector<float> scratch_;  // one row's attendable weights, reordered by keys_to_cover
};

// The fewest of the n weights (largest first) whose sum reaches `mass`, at least 1; reorders
// `weights`. Expected O(n) (a three-way quickselect on the running mass) instead of a sort.
int keys_to_cover(float* weights, int n, double mass);
// The same for the n weights of `row`, left as they are; `scratch` (n floats, not overlapping
// `row`) is reordered instead.
int keys_to_cover(const float* row, float* scratch, int n, double mass);
// The weights of a row above a pivot: their sum and count, and how many equal it.
struct PivotSums {
  double above = 0;
  int n_above = 0, n_equal = 0;
};
// The same again, given the row's sums at the pivot 1/n (as a float), where the selection starts
// for rows of more than 64 keys, so that a caller that has them saves that pass over the row.
int keys_to_cover(const float* row, float* scratch, int n, double mass, const PivotSums& at_uniform);

// One head, one sequence.
HeadStats compute_head_stats(const float* attention, int T, const SequenceInfo& seq);

// Every head of a capture at once: attention [n_layer, n_head, T, T]. Returns n_layer * n_head
// accumulators indexed layer * n_head + head; call add() per sequence.
class ModelStatsAccumulator {
 public:
  // layer_window [n_layer] (ModelConfig::window; may be empty): each layer's heads read the
  // sequence under that layer's sliding window (SequenceInfo::window) instead of seq's own.
  ModelStatsAccumulator(int n_layer, int n_head, std::vector<int64_t> layer_window = {});
  // value_norms [n_layer, n_head, T] (optional): also the norm-weighted sink share.
  void add(const Tensor& attention, const SequenceInfo& seq, const Tensor& value_norms = {});
  // Adds head i's sums from another accumulator (a streamed text, analysis/stream.h).
  void merge_head(size_t i, const HeadStatsAccumulator& head) { heads_.at(i).add(head.sums()); }
  // Adds every head of another accumulator of the same shape (a shard of the same corpus).
  void merge(const ModelStatsAccumulator& other);
  int n_layer() const { return n_layer_; }
  int n_head() const { return n_head_; }
  const std::vector<int64_t>& layer_window() const { return layer_window_; }
  std::vector<HeadStats> result() const;  // [n_layer * n_head]
  // Each head's exact sums as [[high, low] per sum, counts] (JSON), and back (Error when the shape
  // differs): a shard's part of an atlas (pipeline/atlas.h).
  nlohmann::json to_json() const;
  void from_json(const nlohmann::json& j);

 private:
  int n_layer_, n_head_;
  std::vector<int64_t> layer_window_;  // [n_layer] or empty
  // Each text's sums enter exactly (fixed_point.h): any split of the texts, merged, gives the same
  // totals as one pass.
  std::vector<ExactSums> heads_;
};

}  // namespace headscope::analysis
