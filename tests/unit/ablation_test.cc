// Head ablation: the --heads parser, Ablation::apply on a hand-built concatenation, and on real
// models that an empty ablation is the plain run bit for bit, that a pass resumed from an
// ablated layer equals the whole ablated pass, that under GQA the heads sharing the ablated
// head's keys and values keep their outputs, and that the KV cache holds the ablated run's keys
// and values. Transformers as the oracle: tests/reference/test_ablate.py.
#include <gtest/gtest.h>

#include "test_support.h"

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "headscope/model.h"
#include "headscope/pipeline.h"

namespace headscope {
namespace {

ModelConfig six_by_twelve() {
  ModelConfig c;
  c.name = "test-model";
  c.n_layer = 6;
  c.n_head = 12;
  return c;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape != b.shape) return false;
  return a.numel() == 0 || std::memcmp(a.ptr(), b.ptr(), sizeof(float) * size_t(a.numel())) == 0;  // empty: no pointer
}

TEST(ParseHeads, ReadsLayerDotHeadLists) {
  const auto heads = parse_heads("3.1,2.8,0.0,5.11", six_by_twelve());
  EXPECT_EQ(heads, (std::vector<HeadRef>{{3, 1}, {2, 8}, {0, 0}, {5, 11}}));
}

TEST(ParseHeads, RefusesAnythingElseNamingTheItem) {
  const ModelConfig c = six_by_twelve();
  for (const char* bad : {"", "3", "3.", ".1", "a.1", "-1.2", "+1.2", " 1.2", "1.2 ", "1.2.3", "1.1,,2.2", "1.1,"})
    testing::expect_error([&] { parse_heads(bad, c); }, {"head list"});
  testing::expect_error([&] { parse_heads("6.0", c); }, {"6.0", "layers 0..5"});
  testing::expect_error([&] { parse_heads("1.12", c); }, {"1.12", "heads 0..11"});
  testing::expect_error([&] { parse_heads("1.1,2.2,1.1", c); }, {"1.1", "twice"});
  testing::expect_error([&] { parse_heads(std::string(70000, '1'), c); }, {"head list", "characters"});
  testing::expect_error([&] { parse_ablation_mode("ones"); }, {"ones", "zero, mean or resample"});
}

// concat [T = 3, 2 heads · d_head 2]; head 1 of layer 0 is ablated, head 0 is left alone.
TEST(Ablation, ReplacesOnlyTheListedHeadsSlice) {
  const std::vector<float> plain = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  Ablation a;
  a.heads = {{0, 1}, {1, 0}};  // layer 1's head must not touch layer 0
  std::vector<float> x = plain;
  a.apply(0, 0, 3, 2, 2, x.data());
  EXPECT_EQ(x, (std::vector<float>{1, 2, 0, 0, 5, 6, 0, 0, 9, 10, 0, 0}));

  Tensor mean({2, 2, 2});  // [n_layer, n_head, d_head]
  mean.data = {0, 0, -1, -2, 0, 0, 0, 0};
  a.mode = Ablation::Mode::kMean;
  a.mean = &mean;
  x = plain;
  a.apply(0, 0, 3, 2, 2, x.data());
  EXPECT_EQ(x, (std::vector<float>{1, 2, -1, -2, 5, 6, -1, -2, 9, 10, -1, -2}));

  // Resample from a donor of 2 positions: position 0 and 1 are the donor's own, position 2 (past
  // its end) one of them, drawn from the seed; a later call for position 2 alone (a KV-cache step)
  // draws the same.
  Tensor donor({2, 2, 2, 2});  // [n_layer, n_head, T_donor, d_head]
  for (int64_t i = 0; i < donor.numel(); ++i) donor.data[size_t(i)] = 100.0f + float(i);
  a.mode = Ablation::Mode::kResample;
  a.donor = &donor;
  a.seed = 7;
  x = plain;
  a.apply(0, 0, 3, 2, 2, x.data());
  const int64_t p = a.donor_position(2);
  ASSERT_TRUE(p == 0 || p == 1);
  const float* d = donor.ptr() + 1 * 2 * 2;  // layer 0, head 1: [2, 2]
  EXPECT_EQ(x, (std::vector<float>{1, 2, d[0], d[1], 5, 6, d[2], d[3], 9, 10, d[2 * p], d[2 * p + 1]}));
  std::vector<float> row(plain.begin() + 8, plain.end());
  a.apply(0, 2, 1, 2, 2, row.data());
  EXPECT_EQ(row, std::vector<float>(x.begin() + 8, x.end()));
}

CaptureOptions stream_only(bool logits) {
  CaptureOptions o;
  o.attention = o.head_outputs = o.contributions = false;
  o.logits = logits;
  return o;
}

// On one model: nothing ablated = plain; resumed = whole pass, bit for bit; the ablation changes
// the output (so the comparisons can fail).
void check_resume(const Model& model, const Encoding& enc, const std::vector<HeadRef>& heads) {
  const bool causal = model.config().causal;
  const Capture plain = model.run(enc);
  Ablation none;
  CaptureOptions with_none;
  with_none.ablation = &none;
  const Capture also_plain = model.run(enc, with_none);
  EXPECT_TRUE(same_bits(plain.hidden_states, also_plain.hidden_states));
  EXPECT_TRUE(same_bits(plain.attention, also_plain.attention));
  EXPECT_TRUE(same_bits(plain.contributions, also_plain.contributions));

  Ablation ablation;
  ablation.heads = heads;
  CaptureOptions o = stream_only(causal);
  o.ablation = &ablation;
  const Capture whole = model.run(enc, o);
  const Capture resumed = model.resume(enc, heads.front().layer, plain.hidden_states, o);
  EXPECT_TRUE(same_bits(whole.hidden_states, resumed.hidden_states));
  EXPECT_TRUE(same_bits(whole.logits, resumed.logits));
  EXPECT_FALSE(same_bits(whole.hidden_states, plain.hidden_states)) << "the ablation changed nothing";
  testing::expect_error([&] { model.resume(enc, heads.front().layer, plain.hidden_states, {}); }, {"resume"});
  testing::expect_error([&] { model.resume(enc, model.config().n_layer, plain.hidden_states, o); }, {"no layer"});
}

TEST(Ablation, BertResumedPassEqualsTheWholePass) {
  const Model& model = testing::default_model();
  check_resume(model, model.encode("The keys to the cabinet are on the table."), {{2, 5}, {4, 1}});
}

TEST(Ablation, DecoderGqaResumeKeepsGroupAndFillsTheCache) {
  const auto model = Model::load((testing::goldens_dir("decoders") / "llama_gqa3").string());
  ASSERT_EQ(model->config().n_head, 6);
  ASSERT_EQ(model->config().n_kv_head, 2);  // heads 0, 1, 2 read key/value head 0
  const Encoding enc = model->encode("The quick brown fox jumps over the lazy dog.");
  check_resume(*model, enc, {{0, 1}, {1, 4}});

  // GQA: ablating query head 1 leaves heads 0 and 2 (same key/value head) of that layer intact.
  Ablation ablation;
  ablation.heads = {{0, 1}};
  CaptureOptions o;
  o.ablation = &ablation;
  const Capture plain = model->run(enc), ablated = model->run(enc, o);
  const int64_t T = enc.size(), Dh = model->config().d_head;
  for (int h : {0, 2})
    EXPECT_EQ(0, std::memcmp(plain.head_outputs.ptr() + h * T * Dh, ablated.head_outputs.ptr() + h * T * Dh,
                             sizeof(float) * size_t(T * Dh)));
  for (int64_t i = 0; i < T * Dh; ++i) ASSERT_EQ(ablated.head_outputs.ptr()[T * Dh + i], 0.0f);

  // KV cache: the prompt and then the last token as a second step see the ablated keys and values
  // of layer 1, so the last row equals the whole ablated run's (to GEMM rounding).
  std::vector<int32_t> ids = enc.ids(), last = {ids.back()};
  ids.pop_back();
  auto state = model->start();
  model->extend(*state, ids, o, nullptr);
  const Capture step = model->extend(*state, last, o, nullptr);
  const int64_t D = model->config().d_model, L = model->config().n_layer;
  float worst = 0, moved = 0;
  for (int64_t i = 0; i < D; ++i) {
    const float whole = ablated.hidden_states.ptr()[(L * T + T - 1) * D + i];
    worst = std::max(worst, std::abs(step.hidden_states.ptr()[L * D + i] - whole));
    moved = std::max(moved, std::abs(plain.hidden_states.ptr()[(L * T + T - 1) * D + i] - whole));
  }
  EXPECT_LE(worst, 1e-5f);
  EXPECT_GT(moved, 1e-3f) << "the ablation did not change the last row";
}

// The atlas's importance (make_atlas → atlas.json) is the Ablator's: its first N treebank sentences,
// each head zero-ablated alone, the same mean over the texts. A treebank of three sentences, the
// atlas told to use two of them; the oracle is the Ablator run directly on those two texts.
TEST(AtlasImportance, EqualsTheAblatorOnTheFirstTreebankSentences) {
  const std::string model_dir = testing::env_or_fail("HEADSCOPE_MODEL");
  ASSERT_FALSE(model_dir.empty());
  const std::filesystem::path tb = std::filesystem::temp_directory_path() / "headscope_atlas_importance.conllu";
  const auto word = [](int id, const char* form, int head, const char* rel) {
    return std::to_string(id) + "\t" + form + "\t_\t_\t_\t_\t" + std::to_string(head) + "\t" + rel + "\t_\t_\n";
  };
  testing::write_raw(tb.string(), "# text = The dog barked.\n" + word(1, "The", 2, "det") + word(2, "dog", 3, "nsubj") +
                                      word(3, "barked", 0, "root") + word(4, ".", 3, "punct") + "\n" +
                                      "# text = Cats sleep.\n" + word(1, "Cats", 2, "nsubj") +
                                      word(2, "sleep", 0, "root") + word(3, ".", 2, "punct") + "\n" +
                                      "# text = Birds sing.\n" + word(1, "Birds", 2, "nsubj") +
                                      word(2, "sing", 0, "root") + word(3, ".", 2, "punct") + "\n");
  analysis::AtlasOptions o;
  o.report_treebank = tb.string();
  o.probe_count = 1;
  o.probe_length = 8;
  o.min_support = 1;
  o.importance_texts = 2;
  const AtlasFiles files = make_atlas(model_dir, "", o, "test", "test.png");
  const nlohmann::json atlas = nlohmann::json::parse(files.json);
  ASSERT_TRUE(atlas.contains("importance"));
  EXPECT_EQ(atlas["importance"]["texts"].get<int>(), 2);
  EXPECT_NE(files.markdown.find("## Importance (zero ablation)"), std::string::npos);
  EXPECT_NE(files.markdown.find("| sink (norm) |"), std::string::npos);  // the norm-weighted sink share is reported

  const Model& model = testing::default_model();
  const Ablator direct(model, {model.encode("The dog barked ."), model.encode("Cats sleep .")}, AblateOptions{});
  const int H = model.config().n_head;
  for (const HeadRef head : {HeadRef{0, 0}, HeadRef{3, 7}, HeadRef{5, 5}}) {
    const nlohmann::json& h = atlas["heads"][size_t(head.layer * H + head.head)];
    ASSERT_EQ(h["layer"].get<int>(), head.layer);
    ASSERT_EQ(h["head"].get<int>(), head.head);
    const double want = direct.ablate({head}).effect;
    EXPECT_GT(want, 0.0);
    EXPECT_NEAR(h["importance"]["ablation"].get<double>(), want, 1e-9 * want) << head.layer << "." << head.head;
  }
  // Off: no importance anywhere.
  o.importance_texts = 0;
  const AtlasFiles off = make_atlas(model_dir, "", o, "test", "test.png");
  EXPECT_FALSE(nlohmann::json::parse(off.json).contains("importance"));
  EXPECT_EQ(off.markdown.find("## Importance"), std::string::npos);
  std::filesystem::remove(tb);
}

}  // namespace
}  // namespace headscope
