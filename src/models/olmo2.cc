// headscope — OLMo 2 (Team OLMo 2024, "2 OLMo 2 Furious"; transformers' modeling_olmo2.py).
// The Llama block with its norms moved, all switched on in the shared decoder (decoder.h):
//   - no pre-norm: attention and the SwiGLU feed-forward read the residual stream x itself, and an
//     RMSNorm is applied to each block's OUTPUT before it is added back (Olmo2DecoderLayer:
//     x = x + post_attention_layernorm(attn(x));  x = x + post_feedforward_layernorm(mlp(x)));
//     note that "post_attention_layernorm" here normalises the attention output, whereas in Llama
//     it is the norm in front of the feed-forward;
//   - QK-norm over the WHOLE projection: q_norm is an RMSNorm of width n_head·d_head applied to all
//     of q_proj's output at once, k_norm of width n_kv_head·d_head to k_proj's (not per head as
//     Qwen3), before the heads are split and RoPE is applied.
// Bias-free (attention_bias = true is refused); RoPE half-split, default or llama3-scaled.
//
// GGUF (llama.cpp's convert_hf_to_gguf.py, Olmo2Model): the same tensors under llama.cpp's names,
// Q/K rows unpermuted (llama.cpp runs OLMo 2 with NEOX RoPE).
#include <filesystem>

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
// llama_like.h) and its GGUF name (llama.cpp). The embedding, final norm and output head are
// read by read_llama_like_globals.
enum Role { kQ, kK, kV, kO, kQNorm, kKNorm, kPostAttnNorm, kGate, kUp, kDown, kPostFfnNorm, kRoleCount };
constexpr TensorName kLayerTensors[kRoleCount] = {
    /* kQ            */ {"layers.%d.self_attn.q_proj.weight", "blk.%d.attn_q.weight"},  // [n_head·d_head, d_model]
    /* kK            */ {"layers.%d.self_attn.k_proj.weight", "blk.%d.attn_k.weight"},  // [n_kv_head·d_head, d_model]
    /* kV            */ {"layers.%d.self_attn.v_proj.weight", "blk.%d.attn_v.weight"},  // [n_kv_head·d_head, d_model]
    /* kO            */ {"layers.%d.self_attn.o_proj.weight", "blk.%d.attn_output.weight"},  // [d_model, n_head·d_head]
    /* kQNorm        */ {"layers.%d.self_attn.q_norm.weight", "blk.%d.attn_q_norm.weight"},  // [n_head·d_head]
    /* kKNorm        */ {"layers.%d.self_attn.k_norm.weight", "blk.%d.attn_k_norm.weight"},  // [n_kv_head·d_head]
    /* kPostAttnNorm */ {"layers.%d.post_attention_layernorm.weight", "blk.%d.post_attention_norm.weight"},
    /* kGate         */ {"layers.%d.mlp.gate_proj.weight", "blk.%d.ffn_gate.weight"},  // [d_ff, d_model]
    /* kUp           */ {"layers.%d.mlp.up_proj.weight", "blk.%d.ffn_up.weight"},      // [d_ff, d_model]
    /* kDown         */ {"layers.%d.mlp.down_proj.weight", "blk.%d.ffn_down.weight"},  // [d_model, d_ff]
    /* kPostFfnNorm  */ {"layers.%d.post_feedforward_layernorm.weight", "blk.%d.post_ffw_norm.weight"},
};

}  // namespace

DecoderHyper olmo2_config(const nlohmann::json& c, const std::string& where) {
  if (json_bool(c, "attention_bias", where, false))
    throw Error(where + ": attention_bias = true is not supported for OLMo 2");
  // Sizes, RoPE, tied head (no sliding window: model_type olmo2); rms_norm_eps 1e-5 is Olmo2Config's default.
  return llama_config(c, where, 1e-5);
}

namespace {

std::unique_ptr<Model> build(DecoderHyper hp, const LlamaLikeReaders& readers, std::unique_ptr<Tokenizer> tokenizer) {
  const TensorReader& in = readers.body;
  const ModelConfig& m = hp.cfg;
  const int64_t D = m.d_model, F = m.d_ff, H = m.n_head, Hkv = m.n_kv_head, Dh = m.d_head;
  DecoderWeights w;
  read_llama_like_globals(readers, hp, w);
  in.expect_layers(m.n_layer, {kLayerTensors[kQ], kLayerTensors[kPostFfnNorm], kLayerTensors[kDown]});
  w.layers.reserve(size_t(m.n_layer));
  for (int l = 0; l < m.n_layer; ++l) {
    DecoderLayerWeights b;
    const auto get = [&](Role r, std::vector<int64_t> shape) { return in.get(kLayerTensors[r], l, shape); };
    const auto mat = [&](Role r, std::vector<int64_t> shape) { return in.matrix(kLayerTensors[r], l, shape); };
    const QuantMatrix wq = mat(kQ, {H * Dh, D}), wk = mat(kK, {Hkv * Dh, D}), wv = mat(kV, {Hkv * Dh, D});
    b.w_qkv = QuantMatrix::concat_rows({&wq, &wk, &wv});  // fused at load time: one GEMM per layer
    b.q_norm = get(kQNorm, {H * Dh});                     // over all query heads at once
    b.k_norm = get(kKNorm, {Hkv * Dh});                   // over all key heads at once
    b.w_o = mat(kO, {D, H * Dh});
    b.post_attn_norm = get(kPostAttnNorm, {D});
    b.w_gate = mat(kGate, {F, D});
    b.w_up = mat(kUp, {F, D});
    b.w_down = mat(kDown, {D, F});
    b.post_ffn_norm = get(kPostFfnNorm, {D});
    b.window = hp.window[size_t(l)];
    w.layers.push_back(std::move(b));
  }
  DecoderArch arch;
  arch.norm = DecoderArch::Norm::kRms;
  arch.mlp = DecoderArch::Mlp::kSwiGlu;
  arch.rope = true;
  arch.rope_config = hp.rope;
  arch.pre_norm = false;
  arch.qk_norm = true;
  arch.qk_norm_whole = true;
  arch.sandwich_norm = true;  // the output norms; with no pre-norm in front of them
  return std::make_unique<DecoderModel>(hp.cfg, arch, std::move(w), std::move(tokenizer));
}

}  // namespace

std::unique_ptr<Model> load_olmo2(const std::string& dir, const nlohmann::json& config, WeightCheck& check) {
  DecoderHyper hp = olmo2_config(config, dir + "/config.json");
  hp.cfg.name = std::filesystem::path(dir).filename().string();
  auto tokenizer = Tokenizer::from_model_dir(dir);
  auto src = safetensors_source(dir, check);
  const LlamaLikeReaders readers = llama_like_readers(*src, config, "", hp, check);
  return build(std::move(hp), readers, std::move(tokenizer));
}

std::unique_ptr<Model> load_olmo2_gguf(std::shared_ptr<const io::GgufFile> file, const std::string& display_name,
                                       WeightCheck& check) {
  DecoderHyper hp = llama_config(*file);  // half-split RoPE for olmo2
  hp.cfg.name = display_name;
  auto tokenizer = tokenizer::tokenizer_from_gguf(*file);
  auto src = gguf_source(file, check);
  return build(std::move(hp), llama_like_readers(*src), std::move(tokenizer));
}

}  // namespace headscope::models
