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
WordMap words_from_spans(const Encoding& encoding, const std::vector<std::pair<int64_t, int64_t>>& word_spans);

// attention: [T, T] row-major → returns [U, U] row-major (TO = sum, FROM = mean; see above).
// Rows of units whose tokens were all dropped and columns of dropped tokens are left out.
std::vector<float> merge_attention(const float* attention, int T, const WordMap& map);

// The same one row at a time, for attention that arrives in blocks of query rows:
// add_token_row() adds token row `a` (its first n keys, keys summed per unit; the keys after n
// must be zeros, as a causal row's are) into its unit's row `unit_row` [U], each weight added
// in token order; once every piece of the unit is in, finish_unit_row() takes the mean of its
// first `units` entries (U for the whole row).
// merge_attention() is exactly these two in token order.
void add_token_row(const float* a, int n, const WordMap& map, float* unit_row);
void finish_unit_row(float* unit_row, int units, int pieces);

// The same by gathering: each unit's first piece is copied (or added) into the unit row, then its
// later pieces are added, in token order. Per unit these are the additions of add_token_row(),
// in the same order, so the same floats (0 + x is x); the per-token loop is its slow twin.
// Where a map's first pieces come in unit order (every map words.cc makes: a unit is numbered when
// its first token appears), the first pieces are one stream compaction of the row, which AVX-512
// does 16 keys at a time (vcompressps into a register and a masked store).
struct UnitGather {
  std::vector<int32_t> first_token;                // [U] the unit's first token
  std::vector<int32_t> units_before;               // [T + 1] units whose first token is < n
  std::vector<std::pair<int32_t, int32_t>> later;  // (token, unit) of each later piece, by token
  std::vector<uint16_t> first_bits;                // [⌈T/16⌉] bit i of word j: token 16j + i is a first piece
  bool in_order = false;                           // first pieces come in unit order
};
UnitGather unit_gather(const WordMap& map);
// Token row `a` (its first n keys, as add_token_row) into `unit_row` for the units whose first
// token is before n (units_before[n] of them; the others are not touched): written over what the
// row holds for a unit's first query piece (add false), added to it for its later pieces (add true).
void gather_token_row(const float* a, int n, const UnitGather& gather, float* unit_row, bool add);

// Every head at once: [n_layer, n_head, T, T] → [n_layer, n_head, U, U].
Tensor merge_attention(const Tensor& attention, const WordMap& map);

// The SequenceInfo of the units: a unit is special when its token is, punctuation when all its
// tokens are, content otherwise; ids are the unit's first token id when it has one piece and -1
// otherwise (negative ids never count as duplicates, so detection stays token-exact). Causal when the tokens were.
SequenceInfo describe_units(const SequenceInfo& tokens, const WordMap& map);

}  // namespace headscope::analysis
