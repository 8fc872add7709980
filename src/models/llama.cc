// headscope — the Llama family (Touvron et al. 2023): Llama 2/3, Mistral, Qwen2, SmolLM.
// Pre-RMSNorm blocks, rotary positions, grouped-query attention, SwiGLU feed-forward
// (transformers' modeling_llama.py; Qwen2 adds Q/K/V biases, Mistral a sliding window).
// The forward pass is the shared decoder (decoder.h); this file reads hyper-parameters and
// tensors, from a Hugging Face folder or a GGUF file, through one tensor-name table.
#include <cstdio>
#include <filesystem>

#include "io/gguf.h"
#include "models/decoder.h"
#include "models/families.h"
#include "tokenizer/gguf_vocab.h"

namespace headscope::models {
namespace {

// Every tensor of the family, by role: its Hugging Face name, its GGUF name (llama.cpp), whether
// the family must have it. "%d" is the layer.
enum Role { kAttnNorm, kQ, kK, kV, kQBias, kKBias, kVBias, kO, kOBias, kFfnNorm, kGate, kUp, kDown, kRoleCount };
struct TensorName {
  const char* hf;
  const char* gguf;
  bool required;
};
constexpr TensorName kLayerTensors[kRoleCount] = {
    /* kAttnNorm */ {"model.layers.%d.input_layernorm.weight", "blk.%d.attn_norm.weight", true},
    /* kQ        */ {"model.layers.%d.self_attn.q_proj.weight", "blk.%d.attn_q.weight", true},
    /* kK        */ {"model.layers.%d.self_attn.k_proj.weight", "blk.%d.attn_k.weight", true},
    /* kV        */ {"model.layers.%d.self_attn.v_proj.weight", "blk.%d.attn_v.weight", true},
    /* kQBias    */ {"model.layers.%d.self_attn.q_proj.bias", "blk.%d.attn_q.bias", false},
    /* kKBias    */ {"model.layers.%d.self_attn.k_proj.bias", "blk.%d.attn_k.bias", false},
    /* kVBias    */ {"model.layers.%d.self_attn.v_proj.bias", "blk.%d.attn_v.bias", false},
    /* kO        */ {"model.layers.%d.self_attn.o_proj.weight", "blk.%d.attn_output.weight", true},
    /* kOBias    */ {"model.layers.%d.self_attn.o_proj.bias", "blk.%d.attn_output.bias", false},
    /* kFfnNorm  */ {"model.layers.%d.post_attention_layernorm.weight", "blk.%d.ffn_norm.weight", true},
    /* kGate     */ {"model.layers.%d.mlp.gate_proj.weight", "blk.%d.ffn_gate.weight", true},
    /* kUp       */ {"model.layers.%d.mlp.up_proj.weight", "blk.%d.ffn_up.weight", true},
    /* kDown     */ {"model.layers.%d.mlp.down_proj.weight", "blk.%d.ffn_down.weight", true},
};
struct GlobalNames {
  const char* embedding;   // [vocab, d_model]
  const char* final_norm;  // [d_model]
  const char* lm_head;     // [vocab, d_model], absent when tied
};
constexpr GlobalNames kHfGlobals = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"};
constexpr GlobalNames kGgufGlobals = {"token_embd.weight", "output_norm.weight", "output.weight"};

std::string layer_name(const char* pattern, int layer) {
  char buf[160];
  std::snprintf(buf, sizeof buf, pattern, layer);
  return buf;
}

// What the two file formats tell us, in one place.
struct Hyper {
  ModelConfig cfg;
  ops::RopeConfig rope;
  std::vector<int64_t> window;  // [n_layer] sliding window per layer (0 = none)
  bool tied = false;
  bool gguf = false;
};

// config.json's eos_token_id is an integer, a list (the first is taken) or absent.
int32_t eos_from_config(const nlohmann::json& c) {
  if (!c.contains("eos_token_id")) return -1;
  const nlohmann::json& e = c["eos_token_id"];
  if (e.is_number_integer()) return e.get<int32_t>();
  if (e.is_array() && !e.empty() && e[0].is_number_integer()) return e[0].get<int32_t>();
  return -1;
}

Hyper hyper_from_config(const std::string& dir, const nlohmann::json& c) {
  const std::string where = dir + "/config.json";
  Hyper hp;
  ModelConfig& m = hp.cfg;
  m.architecture = c.value("model_type", std::string("llama"));
  m.name = std::filesystem::path(dir).filename().string();
  m.n_layer = required<int>(c, "num_hidden_layers", where);
  m.n_head = required<int>(c, "num_attention_heads", where);
  m.n_kv_head = c.contains("num_key_value_heads") && !c["num_key_value_heads"].is_null()
                    ? c["num_key_value_heads"].get<int>() : m.n_head;
  m.d_model = required<int>(c, "hidden_size", where);
  m.d_ff = required<int>(c, "intermediate_size", where);
  m.vocab_size = required<int>(c, "vocab_size", where);
  m.max_positions = required<int>(c, "max_position_embeddings", where);
  m.norm_eps = c.value("rms_norm_eps", 1e-6f);
  m.causal = true;
  if (m.n_head <= 0 || m.d_model <= 0) throw Error(where + ": num_attention_heads and hidden_size must be positive");
  m.d_head = c.contains("head_dim") && !c["head_dim"].is_null() ? c["head_dim"].get<int>() : m.d_model / m.n_head;
  const std::string act = c.value("hidden_act", std::string("silu"));
  if (act != "silu") throw Error(where + ": hidden_act \"" + act + "\" is not supported (the Llama family uses \"silu\")");
  if (c.value("mlp_bias", false)) throw Error(where + ": mlp_bias = true is not supported");
  hp.tied = c.value("tie_word_embeddings", false);
  m.eos_token_id = eos_from_config(c);

  // RoPE: transformers 5 writes "rope_parameters"; older files "rope_theta" and "rope_scaling".
  hp.rope.d_rot = m.d_head;
  hp.rope.layout = ops::RopeLayout::kHalfSplit;  // HF checkpoints use rotate_half
  nlohmann::json rp = c.contains("rope_parameters") && c["rope_parameters"].is_object() ? c["rope_parameters"]
                      : c.contains("rope_scaling") && c["rope_scaling"].is_object() ? c["rope_scaling"]
                                                                                    : nlohmann::json::object();
  hp.rope.base = rp.value("rope_theta", c.value("rope_theta", 10000.0));
  const std::string rope_type = rp.value("rope_type", rp.value("type", std::string("default")));
  if (rope_type == "llama3") {
    hp.rope.llama3_scaling = true;
    hp.rope.factor = required<double>(rp, "factor", where + " rope_parameters");
    hp.rope.low_freq_factor = required<double>(rp, "low_freq_factor", where + " rope_parameters");
    hp.rope.high_freq_factor = required<double>(rp, "high_freq_factor", where + " rope_parameters");
    hp.rope.original_max_positions = required<double>(rp, "original_max_position_embeddings", where + " rope_parameters");
  } else if (rope_type != "default") {
    throw Error(where + ": rope type \"" + rope_type + "\" is not supported (default and llama3 are)");
  }
  if (c.value("partial_rotary_factor", 1.0) != 1.0) throw Error(where + ": partial rotary embeddings are not supported");

  // Sliding window: Qwen2-style per-layer "layer_types", else Mistral's one window for all layers.
  hp.window.assign(size_t(m.n_layer), 0);
  const int64_t window = c.contains("sliding_window") && c["sliding_window"].is_number() ? c["sliding_window"].get<int64_t>() : 0;
  if (c.contains("layer_types") && c["layer_types"].is_array()) {
    const auto& types = c["layer_types"];
    if (types.size() != size_t(m.n_layer)) throw Error(where + ": layer_types has the wrong length");
    for (int l = 0; l < m.n_layer; ++l) {
      if (types[size_t(l)] == "sliding_attention") hp.window[size_t(l)] = window;
    }
  } else if (m.architecture == "qwen2") {
    // Older Qwen2 configs: the window applies from layer max_window_layers on, if enabled.
    if (c.value("use_sliding_window", false)) {
      const int first = c.value("max_window_layers", m.n_layer);
      for (int l = first; l < m.n_layer; ++l) hp.window[size_t(l)] = window;
    }
  } else {
    for (auto& w : hp.window) w = window;
  }
  return hp;
}

Hyper hyper_from_gguf(const io::GgufFile& f) {
  Hyper hp;
  hp.gguf = true;
  ModelConfig& m = hp.cfg;
  const std::string arch = f.get_string("general.architecture");
  const std::string p = arch + ".";
  m.architecture = arch;
  m.name = f.get_string("general.name", std::filesystem::path(f.path()).stem().string());
  m.n_layer = int(f.get_int(p + "block_count"));
  m.n_head = int(f.get_int(p + "attention.head_count"));
  m.n_kv_head = int(f.get_int(p + "attention.head_count_kv", m.n_head));
  m.d_model = int(f.get_int(p + "embedding_length"));
  m.d_ff = int(f.get_int(p + "feed_forward_length"));
  m.max_positions = int(f.get_int(p + "context_length"));
  m.norm_eps = float(f.get_float(p + "attention.layer_norm_rms_epsilon", 1e-5));
  m.causal = true;
  if (m.n_head <= 0 || m.d_model <= 0) throw Error(f.path() + ": head_count and embedding_length must be positive");
  m.d_head = int(f.get_int(p + "attention.key_length", m.d_model / m.n_head));
  m.vocab_size = int(f.get_int(p + "vocab_size", int64_t(f.value("tokenizer.ggml.tokens").count)));
  hp.rope.d_rot = int(f.get_int(p + "rope.dimension_count", m.d_head));
  if (hp.rope.d_rot != m.d_head) throw Error(f.path() + ": partial rotary embeddings are not supported");
  hp.rope.base = f.get_float(p + "rope.freq_base", 10000.0);
  // llama.cpp's convert script permutes Llama's Q/K rows into the interleaved layout (rope type
  // NORM); Qwen2 keeps Hugging Face's half-split layout (rope type NEOX).
  hp.rope.layout = arch == "qwen2" ? ops::RopeLayout::kHalfSplit : ops::RopeLayout::kInterleaved;
  const std::string scaling = f.get_string(p + "rope.scaling.type", "none");
  if (scaling != "none") throw Error(f.path() + ": rope scaling '" + scaling + "' in GGUF is not supported");
  hp.window.assign(size_t(m.n_layer), 0);
  const int64_t window = f.get_int(p + "attention.sliding_window", 0);
  if (arch != "qwen2") {
    for (auto& w : hp.window) w = window;
  }
  hp.tied = !f.has_tensor(kGgufGlobals.lm_head);
  m.eos_token_id = int32_t(f.get_int("tokenizer.ggml.eos_token_id", -1));
  return hp;
}

std::unique_ptr<Model> build(Hyper hp, const WeightSource& src, std::unique_ptr<Tokenizer> tokenizer) {
  const ModelConfig& m = hp.cfg;
  const int64_t D = m.d_model, F = m.d_ff, H = m.n_head, Hkv = m.n_kv_head, Dh = m.d_head, V = m.vocab_size;
  const GlobalNames& g = hp.gguf ? kGgufGlobals : kHfGlobals;
  const auto name = [&](Role r, int l) { return layer_name(hp.gguf ? kLayerTensors[r].gguf : kLayerTensors[r].hf, l); };
  DecoderWeights w;
  w.token_embedding = src.get(g.embedding, {V, D});
  w.final_norm = src.get(g.final_norm, {D});
  if (!hp.tied) {
    if (!src.has(g.lm_head)) {
      throw Error(src.describe() + ": no " + g.lm_head + " and tie_word_embeddings is false; the checkpoint is incomplete");
    }
    w.lm_head = src.get(g.lm_head, {V, D});
  }
  for (int l = 0; l < m.n_layer; ++l) {
    DecoderLayerWeights b;
    const auto get = [&](Role r, std::vector<int64_t> shape) {
      if (!kLayerTensors[r].required && !src.has(name(r, l))) return Tensor();
      return src.get(name(r, l), shape);
    };
    b.attn_norm = get(kAttnNorm, {D});
    const Tensor wq = get(kQ, {H * Dh, D}), wk = get(kK, {Hkv * Dh, D}), wv = get(kV, {Hkv * Dh, D});
    b.w_qkv = concat_rows({&wq, &wk, &wv});  // fused at load time: one GEMM per layer
    const Tensor bq = get(kQBias, {H * Dh}), bk = get(kKBias, {Hkv * Dh}), bv = get(kVBias, {Hkv * Dh});
    if (!bq.empty() || !bk.empty() || !bv.empty()) {
      if (bq.empty() || bk.empty() || bv.empty()) throw Error(src.describe() + ": layer " + std::to_string(l) + " has only some of the Q/K/V biases");
      b.b_qkv = concat_rows({&bq, &bk, &bv});
    }
    b.w_o = get(kO, {D, H * Dh});
    b.b_o = get(kOBias, {D});
    b.ffn_norm = get(kFfnNorm, {D});
    b.w_gate = get(kGate, {F, D});
    b.w_up = get(kUp, {F, D});
    b.w_down = get(kDown, {D, F});
    b.window = hp.window[size_t(l)];
    w.layers.push_back(std::move(b));
  }
  if (hp.gguf && src.has("rope_freqs.weight")) {
    const Tensor f = src.get("rope_freqs.weight", {hp.rope.d_rot / 2});
    hp.rope.freq_divisors.assign(f.data.begin(), f.data.end());
  }
  DecoderArch arch;
  arch.norm = DecoderArch::Norm::kRms;
  arch.mlp = DecoderArch::Mlp::kSwiGlu;
  arch.rope = true;
  arch.rope_config = hp.rope;
  return std::make_unique<DecoderModel>(hp.cfg, arch, std::move(w), std::move(tokenizer));
}

}  // namespace

std::unique_ptr<Model> load_llama(const std::string& dir, const nlohmann::json& config) {
  Hyper hp = hyper_from_config(dir, config);
  auto tokenizer = Tokenizer::from_model_dir(dir);
  auto src = safetensors_source(dir);
  return build(std::move(hp), *src, std::move(tokenizer));
}

std::unique_ptr<Model> load_llama_gguf(std::shared_ptr<const io::GgufFile> file) {
  Hyper hp = hyper_from_gguf(*file);
  auto tokenizer = tokenizer::tokenizer_from_gguf(*file);
  auto src = gguf_source(file);
  return build(std::move(hp), *src, std::move(tokenizer));
}

}  // namespace headscope::models
