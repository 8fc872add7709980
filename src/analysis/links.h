// headscope analysis — what one head does on one text, in words: its strongest links once the
// sink is discounted, and whether they match the role the corpus gave it.
//
// Sink discount: the columns of position 0 ([CLS], BOS or the first token) and of every special
// token are dropped from each query's row and the rest renormalised to sum to 1. Each ordinary
// query then names its strongest remaining key other than itself; the strongest such links,
// best first, are the head's links on the text (at most limits::kMaxTextLinks are written out).
//
// Recognition (no part-of-speech tagger; rules in the spirit of the atlas's fixed-offset baseline):
//   - coreference: a pronoun (a closed English list) whose strongest link goes to an earlier
//     ordinary word that is not itself a pronoun;
//   - syntactic, for the closed-class relations only (det, case, cc, aux, cop, mark): a link whose
//     dependent end is one of that relation's function words ("the", "of", "and", "was", ...) and
//     whose offset k − q has the sign of the corpus's best fixed offset (the relation's usual
//     side), within kMaxOffset. Open relations (obj, nsubj, ...) would need a parser: their
//     corpus role is shown, but never claimed on the text.
// A role is looked for only when the head holds it on the corpus with a score >= kMinRoleScore.
#pragma once
#include <span>
#include <string>

#include "headscope/analysis.h"

namespace headscope::analysis {

// `attention`: one head's [T, T] map, row-major (row q sums to 1 over the keys q may attend).
// `labels`: [T] the text of each token. `corpus`: the head's syntax / coreference evidence.
TextEvidence describe_text(const float* attention, std::span<const std::string> labels, const SequenceInfo& seq,
                           const HeadEvidence& corpus, const HeadRoles& roles);

// The words the sink discount is described with: "[CLS] and [SEP]" for a model with special
// tokens at both ends, otherwise "the first token".
std::string sink_columns_text(const SequenceInfo& seq, std::span<const std::string> labels);

}  // namespace headscope::analysis
