// Encoder families and checkpoints in every layout their classes save, against transformers
// (tests/reference/golden_encoders.py): tiny random-weight RoBERTa, XLM-RoBERTa and DistilBERT
// (learned and sinusoidal positions), BERT bare / masked-LM / classifier, and decoders saved bare
// (LlamaModel, MistralModel, Qwen2Model, GPT2Model) or with a classifier head
// (LlamaForSequenceClassification). Each is run on token ids; attention and hidden states must be
// transformers' own. And the refusals of model types and options that headscope does not run.
#include <gtest/gtest.h>

#include "test_support.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "golden_util.h"
#include "headscope/model.h"

namespace {

namespace fs = std::filesystem;
using headscope::Capture;
using headscope::Encoding;
using headscope::Model;
using headscope::Tensor;
using headscope::testing::expect_error;
using headscope::testing::read_f32;
using headscope::testing::TempDir;
using headscope::testing::write_raw;

fs::path goldens() { return headscope::testing::goldens_dir("encoders"); }

Encoding encoding_of(const std::vector<int32_t>& ids) {
  Encoding e;
  for (int32_t id : ids) e.tokens.push_back({id, "", 0, 0, false, -1});
  return e;
}

float max_abs_diff(const float* a, const float* b, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// Loads goldens()/name and runs every golden prompt: attention within 1e-5, hidden states within
// 1e-4 of the reference's largest |value|. Returns the model for further checks.
std::unique_ptr<Model> check_against_transformers(const std::string& name, bool causal) {
  const fs::path dir = goldens() / name;
  std::ifstream in(dir / "golden" / "manifest.json");
  if (!in) {
    ADD_FAILURE() << "missing " << dir / "golden" / "manifest.json"
                  << "; run `make goldens`";
    return nullptr;
  }
  const nlohmann::json manifest = nlohmann::json::parse(in);
  auto model = Model::load(dir.string());
  EXPECT_EQ(model->config().causal, causal) << name;
  for (size_t p = 0; p < manifest.at("prompts").size(); ++p) {
    const nlohmann::json& j = manifest["prompts"][p];
    const std::string tag = "p" + std::to_string(p) + "_";
    const Tensor attention = read_f32(dir / "golden", j["tensors"][tag + "attention"]);
    const Tensor hidden = read_f32(dir / "golden", j["tensors"][tag + "hidden_states"]);
    const Capture cap = model->run(encoding_of(j.at("ids").get<std::vector<int32_t>>()), {});
    EXPECT_EQ(cap.attention.shape, attention.shape) << name;
    EXPECT_EQ(cap.hidden_states.shape, hidden.shape) << name;
    if (cap.attention.shape != attention.shape || cap.hidden_states.shape != hidden.shape) continue;
    const float da = max_abs_diff(cap.attention.ptr(), attention.ptr(), attention.numel());
    const float dh = max_abs_diff(cap.hidden_states.ptr(), hidden.ptr(), hidden.numel());
    float h_max = 0.0f;
    for (float v : hidden.data) h_max = std::max(h_max, std::abs(v));
    std::printf("[ checkpoint ] %-22s prompt %zu  T=%-3lld max|Δ| attention %.2e  hidden %.2e (relative %.2e)\n",
                name.c_str(), p, static_cast<long long>(attention.dim(2)), da, dh, dh / h_max);
    EXPECT_LE(da, 1e-5f) << name << " prompt " << p;
    EXPECT_LE(dh, 1e-4f * h_max) << name << " prompt " << p;
  }
  return model;
}

// ---- encoders ----

TEST(Encoders, RobertaMaskedLmPositionsFromPaddingIndex) {
  // Prompt 1 holds the padding id 1 in the middle: those tokens take position padding_idx and do
  // not advance the others, as in transformers' create_position_ids_from_input_ids.
  const auto model = check_against_transformers("roberta_mlm", false);
  ASSERT_TRUE(model);
  EXPECT_EQ(model->config().architecture, "roberta");
  EXPECT_EQ(model->config().max_positions, 40 - 2);  // max_position_embeddings − padding_idx − 1
  EXPECT_TRUE(model->warnings().empty());
}
TEST(Encoders, RobertaClassifierHeadIgnored) { check_against_transformers("roberta_cls", false); }
TEST(Encoders, XlmRobertaBare) {
  const auto model = check_against_transformers("xlm_roberta", false);
  ASSERT_TRUE(model);
  EXPECT_EQ(model->config().architecture, "xlm-roberta");
}
TEST(Encoders, DistilBertMaskedLm) {
  const auto model = check_against_transformers("distilbert_mlm", false);
  ASSERT_TRUE(model);
  EXPECT_EQ(model->config().architecture, "distilbert");
}
TEST(Encoders, DistilBertSinusoidalPositionsBare) { check_against_transformers("distilbert_sinusoidal", false); }
TEST(Encoders, BertBare) { check_against_transformers("bert_bare", false); }
TEST(Encoders, BertMaskedLm) { check_against_transformers("bert_mlm", false); }
TEST(Encoders, BertClassifierHeadIgnored) { check_against_transformers("bert_cls", false); }

// The text's limit is the position table's usable rows: RoBERTa refuses the 39th token.
TEST(Encoders, RobertaRefusesTextsBeyondItsPositions) {
  const auto model = Model::load((goldens() / "roberta_mlm").string());
  model->run(encoding_of(std::vector<int32_t>(38, 5)), {});
  expect_error([&] { model->run(encoding_of(std::vector<int32_t>(39, 5)), {}); }, {"39 tokens", "at most 38"});
}

// ---- decoders saved bare or with another head ----

TEST(BareCheckpoints, LlamaModelWithoutPrefixOrHead) {
  const auto model = check_against_transformers("llama_bare", true);
  ASSERT_TRUE(model);
  ASSERT_EQ(model->warnings().size(), 1u);
  EXPECT_NE(model->warnings()[0].find("no 'lm_head.weight'"), std::string::npos) << model->warnings()[0];
}
TEST(BareCheckpoints, MistralModel) { check_against_transformers("mistral_bare", true); }
TEST(BareCheckpoints, Qwen2Model) { check_against_transformers("qwen2_bare", true); }
TEST(BareCheckpoints, Gpt2Model) { check_against_transformers("gpt2_bare", true); }
TEST(BareCheckpoints, LlamaSequenceClassifierScoreHeadIgnored) {
  const auto model = check_against_transformers("llama_cls", true);
  ASSERT_TRUE(model);
  EXPECT_EQ(model->warnings().size(), 1u);
}

// A *ForCausalLM checkpoint that lost its lm_head is still refused as incomplete.
TEST(BareCheckpoints, CausalLmWithoutItsHeadIsRefused) {
  TempDir dir;
  const fs::path src = goldens() / "llama_bare";
  for (const char* f : {"model.safetensors", "tokenizer.json"}) fs::copy_file(src / f, dir.path() / f);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(src / "config.json"));
  config["architectures"] = {"LlamaForCausalLM"};
  write_raw(dir.file("config.json"), config.dump());
  expect_error([&] { Model::load(dir.path().string()); }, {"no lm_head.weight", "tie_word_embeddings is false"});
}

// ---- refusals, each naming what it refuses ----

void expect_load_error(const nlohmann::json& config, const std::vector<std::string>& parts) {
  TempDir dir;
  write_raw(dir.file("config.json"), config.dump());
  std::vector<std::string> want = parts;
  want.push_back(dir.file("config.json"));
  expect_error([&] { Model::load(dir.path().string()); }, want);
}

constexpr const char* kSupported =
    "supported: bert, roberta, xlm-roberta, distilbert, llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, "
    "gemma3, phi3, olmo2, gpt2";

TEST(Refusals, UnknownModelTypeListsTheDispatchTable) {
  expect_load_error({{"model_type", "t5"}}, {"model_type \"t5\" is not supported", kSupported});
  expect_load_error({{"hidden_size", 8}}, {"model_type \"\" is not supported", kSupported});
}

TEST(Refusals, ModernBertByName) {
  expect_load_error({{"model_type", "modernbert"}},
                    {"model_type \"modernbert\" is not supported (ModernBERT", "GeGLU", kSupported});
}

TEST(Refusals, MixtureOfExpertsKeysWhateverTheFamily) {
  const nlohmann::json llama = {{"model_type", "mistral"}, {"num_local_experts", 8}, {"hidden_size", 64}};
  expect_load_error(llama, {"\"num_local_experts\" is 8", "mixture of experts"});
  expect_load_error({{"model_type", "qwen2"}, {"num_experts", 60}}, {"\"num_experts\" is 60", "mixture of experts"});
  expect_load_error({{"model_type", "llama"}, {"n_routed_experts", 64}},
                    {"\"n_routed_experts\"", "mixture of experts"});
  expect_load_error({{"model_type", "bert"}, {"alibi", true}}, {"\"alibi\" is true", "ALiBi"});
}

}  // namespace
