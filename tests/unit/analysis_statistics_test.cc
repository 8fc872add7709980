// Per-head statistics on hand-built attention matrices; every expected value is worked out by hand
// in the comments next to it (formulas: docs/metrics.md).
#include "analysis/statistics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "headscope/error.h"
#include "headscope/json.h"

namespace headscope::analysis {
namespace {

constexpr double kTol = 1e-6;
using K = TokenKind;

// [CLS] a , [SEP]: a bidirectional 4-token sequence, tokens 1 and 2 share an id.
SequenceInfo four_tokens() {
  SequenceInfo s;
  s.kinds = {K::kSpecial, K::kContent, K::kPunct, K::kSpecial};
  s.ids = {101, 7, 7, 102};
  return s;
}

// Rows: q0 on itself; q1 half on [CLS], half on ","; q2 uniform; q3 half on q1, half on q2.
const std::vector<float> kFour = {
    1.00f, 0.00f, 0.00f, 0.00f,  //
    0.50f, 0.00f, 0.50f, 0.00f,  //
    0.25f, 0.25f, 0.25f, 0.25f,  //
    0.00f, 0.50f, 0.50f, 0.00f,  //
};

// The catalogue names every field of HeadStats's JSON once, in the writer's set of keys, and its
// words quote the constants the formulas read.
TEST(StatisticsCatalogue, NamesEveryFieldOnceWithItsConstants) {
  HeadStats stats;
  stats.sparsity = 0.25;
  stats.n_queries = 7;
  const nlohmann::json j = stats;
  std::vector<std::string> keys, written;
  for (const StatInfo& s : statistics_catalogue()) {
    keys.emplace_back(s.key);
    EXPECT_FALSE(s.label.empty()) << s.key;
    EXPECT_FALSE(s.help.empty()) << s.key;
    EXPECT_EQ(s.kind == StatKind::kMean, s.mean != nullptr) << s.key;
    EXPECT_EQ(s.kind == StatKind::kCount, s.count != nullptr) << s.key;
    for (const StatConstant& c : s.constants) {
      const auto all = statistic_constants();
      EXPECT_TRUE(std::any_of(all.begin(), all.end(), [&](const StatConstant& k) { return k.name == c.name; }))
          << c.name;
    }
  }
  for (const auto& [key, value] : j.items()) written.push_back(key);
  EXPECT_EQ(keys.size(), 26u);
  std::vector<std::string> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
  EXPECT_EQ(sorted, written);  // nlohmann's objects keep their keys sorted
  EXPECT_EQ(j["sparsity"], 0.25);
  EXPECT_EQ(j["n_queries"], 7);

  const nlohmann::json catalogue = statistics_catalogue_json();
  ASSERT_EQ(catalogue.size(), 26u);
  EXPECT_EQ(catalogue[0]["key"], "n_queries");
  const auto find = [&](const char* key) {
    for (const auto& e : catalogue)
      if (e["key"] == key) return e;
    return nlohmann::json();
  };
  EXPECT_EQ(find("sparsity")["constants"], (nlohmann::json{{"sparsity_fraction", kSparsityFraction}}));
  EXPECT_NE(find("sparsity")["help"].get<std::string>().find("under 0.1 / n"), std::string::npos);
  EXPECT_EQ(find("keys_90")["label"], "Keys for 90 %");
  EXPECT_EQ(find("local_mass")["constants"].dump(), R"({"local_window":3})");
  EXPECT_EQ(find("offset_mass")["kind"], "offsets");
  EXPECT_EQ(statistic_constants_json().dump(),
            R"({"cover_mass":0.9,"local_window":3,"max_offset":8,"sparsity_fraction":0.1})");
}

TEST(AnalysisStatistics, LessonStatisticsOnFourTokens) {
  const HeadStats s = compute_head_stats(kFour.data(), 4, four_tokens());
  EXPECT_EQ(s.n_queries, 4);
  // Entropy per row: 0, 1, 2, 1 bits → mean 1. Normalised by log2(4) = 2: 0, .5, 1, .5 → .5.
  EXPECT_NEAR(s.entropy_bits, 1.0, kTol);
  EXPECT_NEAR(s.entropy_norm, 0.5, kTol);
  // Negligible below 0.1/4 = 0.025: 3, 2, 0, 2 of 4 weights → (.75 + .5 + 0 + .5) / 4.
  EXPECT_NEAR(s.sparsity, 0.4375, kTol);
  // Keys for 90 %: 1, 2, 4, 2 → 2.25; as a share of 4 keys: .25, .5, 1, .5 → .5625.
  EXPECT_NEAR(s.keys_90, 2.25, kTol);
  EXPECT_NEAR(s.keys_90_share, 0.5625, kTol);
  // Row maxima 1, .5, .25, .5; Σa² per row the same here: 1, .5, .25, .5.
  EXPECT_NEAR(s.max_attention, 0.5625, kTol);
  EXPECT_NEAR(s.avg_attention, 0.5625, kTol);
  // Σ min(a, 1/4): .25, .5, 1, .5 → .5625.
  EXPECT_NEAR(s.uniform_overlap, 0.5625, kTol);
}

TEST(AnalysisStatistics, PositionAndKindMassesOnFourTokens) {
  const HeadStats s = compute_head_stats(kFour.data(), 4, four_tokens());
  // |k - q| weighted: 0; .5·1 + .5·1 = 1; .25·(2+1+0+1) = 1; .5·2 + .5·1 = 1.5 → 3.5 / 4.
  EXPECT_NEAR(s.mean_distance, 0.875, kTol);
  // (k - q) weighted: 0; 0; .25·(-2-1+0+1) = -.5; .5·(-2) + .5·(-1) = -1.5 → -2 / 4.
  EXPECT_NEAR(s.mean_offset, -0.5, kTol);
  EXPECT_NEAR(s.self_mass, (1.0 + 0.0 + 0.25 + 0.0) / 4, kTol);
  EXPECT_NEAR(s.prev_mass, (0.5 + 0.25 + 0.5) / 3, kTol);  // queries 1..3 have a previous key
  EXPECT_NEAR(s.next_mass, (0.0 + 0.5 + 0.25) / 3, kTol);  // queries 0..2 have a next key
  EXPECT_NEAR(s.local_mass, (0.0 + 1.0 + 0.75 + 1.0) / 4, kTol);
  EXPECT_NEAR(s.offset(-2), (0.25 + 0.5) / 2, kTol);  // queries 2, 3
  EXPECT_NEAR(s.offset(+2), 0.0, kTol);               // queries 0, 1
  EXPECT_NEAR(s.offset(-3), 0.0, kTol);               // query 3 only
  EXPECT_TRUE(std::isnan(s.offset(4)));               // no query has a key 4 away
  EXPECT_NEAR(s.first_mass, (1.0 + 0.5 + 0.25 + 0.0) / 4, kTol);
  EXPECT_NEAR(s.special_mass, (1.0 + 0.5 + 0.5 + 0.0) / 4, kTol);
  EXPECT_NEAR(s.end_special_mass, 0.25 / 4, kTol);  // only q2 looks at [SEP]
  EXPECT_NEAR(s.sink_mass, s.special_mass, kTol);   // the first token is special here
  EXPECT_NEAR(s.punct_mass, (0.0 + 0.5 + 0.25 + 0.5) / 4, kTol);
  EXPECT_NEAR(s.content_mass, (0.0 + 0.0 + 0.25 + 0.5) / 4, kTol);  // key 1, not for query 1 itself
  // Ids 7 at positions 1 and 2: q1 gives .5 to key 2, q2 gives .25 to key 1.
  EXPECT_EQ(s.n_duplicate_queries, 2);
  EXPECT_NEAR(s.duplicate_mass, 0.375, kTol);
}

TEST(AnalysisStatistics, SinkMassUnderNormWeighting) {
  // Value norms 2, 1, 1, .5; the sink set is [CLS] (0) and [SEP] (3). Weighted rows and sink shares:
  //   q0 [2, 0, 0, 0] → 1; q1 [1, 0, .5, 0] → 1/1.5 = 2/3; q2 [.5, .25, .25, .125] → .625/1.125 = 5/9;
  //   q3 [0, .5, .5, 0] → 0. Mean (9/9 + 6/9 + 5/9 + 0) / 4 = 5/9 (unweighted: (1 + .5 + .5 + 0) / 4).
  const std::vector<float> norms = {2.0f, 1.0f, 1.0f, 0.5f};
  HeadStatsAccumulator acc;
  acc.set_value_norms(norms.data());
  acc.add(kFour.data(), 4, four_tokens());
  const HeadStats s = acc.result();
  EXPECT_NEAR(s.sink_mass, 0.5, kTol);
  EXPECT_NEAR(s.sink_mass_norm, 5.0 / 9.0, kTol);
  // The same rows through the masked path (a padding mask that keeps every key) agree.
  SequenceInfo masked = four_tokens();
  masked.attendable = {1, 1, 1, 1};
  HeadStatsAccumulator acc_masked;
  acc_masked.set_value_norms(norms.data());
  acc_masked.add(kFour.data(), 4, masked);
  EXPECT_NEAR(acc_masked.result().sink_mass_norm, 5.0 / 9.0, kTol);
  // Without norms there is no norm-weighted share.
  EXPECT_TRUE(std::isnan(compute_head_stats(kFour.data(), 4, four_tokens()).sink_mass_norm));
}

TEST(AnalysisStatistics, AverageAttentionDiffersFromMaxWhenTheRowIsUneven) {
  SequenceInfo seq;
  seq.kinds = {K::kContent, K::kContent, K::kContent, K::kContent};
  const std::vector<float> a = {0.5f, 0.25f, 0.25f, 0.0f,  //
                                0.5f, 0.25f, 0.25f, 0.0f,  //
                                0.5f, 0.25f, 0.25f, 0.0f,  //
                                0.5f, 0.25f, 0.25f, 0.0f};
  const HeadStats s = compute_head_stats(a.data(), 4, seq);
  EXPECT_NEAR(s.max_attention, 0.5, kTol);
  EXPECT_NEAR(s.avg_attention, 0.25 + 0.0625 + 0.0625, kTol);  // Σa²
  EXPECT_NEAR(s.entropy_bits, 1.5, kTol);                      // .5·1 + 2·(.25·2)
  EXPECT_NEAR(s.keys_90, 3.0, kTol);                           // .5 + .25 < .9
  EXPECT_NEAR(s.sparsity, 0.25, kTol);                         // one zero of four
  EXPECT_TRUE(std::isnan(s.duplicate_mass));                   // no ids given
  EXPECT_NEAR(s.sink_mass, 0.5, kTol);                         // no specials: the first token is the sink
}

TEST(AnalysisStatistics, CausalMaskExcludesFutureKeys) {
  SequenceInfo seq;
  seq.kinds = {K::kContent, K::kContent, K::kContent};
  seq.causal = true;
  // Future cells hold 9: they must be ignored, not read.
  const std::vector<float> a = {1.0f, 9.0f,  9.0f,  //
                                0.5f, 0.5f,  9.0f,  //
                                0.5f, 0.25f, 0.25f};
  const HeadStats s = compute_head_stats(a.data(), 3, seq);
  EXPECT_EQ(s.n_queries, 3);
  EXPECT_NEAR(s.entropy_bits, (0.0 + 1.0 + 1.5) / 3, kTol);
  // q0 has one key and is left out of the normalised mean: (1/1 + 1.5/log2 3) / 2.
  EXPECT_NEAR(s.entropy_norm, (1.0 + 1.5 / std::log2(3.0)) / 2, kTol);
  EXPECT_NEAR(s.max_attention, 2.0 / 3, kTol);
  EXPECT_NEAR(s.prev_mass, (0.5 + 0.25) / 2, kTol);
  EXPECT_TRUE(std::isnan(s.next_mass));
  EXPECT_NEAR(s.keys_90, (1 + 2 + 3) / 3.0, kTol);
  EXPECT_NEAR(s.keys_90_share, 1.0, kTol);
  EXPECT_NEAR(s.sparsity, 0.0, kTol);
  // Σ min(a, 1/n): 1; 1; 1/3 + .25 + .25.
  EXPECT_NEAR(s.uniform_overlap, (2.0 + 1.0 / 3 + 0.5) / 3, kTol);
  EXPECT_NEAR(s.mean_offset, (0.0 - 0.5 + (-1.0 - 0.25)) / 3, kTol);
}

TEST(AnalysisStatistics, PaddingKeysAreNotAttendable) {
  SequenceInfo seq;
  seq.kinds = {K::kContent, K::kContent, K::kContent};
  seq.attendable = {1, 1, 0};
  const std::vector<float> a = {0.5f, 0.5f, 0.0f, 0.5f, 0.5f, 0.0f, 1.0f, 0.0f, 0.0f};
  const HeadStats s = compute_head_stats(a.data(), 3, seq);
  // Two keys per row: rows 0, 1 uniform (1 bit, normalised 1), row 2 one-hot.
  EXPECT_NEAR(s.entropy_norm, 2.0 / 3, kTol);
  EXPECT_NEAR(s.sparsity, 1.0 / 6, kTol);  // the padding key is not counted as a sparse weight
  EXPECT_NEAR(s.next_mass, 0.5, kTol);     // only q0 may attend to its next key
}

TEST(AnalysisStatistics, AccumulatesAcrossSequencesPerQuery) {
  // Two heads: 0 = identity (self), 1 = uniform. Sequences of 2 and 3 tokens.
  ModelStatsAccumulator acc(1, 2);
  for (int T : {2, 3}) {
    SequenceInfo seq;
    seq.kinds.assign(static_cast<size_t>(T), K::kContent);
    Tensor att({1, 2, T, T});
    for (int q = 0; q < T; ++q) {
      for (int k = 0; k < T; ++k) {
        att.data[static_cast<size_t>(q * T + k)] = q == k ? 1.0f : 0.0f;
        att.data[static_cast<size_t>(T * T + q * T + k)] = 1.0f / static_cast<float>(T);
      }
    }
    acc.add(att, seq);
  }
  const auto r = acc.result();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].n_queries, 5);
  EXPECT_NEAR(r[0].self_mass, 1.0, kTol);
  EXPECT_NEAR(r[1].entropy_norm, 1.0, kTol);
  // Uniform: entropy 1 bit (T=2, 2 queries) and log2 3 bits (T=3, 3 queries), weighted by query.
  EXPECT_NEAR(r[1].entropy_bits, (2 * 1.0 + 3 * std::log2(3.0)) / 5, 1e-5);
  EXPECT_NEAR(r[1].self_mass, (2 * 0.5 + 3 / 3.0) / 5, kTol);
}

TEST(AnalysisStatistics, RejectsMismatchedShapes) {
  SequenceInfo seq;
  seq.kinds = {K::kContent, K::kContent};
  const std::vector<float> a(9, 1.0f / 3);
  EXPECT_THROW(compute_head_stats(a.data(), 3, seq), Error);
  ModelStatsAccumulator acc(2, 2);
  Tensor wrong({2, 3, 2, 2});
  EXPECT_THROW(acc.add(wrong, seq), Error);
}

TEST(AnalysisStatistics, DescribesTokenKindsFromTheText) {
  // "Hi, “U.S.”" — bytes: H0 i1 ,2 space3 “4-6 U7 .8 S9 .10 ”11-13
  const std::string text = "Hi, \xE2\x80\x9CU.S.\xE2\x80\x9D";
  Encoding enc;
  auto tok = [&](int32_t id, int64_t b, int64_t e, bool special) {
    Token t;
    t.id = id;
    t.begin = b;
    t.end = e;
    t.special = special;
    enc.tokens.push_back(t);
  };
  tok(101, 0, 0, true);
  tok(1, 0, 2, false);    // Hi
  tok(2, 2, 3, false);    // ,
  tok(3, 4, 7, false);    // “
  tok(4, 7, 11, false);   // U.S. (letters make it content)
  tok(5, 11, 14, false);  // ”
  tok(102, 14, 14, true);
  const SequenceInfo s = describe_sequence(enc, text, false);
  const std::vector<K> expect = {K::kSpecial, K::kContent, K::kPunct, K::kPunct, K::kContent, K::kPunct, K::kSpecial};
  EXPECT_EQ(s.kinds, expect);
  EXPECT_EQ(s.ids[4], 4);
  EXPECT_FALSE(s.causal);
}

// The vectorised row statistics (float lanes, blocks of 1,024 keys summed in double) against the
// all-double loop that rows with a padding mask take: the same matrix, once with no mask and once
// with a mask that keeps every key. Rows long enough for several blocks, peaked, flat and tied.
// Value norms too (the norm-weighted sink share). Stated bound: every mean within 1e-5 relative (1e-9 absolute near
// zero); counts exactly equal.
TEST(AnalysisStatistics, FloatLaneRowsEqualTheDoubleLoop) {
  // Bidirectional, causal, and causal under a sliding window of 300 keys (a Mistral-like layer).
  for (const int64_t window : {-1, 0, 300}) {
    const bool causal = window >= 0;
    const int T = 2100;  // rows of up to three blocks
    std::mt19937 rng(window == 300 ? 5 : causal ? 7 : 11);
    std::normal_distribution<float> logit(0.0f, 2.0f);
    std::vector<float> a(static_cast<size_t>(T) * T, 0.0f);
    for (int q = 0; q < T; ++q) {
      const int lo = window > 0 ? std::max(0, q - int(window) + 1) : 0, hi = causal ? q + 1 : T;
      float* row = a.data() + static_cast<int64_t>(q) * T;
      double sum = 0;
      for (int k = lo; k < hi; ++k) row[k] = q % 5 == 2 ? 0.0f : logit(rng) * (q % 3 == 1 ? 5.0f : 1.0f);
      const float top = *std::max_element(row + lo, row + hi);
      for (int k = lo; k < hi; ++k) sum += row[k] = std::exp(row[k] - top);
      for (int k = lo; k < hi; ++k) row[k] = static_cast<float>(row[k] / sum);
    }
    SequenceInfo fast;
    fast.causal = causal;
    fast.window = std::max<int64_t>(window, 0);
    for (int t = 0; t < T; ++t) {
      fast.kinds.push_back(t == 0 ? K::kSpecial : t % 9 == 4 ? K::kPunct : K::kContent);
      fast.ids.push_back(t % 37);
    }
    SequenceInfo slow = fast;
    slow.attendable.assign(static_cast<size_t>(T), 1);  // the masked path, every key kept
    std::vector<float> norms(static_cast<size_t>(T));
    std::uniform_real_distribution<float> norm(0.1f, 20.0f);
    for (float& v : norms) v = norm(rng);
    const auto stats = [&](const SequenceInfo& seq) {  // with value norms: the norm-weighted sink share too
      HeadStatsAccumulator acc;
      acc.set_value_norms(norms.data());
      acc.add(a.data(), T, seq);
      return nlohmann::json(acc.result());
    };
    const nlohmann::json f = stats(fast), s = stats(slow);
    ASSERT_FALSE(std::isnan(s.at("sink_mass_norm").get<double>()));
    EXPECT_EQ(s.at("n_sink_queries").get<int64_t>(), window > 0 ? window : T);
    if (window > 0) {  // an independent number: the uniform share 1/n of each row is what n says
      double uniform = 0;
      for (int q = 0; q < T; ++q) uniform += 1.0 / double(std::min<int64_t>(q + 1, window));
      HeadStatsAccumulator acc;
      std::vector<float> flat(a.size(), 0.0f);  // uniform rows over each query's window
      for (int q = 0; q < T; ++q)
        for (int k = std::max(0, q - int(window) + 1); k <= q; ++k)
          flat[size_t(q) * T + k] = 1.0f / float(std::min(q + 1, int(window)));
      acc.add(flat.data(), T, fast);
      EXPECT_NEAR(acc.result().avg_attention, uniform / T, 1e-6);
      // Uniform over the visible keys, within the float lanes' 1e-5 (the sanitized build, compiled
      // with other flags, lands 2.4e-6 above 1).
      EXPECT_NEAR(acc.result().entropy_norm, 1.0, 1e-5);
      EXPECT_NEAR(acc.result().sparsity, 0.0, 1e-12);
    }
    ASSERT_EQ(f.size(), s.size());
    for (const auto& [key, want] : s.items()) {
      SCOPED_TRACE(key + (causal ? " causal, window " + std::to_string(window) : " bidirectional"));
      const nlohmann::json& got = f.at(key);
      if (want.is_number_integer()) {
        EXPECT_EQ(got, want);
      } else if (want.is_number()) {
        const double w = want.get<double>();
        EXPECT_NEAR(got.get<double>(), w, std::max(1e-5 * std::abs(w), 1e-9));
      } else if (want.is_array()) {
        for (size_t i = 0; i < want.size(); ++i)
          if (want[i].is_number()) {
            const double w = want[i].get<double>();
            EXPECT_NEAR(got[i].get<double>(), w, std::max(1e-5 * std::abs(w), 1e-9)) << "slot " << i;
          }
      }
    }
  }
}

}  // namespace
}  // namespace headscope::analysis
