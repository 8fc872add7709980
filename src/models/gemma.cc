// headscope — the Gemma family (Gemma Team 2024, 2025): Gemma, Gemma 2, Gemma 3 (text).
// The Llama block with Gemma's changes, all switched on in the shared decoder (decoder.h):
// embeddings scaled by √d_model; RMSNorm with weight (1 + w); GeGLU (gelu_pytorch_tanh on the
// gate); score scale query_pre_attn_scalar^−½; Gemma 2/3 add sandwich norms (post-attention and
// post-feed-forward RMSNorm before the residual add) and alternate sliding-window and global
// layers; Gemma 2 soft-caps attention scores and final logits; Gemma 3 adds QK-norm and a RoPE
// base of its own for the sliding layers (transformers' modeling_gemma{,2,3}.py).
//
// GGUF: llama.cpp's converter already adds 1 to every Gemma norm weight (transformers' GGUF loader
// subtracts it again), so (1 + w) is folded in here for safetensors only. A Gemma 3 GGUF has no
// layer pattern key: llama.cpp (llama_load_hparams, LLM_ARCH_GEMMA3) makes every 6th layer global,
// gives the sliding layers a RoPE base of 10,000 and scales scores by key_length^−½ (but by
// (d_model / n_head)^−½ for the 62-layer 27B); Gemma 2 GGUF alternates, from a sliding layer 0.
#include <cmath>
#include <filesystem>
#include <string_view>

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

// Every layer tensor of the family, by role: its Hugging Face name (behind "model.", or bare:
// llama_like.h) and its GGUF name (llama.cpp). The embedding, final norm and output head (absent
// when tied: always, in released Gemmas) are read by read_llama_like_globals.
enum Role {
  kAttnNorm,
  kQ,
  kK,
  kV,
  kO,
  kQNorm,
  kKNorm,
  kPostAttnNorm,
  kPreFfnNorm,
  kPostFfnNorm,
  kGemma1FfnNorm,
  kGate,
  kUp,
  kDown,
  kRoleCount
};
constexpr TensorName kLayerTensors[kRoleCount] = {
    /* kAttnNorm      */ {"layers.%d.input_layernorm.weight", "blk.%d.attn_norm.weight"},
    /* kQ             */ {"layers.%d.self_attn.q_proj.weight", "blk.%d.attn_q.weight"},
    /* kK             */ {"layers.%d.self_attn.k_proj.weight", "blk.%d.attn_k.weight"},
    /* kV             */ {"layers.%d.self_attn.v_proj.weight", "blk.%d.attn_v.weight"},
    /* kO             */ {"layers.%d.self_attn.o_proj.weight", "blk.%d.attn_output.weight"},
    /* kQNorm         */ {"layers.%d.self_attn.q_norm.weight", "blk.%d.attn_q_norm.weight"},  // Gemma 3
    /* kKNorm         */ {"layers.%d.self_attn.k_norm.weight", "blk.%d.attn_k_norm.weight"},  // Gemma 3
    /* kPostAttnNorm  */ {"layers.%d.post_attention_layernorm.weight", "blk.%d.post_attention_norm.weight"},
    /* kPreFfnNorm    */ {"layers.%d.pre_feedforward_layernorm.weight", "blk.%d.ffn_norm.weight"},
    /* kPostFfnNorm   */ {"layers.%d.post_feedforward_layernorm.weight", "blk.%d.post_ffw_norm.weight"},
    // Gemma 1 names its pre-feed-forward norm as Llama does.
    /* kGemma1FfnNorm */ {"layers.%d.post_attention_layernorm.weight", "blk.%d.ffn_norm.weight"},
    /* kGate          */ {"layers.%d.mlp.gate_proj.weight", "blk.%d.ffn_gate.weight"},
    /* kUp            */ {"layers.%d.mlp.up_proj.weight", "blk.%d.ffn_up.weight"},
    /* kDown          */ {"layers.%d.mlp.down_proj.weight", "blk.%d.ffn_down.weight"},
};

// The generation of a model_type / GGUF architecture: 1, 2 or 3.
int generation_of(const std::string& type) {
  if (type == "gemma") return 1;
  if (type == "gemma2") return 2;
  return 3;  // gemma3, gemma3_text
}

// What a Gemma config adds to the shared hyper-parameters.
struct GemmaHyper {
  DecoderHyper base;
  int generation = 3;
  ops::RopeConfig local_rope;    // sliding layers of Gemma 3
  std::vector<bool> local;       // [n_layer] uses local_rope
  float attention_scale = 0.0f;  // query_pre_attn_scalar^−½
  float attention_softcap = 0.0f, final_softcap = 0.0f;
  bool add_one_to_norms = false;  // safetensors: RMSNorm weight is (1 + w)
};

// One RoPE block of config.json ({"rope_type", "rope_theta"}): its base; other rope types refused.
double rope_theta_of(const nlohmann::json& r, const std::string& where, double fallback) {
  if (!r.is_object()) throw Error(where + " is " + r.type_name() + ", expected an object");
  const std::string type = json_string(r, "rope_type", where, json_string(r, "type", where, "default"));
  if (type != "default")
    throw Error(where + ": rope type \"" + type + "\" is not supported for Gemma (only \"default\")");
  return rope_base(json_number(r, "rope_theta", where, fallback), where + ": \"rope_theta\"");
}

float softcap_of(const nlohmann::json& c, const char* key, const std::string& where) {
  const double v = json_number(c, key, where, 0.0);
  if (v < 0.0) throw Error(where + ": \"" + key + "\" is negative; a soft-capping bound must be positive (or null)");
  return float(v);
}

GemmaHyper gemma_config(const nlohmann::json& c, const std::string& where) {
  GemmaHyper g;
  g.base = llama_like_config(c, where, {.model_type = "gemma", .rms_norm_eps = 1e-6, .tie_word_embeddings = true});
  ModelConfig& m = g.base.cfg;
  g.generation = generation_of(m.architecture);
  const std::string act =
      json_string(c, "hidden_activation", where, json_string(c, "hidden_act", where, "gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh")
    throw Error(where + ": hidden_activation \"" + act + "\" is not supported (Gemma uses \"gelu_pytorch_tanh\")");
  if (json_bool(c, "attention_bias", where, false))
    throw Error(where + ": attention_bias = true is not supported for Gemma");
  if (json_bool(c, "use_bidirectional_attention", where, false))
    throw Error(
        where +
        ": use_bidirectional_attention = true (EmbeddingGemma) is not supported; headscope runs Gemma causally");
  // Scores: Gemma 1 divides by √d_head, Gemma 2/3 by √query_pre_attn_scalar.
  const double scalar =
      g.generation == 1 ? double(m.d_head) : json_number(c, "query_pre_attn_scalar", where, double(m.d_head));
  if (!(scalar > 0.0)) throw Error(where + ": \"query_pre_attn_scalar\" must be positive");
  g.attention_scale = float(1.0 / std::sqrt(scalar));  // as transformers: a Python float, used in fp32
  if (g.generation >= 2) {
    g.attention_softcap = softcap_of(c, "attn_logit_softcapping", where);
    g.final_softcap = softcap_of(c, "final_logit_softcapping", where);
  }
  g.add_one_to_norms = true;

  // RoPE: transformers 5 writes "rope_parameters" (for Gemma 3 one block per layer type); older
  // files rope_theta, rope_local_base_freq and rope_scaling.
  ops::RopeConfig& global = g.base.rope;
  global.d_rot = m.d_head;
  global.layout = ops::RopeLayout::kHalfSplit;
  g.local_rope = global;
  double global_theta = json_number(c, "rope_theta", where, g.generation == 3 ? 1e6 : 1e4);
  double local_theta = json_number(c, "rope_local_base_freq", where, 1e4);
  if (c.contains("rope_scaling") && !c["rope_scaling"].is_null())
    global_theta = rope_theta_of(c["rope_scaling"], where + " rope_scaling", global_theta);
  if (c.contains("rope_parameters") && !c["rope_parameters"].is_null()) {
    const nlohmann::json& rp = c["rope_parameters"];
    if (rp.is_object() && rp.contains("full_attention")) {
      global_theta = rope_theta_of(rp["full_attention"], where + " rope_parameters.full_attention", global_theta);
      if (rp.contains("sliding_attention"))
        local_theta = rope_theta_of(rp["sliding_attention"], where + " rope_parameters.sliding_attention", local_theta);
    } else {
      global_theta = rope_theta_of(rp, where + " rope_parameters", global_theta);
    }
  }
  global.base = rope_base(global_theta, where + ": \"rope_theta\"");
  g.local_rope.base = rope_base(local_theta, where + ": \"rope_local_base_freq\"");

  // Layers: "layer_types" when written, else Gemma 2's alternation or Gemma 3's pattern.
  const size_t L = size_t(m.n_layer);  // within limits::kMaxLayers (read_hf_sizes)
  std::vector<bool> sliding(L, false);
  if (c.contains("layer_types") && !c["layer_types"].is_null()) {
    const auto& types = c["layer_types"];
    if (!types.is_array() || types.size() != L)
      throw Error(where + ": \"layer_types\" must be a list of " + std::to_string(L) + " strings, one per layer");
    for (size_t l = 0; l < L; ++l) {
      if (types[l] == "sliding_attention")
        sliding[l] = true;
      else if (types[l] != "full_attention")
        throw Error(where + ": \"layer_types\"[" + std::to_string(l) + "] is " + types[l].dump() +
                    ", expected \"full_attention\" or \"sliding_attention\"");
    }
  } else if (g.generation >= 2) {
    const int64_t pattern =
        g.generation == 2 ? 2 : json_int(c, "sliding_window_pattern", where, 1, limits::kMaxLayers, 6);
    for (size_t l = 0; l < L; ++l) sliding[l] = (int64_t(l) + 1) % pattern != 0;
  }
  const int64_t window = json_int(c, "sliding_window", where, 1, limits::kMaxPositions, 4096);
  g.base.window.assign(L, 0);
  g.local.assign(L, false);
  for (size_t l = 0; l < L; ++l) {
    if (!sliding[l]) continue;
    if (g.generation == 1) throw Error(where + ": Gemma 1 has no sliding-window layers");
    g.base.window[l] = window;
    g.local[l] = g.generation == 3;
  }
  return g;
}

GemmaHyper gemma_config(const io::GgufFile& f) {
  GemmaHyper g;
  g.base = llama_config(f);  // the sizes, RoPE base, vocabulary, end token and tied head, named alike
  ModelConfig& m = g.base.cfg;
  const std::string p = m.architecture + ".";
  g.generation = generation_of(m.architecture);
  g.base.rope.layout = ops::RopeLayout::kHalfSplit;  // llama.cpp runs Gemma with NEOX RoPE, unpermuted
  g.local_rope = g.base.rope;
  g.local_rope.base = rope_base(gguf_number(f, p + "rope.freq_base_swa", 10000.0),
                                f.path() + ": metadata '" + p + "rope.freq_base_swa'");
  const bool big27 = (g.generation == 2 && m.n_layer == 46) || (g.generation == 3 && m.n_layer == 62);
  g.attention_scale = float(1.0 / std::sqrt(big27 ? double(m.d_model / m.n_head) : double(m.d_head)));
  if (g.generation == 2) {
    g.attention_softcap = float(gguf_number(f, p + "attn_logit_softcapping", 0.0));
    g.final_softcap = float(gguf_number(f, p + "final_logit_softcapping", 0.0));
    if (g.attention_softcap < 0 || g.final_softcap < 0) throw Error(f.path() + ": a soft-capping bound is negative");
  }
  const int64_t window = gguf_int(f, p + "attention.sliding_window", 0, limits::kMaxPositions, 0);
  const size_t L = size_t(m.n_layer);
  g.base.window.assign(L, 0);
  g.local.assign(L, false);
  if (g.generation >= 2) {
    if (window == 0) throw Error(f.path() + ": no '" + p + "attention.sliding_window'; Gemma 2/3 need the window size");
    const size_t pattern = g.generation == 2 ? 2 : 6;  // llama.cpp's set_swa_pattern
    for (size_t l = 0; l < L; ++l) {
      if (l % pattern == pattern - 1) continue;  // global
      g.base.window[l] = window;
      g.local[l] = g.generation == 3;
    }
  }
  return g;
}

// The norm weight as the model multiplies by it: (1 + w) when the file stores w.
Tensor norm_weight(Tensor w, bool add_one) {
  if (add_one)
    for (float& v : w.data) v += 1.0f;  // fp32, as transformers' (1.0 + self.weight.float())
  return w;
}

std::unique_ptr<Model> build(GemmaHyper g, const LlamaLikeReaders& readers, std::unique_ptr<Tokenizer> tokenizer) {
  const TensorReader& in = readers.body;
  const ModelConfig& m = g.base.cfg;
  const int64_t D = m.d_model, F = m.d_ff, H = m.n_head, Hkv = m.n_kv_head, Dh = m.d_head;
  const bool add_one = g.add_one_to_norms, gen2plus = g.generation >= 2, gen3 = g.generation == 3;
  DecoderWeights w;
  read_llama_like_globals(readers, g.base, w);
  w.final_norm = norm_weight(std::move(w.final_norm), add_one);
  in.expect_layers(m.n_layer, {kLayerTensors[kAttnNorm], kLayerTensors[kQ], kLayerTensors[kDown]});
  w.layers.reserve(size_t(m.n_layer));
  for (int l = 0; l < m.n_layer; ++l) {
    DecoderLayerWeights b;
    const auto get = [&](Role r, std::vector<int64_t> shape) { return in.get(kLayerTensors[r], l, shape); };
    const auto mat = [&](Role r, std::vector<int64_t> shape) { return in.matrix(kLayerTensors[r], l, shape); };
    const auto norm = [&](Role r, int64_t d) { return norm_weight(get(r, {d}), add_one); };
    b.attn_norm = norm(kAttnNorm, D);
    const QuantMatrix wq = mat(kQ, {H * Dh, D}), wk = mat(kK, {Hkv * Dh, D}), wv = mat(kV, {Hkv * Dh, D});
    b.w_qkv = QuantMatrix::concat_rows({&wq, &wk, &wv});  // fused at load time: one GEMM per layer
    b.w_o = mat(kO, {D, H * Dh});
    if (gen3) {
      b.q_norm = norm(kQNorm, Dh);
      b.k_norm = norm(kKNorm, Dh);
    }
    if (gen2plus) {
      b.post_attn_norm = norm(kPostAttnNorm, D);
      b.ffn_norm = norm(kPreFfnNorm, D);
      b.post_ffn_norm = norm(kPostFfnNorm, D);
    } else {
      b.ffn_norm = norm(kGemma1FfnNorm, D);
    }
    b.w_gate = mat(kGate, {F, D});
    b.w_up = mat(kUp, {F, D});
    b.w_down = mat(kDown, {D, F});
    b.window = g.base.window[size_t(l)];
    b.local_rope = g.local[size_t(l)];
    w.layers.push_back(std::move(b));
  }
  DecoderArch arch;
  arch.norm = DecoderArch::Norm::kRms;
  arch.mlp = DecoderArch::Mlp::kGeGlu;
  arch.rope = true;
  arch.rope_config = g.base.rope;
  arch.local_rope_config = g.local_rope;
  arch.qk_norm = gen3;
  arch.sandwich_norm = gen2plus;
  // √d_model in the model's dtype (fp32), as transformers' normalizer / embed_scale.
  arch.embedding_scale = float(std::sqrt(double(D)));
  arch.attention_scale = g.attention_scale;
  arch.attention_softcap = g.attention_softcap;
  arch.final_softcap = g.final_softcap;
  return std::make_unique<DecoderModel>(g.base.cfg, arch, std::move(w), std::move(tokenizer));
}

}  // namespace

std::unique_ptr<Model> load_gemma(const std::string& dir, const nlohmann::json& config, WeightCheck& check) {
  const std::string where = dir + "/config.json";
  // A multimodal "gemma3" config holds the text model in text_config; its weights sit behind
  // "language_model." in the checkpoint.
  const auto type = config.find("model_type");  // a non-string model_type is refused by llama_like_config below
  const bool multimodal = type != config.end() && type->is_string() && *type == "gemma3";
  if (multimodal && !(config.contains("text_config") && config["text_config"].is_object()))
    throw Error(where + ": model_type \"gemma3\" without a \"text_config\" object");
  nlohmann::json text = multimodal ? config["text_config"] : config;
  if (multimodal) text["model_type"] = "gemma3_text";
  GemmaHyper g = gemma_config(text, where);
  g.base.cfg.name = std::filesystem::path(dir).filename().string();
  auto tokenizer = Tokenizer::from_model_dir(dir);
  auto src = safetensors_source(dir, check);
  const LlamaLikeReaders readers = llama_like_readers(*src, config, multimodal ? "language_model." : "", g.base, check);
  return build(std::move(g), readers, std::move(tokenizer));
}

std::unique_ptr<Model> load_gemma_gguf(std::shared_ptr<const io::GgufFile> file, const std::string& display_name,
                                       WeightCheck& check) {
  GemmaHyper g = gemma_config(*file);
  g.base.cfg.name = display_name;
  g.add_one_to_norms = false;                                                    // llama.cpp's converter stored 1 + w
  std::unique_ptr<Tokenizer> tokenizer = tokenizer::tokenizer_from_gguf(*file);  // SentencePiece pieces
  auto src = gguf_source(file, check);
  return build(std::move(g), llama_like_readers(*src), std::move(tokenizer));
}

}  // namespace headscope::models
