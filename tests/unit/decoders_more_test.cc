// Phi-3 and OLMo 2 against transformers (tests/reference/golden_phi_olmo.py): tiny random-weight
// models from safetensors and from GGUF. Phi-3: fused QKV and gate/up, half the head dimensions
// rotated, a sliding window of 5; OLMo 2: output norms with no pre-norm, QK-norm over the whole
// projections. Also what each family refuses by name.
#include <gtest/gtest.h>

#include "golden_util.h"
#include "test_support.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "headscope/model.h"
#include "models/families.h"

namespace {

namespace fs = std::filesystem;
using headscope::Capture;
using headscope::Model;
using headscope::Tensor;
using headscope::testing::max_abs;
using headscope::testing::max_abs_diff;
using headscope::testing::read_f32;

fs::path goldens() { return headscope::testing::goldens_dir("decoders"); }

// Every golden prompt of `name` through `model` (loaded from `file`): attention within 1e-5, hidden
// states and every row's logits within 1e-4 of the reference's largest magnitude; the greedy
// continuation through the KV cache; the tokenizer (folder only).
void check(const std::string& name, const std::string& file, bool check_tokenizer) {
  const fs::path dir = goldens() / name / "golden";
  std::ifstream in(dir / "manifest.json");
  ASSERT_TRUE(in) << "missing " << dir / "manifest.json"
                  << "; run `make goldens`";
  const nlohmann::json manifest = nlohmann::json::parse(in);
  const auto model = Model::load((goldens() / file).string());
  ASSERT_EQ(model->config().architecture, name);
  for (size_t p = 0; p < manifest.at("prompts").size(); ++p) {
    const nlohmann::json& j = manifest["prompts"][p];
    const std::string tag = "p" + std::to_string(p) + "_";
    const auto ids = j.at("ids").get<std::vector<int32_t>>();
    const Tensor attention = read_f32(dir, j["tensors"][tag + "attention"]);
    const Tensor hidden = read_f32(dir, j["tensors"][tag + "hidden_states"]);
    const Tensor logits = read_f32(dir, j["tensors"][tag + "logits"]);
    if (check_tokenizer) {
      EXPECT_EQ(model->encode(j.at("text").get<std::string>()).ids(), ids) << name;
    }
    headscope::CaptureOptions options;
    options.logits = true;
    headscope::Encoding e;
    for (int32_t id : ids) e.tokens.push_back({id, "", 0, 0, false, -1});
    const Capture cap = model->run(e, options);
    ASSERT_EQ(cap.attention.shape, attention.shape) << name;
    ASSERT_EQ(cap.hidden_states.shape, hidden.shape) << name;
    ASSERT_EQ(cap.logits.shape, logits.shape) << name;
    const float da = max_abs_diff(cap.attention.ptr(), attention.ptr(), attention.numel());
    const float dh = max_abs_diff(cap.hidden_states.ptr(), hidden.ptr(), hidden.numel());
    const float dl = max_abs_diff(cap.logits.ptr(), logits.ptr(), logits.numel());
    std::printf(
        "[ decoder ] %-12s prompt %zu  T=%-3zu max|Δ| attention %.2e  hidden %.2e (max|h| %.3g)  logits %.2e (max "
        "%.3g)\n",
        file.c_str(), p, ids.size(), da, dh, max_abs(hidden), dl, max_abs(logits));
    EXPECT_LE(da, 1e-5f) << file;
    EXPECT_LE(dh, 1e-4f * max_abs(hidden)) << file;
    EXPECT_LE(dl, 1e-4f * max_abs(logits)) << file;
    // Greedy decoding through the KV cache picks what transformers' generate() picks.
    const auto expected = j.at("greedy").get<std::vector<int32_t>>();
    auto state = model->start();
    std::vector<float> next;
    model->extend(*state, ids, {}, &next);
    std::vector<int32_t> got;
    while (got.size() < expected.size()) {
      got.push_back(static_cast<int32_t>(std::max_element(next.begin(), next.end()) - next.begin()));
      model->extend(*state, {got.back()}, {}, &next);
    }
    EXPECT_EQ(got, expected) << file;
    // The KV cache: the prompt fed as a first half and then token by token gives the full run's
    // attention rows (past the window of 5, through the partially rotated keys).
    auto steps = model->start();
    const int64_t T = static_cast<int64_t>(ids.size()), L = cap.n_layer, H = cap.n_head, first = T / 2;
    model->extend(*steps, std::vector<int32_t>(ids.begin(), ids.begin() + first), {}, nullptr);
    float worst = 0.0f;
    for (int64_t t = first; t < T; ++t) {
      const Capture step = model->extend(*steps, {ids[size_t(t)]}, {}, nullptr);
      ASSERT_EQ(step.attention.shape, (std::vector<int64_t>{L, H, 1, t + 1}));
      for (int64_t l = 0; l < L; ++l)
        for (int64_t h = 0; h < H; ++h)
          worst = std::max(worst, max_abs_diff(step.attention.ptr() + (l * H + h) * (t + 1),
                                               cap.attention.ptr() + ((l * H + h) * T + t) * T, t + 1));
    }
    EXPECT_LE(worst, 1e-5f) << file << ": token-by-token attention";
  }
}

TEST(DecodersMore, Phi3FusedProjectionsPartialRotaryWindow) { check("phi3", "phi3", true); }
TEST(DecodersMore, Phi3FromGguf) { check("phi3", "phi3.gguf", false); }
TEST(DecodersMore, Olmo2OutputNormsWholeQkNorm) { check("olmo2", "olmo2", true); }
TEST(DecodersMore, Olmo2FromGguf) { check("olmo2", "olmo2.gguf", false); }

// ---- checkpoints people bring: the bare *Model and a *ForSequenceClassification ----
// golden_phi_olmo.py and golden_gemma.py save each tiny *ForCausalLM's weights again as its bare
// *Model (no "model." prefix, no lm_head) in <name>_bare and as a *ForSequenceClassification
// ("score" head, no lm_head) in <name>_cls. Attention and hidden states must be the *ForCausalLM's
// goldens; logits too when the config ties the head to the embedding (Gemma). Untied (Phi-3, OLMo 2),
// the logits come from the embedding, with one warning saying so.
void check_layout(const std::string& folder, const std::string& golden_model, bool tied) {
  const auto prompts = headscope::testing::read_goldens(goldens() / golden_model);
  ASSERT_FALSE(prompts.empty());
  const auto model = Model::load((goldens() / folder).string());
  ASSERT_EQ(model->warnings().size(), tied ? 0u : 1u) << folder;
  if (!tied) {
    EXPECT_NE(model->warnings()[0].find("no 'lm_head.weight'"), std::string::npos) << model->warnings()[0];
  }
  for (size_t p = 0; p < prompts.size(); ++p) {
    const headscope::testing::GoldenPrompt& g = prompts[p];
    headscope::CaptureOptions options;
    options.logits = tied;
    const Capture cap = model->run(headscope::testing::encoding_of(g.ids), options);
    ASSERT_EQ(cap.attention.shape, g.attention.shape) << folder;
    ASSERT_EQ(cap.hidden_states.shape, g.hidden_states.shape) << folder;
    const float da = max_abs_diff(cap.attention.ptr(), g.attention.ptr(), g.attention.numel());
    const float dh = max_abs_diff(cap.hidden_states.ptr(), g.hidden_states.ptr(), g.hidden_states.numel());
    const float dl = tied ? max_abs_diff(cap.logits.ptr(), g.logits.ptr(), g.logits.numel()) : 0.0f;
    std::printf("[ layout  ] %-18s prompt %zu  max|Δ| attention %.2e  hidden %.2e (max|h| %.3g)  logits %.2e\n",
                folder.c_str(), p, da, dh, max_abs(g.hidden_states), dl);
    EXPECT_LE(da, 1e-5f) << folder;
    EXPECT_LE(dh, 1e-4f * max_abs(g.hidden_states)) << folder;
    if (tied) {
      EXPECT_LE(dl, 1e-4f * max_abs(g.logits)) << folder;
    }
  }
}

TEST(BareDecoders, Qwen3Model) { check_layout("qwen3_bare", "qwen3", false); }
TEST(BareDecoders, Qwen3SequenceClassifierScoreHeadIgnored) { check_layout("qwen3_cls", "qwen3", false); }
TEST(BareDecoders, GemmaModel) { check_layout("gemma_bare", "gemma", true); }
TEST(BareDecoders, Gemma2Model) { check_layout("gemma2_bare", "gemma2", true); }
TEST(BareDecoders, Gemma3TextModel) { check_layout("gemma3_text_bare", "gemma3_text", true); }
TEST(BareDecoders, Gemma3SequenceClassifierScoreHeadIgnored) { check_layout("gemma3_text_cls", "gemma3_text", true); }
TEST(BareDecoders, Phi3Model) { check_layout("phi3_bare", "phi3", false); }
TEST(BareDecoders, Phi3SequenceClassifierScoreHeadIgnored) { check_layout("phi3_cls", "phi3", false); }
TEST(BareDecoders, Olmo2Model) { check_layout("olmo2_bare", "olmo2", false); }
TEST(BareDecoders, Olmo2SequenceClassifierScoreHeadIgnored) { check_layout("olmo2_cls", "olmo2", false); }

TEST(DecodersMore, Phi3ConfigShape) {
  const auto model = Model::load((goldens() / "phi3").string());
  EXPECT_EQ(model->config().d_head, 16);
  EXPECT_EQ(model->config().n_kv_head, 2);
  EXPECT_TRUE(model->final_readout().attention_gain.empty());  // plain pre-norm blocks
  // OLMo 2 normalises each block's output before adding it: the readout carries those norms.
  EXPECT_EQ(Model::load((goldens() / "olmo2").string())->final_readout().attention_gain.size(), size_t{2});
}

// Loads a folder holding only `config` (the refusal must come before any weight is read).
std::string load_error(const std::string& config) {
  headscope::testing::TempDir dir("headscope_phi_olmo");
  std::ofstream(dir.file("config.json")) << config;
  try {
    Model::load(dir.path().string());
  } catch (const headscope::Error& e) {
    return e.what();
  }
  return "loaded";
}

constexpr const char* kSizes = R"("num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64,
    "intermediate_size": 96, "vocab_size": 320, "max_position_embeddings": 256)";

TEST(DecodersMore, Phi3RefusesLongRopeByName) {
  const std::string base = std::string(R"({"model_type": "phi3", )") + kSizes;
  for (const char* type : {"longrope", "su", "yarn"}) {
    const std::string e = load_error(base + R"(, "rope_scaling": {"type": ")" + type +
                                     R"(", "short_factor": [1, 1, 1, 1], "long_factor": [2, 2, 2, 2]}})");
    EXPECT_NE(e.find(std::string("\"") + type + "\""), std::string::npos) << e;
    EXPECT_NE(e.find("LongRoPE"), std::string::npos) << e;
  }
  const std::string linear = load_error(base + R"(, "rope_parameters": {"rope_type": "linear", "factor": 2.0}})");
  EXPECT_NE(linear.find("\"linear\" is not supported"), std::string::npos) << linear;
  // 16 · 0.1 = 1.6 → 1 rotated dimension: odd, refused (RoPE turns pairs).
  const std::string odd = load_error(base + R"(, "partial_rotary_factor": 0.1})");
  EXPECT_NE(odd.find("partial_rotary_factor"), std::string::npos) << odd;
  for (const char* bad :
       {"0.0", "-0.5", "1.5", "1e300"}) {  // outside (0, 1]; 1e300 must not reach an integer conversion
    const std::string e = load_error(base + R"(, "partial_rotary_factor": )" + bad + "}");
    EXPECT_NE(e.find("partial_rotary_factor"), std::string::npos) << bad << ": " << e;
  }
}

// The pure config readers: the rotated width is int(d_head · factor), with rope_parameters' factor
// taking precedence over the top-level one (transformers' setdefault); one window for every layer.
TEST(DecodersMore, Phi3ConfigReadsPartialRotaryAndWindow) {
  nlohmann::json c = nlohmann::json::parse(std::string("{") + kSizes + "}");
  c["model_type"] = "phi3";
  c["partial_rotary_factor"] = 0.5;
  c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.75}};
  c["sliding_window"] = 7;
  const headscope::models::DecoderHyper hp = headscope::models::phi3_config(c, "config.json");
  EXPECT_EQ(hp.cfg.d_head, 16);
  EXPECT_EQ(hp.rope.d_rot, 12);  // 16 · 0.75
  EXPECT_EQ(hp.window, (std::vector<int64_t>{7, 7}));
  EXPECT_FLOAT_EQ(hp.cfg.norm_eps, 1e-5f);  // Phi3Config's default when the file has none
  c.erase("rope_parameters");
  EXPECT_EQ(headscope::models::phi3_config(c, "config.json").rope.d_rot, 8);  // the top-level 0.5
  nlohmann::json o = nlohmann::json::parse(std::string("{") + kSizes + "}");
  o["model_type"] = "olmo2";
  const headscope::models::DecoderHyper olmo = headscope::models::olmo2_config(o, "config.json");
  EXPECT_EQ(olmo.rope.d_rot, 16);
  EXPECT_EQ(olmo.window, (std::vector<int64_t>{0, 0}));
}

TEST(DecodersMore, Olmo2RefusesAttentionBias) {
  const std::string e =
      load_error(std::string(R"({"model_type": "olmo2", )") + kSizes + R"(, "attention_bias": true})");
  EXPECT_NE(e.find("attention_bias"), std::string::npos) << e;
}

// A Phi-3 GGUF carrying LongRoPE factors (llama.cpp's rope_factors_long / _short tensors) is refused
// by name before anything else is read.
TEST(DecodersMore, Phi3GgufRefusesLongRopeFactors) {
  const auto u32 = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
  const auto u64 = [](uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
  const auto str = [&](const std::string& s) { return u64(s.size()) + s; };
  // GGUF v3: one string key (general.architecture = phi3), one F32 tensor of 4 values.
  std::string file = "GGUF" + u32(3) + u64(1) + u64(1) + str("general.architecture") + u32(8) + str("phi3") +
                     str("rope_factors_long.weight") + u32(1) + u64(4) + u32(0) + u64(0);
  file.resize((file.size() + 31) / 32 * 32, '\0');
  file += std::string(16, '\0');
  headscope::testing::TempDir dir("headscope_phi3_gguf");
  std::ofstream(dir.file("longrope.gguf"), std::ios::binary) << file;
  try {
    Model::load(dir.file("longrope.gguf"));
    ADD_FAILURE() << "a LongRoPE Phi-3 GGUF loaded";
  } catch (const headscope::Error& e) {
    EXPECT_NE(std::string(e.what()).find("rope_factors_long.weight"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("LongRoPE"), std::string::npos) << e.what();
  }
}

}  // namespace
