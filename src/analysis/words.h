// headscope analysis — from token-level to word-level attention.
//
// A word split into several pieces ("play", "##ing") is one unit for a linguist. Following Clark
// et al. (2019, "What Does BERT Look At?", section 4.1) we merge the [T, T] token attention into a
// [U, U] unit attention:
//   attention TO a unit   = the sum over its pieces   (columns are added: the row still sums to 1)
//   attention FROM a unit = the mean over its pieces  (rows are averaged: still a distribution)
// Units are the words plus every special token as a unit of its own, in token order, so nothing is
// lost and every statistic of statistics.h applies to the merged matrix unchanged.
#pragma once
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/statistics.h"
#include "headscope/analysis.h"
#include "headscope/tokenizer.h"

namespace headscope::analysis {

// Words as the tokenizer's pre-tokenizer saw them (Token::word); specials become their own units.
WordMap words_from_encoding(const Encoding& encoding);

// Words given as byte spans [begin, end) of the encoded text (e.g. the gold words of a treebank
// joined by spaces). A non-special token belongs to the first span it overlaps (a byte-level BPE
// token such as " cat" starts on the space before the word); tokens overlapping no span are
// dropped (unit -1). Spans must be sorted and must not overlap.
WordMap words_from_spans(const Encoding& encoding,
                         const std::vector<std::pair<int64_t, int64_t>>& word_spans);

// attention: [T, T] row-major → returns [U, U] row-major (TO = sum, FROM = mean; see above).
// Rows of units whose tokens were all dropped and columns of dropped tokens are left out.
std::vector<float> merge_attention(const float* attention, int T, const WordMap& map);

// The same one row at a time, for attention that arrives in blocks of query rows:
// add_token_row() adds token row `a` (its first n keys, keys summed per unit; the keys after n
// must be zeros, as a causal row's are) into its unit's row `unit_row` [U], each weight added
// in token order; once every piece of the unit is in, finish_unit_row() takes the mean.
// merge_attention() is exactly these two in token order.
void add_token_row(const float* a, int n, const WordMap& map, float* unit_row);
void finish_unit_row(float* unit_row, int U, int pieces);

// Tokens t0 .. t0 + len − 1 of units u0 .. u0 + len − 1, one unit each (dropped tokens belong to
// no run). Within a run every key goes to a unit of its own, so the run adds as one vector;
// a word of several pieces is a run of one token per piece.
struct UnitRun {
  int32_t t0, u0, len;
};
std::vector<UnitRun> unit_runs(const WordMap& map);
// add_token_row() over the map's runs (unit_runs(map)): the same additions in the same order,
// so the same floats; the per-token loop above is its slow twin.
void add_token_row(const float* a, int n, const std::vector<UnitRun>& runs, float* unit_row);

// Every head at once: [n_layer, n_head, T, T] → [n_layer, n_head, U, U].
Tensor merge_attention(const Tensor& attention, const WordMap& map);

// The SequenceInfo of the units: a unit is special when its token is, punctuation when all its
// tokens are, content otherwise; ids are the unit's first token id when it has one piece and -1
// otherwise (negative ids never count as duplicates, so detection stays token-exact). Causal when the tokens were.
SequenceInfo describe_units(const SequenceInfo& tokens, const WordMap& map);

}  // namespace headscope::analysis
