// headscope — GPT-2 (Radford et al. 2019), as transformers' modeling_gpt2.py: learned absolute
// positions, pre-LayerNorm blocks, fused QKV projection, GELU (tanh form) feed-forward, tied
// output embedding. The forward pass is the shared decoder (decoder.h).
//
// Storage quirks fixed at load time, so the forward pass never sees them: Hugging Face's GPT-2
// keeps its projections as Conv1D, whose weight is (in, out) — the transpose of nn.Linear — so
// c_attn, c_proj, c_fc and mlp.c_proj are transposed here; GGUF files already hold them as
// (out, in). The fused c_attn (Q | K | V along the output axis) is used as it is.
#include <cstdio>
#include <filesystem>

#include "io/gguf.h"
#include "models/decoder.h"
#include "models/families.h"
#include "tokenizer/gguf_vocab.h"

namespace headscope::models {
namespace {

enum Role { kLn1W, kLn1B, kQkvW, kQkvB, kProjW, kProjB, kLn2W, kLn2B, kFcW, kFcB, kMlpProjW, kMlpProjB, kRoleCount };
struct TensorName {
  const char* hf;    // after the optional "transformer." prefix; "%d" is the layer
  const char* gguf;
  bool conv1d;       // stored (in, out) in Hugging Face files: transpose
};
constexpr TensorName kLayerTensors[kRoleCount] = {
    /* kLn1W     */ {"h.%d.ln_1.weight", "blk.%d.attn_norm.weight", false},
    /* kLn1B     */ {"h.%d.ln_1.bias", "blk.%d.attn_norm.bias", false},
    /* kQkvW     */ {"h.%d.attn.c_attn.weight", "blk.%d.attn_qkv.weight", true},
    /* kQkvB     */ {"h.%d.attn.c_attn.bias", "blk.%d.attn_qkv.bias", false},
    /* kProjW    */ {"h.%d.attn.c_proj.weight", "blk.%d.attn_output.weight", true},
    /* kProjB    */ {"h.%d.attn.c_proj.bias", "blk.%d.attn_output.bias", false},
    /* kLn2W     */ {"h.%d.ln_2.weight", "blk.%d.ffn_norm.weight", false},
    /* kLn2B     */ {"h.%d.ln_2.bias", "blk.%d.ffn_norm.bias", false},
    /* kFcW      */ {"h.%d.mlp.c_fc.weight", "blk.%d.ffn_up.weight", true},
    /* kFcB      */ {"h.%d.mlp.c_fc.bias", "blk.%d.ffn_up.bias", false},
    /* kMlpProjW */ {"h.%d.mlp.c_proj.weight", "blk.%d.ffn_down.weight", true},
    /* kMlpProjB */ {"h.%d.mlp.c_proj.bias", "blk.%d.ffn_down.bias", false},
};
struct GlobalNames {
  const char *token_embedding, *position_embedding, *final_norm_w, *final_norm_b, *lm_head;
};
constexpr GlobalNames kHfGlobals = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias", "lm_head.weight"};
constexpr GlobalNames kGgufGlobals = {"token_embd.weight", "position_embd.weight", "output_norm.weight",
                                      "output_norm.bias", "output.weight"};

std::string layer_name(const char* pattern, int layer) {
  char buf[160];
  std::snprintf(buf, sizeof buf, pattern, layer);
  return buf;
}

std::unique_ptr<Model> build(ModelConfig m, bool gguf, bool scale_by_layer, const WeightSource& src,
                             std::unique_ptr<Tokenizer> tokenizer) {
  const int64_t D = m.d_model, F = m.d_ff, V = m.vocab_size, P = m.max_positions;
  // Checkpoints saved from GPT2LMHeadModel prefix the body with "transformer.", GPT2Model's do not.
  const std::string prefix = gguf || !src.has("transformer.wte.weight") ? "" : "transformer.";
  const GlobalNames& g = gguf ? kGgufGlobals : kHfGlobals;
  const auto global = [&](const char* n) { return gguf ? std::string(n) : prefix + n; };
  const auto get = [&](Role r, int l, std::vector<int64_t> shape) {
    const TensorName& t = kLayerTensors[r];
    const std::string name = gguf ? layer_name(t.gguf, l) : prefix + layer_name(t.hf, l);
    if (!gguf && t.conv1d) return transpose(src.get(name, {shape[1], shape[0]}));
    return src.get(name, shape);
  };
  DecoderWeights w;
  w.token_embedding = src.get(global(g.token_embedding), {V, D});
  w.position_embedding = src.get(global(g.position_embedding), {P, D});
  w.final_norm = src.get(global(g.final_norm_w), {D});
  w.final_norm_bias = src.get(global(g.final_norm_b), {D});
  // The head is tied to the token embedding unless the file has its own.
  if (src.has(g.lm_head)) w.lm_head = src.get(g.lm_head, {V, D});
  for (int l = 0; l < m.n_layer; ++l) {
    DecoderLayerWeights b;
    b.attn_norm = get(kLn1W, l, {D});
    b.attn_norm_bias = get(kLn1B, l, {D});
    b.w_qkv = get(kQkvW, l, {3 * D, D});  // rows: Q | K | V
    b.b_qkv = get(kQkvB, l, {3 * D});
    b.w_o = get(kProjW, l, {D, D});
    b.b_o = get(kProjB, l, {D});
    b.ffn_norm = get(kLn2W, l, {D});
    b.ffn_norm_bias = get(kLn2B, l, {D});
    b.w_up = get(kFcW, l, {F, D});
    b.b_up = get(kFcB, l, {F});
    b.w_down = get(kMlpProjW, l, {D, F});
    b.b_down = get(kMlpProjB, l, {D});
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

std::unique_ptr<Model> load_gpt2(const std::string& dir, const nlohmann::json& c) {
  const std::string where = dir + "/config.json";
  ModelConfig m;
  m.architecture = "gpt2";
  m.name = std::filesystem::path(dir).filename().string();
  m.n_layer = required<int>(c, "n_layer", where);
  m.n_head = required<int>(c, "n_head", where);
  m.n_kv_head = m.n_head;
  m.d_model = required<int>(c, "n_embd", where);
  m.d_ff = c.contains("n_inner") && !c["n_inner"].is_null() ? c["n_inner"].get<int>() : 4 * m.d_model;
  m.vocab_size = required<int>(c, "vocab_size", where);
  m.max_positions = required<int>(c, "n_positions", where);
  m.norm_eps = c.value("layer_norm_epsilon", 1e-5f);
  m.eos_token_id = c.contains("eos_token_id") && c["eos_token_id"].is_number_integer() ? c["eos_token_id"].get<int32_t>() : -1;
  m.causal = true;
  if (m.n_head <= 0 || m.d_model % m.n_head != 0) throw Error(where + ": n_embd must be a multiple of n_head");
  m.d_head = m.d_model / m.n_head;
  const std::string act = c.value("activation_function", std::string("gelu_new"));
  if (act != "gelu_new" && act != "gelu_pytorch_tanh") {
    throw Error(where + ": activation_function \"" + act + "\" is not supported (gelu_new is)");
  }
  if (!c.value("scale_attn_weights", true)) throw Error(where + ": scale_attn_weights = false is not supported");
  auto tokenizer = Tokenizer::from_model_dir(dir);
  auto src = safetensors_source(dir);
  return build(std::move(m), false, c.value("scale_attn_by_inverse_layer_idx", false), *src, std::move(tokenizer));
}

std::unique_ptr<Model> load_gpt2_gguf(std::shared_ptr<const io::GgufFile> f) {
  ModelConfig m;
  m.architecture = "gpt2";
  m.name = f->get_string("general.name", std::filesystem::path(f->path()).stem().string());
  m.n_layer = int(f->get_int("gpt2.block_count"));
  m.n_head = int(f->get_int("gpt2.attention.head_count"));
  m.n_kv_head = m.n_head;
  m.d_model = int(f->get_int("gpt2.embedding_length"));
  m.d_ff = int(f->get_int("gpt2.feed_forward_length"));
  m.max_positions = int(f->get_int("gpt2.context_length"));
  m.norm_eps = float(f->get_float("gpt2.attention.layer_norm_epsilon", 1e-5));
  m.vocab_size = int(f->get_int("gpt2.vocab_size", int64_t(f->value("tokenizer.ggml.tokens").count)));
  m.eos_token_id = int32_t(f->get_int("tokenizer.ggml.eos_token_id", -1));
  m.causal = true;
  if (m.n_head <= 0 || m.d_model % m.n_head != 0) throw Error(f->path() + ": embedding_length must be a multiple of head_count");
  m.d_head = m.d_model / m.n_head;
  auto tokenizer = tokenizer::tokenizer_from_gguf(*f);
  auto src = gguf_source(f);
  return build(std::move(m), true, false, *src, std::move(tokenizer));
}

}  // namespace headscope::models
