// headscope — GPT-2 (Radford et al. 2019), as transformers' modeling_gpt2.py: learned absolute
// positions, pre-LayerNorm blocks, fused QKV projection, GELU (tanh form) feed-forward, tied
// output embedding. The forward pass is the shared decoder (decoder.h).
//
// Storage quirks fixed at load time, so the forward pass never sees them: Hugging Face's GPT-2
// keeps its projections as Conv1D, whose weight is (in, out) — the transpose of nn.Linear — so
// c_attn, c_proj, c_fc and mlp.c_proj are transposed here; GGUF files already hold them as
// (out, in). The fused c_attn (Q | K | V along the output axis) is used as it is.
#include <algorithm>
#include <filesystem>

#include "headscope/limits.h"
#include "io/gguf.h"
#include "models/config_values.h"
#include "models/decoder.h"
#include "models/families.h"
#include "models/tensor_table.h"
#include "tokenizer/gguf_vocab.h"

namespace headscope::models {
namespace {

// Every tensor of the family, by role: its Hugging Face name (after the optional "transformer."
// prefix) and its GGUF name (llama.cpp).
enum Role { kLn1W, kLn1B, kQkvW, kQkvB, kProjW, kProjB, kLn2W, kLn2B, kFcW, kFcB, kMlpProjW, kMlpProjB, kRoleCount };
constexpr TensorName kLayerTensors[kRoleCount] = {
    /* kLn1W     */ {"h.%d.ln_1.weight", "blk.%d.attn_norm.weight"},
    /* kLn1B     */ {"h.%d.ln_1.bias", "blk.%d.attn_norm.bias"},
    /* kQkvW     */ {"h.%d.attn.c_attn.weight", "blk.%d.attn_qkv.weight", kConv1d},
    /* kQkvB     */ {"h.%d.attn.c_attn.bias", "blk.%d.attn_qkv.bias"},
    /* kProjW    */ {"h.%d.attn.c_proj.weight", "blk.%d.attn_output.weight", kConv1d},
    /* kProjB    */ {"h.%d.attn.c_proj.bias", "blk.%d.attn_output.bias"},
    /* kLn2W     */ {"h.%d.ln_2.weight", "blk.%d.ffn_norm.weight"},
    /* kLn2B     */ {"h.%d.ln_2.bias", "blk.%d.ffn_norm.bias"},
    /* kFcW      */ {"h.%d.mlp.c_fc.weight", "blk.%d.ffn_up.weight", kConv1d},
    /* kFcB      */ {"h.%d.mlp.c_fc.bias", "blk.%d.ffn_up.bias"},
    /* kMlpProjW */ {"h.%d.mlp.c_proj.weight", "blk.%d.ffn_down.weight", kConv1d},
    /* kMlpProjB */ {"h.%d.mlp.c_proj.bias", "blk.%d.ffn_down.bias"},
};
enum Global { kTokenEmbedding, kPositionEmbedding, kFinalNormW, kFinalNormB, kGlobalCount };
constexpr TensorName kGlobalTensors[kGlobalCount] = {
    /* kTokenEmbedding    */ {"wte.weight", "token_embd.weight"},     // [vocab, d_model]
    /* kPositionEmbedding */ {"wpe.weight", "position_embd.weight"},  // [n_positions, d_model]
    /* kFinalNormW        */ {"ln_f.weight", "output_norm.weight"},   // [d_model]
    /* kFinalNormB        */ {"ln_f.bias", "output_norm.bias"},       // [d_model]
};
// The output head, outside the body (never prefixed); absent when tied to the token embedding.
constexpr TensorName kLmHead = {"lm_head.weight", "output.weight", kOptional};

std::unique_ptr<Model> build(ModelConfig m, bool scale_by_layer, const TensorReader& in,
                             std::unique_ptr<Tokenizer> tokenizer) {
  const int64_t D = m.d_model, F = m.d_ff, V = m.vocab_size, P = m.max_positions;
  const TensorReader top(in.source(), in.gguf());  // no prefix: for the output head
  DecoderWeights w;
  w.token_embedding = in.matrix(kGlobalTensors[kTokenEmbedding], {V, D});
  w.position_embedding = in.get(kGlobalTensors[kPositionEmbedding], {P, D});
  w.final_norm = in.get(kGlobalTensors[kFinalNormW], {D});
  w.final_norm_bias = in.get(kGlobalTensors[kFinalNormB], {D});
  w.lm_head = top.matrix(kLmHead, {V, D});  // empty: tied
  in.expect_layers(m.n_layer, {kLayerTensors[kLn1W], kLayerTensors[kQkvW], kLayerTensors[kMlpProjB]});
  w.layers.reserve(size_t(m.n_layer));
  for (int l = 0; l < m.n_layer; ++l) {
    DecoderLayerWeights b;
    const auto get = [&](Role r, std::vector<int64_t> shape) { return in.get(kLayerTensors[r], l, shape); };
    const auto mat = [&](Role r, std::vector<int64_t> shape) { return in.matrix(kLayerTensors[r], l, shape); };
    b.attn_norm = get(kLn1W, {D});
    b.attn_norm_bias = get(kLn1B, {D});
    b.w_qkv = mat(kQkvW, {3 * D, D});  // rows: Q | K | V
    b.b_qkv = get(kQkvB, {3 * D});
    b.w_o = mat(kProjW, {D, D});
    b.b_o = get(kProjB, {D});
    b.ffn_norm = get(kLn2W, {D});
    b.ffn_norm_bias = get(kLn2B, {D});
    b.w_up = mat(kFcW, {F, D});
    b.b_up = get(kFcB, {F});
    b.w_down = mat(kMlpProjW, {D, F});
    b.b_down = get(kMlpProjB, {D});
    w.layers.push_back(std::move(b));
  }
  DecoderArch arch;
  arch.norm = DecoderArch::Norm::kLayer;
  arch.mlp = DecoderArch::Mlp::kGeluTanh;
  arch.rope = false;
  arch.scale_by_inverse_layer = scale_by_layer;
  return std::make_unique<DecoderModel>(std::move(m), arch, std::move(w), std::move(tokenizer));
}

}  // namespace

DecoderHyper gpt2_config(const nlohmann::json& c, const std::string& where) {
  using limits::kMaxLayers, limits::kMaxHeads, limits::kMaxModelWidth, limits::kMaxFeedForward, limits::kMaxVocabulary,
      limits::kMaxPositions;
  DecoderHyper hp;
  ModelConfig& m = hp.cfg;
  m.architecture = "gpt2";
  m.n_layer = int(json_int(c, "n_layer", where, 1, kMaxLayers));
  m.n_head = int(json_int(c, "n_head", where, 1, kMaxHeads));
  m.n_kv_head = m.n_head;
  m.d_model = int(json_int(c, "n_embd", where, 1, kMaxModelWidth));
  m.d_ff = int(
      json_int(c, "n_inner", where, 1, kMaxFeedForward, std::min<int64_t>(4 * int64_t(m.d_model), kMaxFeedForward)));
  m.vocab_size = int(json_int(c, "vocab_size", where, 1, kMaxVocabulary));
  m.max_positions = int(json_int(c, "n_positions", where, 1, kMaxPositions));
  m.norm_eps = norm_epsilon(json_number(c, "layer_norm_epsilon", where, 1e-5), where + ": \"layer_norm_epsilon\"");
  // An integer, or a list whose first entry is taken (as the Llama family); absent or null: none.
  nlohmann::json eos = c.contains("eos_token_id") && c["eos_token_id"].is_array() && !c["eos_token_id"].empty()
                           ? nlohmann::json{{"eos_token_id", c["eos_token_id"][0]}}
                           : c;
  m.eos_token_id = int32_t(json_int(eos, "eos_token_id", where, 0, kMaxVocabulary, -1));
  m.causal = true;
  if (m.d_model % m.n_head != 0)
    throw Error(where + ": n_embd " + std::to_string(m.d_model) + " is not a multiple of n_head " +
                std::to_string(m.n_head));
  m.d_head = m.d_model / m.n_head;
  const std::string act = json_string(c, "activation_function", where, "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh") {
    throw Error(where + ": activation_function \"" + act + "\" is not supported (gelu_new is)");
  }
  if (!json_bool(c, "scale_attn_weights", where, true))
    throw Error(where + ": scale_attn_weights = false is not supported");
  hp.scale_by_inverse_layer = json_bool(c, "scale_attn_by_inverse_layer_idx", where, false);
  check_model_shape(m, where);
  return hp;
}

DecoderHyper gpt2_config(const io::GgufFile& f) {
  using limits::kMaxLayers, limits::kMaxHeads, limits::kMaxModelWidth, limits::kMaxFeedForward, limits::kMaxVocabulary,
      limits::kMaxPositions;
  DecoderHyper hp;
  ModelConfig& m = hp.cfg;
  m.architecture = "gpt2";
  m.n_layer = int(gguf_int(f, "gpt2.block_count", 1, kMaxLayers));
  m.n_head = int(gguf_int(f, "gpt2.attention.head_count", 1, kMaxHeads));
  m.n_kv_head = m.n_head;
  m.d_model = int(gguf_int(f, "gpt2.embedding_length", 1, kMaxModelWidth));
  m.d_ff = int(gguf_int(f, "gpt2.feed_forward_length", 1, kMaxFeedForward));
  m.max_positions = int(gguf_int(f, "gpt2.context_length", 1, kMaxPositions));
  m.norm_eps = norm_epsilon(gguf_number(f, "gpt2.attention.layer_norm_epsilon", 1e-5),
                            f.path() + ": metadata 'gpt2.attention.layer_norm_epsilon'");
  const int64_t n_tokens = f.has("tokenizer.ggml.tokens") ? int64_t(f.value("tokenizer.ggml.tokens").count) : 0;
  m.vocab_size = int(gguf_int(f, "gpt2.vocab_size", 1, kMaxVocabulary, std::min(n_tokens, kMaxVocabulary + 1)));
  m.eos_token_id = int32_t(gguf_int(f, "tokenizer.ggml.eos_token_id", 0, kMaxVocabulary, -1));
  m.causal = true;
  if (m.d_model % m.n_head != 0)
    throw Error(f.path() + ": embedding_length " + std::to_string(m.d_model) + " is not a multiple of head_count " +
                std::to_string(m.n_head));
  m.d_head = m.d_model / m.n_head;
  check_model_shape(m, f.path());
  return hp;
}

std::unique_ptr<Model> load_gpt2(const std::string& dir, const nlohmann::json& c, WeightCheck& check) {
  DecoderHyper hp = gpt2_config(c, dir + "/config.json");
  hp.cfg.name = std::filesystem::path(dir).filename().string();
  auto tokenizer = Tokenizer::from_model_dir(dir);
  auto src = safetensors_source(dir, check);
  // Checkpoints saved from GPT2LMHeadModel prefix the body with "transformer.", GPT2Model's do not.
  const std::string prefix = src->has("transformer.wte.weight") ? "transformer." : "";
  return build(std::move(hp.cfg), hp.scale_by_inverse_layer, TensorReader(*src, false, prefix), std::move(tokenizer));
}

std::unique_ptr<Model> load_gpt2_gguf(std::shared_ptr<const io::GgufFile> f, const std::string& display_name,
                                      WeightCheck& check) {
  DecoderHyper hp = gpt2_config(*f);
  hp.cfg.name = display_name;
  auto tokenizer = tokenizer::tokenizer_from_gguf(*f);
  auto src = gguf_source(f, check);
  return build(std::move(hp.cfg), false, TensorReader(*src, true), std::move(tokenizer));
}

}  // namespace headscope::models
