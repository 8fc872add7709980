// Attention without special tokens; see without_specials.h.
#include "analysis/without_specials.h"

#include <string>

#include "headscope/error.h"

namespace headscope::analysis {

WithoutSpecials special_free_units(const SequenceInfo& units, bool drop_first) {
  WithoutSpecials out;
  for (int32_t i = drop_first ? 1 : 0; i < units.T(); ++i)
    if (units.kinds[static_cast<size_t>(i)] != TokenKind::kSpecial) out.kept.push_back(i);
  out.units.causal = units.causal;
  for (int32_t i : out.kept) {
    out.units.kinds.push_back(units.kinds[static_cast<size_t>(i)]);
    if (!units.ids.empty()) out.units.ids.push_back(units.ids[static_cast<size_t>(i)]);
    if (!units.attendable.empty()) out.units.attendable.push_back(units.attendable[static_cast<size_t>(i)]);
  }
  return out;
}

void drop_special_row(const float* src, int q, const SequenceInfo& units, const std::vector<int32_t>& kept,
                      float* dst) {
  const size_t K = kept.size();
  double mass = 0;
  for (size_t ki = 0; ki < K; ++ki)
    if (units.may_attend(q, kept[ki])) mass += src[kept[ki]];
  const double scale = mass > 0 ? 1.0 / mass : 0.0;
  for (size_t ki = 0; ki < K; ++ki)
    dst[ki] = units.may_attend(q, kept[ki]) ? static_cast<float>(src[kept[ki]] * scale) : 0.0f;
}

WithoutSpecials drop_special_units(const Tensor& attention, const SequenceInfo& units) {
  const int64_t U = units.T();
  if (attention.rank() != 4 || attention.dim(2) != U || attention.dim(3) != U)
    throw Error("drop_special_units: attention " + attention.shape_str() + " does not match " + std::to_string(U) +
                " units");
  WithoutSpecials out = special_free_units(units);
  const int64_t K = static_cast<int64_t>(out.kept.size());
  const int64_t blocks = attention.dim(0) * attention.dim(1);
  out.attention = Tensor({attention.dim(0), attention.dim(1), K, K});
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t qi = 0; qi < K; ++qi)
      drop_special_row(attention.ptr() + (b * U + out.kept[static_cast<size_t>(qi)]) * U,
                       out.kept[static_cast<size_t>(qi)], units, out.kept, out.attention.ptr() + (b * K + qi) * K);
  return out;
}

}  // namespace headscope::analysis
