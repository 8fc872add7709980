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
#include <string_view>
#include <vector>

#include "headscope/tensor.h"
#include "headscope/tokenizer.h"

namespace headscope::analysis {

// A weight below kSparsityFraction / n (n = attendable keys of the query, so 1/n is the uniform
// share) counts as negligible for `sparsity`. Relative to uniform so that the number means the same
// for a 10-token and a 300-token sequence.
inline constexpr double kSparsityFraction = 0.1;
// `keys_90`: the fewest keys whose weights add up to this share of the row.
inline constexpr double kCoverMass = 0.9;
// `local_mass`: keys with 1 <= |k - q| <= kLocalWindow.
inline constexpr int kLocalWindow = 3;
// `offset_mass` covers signed offsets d = k - q in [-kMaxOffset, kMaxOffset].
inline constexpr int kMaxOffset = 8;
inline constexpr int kOffsetSlots = 2 * kMaxOffset + 1;

enum class TokenKind : uint8_t {
  kContent = 0,  // an ordinary piece of text
  kPunct = 1,    // every character of its text span is Unicode punctuation
  kSpecial = 2,  // added by the template: [CLS], [SEP], <s>, BOS, EOS
};

// What the statistics need to know about one sequence of T positions (tokens, or word units
// after merging, see words.h).
struct SequenceInfo {
  std::vector<TokenKind> kinds;     // [T]
  std::vector<int32_t> ids;         // [T] token ids, for duplicate_mass; empty: that field stays NaN;
                                    //     a negative id never matches anything
  std::vector<uint8_t> attendable;  // [T] 0 = padding key, never attended; empty: all keys valid
  bool causal = false;              // query q sees keys k <= q only (decoders)

  int T() const { return static_cast<int>(kinds.size()); }
  // Whether query q may attend to key k under the mask.
  bool may_attend(int q, int k) const {
    return (!causal || k <= q) && (attendable.empty() || attendable[static_cast<size_t>(k)] != 0);
  }
};

// Token kinds from an encoding: special flag from the tokenizer, punctuation decided on the
// original text span (ICU u_ispunct on every code point), ids copied for duplicate detection.
SequenceInfo describe_sequence(const Encoding& encoding, std::string_view text, bool causal);

struct HeadStats {
  int64_t n_queries = 0;  // queries averaged over (each with >= 1 attendable key)

  // The four statistics of the lesson page.
  double entropy_bits = 0;   // H(row) = -Σ a log2 a, mean over queries
  double entropy_norm = 0;   // H / log2(n), in [0, 1]; queries with n = 1 are left out of this mean
  double sparsity = 0;       // share of attendable weights below kSparsityFraction / n
  double keys_90 = 0;        // fewest keys covering kCoverMass of the row (mean count)
  double keys_90_share = 0;  // keys_90 / n, in (0, 1]
  double max_attention = 0;  // mean of row maxima
  double avg_attention = 0;  // Σ_k a_k² per row: the average weight *where the attention lands*
                             // (uniform: 1/n, one-hot: 1); see docs/metrics.md for why
  double uniform_overlap = 0;  // Σ_k min(a_k, 1/n): share of the row that a uniform row shares

  // Position.
  double mean_distance = 0;  // Σ a_k |k - q|
  double mean_offset = 0;    // Σ a_k (k - q); negative = looks back
  double self_mass = 0;      // a_q
  double prev_mass = 0;      // a_{q-1}, mean over the queries that may attend to q-1 (= offset(-1))
  double next_mass = 0;      // a_{q+1}, same rule (= offset(+1)); NaN for causal models
  double local_mass = 0;     // Σ over 1 <= |k - q| <= kLocalWindow
  // Mean of a_{q+d} over the queries for which q + d is attendable, d = slot - kMaxOffset
  // (slot kMaxOffset is d = 0, the self mass). NaN where no query had such a key.
  std::array<double, kOffsetSlots> offset_mass{};

  // Token kinds.
  double first_mass = 0;        // a_0: the first position ([CLS] or BOS or the first word)
  double special_mass = 0;      // on TokenKind::kSpecial keys
  double end_special_mass = 0;  // on special keys after position 0 ([SEP], EOS)
  double sink_mass = 0;         // on the first position or any special key (the "sink" set)
  double punct_mass = 0;        // on TokenKind::kPunct keys
  double content_mass = 0;      // on TokenKind::kContent keys other than the query itself

  // Repetition: mean mass on the other positions holding the same token id, over the queries
  // whose id occurs at another attendable position. NaN when no such query (or no ids).
  double duplicate_mass = 0;
  int64_t n_duplicate_queries = 0;

  double offset(int d) const { return offset_mass[static_cast<size_t>(d + kMaxOffset)]; }
};

// Sums per-query terms over any number of sequences; result() turns them into means.
class HeadStatsAccumulator {
 public:
  // attention: [T, T] row-major, T == seq.T(). Throws Error on a size mismatch.
  void add(const float* attention, int T, const SequenceInfo& seq);
  void merge(const HeadStatsAccumulator& other);
  HeadStats result() const;

 private:
  int64_t n_ = 0, n_norm_ = 0, n_dup_ = 0;
  double entropy_ = 0, entropy_norm_ = 0, sparsity_ = 0, keys90_ = 0, keys90_share_ = 0, max_ = 0,
         avg_ = 0, uniform_ = 0, distance_ = 0, offset_ = 0, self_ = 0, prev_ = 0, next_ = 0,
         local_ = 0, first_ = 0, special_ = 0, end_special_ = 0, sink_ = 0, punct_ = 0,
         content_ = 0, dup_ = 0;
  std::array<double, kOffsetSlots> offset_sum_{};
  std::array<int64_t, kOffsetSlots> offset_n_{};
  std::vector<float> scratch_;  // one sorted row, reused
};

// One head, one sequence.
HeadStats compute_head_stats(const float* attention, int T, const SequenceInfo& seq);

// Every head of a capture at once: attention [n_layer, n_head, T, T]. Returns n_layer * n_head
// accumulators indexed layer * n_head + head; call add() per sequence.
class ModelStatsAccumulator {
 public:
  ModelStatsAccumulator(int n_layer, int n_head);
  void add(const Tensor& attention, const SequenceInfo& seq);
  int n_layer() const { return n_layer_; }
  int n_head() const { return n_head_; }
  std::vector<HeadStats> result() const;  // [n_layer * n_head]

 private:
  int n_layer_, n_head_;
  std::vector<HeadStatsAccumulator> heads_;
};

}  // namespace headscope::analysis
