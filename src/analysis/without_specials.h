// headscope analysis — attention with the special tokens taken out.
//
// BERT-like models park much of their attention on [CLS] and [SEP] (Clark et al. 2019, section
// 3): a head that does something precise with the rest of its weight can then look like a "sink"
// head and little else. Removing the special positions and rescaling each remaining row to sum to
// one shows how the rest of the attention is shared out; statistics and roles of that matrix
// describe what a head does when it is not parking its weight. The explorer offers it as "hide
// special tokens".
#pragma once
#include <cstdint>
#include <vector>

#include "analysis/statistics.h"
#include "headscope/tensor.h"

namespace headscope::analysis {

struct WithoutSpecials {
  Tensor attention;           // [n_layer, n_head, K, K], K = kept positions
  SequenceInfo units;         // [K] kinds, ids and mask of the kept positions
  std::vector<int32_t> kept;  // [K] original index of each kept position
};

// attention: [n_layer, n_head, U, U] over the units described by `units` (tokens or words).
// Keeps every position whose kind is not TokenKind::kSpecial; each kept row is divided by its
// mass on the kept keys it may attend to (a row with no such mass stays zero). Throws Error
// when the shapes disagree.
WithoutSpecials drop_special_units(const Tensor& attention, const SequenceInfo& units);

// The kept positions and their SequenceInfo only (WithoutSpecials::attention left empty). With
// drop_first, position 0 goes too, special or not: the attention sink of a causal model, where
// every query may read the first token and most heads park their weight there (Xiao et al. 2023).
WithoutSpecials special_free_units(const SequenceInfo& units, bool drop_first = false);
// Row q of [U, U] attention `src_row` ([U]) without the specials: `kept` columns, renormalised as
// above, into dst [kept.size()]. drop_special_units() is this for every kept row of every head.
void drop_special_row(const float* src_row, int q, const SequenceInfo& units, const std::vector<int32_t>& kept,
                      float* dst);

}  // namespace headscope::analysis
