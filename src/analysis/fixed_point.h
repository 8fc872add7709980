// headscope analysis — exact sums of doubles for results that merge (CorpusStats, the atlas's
// partials): each value enters once as a 128-bit fixed-point number with 64 fractional bits,
// trunc(s · 2⁶⁴) — one deterministic rounding, below 2⁻⁶⁴ absolute — and integer addition is
// associative, so a total does not depend on how the values were split, merged or ordered.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "headscope/analysis.h"
#include "headscope/error.h"

namespace headscope::analysis {

using Fixed = __int128;
inline constexpr int kFixedFractionBits = 64;
// |s| must stay below 2⁶² (far above any sum of attention statistics: a million texts of 8,192
// rows, each at most 8,192, is 7·10¹⁶ < 2⁶² ≈ 4.6·10¹⁸).
inline constexpr double kFixedMaxMagnitude = 4.6e18;

inline Fixed to_fixed(double s) {
  if (!std::isfinite(s) || std::abs(s) >= kFixedMaxMagnitude)
    throw Error("a statistic's sum of " + std::to_string(s) + " is outside the exact accumulator's range");
  return static_cast<Fixed>(std::ldexp(s, kFixedFractionBits));  // exact scaling by a power of two, then truncation
}
inline double to_double(Fixed f) { return std::ldexp(static_cast<double>(f), -kFixedFractionBits); }
// A Fixed as two 64-bit halves (high signed, low unsigned) for storage, and back.
inline Fixed join(const std::pair<int64_t, uint64_t>& p) {
  return static_cast<Fixed>((static_cast<unsigned __int128>(static_cast<uint64_t>(p.first)) << 64) | p.second);
}
inline std::pair<int64_t, uint64_t> split(Fixed f) {
  const auto u = static_cast<unsigned __int128>(f);
  return {static_cast<int64_t>(static_cast<uint64_t>(u >> 64)), static_cast<uint64_t>(u)};
}

// One head's StatSums (HeadStatsAccumulator::sums), summed exactly over texts.
struct ExactSums {
  std::vector<Fixed> sums;
  std::vector<int64_t> counts;
  void add(const StatSums& s) {
    if (sums.empty() && counts.empty()) sums.assign(s.sums.size(), 0), counts.assign(s.counts.size(), 0);
    if (s.sums.size() != sums.size() || s.counts.size() != counts.size())
      throw Error("statistic sums of another shape cannot be added");
    for (size_t k = 0; k < sums.size(); ++k) sums[k] += to_fixed(s.sums[k]);
    for (size_t k = 0; k < counts.size(); ++k) counts[k] += s.counts[k];
  }
  void add(const ExactSums& o) {
    if (o.sums.empty() && o.counts.empty()) return;
    if (sums.empty() && counts.empty()) sums.assign(o.sums.size(), 0), counts.assign(o.counts.size(), 0);
    if (o.sums.size() != sums.size() || o.counts.size() != counts.size())
      throw Error("statistic sums of another shape cannot be merged");
    for (size_t k = 0; k < sums.size(); ++k) sums[k] += o.sums[k];
    for (size_t k = 0; k < counts.size(); ++k) counts[k] += o.counts[k];
  }
  StatSums value() const {
    StatSums s;
    for (const Fixed f : sums) s.sums.push_back(to_double(f));
    s.counts = counts;
    return s;
  }
};

}  // namespace headscope::analysis
