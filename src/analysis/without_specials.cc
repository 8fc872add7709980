// Attention without special tokens; see without_specials.h.
#include "analysis/without_specials.h"

#include <string>

#include "headscope/error.h"

namespace headscope::analysis {

WithoutSpecials drop_special_units(const Tensor& attention, const SequenceInfo& units) {
  const int64_t U = units.T();
  if (attention.rank() != 4 || attention.dim(2) != U || attention.dim(3) != U)
    throw Error("drop_special_units: attention " + attention.shape_str() + " does not match " + std::to_string(U) +
                " units");
  WithoutSpecials out;
  for (int32_t i = 0; i < U; ++i)
    if (units.kinds[static_cast<size_t>(i)] != TokenKind::kSpecial) out.kept.push_back(i);
  const int64_t K = static_cast<int64_t>(out.kept.size());

  out.units.causal = units.causal;
  for (int32_t i : out.kept) {
    out.units.kinds.push_back(units.kinds[static_cast<size_t>(i)]);
    if (!units.ids.empty()) out.units.ids.push_back(units.ids[static_cast<size_t>(i)]);
    if (!units.attendable.empty()) out.units.attendable.push_back(units.attendable[static_cast<size_t>(i)]);
  }

  const int64_t blocks = attention.dim(0) * attention.dim(1);
  out.attention = Tensor({attention.dim(0), attention.dim(1), K, K});
  for (int64_t b = 0; b < blocks; ++b) {
    const float* src = attention.ptr() + b * U * U;  // [U, U]
    float* dst = out.attention.ptr() + b * K * K;    // [K, K]
    for (int64_t qi = 0; qi < K; ++qi) {
      const int64_t q = out.kept[static_cast<size_t>(qi)];
      double mass = 0;
      for (int64_t ki = 0; ki < K; ++ki) {
        const int64_t k = out.kept[static_cast<size_t>(ki)];
        if (units.may_attend(static_cast<int>(q), static_cast<int>(k))) mass += src[q * U + k];
      }
      const double scale = mass > 0 ? 1.0 / mass : 0.0;
      for (int64_t ki = 0; ki < K; ++ki) {
        const int64_t k = out.kept[static_cast<size_t>(ki)];
        const bool allowed = units.may_attend(static_cast<int>(q), static_cast<int>(k));
        dst[qi * K + ki] = allowed ? static_cast<float>(src[q * U + k] * scale) : 0.0f;
      }
    }
  }
  return out;
}

}  // namespace headscope::analysis
