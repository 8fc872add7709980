// Repeated-random-tokens probe; see probe.h.
#include "analysis/probe.h"

#include <algorithm>
#include <string>

#include "headscope/error.h"

namespace headscope::analysis {
std::vector<ProbeEvidence> score_probe(const Tensor& attention, const ProbeLayout& layout) {
  const auto T = static_cast<int64_t>(layout.encoding.size());
  attention.expect_shape({-1, -1, T, T}, "attention of the induction probe");
  const int64_t P = layout.prefix, L = layout.length;
  if (P + 2 * L > T)
    throw Error("induction probe: layout does not fit the attention's " + std::to_string(T) + " tokens");
  const int64_t n_heads = attention.dim(0) * attention.dim(1);
  std::vector<ProbeEvidence> out(static_cast<size_t>(n_heads));
  for (int64_t h = 0; h < n_heads; ++h) {
    const float* a = attention.ptr() + h * T * T;
    double induction = 0, duplicate = 0;
    for (int64_t i = 0; i < L; ++i) {
      const int64_t q = P + L + i;
      induction += a[q * T + P + i + 1];
      duplicate += a[q * T + P + i];
    }
    out[static_cast<size_t>(h)] = ProbeEvidence{induction / L, duplicate / L, static_cast<int>(L)};
  }
  return out;
}

ProbeRowScorer::ProbeRowScorer(const ProbeLayout& layout, int n_layer, int n_head)
    : H_(n_head),
      P_(layout.prefix),
      L_(layout.length),
      induction_(size_t(n_layer) * size_t(n_head), 0.0),
      duplicate_(induction_.size(), 0.0) {
  if (P_ + 2 * L_ > static_cast<int64_t>(layout.encoding.size()))
    throw Error("induction probe: layout does not fit its " + std::to_string(layout.encoding.size()) + " tokens");
}

void ProbeRowScorer::add_block(int layer, int64_t q0, int64_t q1, int64_t width, const float* probs) {
  const int64_t H = H_, P = P_, L = L_;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t q = std::max(q0, P + L); q < std::min(q1, P + 2 * L); ++q) {  // second copy: i = q − P − L
      const float* row = probs + (h * (q1 - q0) + q - q0) * width;
      induction_[size_t(layer * H + h)] += row[q - L + 1];  // the token after i's first occurrence
      duplicate_[size_t(layer * H + h)] += row[q - L];      // i's first occurrence
    }
}

std::vector<ProbeEvidence> ProbeRowScorer::result() const {
  std::vector<ProbeEvidence> out(induction_.size());
  for (size_t h = 0; h < out.size(); ++h)
    out[h] = ProbeEvidence{induction_[h] / double(L_), duplicate_[h] / double(L_), static_cast<int>(L_)};
  return out;
}

std::vector<ProbeEvidence> average_probes(const std::vector<std::vector<ProbeEvidence>>& runs) {
  if (runs.empty()) return {};
  std::vector<ProbeEvidence> mean(runs.front().size());
  for (const auto& run : runs) {
    if (run.size() != mean.size()) throw Error("induction probe: runs with different head counts cannot be averaged");
    for (size_t h = 0; h < run.size(); ++h) {
      mean[h].induction += run[h].induction / static_cast<double>(runs.size());
      mean[h].duplicate += run[h].duplicate / static_cast<double>(runs.size());
      mean[h].probe_length = run[h].probe_length;
    }
  }
  return mean;
}

}  // namespace headscope::analysis
