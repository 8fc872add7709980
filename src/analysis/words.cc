// Token → word merging of attention (Clark et al. 2019, section 4.1); see words.h.
#include "analysis/words.h"

#include <algorithm>
#include <bit>
#include <string>

#if defined(__AVX512F__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's avx512fintrin.h (bug 105593)
#if !defined(__clang__)                           // (a GCC-only group)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

#include "headscope/error.h"

namespace headscope::analysis {
namespace {

// Appends a unit for `word` (-1 for a special token) starting at `token`, returns its index.
int32_t new_unit(WordMap& map, int32_t word, int32_t token) {
  map.word_of_unit.push_back(word);
  map.first_token.push_back(token);
  return map.n_units++;
}

// A SentencePiece vocabulary read without a pre-tokenizer (Gemma, Llama 2) hands the whole text
// over as one tokenizer word; its pieces mark where a word starts with ▁ (U+2581), which splits it.
bool starts_word(const Token& t) { return t.text.rfind("\xE2\x96\x81", 0) == 0; }

}  // namespace

WordMap words_from_encoding(const Encoding& encoding) {
  WordMap map;
  map.unit_of_token.reserve(encoding.size());
  int32_t previous_word = -1, unit = -1;  // the tokenizer word of the previous token, and its unit
  for (size_t i = 0; i < encoding.size(); ++i) {
    const Token& t = encoding.tokens[i];
    const auto ti = static_cast<int32_t>(i);
    if (t.special || t.word < 0) {
      map.unit_of_token.push_back(new_unit(map, -1, ti));
      previous_word = -1;
      continue;
    }
    if (t.word != previous_word || starts_word(t)) {
      unit = new_unit(map, static_cast<int32_t>(map.unit_of_word.size()), ti);
      map.unit_of_word.push_back(unit);
    }
    previous_word = t.word;
    map.unit_of_token.push_back(unit);
  }
  return map;
}

WordMap words_from_spans(const Encoding& encoding, const std::vector<std::pair<int64_t, int64_t>>& word_spans) {
  for (size_t w = 0; w < word_spans.size(); ++w) {
    const auto [b, e] = word_spans[w];
    if (b > e || (w > 0 && b < word_spans[w - 1].second)) {
      throw Error("word spans: span " + std::to_string(w) + " [" + std::to_string(b) + ", " + std::to_string(e) +
                  ") is empty-reversed or overlaps the one before; spans must be sorted");
    }
  }
  WordMap map;
  map.unit_of_word.assign(word_spans.size(), -1);
  map.unit_of_token.reserve(encoding.size());
  for (size_t i = 0; i < encoding.size(); ++i) {
    const Token& t = encoding.tokens[i];
    const auto ti = static_cast<int32_t>(i);
    if (t.special) {
      map.unit_of_token.push_back(new_unit(map, -1, ti));
      continue;
    }
    // The first span ending after the token's first byte; the token belongs to it if they overlap.
    // Overlap rather than containment of the first byte, because byte-level BPE tokens carry the
    // space before a word (" cat" begins on the space, which no word span covers).
    auto it = std::upper_bound(word_spans.begin(), word_spans.end(), t.begin,
                               [](int64_t pos, const std::pair<int64_t, int64_t>& s) { return pos < s.second; });
    if (it == word_spans.end() || it->first >= t.end || t.begin >= t.end) {
      map.unit_of_token.push_back(-1);
      continue;
    }
    const auto w = static_cast<size_t>(it - word_spans.begin());
    int32_t& unit = map.unit_of_word[w];
    if (unit < 0) unit = new_unit(map, static_cast<int32_t>(w), ti);
    map.unit_of_token.push_back(unit);
  }
  return map;
}

void add_token_row(const float* a, int n, const WordMap& map, float* unit_row) {
  // Attention TO a unit: the sum over its pieces (columns), added in token order into the row.
  const int32_t* unit = map.unit_of_token.data();
  for (int t = 0; t < n; ++t)
    if (unit[t] >= 0) unit_row[unit[t]] += a[t];
}

UnitGather unit_gather(const WordMap& map) {
  UnitGather g;
  const auto T = static_cast<int32_t>(map.unit_of_token.size());
  g.first_token.assign(static_cast<size_t>(map.n_units), -1);
  g.units_before.assign(static_cast<size_t>(T) + 1, 0);
  g.first_bits.assign((static_cast<size_t>(T) + 15) / 16, 0);
  g.in_order = true;
  int32_t seen = 0;
  for (int32_t t = 0; t < T; ++t) {
    const int32_t u = map.unit_of_token[static_cast<size_t>(t)];
    if (u >= 0 && g.first_token[static_cast<size_t>(u)] < 0) {
      g.first_token[static_cast<size_t>(u)] = t;
      g.first_bits[static_cast<size_t>(t / 16)] |= uint16_t(1u << (t % 16));
      g.in_order = g.in_order && u == seen;
      ++seen;
    } else if (u >= 0) {
      g.later.emplace_back(t, u);
    }
    g.units_before[static_cast<size_t>(t) + 1] = seen;
  }
  if (!g.in_order) {  // units_before[n] counts units, not a prefix of them: keep every unit
    std::fill(g.units_before.begin() + 1, g.units_before.end(), map.n_units);
    std::fill(g.first_bits.begin(), g.first_bits.end(), uint16_t(0));
  }
  return g;
}

namespace {

// unit_row[0 .. m) = the row's first pieces, in token (= unit) order; returns m.
int compact_first_pieces(const float* a, int n, const UnitGather& g, float* unit_row) {
  int m = 0;
  int t = 0;
#if defined(__AVX512F__)
  for (; t + 16 <= n; t += 16) {
    const __mmask16 first = g.first_bits[static_cast<size_t>(t / 16)];
    const __m512 x = _mm512_maskz_loadu_ps(first, a + t);
    const int k = std::popcount(static_cast<unsigned>(first));
    _mm512_mask_storeu_ps(unit_row + m, __mmask16((1u << k) - 1), _mm512_maskz_compress_ps(first, x));
    m += k;
  }
#endif
  for (; t < n; ++t)
    if (g.first_bits[static_cast<size_t>(t / 16)] >> (t % 16) & 1u) unit_row[m++] = a[t];
  return m;
}

}  // namespace

void gather_token_row(const float* a, int n, const UnitGather& g, float* unit_row, bool add) {
  const int units = g.units_before[static_cast<size_t>(n)];
  if (g.in_order && !add) {
    compact_first_pieces(a, n, g, unit_row);
  } else if (g.in_order) {  // compacted apart, then added as one vector loop
    thread_local std::vector<float> first_pieces;
    if (first_pieces.size() < static_cast<size_t>(units)) first_pieces.resize(static_cast<size_t>(units));
    compact_first_pieces(a, n, g, first_pieces.data());
    const float* from = first_pieces.data();
#pragma omp simd
    for (int u = 0; u < units; ++u) unit_row[u] += from[u];
  } else {
    const int32_t* first = g.first_token.data();
    for (int u = 0; u < units; ++u) {
      const int32_t t = first[u];
      if (t < 0 || t >= n) {  // (out of order maps only) a unit with no piece before n
        if (!add) unit_row[u] = 0.0f;
        continue;
      }
      unit_row[u] = add ? unit_row[u] + a[t] : a[t];
    }
  }
  for (const auto& [t, u] : g.later) {
    if (t >= n) break;
    unit_row[u] += a[t];
  }
}

void finish_unit_row(float* unit_row, int units, int pieces) {
  if (pieces <= 1) return;  // attention FROM a unit: the mean over its pieces (rows)
  for (int v = 0; v < units; ++v) unit_row[v] /= static_cast<float>(pieces);
}

namespace {

// One head's [T, T] into `out` [U, U] (zeros), given the map's gather and each unit's piece count,
// which every head of a capture shares.
void merge_into(const float* attention, int T, const WordMap& map, const UnitGather& gather,
                const std::vector<int>& pieces, float* out) {
  const int U = map.n_units;
  for (int t = 0; t < T; ++t) {
    const int32_t u = map.unit_of_token[static_cast<size_t>(t)];
    if (u >= 0)
      gather_token_row(attention + static_cast<int64_t>(t) * T, T, gather, out + static_cast<int64_t>(u) * U,
                       /*add=*/t != gather.first_token[static_cast<size_t>(u)]);
  }
  for (int u = 0; u < U; ++u) finish_unit_row(out + static_cast<int64_t>(u) * U, U, pieces[static_cast<size_t>(u)]);
}

void check_map_covers(const WordMap& map, int64_t T) {
  if (static_cast<int64_t>(map.unit_of_token.size()) != T)
    throw Error("word merge: the word map covers " + std::to_string(map.unit_of_token.size()) +
                " tokens but the attention is [" + std::to_string(T) + ", " + std::to_string(T) + "]");
}

std::vector<int> unit_pieces(const WordMap& map) {
  std::vector<int> pieces(static_cast<size_t>(map.n_units), 0);
  for (const int32_t u : map.unit_of_token)
    if (u >= 0) ++pieces[static_cast<size_t>(u)];
  return pieces;
}

}  // namespace

std::vector<float> merge_attention(const float* attention, int T, const WordMap& map) {
  check_map_covers(map, T);
  std::vector<float> out(static_cast<size_t>(map.n_units) * map.n_units, 0.0f);
  merge_into(attention, T, map, unit_gather(map), unit_pieces(map), out.data());
  return out;
}

Tensor merge_attention(const Tensor& attention, const WordMap& map) {
  attention.expect_shape({-1, -1, -1, -1}, "attention for word merging");
  const int64_t L = attention.dim(0), H = attention.dim(1), T = attention.dim(2);
  attention.expect_shape({L, H, T, T}, "attention for word merging");
  check_map_covers(map, T);
  const int64_t U = map.n_units;
  Tensor out({L, H, U, U});
  const UnitGather gather = unit_gather(map);
  const std::vector<int> pieces = unit_pieces(map);
  for (int64_t lh = 0; lh < L * H; ++lh)
    merge_into(attention.ptr() + lh * T * T, static_cast<int>(T), map, gather, pieces, out.ptr() + lh * U * U);
  return out;
}

SequenceInfo describe_units(const SequenceInfo& tokens, const WordMap& map) {
  if (static_cast<int>(map.unit_of_token.size()) != tokens.T()) {
    throw Error("word merge: the word map covers " + std::to_string(map.unit_of_token.size()) +
                " tokens but the sequence has " + std::to_string(tokens.T()));
  }
  const auto U = static_cast<size_t>(map.n_units);
  SequenceInfo units;
  units.causal = tokens.causal;
  units.kinds.assign(U, TokenKind::kPunct);
  std::vector<int> pieces(U, 0);
  std::vector<int32_t> id(U, -1);
  std::vector<uint8_t> attendable(U, 0);
  for (size_t t = 0; t < map.unit_of_token.size(); ++t) {
    const int32_t u = map.unit_of_token[t];
    if (u < 0) continue;
    const auto ui = static_cast<size_t>(u);
    const TokenKind k = tokens.kinds[t];
    if (k == TokenKind::kSpecial) {
      units.kinds[ui] = TokenKind::kSpecial;
    } else if (k == TokenKind::kContent && units.kinds[ui] != TokenKind::kSpecial) {
      units.kinds[ui] = TokenKind::kContent;  // one non-punctuation piece makes the word content
    }
    if (++pieces[ui] == 1 && !tokens.ids.empty()) id[ui] = tokens.ids[t];
    if (tokens.attendable.empty() || tokens.attendable[t]) attendable[ui] = 1;
  }
  if (!tokens.ids.empty()) {
    units.ids.resize(U);
    for (size_t u = 0; u < U; ++u) units.ids[u] = pieces[u] == 1 ? id[u] : -1;
  }
  if (!tokens.attendable.empty()) units.attendable = std::move(attendable);
  return units;
}

}  // namespace headscope::analysis
