// The streamed analysis against the dense one: random attention (softmax rows, bidirectional and
// causal), words of one to three pieces and special tokens, fed in blocks of random sizes. Every
// statistic at both levels, with and without specials, must equal what the dense functions
// (compute_head_stats, merge_attention, drop_special_units) give on the whole matrix; the overview,
// column sums and offset profile are checked against sums written out here.
#include "analysis/stream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "analysis/without_specials.h"
#include "analysis/words.h"
#include "headscope/error.h"
#include "headscope/json.h"

namespace headscope::analysis {
namespace {

struct Text {
  SequenceInfo tokens;
  WordMap words;
};

// [special] words of 1–3 pieces, some punctuation … [special] (T >= 2); ids from a small range so
// that duplicates occur.
Text random_text(int T, bool causal, std::mt19937& rng) {
  Text t;
  t.tokens.causal = causal;
  std::uniform_int_distribution<int> id(0, 9), pieces(1, 3), kind(0, 5);
  int tok = 0;
  const auto add = [&](TokenKind k, int32_t unit) {
    t.tokens.kinds.push_back(k);
    t.tokens.ids.push_back(k == TokenKind::kSpecial ? 100 + tok : id(rng));
    t.words.unit_of_token.push_back(unit);
    ++tok;
  };
  const auto new_unit = [&](int32_t word) {
    t.words.word_of_unit.push_back(word);
    t.words.first_token.push_back(tok);
    return t.words.n_units++;
  };
  add(TokenKind::kSpecial, new_unit(-1));
  int word = 0;
  while (tok < T - 1) {
    const int32_t u = new_unit(word++);
    const TokenKind k = kind(rng) == 0 ? TokenKind::kPunct : TokenKind::kContent;
    for (int p = pieces(rng); p > 0 && tok < T - 1; --p) add(k, u);
  }
  add(TokenKind::kSpecial, new_unit(-1));
  return t;
}

// Softmax rows of random logits, masked keys exactly 0; a few rows sharply peaked and a few with
// ties, as real heads have.
std::vector<float> random_attention(int T, bool causal, std::mt19937& rng) {
  std::normal_distribution<float> logit(0.0f, 2.0f);
  std::vector<float> a(static_cast<size_t>(T) * T, 0.0f);
  for (int q = 0; q < T; ++q) {
    const int n = causal ? q + 1 : T;
    float* row = a.data() + static_cast<int64_t>(q) * T;
    const int style = q % 7;
    float top = -1e30f;
    for (int k = 0; k < n; ++k) {
      row[k] = style == 3 ? 0.0f : style == 5 ? logit(rng) * 6 : logit(rng);
      top = std::max(top, row[k]);
    }
    double sum = 0;
    for (int k = 0; k < n; ++k) sum += row[k] = std::exp(row[k] - top);
    for (int k = 0; k < n; ++k) row[k] = static_cast<float>(row[k] / sum);
  }
  return a;
}

// Feeds `a` in blocks of 1–37 rows, each block `width` keys wide (causal: just the keys it needs).
void stream(HeadStream& head, const std::vector<float>& a, int T, bool causal, std::mt19937& rng) {
  std::uniform_int_distribution<int> block(1, 37);
  std::vector<float> rows;
  for (int q0 = 0; q0 < T;) {
    const int q1 = std::min(T, q0 + block(rng));
    const int width = causal ? q1 : T;
    rows.assign(static_cast<size_t>(q1 - q0) * width, 0.0f);
    for (int q = q0; q < q1; ++q)
      std::copy_n(a.data() + static_cast<int64_t>(q) * T, width, rows.data() + static_cast<int64_t>(q - q0) * width);
    head.add_rows(rows.data(), q0, q1, width);
    q0 = q1;
  }
}

HeadStats dense_stats(const Tensor& attention, const SequenceInfo& units) {
  const int U = units.T();
  return compute_head_stats(attention.ptr(), U, units);
}

nlohmann::json as_json(const HeadStats& s) { return s; }

// A causal head's rows without the sink, densely: position 0 and the specials dropped, every kept
// row renormalised over its kept keys, and the rows of the first two kept positions (one or two
// keys) left out of the statistics.
HeadStats sink_free_stats(const Tensor& attention, const SequenceInfo& units) {
  const int U = units.T();
  const WithoutSpecials kept = special_free_units(units, /*drop_first=*/true);
  const int K = static_cast<int>(kept.kept.size());
  std::vector<float> dense(static_cast<size_t>(K) * K, 0.0f);
  for (int qi = 0; qi < K; ++qi) {
    const int q = kept.kept[static_cast<size_t>(qi)];
    double mass = 0;
    for (int ki = 0; ki < K; ++ki)
      if (units.may_attend(q, kept.kept[static_cast<size_t>(ki)]))
        mass += attention.ptr()[static_cast<int64_t>(q) * U + kept.kept[static_cast<size_t>(ki)]];
    for (int ki = 0; ki < K; ++ki) {
      const int k = kept.kept[static_cast<size_t>(ki)];
      if (units.may_attend(q, k) && mass > 0)
        dense[static_cast<size_t>(qi) * K + ki] =
            static_cast<float>(attention.ptr()[static_cast<int64_t>(q) * U + k] / mass);
    }
  }
  HeadStatsAccumulator acc;
  for (int qi = 2; qi < K; ++qi) acc.add_rows(dense.data() + static_cast<int64_t>(qi) * K, qi, qi + 1, kept.units);
  return acc.result();
}

void run_case(int T, bool causal, uint32_t seed) {
  SCOPED_TRACE("T=" + std::to_string(T) + (causal ? " causal" : " bidirectional") + " seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  Text text = random_text(T, causal, rng);
  const std::vector<float> a = random_attention(T, causal, rng);
  const int cells = 16;
  const StreamPlan plan = make_stream_plan(text.tokens, text.words, /*without_specials=*/true, cells);
  HeadStream head(plan);
  stream(head, a, T, causal, rng);
  ASSERT_TRUE(head.complete());

  // Dense: the functions analyse() used before streaming existed.
  Tensor tokens({1, 1, T, T});
  std::copy(a.begin(), a.end(), tokens.data.begin());
  const Tensor words = merge_attention(tokens, text.words);
  const SequenceInfo word_units = describe_units(text.tokens, text.words);
  const WithoutSpecials token_plain = drop_special_units(tokens, text.tokens);
  const WithoutSpecials word_plain = drop_special_units(words, word_units);

  EXPECT_EQ(as_json(head.token.result()), as_json(dense_stats(tokens, text.tokens)));
  EXPECT_EQ(as_json(head.word.result()), as_json(dense_stats(words, word_units)));
  EXPECT_EQ(as_json(head.token_plain.result()), as_json(dense_stats(token_plain.attention, token_plain.units)));
  EXPECT_EQ(as_json(head.word_plain.result()), as_json(dense_stats(word_plain.attention, word_plain.units)));
  if (causal) {  // the rows roles are read from: without the first position and the specials, from the third kept row
    ASSERT_TRUE(plan.sink_free);
    EXPECT_EQ(as_json(head.token_free.result()), as_json(sink_free_stats(tokens, text.tokens)));
    EXPECT_EQ(as_json(head.word_free.result()), as_json(sink_free_stats(words, word_units)));
    if (T > 4) EXPECT_EQ(head.token_free.result().special_mass, 0.0);  // no special kept
  } else {
    EXPECT_FALSE(plan.sink_free);
  }

  // Overview, column sums, offsets, summed here in double from the dense matrix.
  const int C = std::min(T, cells);
  std::vector<double> sum(static_cast<size_t>(C) * C, 0.0), received(static_cast<size_t>(T), 0.0);
  std::vector<float> max(static_cast<size_t>(C) * C, 0.0f);
  std::vector<double> off_sum(static_cast<size_t>(2 * T - 1), 0.0), off_n(static_cast<size_t>(2 * T - 1), 0.0);
  for (int q = 0; q < T; ++q)
    for (int k = 0; k < T; ++k) {
      const float w = a[static_cast<size_t>(q) * T + k];
      const size_t cell = static_cast<size_t>(q * C / T) * C + static_cast<size_t>(k * C / T);  // cell_of
      sum[cell] += w;
      max[cell] = std::max(max[cell], w);
      received[static_cast<size_t>(k)] += w;
      if (!causal || k <= q) {
        off_sum[static_cast<size_t>(k - q + T - 1)] += w;
        off_n[static_cast<size_t>(k - q + T - 1)] += 1;
      }
    }
  const HeadOverview overview = head.take_overview();
  ASSERT_EQ(overview.cells, C);
  ASSERT_EQ(overview.T, T);
  for (size_t i = 0; i < sum.size(); ++i) {
    EXPECT_NEAR(overview.sum[i], sum[i], 1e-5 * std::max(1.0, sum[i])) << "cell " << i;
    EXPECT_EQ(overview.max[i], max[i]) << "cell " << i;
  }
  // Column sums and offsets are summed in float over the rows of one row of cells (at most
  // T / C + 1 of them), then in double: within (T / C + 1) · 2⁻²⁴ of the value, plus the double sums'
  // own rounding.
  const double float_rows = std::ldexp(T / C + 1, -24);
  for (int k = 0; k < T; ++k)
    EXPECT_NEAR(overview.received[static_cast<size_t>(k)], received[static_cast<size_t>(k)],
                float_rows * received[static_cast<size_t>(k)] + 1e-12);
  const std::vector<double>& profile = overview.offset_mass;
  for (size_t i = 0; i < profile.size(); ++i) {
    if (off_n[i] == 0) {
      EXPECT_TRUE(std::isnan(profile[i])) << "offset " << int(i) - (T - 1);
    } else {
      EXPECT_NEAR(profile[i], off_sum[i] / off_n[i], float_rows * off_sum[i] / off_n[i] + 1e-12)
          << "offset " << int(i) - (T - 1);
    }
  }
}

TEST(AnalysisStream, EqualsDenseBidirectional) {
  for (int T : {2, 3, 17, 64, 200}) run_case(T, false, 7u + static_cast<uint32_t>(T));
}

TEST(AnalysisStream, EqualsDenseCausal) {
  for (int T : {2, 5, 33, 129, 300}) run_case(T, true, 11u + static_cast<uint32_t>(T));
}

TEST(AnalysisStream, RefusesRowsOutOfOrderOrTooNarrow) {
  std::mt19937 rng(3);
  Text text = random_text(10, true, rng);
  const std::vector<float> a = random_attention(10, true, rng);
  const StreamPlan plan = make_stream_plan(text.tokens, text.words, false, 4);
  HeadStream head(plan);
  EXPECT_THROW(head.add_rows(a.data() + 20, 2, 3, 10), Error);  // row 0 comes first
  EXPECT_THROW(head.add_rows(a.data(), 0, 4, 3), Error);        // rows up to 4 need 4 keys
  head.add_rows(a.data(), 0, 10, 10);
  EXPECT_TRUE(head.complete());
  EXPECT_THROW(head.add_rows(a.data(), 10, 11, 10), Error);  // past the end
}

// The plan's count of query–key pairs at each offset (the denominators of offset_mass) against
// counting every pair the mask allows: bidirectional, causal, a sliding window, padding keys.
TEST(AnalysisStream, OffsetCountsAreThePairsTheMaskAllows) {
  std::mt19937 rng(9);
  for (const int T : {2, 7, 40}) {  // random_text makes T >= 2 tokens
    for (const int variant : {0, 1, 2, 3}) {
      Text text = random_text(T, variant != 0, rng);
      if (variant == 2) text.tokens.window = 3;
      if (variant == 3) {
        text.tokens.attendable.assign(static_cast<size_t>(T), 1);
        text.tokens.attendable[static_cast<size_t>(T / 2)] = 0;
      }
      std::vector<int64_t> want(static_cast<size_t>(2 * T - 1), 0);
      for (int q = 0; q < T; ++q)
        for (int k = 0; k < T; ++k)
          if (text.tokens.may_attend(q, k)) ++want[static_cast<size_t>(k - q + T - 1)];
      const StreamPlan plan = make_stream_plan(text.tokens, text.words, false, 4);
      ASSERT_EQ(plan.offset_count.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_EQ(int64_t(plan.offset_count[i]), want[i])
            << "T " << T << " variant " << variant << " offset " << int(i) - (T - 1);
    }
  }
}

// keys_to_cover against the sort it replaces: the largest weights first, summed until 0.9.
int cover_by_sorting(std::vector<float> v, double mass) {
  std::sort(v.begin(), v.end(), std::greater<float>());
  int cover = 0;
  double cum = 0;
  while (cover < static_cast<int>(v.size()) && cum < mass) cum += v[static_cast<size_t>(cover++)];
  return std::max(cover, 1);
}

TEST(AnalysisStream, KeysToCoverEqualsSorting) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> length(1, 3000), tie(0, 3);
  std::exponential_distribution<float> weight(1.0f);
  for (int trial = 0; trial < 400; ++trial) {
    const int n = trial < 40 ? trial + 1 : length(rng);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = tie(rng) == 0 ? 0.25f : trial % 3 == 0 ? std::pow(weight(rng), 6.0f) : weight(rng);
    double total = 0;
    for (float x : v) total += x;
    for (float& x : v) x = static_cast<float>(x / total);
    for (double mass : {0.0, 0.5, 0.9 - 1e-6, 0.999, 2.0}) {
      std::vector<float> work = v;
      EXPECT_EQ(keys_to_cover(work.data(), n, mass), cover_by_sorting(v, mass)) << "n " << n << " mass " << mass;
    }
  }
  std::vector<float> tenths(10, 0.1f);  // ten equal weights: nine cover 0.9 within the tolerance
  EXPECT_EQ(keys_to_cover(tenths.data(), 10, 0.9 - 1e-6), 9);
}

}  // namespace
}  // namespace headscope::analysis
