// Per-head attention statistics; formulas in docs/metrics.md.
#include "analysis/statistics.h"

#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "headscope/error.h"
#include "ops/compact.h"
#include "ops/log2.h"

namespace headscope::analysis {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Cumulative sums of float weights can fall a hair short of kCoverMass for a row that covers it
// exactly (ten weights of 0.1); this tolerance keeps keys_90 from counting one key too many.
constexpr double kCoverTolerance = 1e-6;
// Keys per block of the vectorised row sums: each block is summed in float lanes (8 per AVX2
// register, 128 terms a lane), the blocks in double. A float lane of 128 weights in [0, 1] is off
// by at most 128 · 2⁻²⁴ ≈ 7.6e-6 of its value (far less in practice); longer blocks amortise the
// per-loop set-up of the reductions (256 keys: ~7 % faster than all-double sums, 1,024: ~18 %).
constexpr int kLaneKeys = 1024;

// True when every code point of the span is Unicode punctuation (general categories P*), so that
// "," and "“" and "..." are punctuation but "U.S." and "'s" are not.
bool all_punct(std::string_view text, int64_t begin, int64_t end) {
  if (begin < 0 || end > static_cast<int64_t>(text.size()) || begin >= end) return false;
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  int32_t i = static_cast<int32_t>(begin);
  const int32_t n = static_cast<int32_t>(end);
  while (i < n) {
    UChar32 c;
    U8_NEXT(s, i, n, c);
    if (c < 0 || !u_ispunct(c)) return false;
  }
  return true;
}

double mean_or_nan(double sum, int64_t n) { return n > 0 ? sum / static_cast<double>(n) : kNaN; }

// Sixteen lanes as GCC vector types (ops/log2.h), so that the row sums below keep each of their
// accumulators in a register of its own. (Written as `omp simd` reductions, more than a few sums in
// one loop went to arrays on the stack on every step.)
using ops::IntLanes;
using ops::kLanes;
using ops::Lanes;

template <class V, class E>
V load_lanes(const E* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

IntLanes widen_bytes(const uint8_t* p) {  // (__builtin_convertvector from bytes goes element by element in GCC 12)
  IntLanes v;
  for (int i = 0; i < kLanes; ++i) v[i] = p[i];
  return v;
}

template <class V>
auto fold_lanes(V v) {  // the sum of the lanes
  for (int w = kLanes / 2; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i) v[i] += v[i + w];
  return v[0];
}

// Everything add_contiguous_row() sums over a row's keys lo .. hi − 1, in one pass: the weights'
// own statistics, those that depend on each key's position and kind, the duplicate-token mass
// (kIds), the norm-weighted total (kNorms), and the first step of keys_to_cover (the weights
// above the uniform 1/n). Float lanes within blocks of kLaneKeys, the blocks added in double.
// Sums that have a cheaper equal are not made key by key:
//   - with every key at or before the query (kBefore: a causal row), Σ a·|k − q| = −Σ a·(k − q);
//   - the content and duplicate masses sum every key of their kind, the query's own key included
//     (it always has the query's id), and the caller takes that key out again.
struct RowSums {
  double h = 0, sq = 0, overlap = 0, dist = 0, off = 0, punct = 0, content = 0, dup = 0, norm_total = 0;
  float max = 0;
  int64_t below = 0, dups = 0;
  PivotSums at_uniform;
};

template <bool kIds, bool kNorms, bool kBefore>
RowSums row_sums(const float* row, int lo, int hi, int q, float uniform, float negligible, const TokenKind* kinds,
                 const int32_t* ids, int32_t id, const float* norms) {
  static_assert(sizeof(TokenKind) == 1);
  const auto* kind_bytes = reinterpret_cast<const uint8_t*>(kinds);
  const ops::Log2Lanes log2_lanes;
  RowSums out;
  Lanes top{};
  Lanes iota;
  for (int i = 0; i < kLanes; ++i) iota[i] = float(i);
  int64_t above_count = 0, equal_count = 0;
  double above_sum = 0;
  for (int k0 = lo; k0 < hi; k0 += kLaneKeys) {
    const int k1 = std::min(hi, k0 + kLaneKeys);
    Lanes h{}, sq{}, overlap{}, dist{}, off{}, punct{}, content{}, dup{}, total{}, above{};
    IntLanes below{}, dups{}, n_above{}, n_equal{};
    Lanes d = iota + float(k0 - q);  // k − q, exact: |k − q| < 2²⁴
    const auto step = [&](Lanes a, IntLanes kind, IntLanes key_id, Lanes norm) {
      h -= a > 0.0f ? a * log2_lanes(a) : Lanes{};
      top = a > top ? a : top;
      sq += a * a;
      overlap += uniform < a ? uniform : a;  // std::min(a, uniform)
      below -= a < negligible;               // a comparison is −1 where true
      if constexpr (!kBefore) dist += a * (d < 0.0f ? -d : d);
      off += a * d;
      punct += kind == int(TokenKind::kPunct) ? a : Lanes{};
      content += kind == int(TokenKind::kContent) ? a : Lanes{};
      if constexpr (kIds) {
        const IntLanes same = key_id == id;
        dup += same ? a : Lanes{};
        dups -= same;
      }
      if constexpr (kNorms) total += a * norm;
      above += a > uniform ? a : Lanes{};
      n_above -= a > uniform;
      n_equal -= a == uniform;
      d += float(kLanes);
    };
    int k = k0;
    for (; k + kLanes <= k1; k += kLanes)
      step(load_lanes<Lanes>(row + k), widen_bytes(kind_bytes + k), kIds ? load_lanes<IntLanes>(ids + k) : IntLanes{},
           kNorms ? load_lanes<Lanes>(norms + k) : Lanes{});
    if (k < k1) {  // the last few keys, padded with weight 0 (and a kind, id and norm that add nothing)
      const int m = k1 - k;
      float a[kLanes] = {}, norm[kLanes] = {};
      int32_t key_id[kLanes], kind[kLanes];
      for (int i = 0; i < kLanes; ++i) {
        a[i] = i < m ? row[k + i] : 0.0f;
        kind[i] = i < m ? int(kind_bytes[k + i]) : int(TokenKind::kSpecial);
        key_id[i] = kIds && i < m ? ids[k + i] : ~id;
        norm[i] = kNorms && i < m ? norms[k + i] : 0.0f;
      }
      step(load_lanes<Lanes>(a), load_lanes<IntLanes>(kind), load_lanes<IntLanes>(key_id), load_lanes<Lanes>(norm));
      out.below -= kLanes - m;  // the padding's zeros, all below the threshold
    }
    out.h += fold_lanes(h), out.sq += fold_lanes(sq), out.overlap += fold_lanes(overlap);
    out.dist += fold_lanes(dist), out.off += fold_lanes(off), out.punct += fold_lanes(punct);
    out.content += fold_lanes(content), out.dup += fold_lanes(dup), out.norm_total += fold_lanes(total);
    out.below += fold_lanes(below), out.dups += fold_lanes(dups);
    above_sum += fold_lanes(above), above_count += fold_lanes(n_above), equal_count += fold_lanes(n_equal);
  }
  for (int i = 0; i < kLanes; ++i) out.max = std::max(out.max, top[i]);
  if constexpr (kBefore) out.dist = -out.off;
  out.at_uniform = {above_sum, int(above_count), int(equal_count)};
  if (lo <= q && q < hi) {  // the query's own key, summed above with its kind and id
    if (kinds[q] == TokenKind::kContent) out.content -= row[q];
    if constexpr (kIds) out.dup -= row[q], out.dups -= 1;
  }
  return out;
}

// fn(k) for each special token k in lo .. hi − 1, in key order. Special tokens are few (a
// template's [CLS] and [SEP], a BOS), so memchr over the kinds finds them.
template <class Fn>
void for_each_special(const SequenceInfo& seq, int lo, int hi, Fn fn) {
  static_assert(sizeof(TokenKind) == 1);
  const auto* kinds = reinterpret_cast<const unsigned char*>(seq.kinds.data());
  for (int k = lo; k < hi; ++k) {
    const void* at = std::memchr(kinds + k, int(TokenKind::kSpecial), size_t(hi - k));
    if (at == nullptr) return;
    k = static_cast<int>(static_cast<const unsigned char*>(at) - kinds);
    fn(k);
  }
}

}  // namespace

SequenceInfo describe_sequence(const Encoding& encoding, std::string_view text, bool causal) {
  SequenceInfo seq;
  seq.causal = causal;
  seq.kinds.reserve(encoding.size());
  seq.ids.reserve(encoding.size());
  for (const Token& t : encoding.tokens) {
    if (t.special) {
      seq.kinds.push_back(TokenKind::kSpecial);
    } else if (all_punct(text, t.begin, t.end)) {
      seq.kinds.push_back(TokenKind::kPunct);
    } else {
      seq.kinds.push_back(TokenKind::kContent);
    }
    seq.ids.push_back(t.id);
  }
  return seq;
}

void HeadStatsAccumulator::add(const float* attention, int T, const SequenceInfo& seq) {
  if (T != seq.T()) {
    throw Error("head statistics: attention is [" + std::to_string(T) + ", " + std::to_string(T) +
                "] but the sequence description has " + std::to_string(seq.T()) + " positions");
  }
  add_rows(attention, 0, T, seq);
}

void HeadStatsAccumulator::add_rows(const float* rows, int q0, int q1, const SequenceInfo& seq) {
  const int T = seq.T();
  if (q0 < 0 || q1 > T || q0 > q1)
    throw Error("head statistics: query rows " + std::to_string(q0) + ".." + std::to_string(q1) + " of " +
                std::to_string(T) + " positions");
  if (!seq.ids.empty() && static_cast<int>(seq.ids.size()) != T) {
    throw Error("head statistics: sequence ids have " + std::to_string(seq.ids.size()) + " entries for " +
                std::to_string(T) + " positions");
  }
  if (!seq.attendable.empty() && static_cast<int>(seq.attendable.size()) != T) {
    throw Error("head statistics: attendable mask has " + std::to_string(seq.attendable.size()) + " entries for " +
                std::to_string(T) + " positions");
  }
  scratch_.resize(static_cast<size_t>(T));
  if (seq.attendable.empty()) {  // the keys of a row are 0 .. n − 1: the vectorised path
    for (int q = q0; q < q1; ++q) add_contiguous_row(rows + static_cast<int64_t>(q - q0) * T, q, seq);
    return;
  }
  for (int q = q0; q < q1; ++q) {
    const float* row = rows + static_cast<int64_t>(q - q0) * T;
    int n = 0;
    for (int k = 0; k < T; ++k) {
      if (seq.may_attend(q, k)) scratch_[static_cast<size_t>(n++)] = row[k];
    }
    if (n == 0) continue;  // a padding query under a causal mask, nothing to describe
    ++n_;
    const bool sees_first = seq.first_key(q) == 0;
    if (sees_first) ++n_sink_;
    if (norms_ != nullptr && sees_first) add_norm_row(row, q, seq);
    const double uniform = 1.0 / n;
    const double negligible = kSparsityFraction * uniform;

    double h = 0, row_max = 0, sq = 0, overlap = 0, below = 0;
    for (int i = 0; i < n; ++i) {
      const double a = scratch_[static_cast<size_t>(i)];
      if (a > 0) h -= a * std::log2(a);
      row_max = std::max(row_max, a);
      sq += a * a;
      overlap += std::min(a, uniform);
      if (a < negligible) below += 1;
    }
    entropy_ += h;
    if (n > 1) {
      entropy_norm_ += h / std::log2(static_cast<double>(n));
      ++n_norm_;
    }
    sparsity_ += below / n;
    max_ += row_max;
    avg_ += sq;
    uniform_ += overlap;

    const int cover = keys_to_cover(scratch_.data(), n, kCoverMass - kCoverTolerance);
    keys90_ += cover;
    keys90_share_ += static_cast<double>(cover) / n;

    double dist = 0, off = 0, local = 0, first = 0, special = 0, end_special = 0, sink = 0, punct = 0, content = 0,
           dup = 0;
    bool has_dup = false;
    const bool use_ids = !seq.ids.empty() && seq.ids[static_cast<size_t>(q)] >= 0;
    for (int k = 0; k < T; ++k) {
      if (!seq.may_attend(q, k)) continue;
      const double a = row[k];
      const int d = k - q;
      dist += a * std::abs(d);
      off += a * d;
      if (d != 0 && std::abs(d) <= kLocalWindow) local += a;
      if (std::abs(d) <= kMaxOffset) {
        offset_sum_[static_cast<size_t>(d + kMaxOffset)] += a;
        offset_n_[static_cast<size_t>(d + kMaxOffset)] += 1;
      }
      const TokenKind kind = seq.kinds[static_cast<size_t>(k)];
      if (k == 0) first += a;
      if (kind == TokenKind::kSpecial) {
        special += a;
        if (k > 0) end_special += a;
      }
      if (k == 0 || kind == TokenKind::kSpecial) sink += a;
      if (kind == TokenKind::kPunct) punct += a;
      if (kind == TokenKind::kContent && k != q) content += a;
      if (use_ids && k != q && seq.ids[static_cast<size_t>(k)] == seq.ids[static_cast<size_t>(q)]) {
        dup += a;
        has_dup = true;
      }
    }
    distance_ += dist;
    offset_ += off;
    local_ += local;
    special_ += special;
    end_special_ += end_special;
    if (sees_first) first_ += first, sink_ += sink;
    punct_ += punct;
    content_ += content;
    if (has_dup) {
      dup_ += dup;
      ++n_dup_;
    }
  }
}

// The same sums as the loop of add_rows() for a row whose attendable keys are lo .. hi − 1 (no
// padding mask; hi = q + 1 under a causal mask, else T; lo = seq.first_key(q), 0 without a
// sliding window; the weights outside are exact zeros in a captured map and are never read),
// n = hi − lo of them: one pass of row_sums() over the keys, then the few that need a key one by
// one (special tokens, offsets near the query) and keys_to_cover from the pass's first step. The
// all-double loop of add_rows() is its slow twin, compared in analysis_statistics_test
// (FloatLaneRowsEqualTheDoubleLoop).
void HeadStatsAccumulator::add_contiguous_row(const float* row, int q, const SequenceInfo& seq) {
  const int lo = seq.first_key(q), hi = seq.causal ? q + 1 : seq.T(), n = hi - lo;
  ++n_;
  const bool sees_first = lo == 0;
  if (sees_first) ++n_sink_;
  const float uniform = 1.0f / static_cast<float>(n);
  const float negligible = static_cast<float>(kSparsityFraction / n);
  const TokenKind* kinds = seq.kinds.data();
  const bool use_ids = !seq.ids.empty() && seq.ids[static_cast<size_t>(q)] >= 0;
  const bool use_norms = norms_ != nullptr && sees_first;
  const int32_t* ids = seq.ids.data();
  const int32_t id = use_ids ? ids[q] : 0;
  const auto sums = [&]<bool kIds, bool kNorms>() {
    return hi <= q + 1 ? row_sums<kIds, kNorms, true>(row, lo, hi, q, uniform, negligible, kinds, ids, id, norms_)
                       : row_sums<kIds, kNorms, false>(row, lo, hi, q, uniform, negligible, kinds, ids, id, norms_);
  };
  const RowSums r = use_ids ? (use_norms ? sums.operator()<true, true>() : sums.operator()<true, false>())
                            : (use_norms ? sums.operator()<false, true>() : sums.operator()<false, false>());
  if (use_norms) add_norm_share(row, n, seq, r.norm_total);
  double special = 0;  // the few special tokens, one by one in key order
  for_each_special(seq, lo, hi, [&](int k) { special += row[k]; });
  entropy_ += r.h;
  if (n > 1) {
    entropy_norm_ += r.h / std::log2(static_cast<double>(n));
    ++n_norm_;
  }
  sparsity_ += static_cast<double>(r.below) / n;
  max_ += r.max;
  avg_ += r.sq;
  uniform_ += r.overlap;

  const int cover = keys_to_cover(row + lo, scratch_.data(), n, kCoverMass - kCoverTolerance, r.at_uniform);
  keys90_ += cover;
  keys90_share_ += static_cast<double>(cover) / n;
  // Within kMaxOffset of the query only.
  double local = 0;
  for (int k = std::max(lo, q - kMaxOffset); k <= std::min(hi - 1, q + kMaxOffset); ++k) {
    const int d = k - q;
    const double a = row[k];
    if (d != 0 && std::abs(d) <= kLocalWindow) local += a;
    offset_sum_[static_cast<size_t>(d + kMaxOffset)] += a;
    offset_n_[static_cast<size_t>(d + kMaxOffset)] += 1;
  }
  const double first = sees_first ? row[0] : 0.0;
  const bool first_special = sees_first && kinds[0] == TokenKind::kSpecial;
  distance_ += r.dist;
  offset_ += r.off;
  local_ += local;
  special_ += special;
  end_special_ += special - (first_special ? first : 0.0);
  if (sees_first) first_ += first, sink_ += special + (first_special ? 0.0 : first);
  punct_ += r.punct;
  content_ += r.content;
  if (r.dups > 0) {
    dup_ += r.dup;
    ++n_dup_;
  }
}

// The sink share of one row under norm weighting: Σ_{k ∈ sink} a_k ‖f(x_k)‖ / Σ_k a_k ‖f(x_k)‖ over
// the attendable keys (Kobayashi et al. 2020's ‖α f(x)‖ in place of α). Called for the rows whose
// window holds the first position only, so the keys of a contiguous row are 0 .. q (or T − 1).
void HeadStatsAccumulator::add_norm_row(const float* row, int q, const SequenceInfo& seq) {
  double sink = 0, total = 0;
  for (int k = 0; k < seq.T(); ++k) {
    if (!seq.may_attend(q, k)) continue;
    const double w = double(row[k]) * norms_[k];
    total += w;
    if (k == 0 || seq.kinds[static_cast<size_t>(k)] == TokenKind::kSpecial) sink += w;
  }
  if (total <= 0) return;  // every attended value is zero: no share to speak of
  sink_norm_ += sink / total;
  ++n_sink_norm_;
}

// The same for a contiguous row (add_contiguous_row) whose keys are 0 .. n − 1, given the total
// Σ_k a_k ‖f(x_k)‖ summed with the row's other sums; the sink is the first key and the special
// tokens, in key order.
void HeadStatsAccumulator::add_norm_share(const float* row, int n, const SequenceInfo& seq, double total) {
  if (total <= 0) return;
  double sink = double(row[0] * norms_[0]);
  for_each_special(seq, 1, n, [&](int k) { sink += double(row[k] * norms_[k]); });
  sink_norm_ += sink / total;
  ++n_sink_norm_;
}

void HeadStatsAccumulator::merge(const HeadStatsAccumulator& o) {
  n_ += o.n_;
  n_sink_norm_ += o.n_sink_norm_;
  n_sink_ += o.n_sink_;
  sink_norm_ += o.sink_norm_;
  n_norm_ += o.n_norm_;
  n_dup_ += o.n_dup_;
  entropy_ += o.entropy_;
  entropy_norm_ += o.entropy_norm_;
  sparsity_ += o.sparsity_;
  keys90_ += o.keys90_;
  keys90_share_ += o.keys90_share_;
  max_ += o.max_;
  avg_ += o.avg_;
  uniform_ += o.uniform_;
  distance_ += o.distance_;
  offset_ += o.offset_;
  local_ += o.local_;
  first_ += o.first_;
  special_ += o.special_;
  end_special_ += o.end_special_;
  sink_ += o.sink_;
  punct_ += o.punct_;
  content_ += o.content_;
  dup_ += o.dup_;
  for (size_t i = 0; i < offset_sum_.size(); ++i) {
    offset_sum_[i] += o.offset_sum_[i];
    offset_n_[i] += o.offset_n_[i];
  }
}

// The order of StatSums' entries: sums, then counts (analysis.h).
StatSums HeadStatsAccumulator::sums() const {
  StatSums out;
  out.sums = {entropy_, entropy_norm_, sparsity_, keys90_, keys90_share_, max_,     avg_,
              uniform_, distance_,     offset_,   local_,  first_,        special_, end_special_,
              sink_,    punct_,        content_,  dup_,    sink_norm_};
  out.counts = {n_, n_norm_, n_dup_, n_sink_, n_sink_norm_};
  out.sums.insert(out.sums.end(), offset_sum_.begin(), offset_sum_.end());
  out.counts.insert(out.counts.end(), offset_n_.begin(), offset_n_.end());
  return out;
}

HeadStatsAccumulator HeadStatsAccumulator::from_sums(const StatSums& in) {
  constexpr size_t kSums = 19, kCounts = 5;
  if (in.sums.size() != kSums + kOffsetSlots || in.counts.size() != kCounts + kOffsetSlots)
    throw Error("statistics sums: " + std::to_string(in.sums.size()) + " sums and " + std::to_string(in.counts.size()) +
                " counts; expected " + std::to_string(kSums + kOffsetSlots) + " and " +
                std::to_string(kCounts + kOffsetSlots));
  HeadStatsAccumulator a;
  double* const sums[kSums] = {&a.entropy_, &a.entropy_norm_, &a.sparsity_, &a.keys90_,      &a.keys90_share_,
                               &a.max_,     &a.avg_,          &a.uniform_,  &a.distance_,    &a.offset_,
                               &a.local_,   &a.first_,        &a.special_,  &a.end_special_, &a.sink_,
                               &a.punct_,   &a.content_,      &a.dup_,      &a.sink_norm_};
  int64_t* const counts[kCounts] = {&a.n_, &a.n_norm_, &a.n_dup_, &a.n_sink_, &a.n_sink_norm_};
  for (size_t i = 0; i < kSums; ++i) *sums[i] = in.sums[i];
  for (size_t i = 0; i < kCounts; ++i) *counts[i] = in.counts[i];
  for (size_t i = 0; i < size_t(kOffsetSlots); ++i) {
    a.offset_sum_[i] = in.sums[kSums + i];
    a.offset_n_[i] = in.counts[kCounts + i];
  }
  return a;
}

HeadStats HeadStatsAccumulator::result() const {
  HeadStats s;
  s.n_queries = n_;
  s.entropy_bits = mean_or_nan(entropy_, n_);
  s.entropy_norm = mean_or_nan(entropy_norm_, n_norm_);
  s.sparsity = mean_or_nan(sparsity_, n_);
  s.keys_90 = mean_or_nan(keys90_, n_);
  s.keys_90_share = mean_or_nan(keys90_share_, n_);
  s.max_attention = mean_or_nan(max_, n_);
  s.avg_attention = mean_or_nan(avg_, n_);
  s.uniform_overlap = mean_or_nan(uniform_, n_);
  s.mean_distance = mean_or_nan(distance_, n_);
  s.mean_offset = mean_or_nan(offset_, n_);
  for (size_t i = 0; i < offset_sum_.size(); ++i) s.offset_mass[i] = mean_or_nan(offset_sum_[i], offset_n_[i]);
  s.self_mass = s.offset(0);
  s.prev_mass = s.offset(-1);
  s.next_mass = s.offset(+1);
  s.local_mass = mean_or_nan(local_, n_);
  s.n_sink_queries = n_sink_;
  s.first_mass = mean_or_nan(first_, n_sink_);
  s.special_mass = mean_or_nan(special_, n_);
  s.end_special_mass = mean_or_nan(end_special_, n_);
  s.sink_mass = mean_or_nan(sink_, n_sink_);
  s.sink_mass_norm = mean_or_nan(sink_norm_, n_sink_norm_);
  s.punct_mass = mean_or_nan(punct_, n_);
  s.content_mass = mean_or_nan(content_, n_);
  s.duplicate_mass = mean_or_nan(dup_, n_dup_);
  s.n_duplicate_queries = n_dup_;
  return s;
}

int keys_to_cover(float* v, int n, double need) { return keys_to_cover(v, v, n, need); }

namespace {

// The weights above a pivot, their count and how many equal it: float lanes within blocks of
// kLaneKeys, as row_sums() makes the first step's.
PivotSums pivot_sums(const float* v, int n, float pivot) {
  double above = 0;
  int64_t n_above = 0, n_equal = 0;
  for (int k0 = 0; k0 < n; k0 += kLaneKeys) {
    const int k1 = std::min(n, k0 + kLaneKeys);
    Lanes sum{};
    IntLanes count{}, equal{};
    int k = k0;
    for (; k + kLanes <= k1; k += kLanes) {
      const Lanes a = load_lanes<Lanes>(v + k);
      sum += a > pivot ? a : Lanes{};
      count -= a > pivot;  // a comparison is −1 where true
      equal -= a == pivot;
    }
    above += fold_lanes(sum), n_above += fold_lanes(count), n_equal += fold_lanes(equal);
    for (; k < k1; ++k) {
      above += v[k] > pivot ? v[k] : 0.0f;
      n_above += v[k] > pivot;
      n_equal += v[k] == pivot;
    }
  }
  return {above, int(n_above), int(n_equal)};
}

int keys_to_cover(const float* row, float* v, int n, double need, const PivotSums* at_uniform) {
  // A selection around pivots. Invariant: `count` weights, all larger than any in src[0, n), are
  // taken; `need` is what they still lack. Each step measures, in one vectorised pass, the sum of
  // the weights above a pivot: when they alone cover `need`, the answer is among them and only
  // they are kept (ops::keep_greater); else they and as many ties as needed are taken and the
  // smaller ones kept (ops::keep_less). The first step reads the row and writes v, the others
  // work in v. Attention rows are mostly peaked, so the first pivot is the uniform weight 1/n.
  const float* src = row;
  int count = 0;
  bool first = n > 64;
  while (n > 0 && need > 0) {
    if (n <= 32) {
      if (src != v) std::copy_n(src, n, v);
      std::sort(v, v + n, std::greater<float>());
      for (int i = 0; i < n && need > 0; ++i) need -= v[i], ++count;
      break;
    }
    float pivot;
    const bool given = first && at_uniform != nullptr;  // the first step, measured by the caller
    if (first) {
      pivot = 1.0f / static_cast<float>(n);
      first = false;
    } else {
      const float a = src[0], b = src[n / 2], c = src[n - 1];
      pivot = std::max(std::min(a, b), std::min(std::max(a, b), c));  // median of three
    }
    const PivotSums at = given ? *at_uniform : pivot_sums(src, n, pivot);
    double above = at.above;
    const int n_above = at.n_above, n_equal = at.n_equal;
    if (above >= need && n_above > 0) {
      n = ops::keep_greater(src, v, n, pivot);
      src = v;
      continue;
    }
    need -= above;
    count += n_above;
    for (int j = 0; j < n_equal && need > 0; ++j) need -= pivot, ++count;
    n = ops::keep_less(src, v, n, pivot);
    src = v;
  }
  return std::max(count, 1);
}

}  // namespace

int keys_to_cover(const float* row, float* scratch, int n, double need) {
  return keys_to_cover(row, scratch, n, need, nullptr);
}

int keys_to_cover(const float* row, float* scratch, int n, double need, const PivotSums& at_uniform) {
  return keys_to_cover(row, scratch, n, need, &at_uniform);
}

HeadStats compute_head_stats(const float* attention, int T, const SequenceInfo& seq) {
  HeadStatsAccumulator acc;
  acc.add(attention, T, seq);
  return acc.result();
}

ModelStatsAccumulator::ModelStatsAccumulator(int n_layer, int n_head, std::vector<int64_t> layer_window)
    : n_layer_(n_layer), n_head_(n_head), layer_window_(std::move(layer_window)) {
  if (n_layer <= 0 || n_head <= 0) {
    throw Error("head statistics: need at least one layer and one head, got " + std::to_string(n_layer) + " x " +
                std::to_string(n_head));
  }
  if (!layer_window_.empty() && static_cast<int>(layer_window_.size()) != n_layer)
    throw Error("head statistics: " + std::to_string(layer_window_.size()) + " layer windows for " +
                std::to_string(n_layer) + " layers");
  ExactSums zero;
  zero.add(HeadStatsAccumulator{}.sums());
  heads_.assign(static_cast<size_t>(n_layer) * n_head, zero);
}

void ModelStatsAccumulator::add(const Tensor& attention, const SequenceInfo& seq, const Tensor& value_norms) {
  const int T = seq.T();
  attention.expect_shape({n_layer_, n_head_, T, T}, "attention for head statistics");
  if (!value_norms.empty()) value_norms.expect_shape({n_layer_, n_head_, T}, "value norms for head statistics");
  const int64_t stride = static_cast<int64_t>(T) * T;
  SequenceInfo windowed;  // seq under a layer's own window, copied when that differs from seq's
  for (size_t h = 0; h < heads_.size(); ++h) {
    const size_t layer = h / static_cast<size_t>(n_head_);
    const SequenceInfo* s = &seq;
    if (!layer_window_.empty() && layer_window_[layer] != seq.window) {
      if (windowed.T() != T || windowed.window != layer_window_[layer]) {
        windowed = seq;
        windowed.window = layer_window_[layer];
      }
      s = &windowed;
    }
    HeadStatsAccumulator text;  // this text's sums, then added exactly
    if (!value_norms.empty()) text.set_value_norms(value_norms.ptr() + static_cast<int64_t>(h) * T);
    text.add(attention.ptr() + static_cast<int64_t>(h) * stride, T, *s);
    text.set_value_norms(nullptr);
    heads_[h].add(text.sums());
  }
}

void ModelStatsAccumulator::merge(const ModelStatsAccumulator& other) {
  if (other.n_layer_ != n_layer_ || other.n_head_ != n_head_)
    throw Error("head statistics: cannot merge " + std::to_string(other.n_layer_) + " x " +
                std::to_string(other.n_head_) + " heads into " + std::to_string(n_layer_) + " x " +
                std::to_string(n_head_));
  for (size_t h = 0; h < heads_.size(); ++h) heads_[h].add(other.heads_[h]);
}

std::vector<HeadStats> ModelStatsAccumulator::result() const {
  std::vector<HeadStats> out;
  out.reserve(heads_.size());
  for (const ExactSums& h : heads_) out.push_back(HeadStatsAccumulator::from_sums(h.value()).result());
  return out;
}

nlohmann::json ModelStatsAccumulator::to_json() const {
  nlohmann::json heads = nlohmann::json::array();
  for (const ExactSums& h : heads_) {
    nlohmann::json sums = nlohmann::json::array();
    for (const Fixed f : h.sums) {
      const auto [high, low] = split(f);
      sums.push_back({high, low});
    }
    heads.push_back({{"sums", std::move(sums)}, {"counts", h.counts}});
  }
  return heads;
}

void ModelStatsAccumulator::from_json(const nlohmann::json& j) {
  if (!j.is_array() || j.size() != heads_.size())
    throw Error("head statistics: a part with " + std::to_string(j.is_array() ? j.size() : 0) + " heads for " +
                std::to_string(heads_.size()));
  for (size_t h = 0; h < heads_.size(); ++h) {
    ExactSums e;
    for (const nlohmann::json& p : j[h].at("sums"))
      e.sums.push_back(join({p.at(0).get<int64_t>(), p.at(1).get<uint64_t>()}));
    e.counts = j[h].at("counts").get<std::vector<int64_t>>();
    if (e.sums.size() != heads_[h].sums.size() || e.counts.size() != heads_[h].counts.size())
      throw Error("head statistics: a part's head " + std::to_string(h) + " has sums of another shape");
    heads_[h] = std::move(e);
  }
}

}  // namespace headscope::analysis
