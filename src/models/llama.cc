// headscope — the Llama family (Touvron et al. 2023): Llama 2/3, Mistral, Qwen2, Qwen3, SmolLM.
// Pre-RMSNorm blocks, rotary positions, grouped-query attention, SwiGLU feed-forward
// (transformers' modeling_llama.py; Qwen2 adds Q/K/V biases, Mistral a sliding window, Qwen3
// QK-norm: an RMSNorm over d_head of each head's q and k before RoPE).
// The forward pass is the shared decoder (decoder.h); this file reads hyper-parameters and
// tensors, from a Hugging Face folder or a GGUF file, through one tensor-name table.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "headscope/limits.h"
#include "io/gguf.h"
#include "models/config_values.h"
#include "models/decoder.h"
#include "models/families.h"
#include "models/llama_like.h"
#include "models/tensor_table.h"
#include "tensor/tensor_ops.h"
#include "tokenizer/gguf_vocab.h"

namespace headscope::models {
namespace {

// Every layer tensor of the family, by role: its Hugging Face name (after the "model." prefix that
// *ForCausalLM and other task-head checkpoints add, or bare: llama_like.h) and its GGUF name
// (llama.cpp). The embedding, final norm and output head are read by read_llama_like_globals.
enum Role {
  kAttnNorm,
  kQ,
  kK,
  kV,
  kQBias,
  kKBias,
  kVBias,
  kO,
  kOBias,
  kFfnNorm,
  kGate,
  kUp,
  kDown,
  kQNorm,
  kKNorm,
  kRoleCount
};
constexpr TensorName kLayerTensors[kRoleCount] = {
    /* kAttnNorm */ {"layers.%d.input_layernorm.weight", "blk.%d.attn_norm.weight"},
    /* kQ        */ {"layers.%d.self_attn.q_proj.weight", "blk.%d.attn_q.weight"},
    /* kK        */ {"layers.%d.self_attn.k_proj.weight", "blk.%d.attn_k.weight"},
    /* kV        */ {"layers.%d.self_attn.v_proj.weight", "blk.%d.attn_v.weight"},
    /* kQBias    */ {"layers.%d.self_attn.q_proj.bias", "blk.%d.attn_q.bias", kOptional},  // Qwen2
    /* kKBias    */ {"layers.%d.self_attn.k_proj.bias", "blk.%d.attn_k.bias", kOptional},
    /* kVBias    */ {"layers.%d.self_attn.v_proj.bias", "blk.%d.attn_v.bias", kOptional},
    /* kO        */ {"layers.%d.self_attn.o_proj.weight", "blk.%d.attn_output.weight"},
    /* kOBias    */ {"layers.%d.self_attn.o_proj.bias", "blk.%d.attn_output.bias", kOptional},
    /* kFfnNorm  */ {"layers.%d.post_attention_layernorm.weight", "blk.%d.ffn_norm.weight"},
    /* kGate     */ {"layers.%d.mlp.gate_proj.weight", "blk.%d.ffn_gate.weight"},
    /* kUp       */ {"layers.%d.mlp.up_proj.weight", "blk.%d.ffn_up.weight"},
    /* kDown     */ {"layers.%d.mlp.down_proj.weight", "blk.%d.ffn_down.weight"},
    /* kQNorm    */ {"layers.%d.self_attn.q_norm.weight", "blk.%d.attn_q_norm.weight"},  // Qwen3
    /* kKNorm    */ {"layers.%d.self_attn.k_norm.weight", "blk.%d.attn_k_norm.weight"},  // Qwen3
};

bool has_qk_norm(const std::string& architecture) { return architecture == "qwen3"; }

// Sliding-window sizes and window-layer counts: at most the longest position limit we accept.
constexpr int64_t kMaxWindow = limits::kMaxPositions;

}  // namespace

DecoderHyper llama_config(const nlohmann::json& c, const std::string& where, double default_rms_norm_eps) {
  using limits::kMaxLayers, limits::kMaxPositions;
  DecoderHyper hp = llama_like_config(c, where, {.model_type = "llama", .rms_norm_eps = default_rms_norm_eps});
  ModelConfig& m = hp.cfg;
  const std::string act = json_string(c, "hidden_act", where, "silu");
  if (act != "silu")
    throw Error(where + ": hidden_act \"" + act + "\" is not supported (the Llama family uses \"silu\")");
  if (json_bool(c, "mlp_bias", where, false)) throw Error(where + ": mlp_bias = true is not supported");

  // RoPE: transformers 5 writes "rope_parameters"; older files "rope_theta" and "rope_scaling".
  hp.rope.d_rot = m.d_head;
  hp.rope.layout = ops::RopeLayout::kHalfSplit;  // HF checkpoints use rotate_half
  const char* rope_key = c.contains("rope_parameters") && !c["rope_parameters"].is_null() ? "rope_parameters"
                         : c.contains("rope_scaling") && !c["rope_scaling"].is_null()     ? "rope_scaling"
                                                                                          : nullptr;
  if (rope_key != nullptr && !c[rope_key].is_object())
    throw Error(where + ": \"" + rope_key + "\" is " + c[rope_key].type_name() + ", expected an object");
  const nlohmann::json rp = rope_key != nullptr ? c[rope_key] : nlohmann::json::object();
  const std::string rp_where = where + (rope_key != nullptr ? std::string(" ") + rope_key : std::string());
  hp.rope.base = rope_base(json_number(rp, "rope_theta", rp_where, json_number(c, "rope_theta", where, 10000.0)),
                           where + ": \"rope_theta\"");
  const std::string rope_type = json_string(rp, "rope_type", rp_where, json_string(rp, "type", rp_where, "default"));
  if (rope_type == "llama3") {
    hp.rope.llama3_scaling = true;
    hp.rope.factor = json_number(rp, "factor", rp_where);
    hp.rope.low_freq_factor = json_number(rp, "low_freq_factor", rp_where);
    hp.rope.high_freq_factor = json_number(rp, "high_freq_factor", rp_where);
    hp.rope.original_max_positions =
        double(json_int(rp, "original_max_position_embeddings", rp_where, 1, kMaxPositions));
    // The blend divides by high − low and by each factor (ops/rope.cc, after transformers).
    if (!(hp.rope.factor > 0 && hp.rope.low_freq_factor > 0 && hp.rope.high_freq_factor > hp.rope.low_freq_factor))
      throw Error(rp_where + ": llama3 rope scaling needs factor > 0 and high_freq_factor > low_freq_factor > 0");
  } else if (rope_type != "default") {
    throw Error(where + ": rope type \"" + rope_type + "\" is not supported (default and llama3 are)");
  }
  if (json_number(c, "partial_rotary_factor", where, 1.0) != 1.0)
    throw Error(where + ": partial rotary embeddings are not supported");

  // Sliding window, as transformers applies it: Llama and OLMo 2 have none (their attention
  // ignores a "sliding_window" in config.json); Qwen2/Qwen3 per layer ("layer_types", or
  // use_sliding_window from max_window_layers on); Mistral and Phi-3 one window for every layer.
  // n_layer is within limits::kMaxLayers here, so sizing `window` from it is safe.
  hp.window.assign(size_t(m.n_layer), 0);
  if (m.architecture == "llama" || m.architecture == "olmo2") return hp;
  const int64_t window = json_int(c, "sliding_window", where, 0, kMaxWindow, 0);
  if (c.contains("layer_types") && !c["layer_types"].is_null()) {
    const auto& types = c["layer_types"];
    if (!types.is_array() || types.size() != size_t(m.n_layer))
      throw Error(where + ": \"layer_types\" must be a list of " + std::to_string(m.n_layer) +
                  " strings, one per layer");
    for (int l = 0; l < m.n_layer; ++l) {
      const nlohmann::json& t = types[size_t(l)];
      if (t == "sliding_attention")
        hp.window[size_t(l)] = window;
      else if (t != "full_attention")
        throw Error(where + ": \"layer_types\"[" + std::to_string(l) + "] is " + t.dump() +
                    ", expected \"full_attention\" or \"sliding_attention\"");
    }
  } else if (m.architecture == "qwen2" || m.architecture == "qwen3") {
    // Older Qwen2 configs: the window applies from layer max_window_layers on, if enabled.
    if (json_bool(c, "use_sliding_window", where, false)) {
      const int64_t first = json_int(c, "max_window_layers", where, 0, kMaxLayers, m.n_layer);
      for (int64_t l = first; l < m.n_layer; ++l) hp.window[size_t(l)] = window;
    }
  } else {
    for (auto& w : hp.window) w = window;
  }
  return hp;
}

DecoderHyper llama_config(const io::GgufFile& f) {
  using limits::kMaxLayers, limits::kMaxHeads, limits::kMaxModelWidth, limits::kMaxHeadWidth, limits::kMaxFeedForward,
      limits::kMaxVocabulary, limits::kMaxPositions;
  DecoderHyper hp;
  ModelConfig& m = hp.cfg;
  const std::string arch = f.get_string("general.architecture");
  const std::string p = arch + ".";
  m.architecture = arch;
  m.n_layer = int(gguf_int(f, p + "block_count", 1, kMaxLayers));
  m.n_head = int(gguf_int(f, p + "attention.head_count", 1, kMaxHeads));
  m.n_kv_head = int(gguf_int(f, p + "attention.head_count_kv", 1, m.n_head, m.n_head));
  m.d_model = int(gguf_int(f, p + "embedding_length", 1, kMaxModelWidth));
  m.d_ff = int(gguf_int(f, p + "feed_forward_length", 1, kMaxFeedForward));
  m.max_positions = int(gguf_int(f, p + "context_length", 1, kMaxPositions));
  m.norm_eps = norm_epsilon(gguf_number(f, p + "attention.layer_norm_rms_epsilon", 1e-5),
                            f.path() + ": metadata '" + p + "attention.layer_norm_rms_epsilon'");
  m.causal = true;
  m.d_head = int(gguf_int(f, p + "attention.key_length", 1, kMaxHeadWidth, m.d_model / m.n_head));
  if (m.d_head % 2 != 0)
    throw Error(f.path() + ": the head width " + std::to_string(m.d_head) + " is odd; RoPE rotates pairs");
  const int64_t n_tokens = f.has("tokenizer.ggml.tokens") ? int64_t(f.value("tokenizer.ggml.tokens").count) : 0;
  m.vocab_size = int(gguf_int(f, p + "vocab_size", 1, kMaxVocabulary, std::min(n_tokens, kMaxVocabulary + 1)));
  hp.rope.d_rot = gguf_int(f, p + "rope.dimension_count", 1, kMaxHeadWidth, m.d_head);
  // Partial rotary embeddings: Phi-3 only (its partial_rotary_factor); elsewhere refused.
  if (hp.rope.d_rot != m.d_head && (arch != "phi3" || hp.rope.d_rot > m.d_head || hp.rope.d_rot % 2 != 0))
    throw Error(f.path() + ": rope.dimension_count " + std::to_string(hp.rope.d_rot) + " with heads of " +
                std::to_string(m.d_head) +
                ": partial rotary embeddings are supported for phi3 only (even, at most the head)");
  hp.rope.base =
      rope_base(gguf_number(f, p + "rope.freq_base", 10000.0), f.path() + ": metadata '" + p + "rope.freq_base'");
  // llama.cpp's convert script permutes Llama's Q/K rows into the interleaved layout (rope type
  // NORM); Qwen2 keeps Hugging Face's half-split layout (rope type NEOX).
  // Qwen3, Phi-3 and OLMo 2 likewise.
  const bool neox = arch == "qwen2" || arch == "qwen3" || arch == "phi3" || arch == "olmo2";
  hp.rope.layout = neox ? ops::RopeLayout::kHalfSplit : ops::RopeLayout::kInterleaved;
  const std::string scaling = f.get_string(p + "rope.scaling.type", "none");
  if (scaling != "none") throw Error(f.path() + ": rope scaling '" + scaling + "' in GGUF is not supported");
  m.eos_token_id = int32_t(gguf_int(f, "tokenizer.ggml.eos_token_id", 0, kMaxVocabulary, -1));
  check_model_shape(m, f.path());
  hp.window.assign(size_t(m.n_layer), 0);
  const int64_t window = gguf_int(f, p + "attention.sliding_window", 0, kMaxWindow, 0);
  if (arch != "qwen2" && arch != "qwen3") {
    for (auto& w : hp.window) w = window;
  }
  hp.tied = !f.has_tensor("output.weight");  // llama.cpp writes no output head when tied
  return hp;
}

namespace {

std::unique_ptr<Model> build(DecoderHyper hp, const LlamaLikeReaders& readers, std::unique_ptr<Tokenizer> tokenizer) {
  const TensorReader& in = readers.body;
  const ModelConfig& m = hp.cfg;
  const int64_t D = m.d_model, F = m.d_ff, H = m.n_head, Hkv = m.n_kv_head, Dh = m.d_head;
  DecoderWeights w;
  read_llama_like_globals(readers, hp, w);
  in.expect_layers(m.n_layer, {kLayerTensors[kAttnNorm], kLayerTensors[kQ], kLayerTensors[kDown]});
  w.layers.reserve(size_t(m.n_layer));
  for (int l = 0; l < m.n_layer; ++l) {
    DecoderLayerWeights b;
    const auto get = [&](Role r, std::vector<int64_t> shape) { return in.get(kLayerTensors[r], l, shape); };
    const auto mat = [&](Role r, std::vector<int64_t> shape) { return in.matrix(kLayerTensors[r], l, shape); };
    b.attn_norm = get(kAttnNorm, {D});
    const QuantMatrix wq = mat(kQ, {H * Dh, D}), wk = mat(kK, {Hkv * Dh, D}), wv = mat(kV, {Hkv * Dh, D});
    b.w_qkv = QuantMatrix::concat_rows({&wq, &wk, &wv});  // fused at load time: one GEMM per layer
    const Tensor bq = get(kQBias, {H * Dh}), bk = get(kKBias, {Hkv * Dh}), bv = get(kVBias, {Hkv * Dh});
    if (!bq.empty() || !bk.empty() || !bv.empty()) {
      if (bq.empty() || bk.empty() || bv.empty())
        throw Error(in.source().describe() + ": layer " + std::to_string(l) + " has only some of the Q/K/V biases");
      b.b_qkv = concat_rows({&bq, &bk, &bv});
    }
    b.w_o = mat(kO, {D, H * Dh});
    b.b_o = get(kOBias, {D});
    b.ffn_norm = get(kFfnNorm, {D});
    b.w_gate = mat(kGate, {F, D});
    b.w_up = mat(kUp, {F, D});
    b.w_down = mat(kDown, {D, F});
    if (has_qk_norm(m.architecture)) {
      b.q_norm = in.get(kLayerTensors[kQNorm], l, {Dh});
      b.k_norm = in.get(kLayerTensors[kKNorm], l, {Dh});
    }
    b.window = hp.window[size_t(l)];
    w.layers.push_back(std::move(b));
  }
  const WeightSource& src = in.source();
  if (in.gguf() && src.has("rope_freqs.weight")) {
    const Tensor f = src.get("rope_freqs.weight", {hp.rope.d_rot / 2});
    for (float d : f.data)
      if (!(d > 0.0f) || !std::isfinite(d))
        throw Error(src.describe() + ": tensor 'rope_freqs.weight' holds " + std::to_string(d) +
                    "; RoPE frequency divisors must be positive and finite");
    hp.rope.freq_divisors.assign(f.data.begin(), f.data.end());
  }
  DecoderArch arch;
  arch.norm = DecoderArch::Norm::kRms;
  arch.mlp = DecoderArch::Mlp::kSwiGlu;
  arch.rope = true;
  arch.rope_config = hp.rope;
  arch.qk_norm = has_qk_norm(m.architecture);
  return std::make_unique<DecoderModel>(hp.cfg, arch, std::move(w), std::move(tokenizer));
}

}  // namespace

std::unique_ptr<Model> load_llama(const std::string& dir, const nlohmann::json& config, WeightCheck& check) {
  DecoderHyper hp = llama_config(config, dir + "/config.json");
  hp.cfg.name = std::filesystem::path(dir).filename().string();
  auto tokenizer = Tokenizer::from_model_dir(dir);
  auto src = safetensors_source(dir, check);
  const LlamaLikeReaders readers = llama_like_readers(*src, config, "", hp, check);
  return build(std::move(hp), readers, std::move(tokenizer));
}

std::unique_ptr<Model> load_llama_gguf(std::shared_ptr<const io::GgufFile> file, const std::string& display_name,
                                       WeightCheck& check) {
  DecoderHyper hp = llama_config(*file);
  hp.cfg.name = display_name;
  auto tokenizer = tokenizer::tokenizer_from_gguf(*file);
  auto src = gguf_source(file, check);
  return build(std::move(hp), llama_like_readers(*src), std::move(tokenizer));
}

}  // namespace headscope::models
