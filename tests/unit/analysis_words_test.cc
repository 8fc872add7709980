// Token → word merging on a hand-built matrix: TO a word = sum over pieces, FROM = mean.
#include "analysis/words.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <random>

#include "headscope/error.h"

namespace headscope::analysis {
namespace {

// [CLS] play ##ing ball [SEP] for the text "playing ball".
Encoding playing_ball() {
  Encoding enc;
  auto tok = [&](int32_t id, const char* text, int64_t b, int64_t e, bool special, int32_t word) {
    Token t;
    t.id = id;
    t.text = text;
    t.begin = b;
    t.end = e;
    t.special = special;
    t.word = word;
    enc.tokens.push_back(t);
  };
  tok(101, "[CLS]", 0, 0, true, -1);
  tok(2377, "play", 0, 4, false, 0);
  tok(2075, "##ing", 4, 7, false, 0);
  tok(3608, "ball", 8, 12, false, 1);
  tok(102, "[SEP]", 12, 12, true, -1);
  return enc;
}

const std::vector<float> kAttention = {
    0.20f, 0.20f, 0.20f, 0.20f, 0.20f,  // [CLS]
    0.10f, 0.30f, 0.20f, 0.40f, 0.00f,  // play
    0.00f, 0.50f, 0.10f, 0.20f, 0.20f,  // ##ing
    0.25f, 0.25f, 0.25f, 0.25f, 0.00f,  // ball
    0.00f, 0.00f, 0.00f, 0.00f, 1.00f,  // [SEP]
};

void expect_units(const WordMap& m) {
  EXPECT_EQ(m.n_units, 4);
  EXPECT_EQ(m.unit_of_token, (std::vector<int32_t>{0, 1, 1, 2, 3}));
  EXPECT_EQ(m.word_of_unit, (std::vector<int32_t>{-1, 0, 1, -1}));
  EXPECT_EQ(m.unit_of_word, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(m.first_token, (std::vector<int32_t>{0, 1, 3, 4}));
}

TEST(AnalysisWords, UnitsFromTheTokenizerWords) { expect_units(words_from_encoding(playing_ball())); }

// A SentencePiece vocabulary without a pre-tokenizer (Gemma) gives the whole text as tokenizer word
// 0: its pieces' word-start mark ▁ splits it, "didn't" staying one word as SentencePiece writes it.
TEST(AnalysisWords, SentencePieceMarksSplitOneTokenizerWord) {
  Encoding enc;
  const char* pieces[] = {"The",
                          "\xE2\x96\x81"
                          "trophy",
                          "\xE2\x96\x81"
                          "didn",
                          "'",
                          "t",
                          "\xE2\x96\x81"
                          "fit"};
  Token bos;
  bos.text = "<bos>", bos.special = true, bos.word = -1;
  enc.tokens.push_back(bos);
  for (const char* p : pieces) {
    Token t;
    t.text = p, t.word = 0;
    enc.tokens.push_back(t);
  }
  const WordMap m = words_from_encoding(enc);
  EXPECT_EQ(m.n_units, 5);
  EXPECT_EQ(m.unit_of_token, (std::vector<int32_t>{0, 1, 2, 3, 3, 3, 4}));
  EXPECT_EQ(m.word_of_unit, (std::vector<int32_t>{-1, 0, 1, 2, 3}));
  EXPECT_EQ(m.unit_of_word, (std::vector<int32_t>{1, 2, 3, 4}));
}

TEST(AnalysisWords, UnitsFromByteSpans) { expect_units(words_from_spans(playing_ball(), {{0, 7}, {8, 12}})); }

TEST(AnalysisWords, ByteLevelTokensWithALeadingSpaceJoinTheirWord) {
  // GPT-2 style: "Hi there" → "Hi" [0, 2), " there" [2, 8) starting on the space.
  Encoding enc;
  Token a, b;
  a.begin = 0, a.end = 2, a.word = 0;
  b.begin = 2, b.end = 8, b.word = 1;
  enc.tokens = {a, b};
  const WordMap m = words_from_spans(enc, {{0, 2}, {3, 8}});
  EXPECT_EQ(m.unit_of_token, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(m.unit_of_word, (std::vector<int32_t>{0, 1}));
}

TEST(AnalysisWords, TokensOutsideEverySpanAreDropped) {
  const WordMap m = words_from_spans(playing_ball(), {{0, 7}});  // "ball" not a gold word
  EXPECT_EQ(m.unit_of_token, (std::vector<int32_t>{0, 1, 1, -1, 2}));
  EXPECT_THROW(words_from_spans(playing_ball(), {{0, 7}, {5, 12}}), Error);  // overlapping spans
}

TEST(AnalysisWords, MergeSumsColumnsAndAveragesRows) {
  const WordMap m = words_from_encoding(playing_ball());
  const std::vector<float> w = merge_attention(kAttention.data(), 5, m);
  ASSERT_EQ(w.size(), 16u);
  // [CLS] row: columns play+##ing summed: .2, .4, .2, .2.
  const std::vector<float> cls = {0.2f, 0.4f, 0.2f, 0.2f};
  // "playing" = mean of play → (.1, .5, .4, 0) and ##ing → (0, .6, .2, .2).
  const std::vector<float> playing = {0.05f, 0.55f, 0.30f, 0.10f};
  const std::vector<float> ball = {0.25f, 0.50f, 0.25f, 0.0f};
  const std::vector<float> sep = {0.0f, 0.0f, 0.0f, 1.0f};
  const std::vector<std::vector<float>> rows = {cls, playing, ball, sep};
  for (int u = 0; u < 4; ++u) {
    float sum = 0;
    for (int v = 0; v < 4; ++v) {
      EXPECT_NEAR(w[static_cast<size_t>(u * 4 + v)], rows[static_cast<size_t>(u)][static_cast<size_t>(v)], 1e-6)
          << u << "," << v;
      sum += w[static_cast<size_t>(u * 4 + v)];
    }
    EXPECT_NEAR(sum, 1.0f, 1e-6);  // still a distribution
  }
}

TEST(AnalysisWords, MergesEveryHeadOfACapture) {
  const WordMap m = words_from_encoding(playing_ball());
  Tensor att({1, 2, 5, 5});
  std::copy(kAttention.begin(), kAttention.end(), att.data.begin());
  std::copy(kAttention.begin(), kAttention.end(), att.data.begin() + 25);
  const Tensor w = merge_attention(att, m);
  EXPECT_EQ(w.shape, (std::vector<int64_t>{1, 2, 4, 4}));
  EXPECT_NEAR(w.data[16 + 5], 0.55f, 1e-6);  // head 1, "playing" → "playing"
  EXPECT_THROW(merge_attention(Tensor({1, 1, 4, 4}), m), Error);
}

// Gathering gives the same floats as the token-by-token loop: maps with words of several pieces,
// dropped tokens, a unit whose pieces are apart, causal rows, several query pieces into one unit
// row, and a map whose units are not numbered in token order (the gather's general path).
TEST(AnalysisWords, UnitGatherGivesExactlyTheTokenLoopsFloats) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> weight(0.0f, 1.0f);
  int in_order = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int T = 1 + int(rng() % 300);
    WordMap map;
    int u = -1;
    for (int t = 0; t < T; ++t) {
      const unsigned pick = rng() % 10;
      if (pick == 0 && t > 0) {
        map.unit_of_token.push_back(-1);  // dropped
      } else if (pick < 4 && u >= 0) {
        map.unit_of_token.push_back(u);  // another piece of the unit before
      } else if (pick == 4 && u >= 2) {
        map.unit_of_token.push_back(u - 2);  // a piece apart from the rest of its unit
      } else {
        map.unit_of_token.push_back(++u);
      }
    }
    map.n_units = u + 1;
    if (map.n_units == 0) continue;
    if (trial % 3 == 2) {  // units numbered out of token order
      std::vector<int32_t> renumber(size_t(map.n_units));
      for (int v = 0; v < map.n_units; ++v) renumber[size_t(v)] = map.n_units - 1 - v;
      for (int32_t& v : map.unit_of_token)
        if (v >= 0) v = renumber[size_t(v)];
    }
    const UnitGather gather = unit_gather(map);
    in_order += gather.in_order;
    EXPECT_EQ(gather.in_order, trial % 3 != 2 || map.n_units == 1);
    for (const int n : {T, 1 + int(rng() % T)}) {
      std::vector<float> slow(size_t(map.n_units), 0.0f), fast(size_t(map.n_units), -7.0f);
      for (int rep = 0; rep < 3; ++rep) {  // several rows into one unit row
        std::vector<float> a(static_cast<size_t>(T));
        for (float& w : a) w = weight(rng);
        add_token_row(a.data(), n, map, slow.data());
        gather_token_row(a.data(), n, gather, fast.data(), /*add=*/rep > 0);
      }
      int written = 0;
      for (int v = 0; v < map.n_units; ++v) {
        const int32_t first =
            int32_t(std::find(map.unit_of_token.begin(), map.unit_of_token.end(), v) - map.unit_of_token.begin());
        if (first >= n && gather.in_order) {
          ASSERT_EQ(fast[size_t(v)], -7.0f) << "unit " << v << " starts after the row's keys: untouched";
          continue;
        }
        ++written;
        ASSERT_EQ(std::bit_cast<uint32_t>(slow[size_t(v)]), std::bit_cast<uint32_t>(fast[size_t(v)])) << "unit " << v;
      }
      EXPECT_EQ(written, gather.units_before[size_t(n)]);
    }
  }
  EXPECT_GT(in_order, 150);
}

TEST(AnalysisWords, DescribesUnits) {
  const WordMap m = words_from_encoding(playing_ball());
  SequenceInfo tokens;
  tokens.kinds = {TokenKind::kSpecial, TokenKind::kContent, TokenKind::kContent, TokenKind::kContent,
                  TokenKind::kSpecial};
  tokens.ids = {101, 2377, 2075, 3608, 102};
  const SequenceInfo units = describe_units(tokens, m);
  EXPECT_EQ(units.kinds, (std::vector<TokenKind>{TokenKind::kSpecial, TokenKind::kContent, TokenKind::kContent,
                                                 TokenKind::kSpecial}));
  EXPECT_EQ(units.ids, (std::vector<int32_t>{101, -1, 3608, 102}));  // two-piece word: no id
}

}  // namespace
}  // namespace headscope::analysis
