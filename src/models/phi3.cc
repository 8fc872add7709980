// headscope — Phi-3 (Abdin et al. 2024, "Phi-3 Technical Report"; transformers' modeling_phi3.py).
// The Llama block with two storage differences and one option, all settled at load time:
//   - Q, K and V are one projection, qkv_proj [(n_head + 2·n_kv_head)·d_head, d_model], rows Q | K | V:
//     exactly the decoder's fused W_qkv, used as it is;
//   - gate and up are one projection, gate_up_proj [2·d_ff, d_model], rows gate | up
//     (Phi3MLP: `gate, up = gate_up_proj(h).chunk(2)`): split into W_gate and W_up;
//   - partial_rotary_factor: RoPE turns the first int(d_head · factor) dimensions of each head only
//     (apply_rotary_pos_emb's q_rot / q_pass); Phi-3's own checkpoints rotate all of them.
// One sliding window applies to every layer when sliding_window is set (Phi3Model picks
// create_sliding_window_causal_mask), as Mistral's. Bias-free throughout.
//
// Refused by name: rope scaling "longrope" (also written "su" or "yarn", which transformers maps
// to it): the 128K Phi-3 and Phi-3.5 / Phi-4-mini checkpoints, whose per-frequency factors switch
// with the sequence length; headscope does not implement it.
//
// GGUF (llama.cpp's convert_hf_to_gguf.py, Phi3MiniModel): attn_qkv and ffn_up hold the same fused
// rows, unpermuted (llama.cpp runs Phi-3 with NEOX RoPE, the half-split layout); LongRoPE is
// stored as the tensors rope_factors_long / rope_factors_short, refused. llama.cpp itself ignores
// phi3.attention.sliding_window (it disabled SWA for Phi-3); headscope applies it, as transformers does.
#include <algorithm>
#include <filesystem>

#include "io/gguf.h"
#include "models/config_values.h"
#include "models/decoder.h"
#include "models/families.h"
#include "models/llama_like.h"
#include "models/tensor_table.h"
#include "tokenizer/gguf_vocab.h"

namespace headscope::models {
namespace {

// Every layer tensor of the family, by role: its Hugging Face name (behind "model.", or bare:
// llama_like.h) and its GGUF name (llama.cpp). The embedding, final norm and output head are
// read by read_llama_like_globals.
enum Role { kAttnNorm, kQkv, kO, kFfnNorm, kGateUp, kDown, kRoleCount };
constexpr TensorName kLayerTensors[kRoleCount] = {
    /* kAttnNorm */ {"layers.%d.input_layernorm.weight", "blk.%d.attn_norm.weight"},     // [d_model]
    /* kQkv      */ {"layers.%d.self_attn.qkv_proj.weight", "blk.%d.attn_qkv.weight"},   // Q | K | V
    /* kO        */ {"layers.%d.self_attn.o_proj.weight", "blk.%d.attn_output.weight"},  // [d_model, n_head·d_head]
    /* kFfnNorm  */ {"layers.%d.post_attention_layernorm.weight", "blk.%d.ffn_norm.weight"},  // [d_model]
    /* kGateUp   */ {"layers.%d.mlp.gate_up_proj.weight", "blk.%d.ffn_up.weight"},            // gate | up
    /* kDown     */ {"layers.%d.mlp.down_proj.weight", "blk.%d.ffn_down.weight"},             // [d_model, d_ff]
};

}  // namespace

DecoderHyper phi3_config(const nlohmann::json& c, const std::string& where) {
  // transformers 5 writes "rope_parameters" (holding partial_rotary_factor), older files
  // "rope_scaling" and a top-level partial_rotary_factor.
  const char* rope_key = c.contains("rope_parameters") && !c["rope_parameters"].is_null() ? "rope_parameters"
                         : c.contains("rope_scaling") && !c["rope_scaling"].is_null()     ? "rope_scaling"
                                                                                          : nullptr;
  nlohmann::json rest = c;
  double factor = json_number(c, "partial_rotary_factor", where, 1.0);
  rest.erase("partial_rotary_factor");
  if (rope_key != nullptr && c[rope_key].is_object()) {
    const nlohmann::json& rp = c[rope_key];
    const std::string rp_where = where + " " + rope_key;
    const std::string type = json_string(rp, "rope_type", rp_where, json_string(rp, "type", rp_where, "default"));
    if (type == "longrope" || type == "su" || type == "yarn")
      throw Error(rp_where + ": rope type \"" + type +
                  "\" (LongRoPE: the 128K Phi-3, Phi-3.5 and Phi-4-mini) is not supported; only the default RoPE is");
    if (type != "default")
      throw Error(rp_where + ": rope type \"" + type + "\" is not supported for Phi-3 (only \"default\")");
    factor = json_number(rp, "partial_rotary_factor", rp_where, factor);
    rest[rope_key].erase("partial_rotary_factor");
  }
  // Sizes, RoPE base, one sliding window for all layers; rms_norm_eps 1e-5 is Phi3Config's default.
  DecoderHyper hp = llama_config(rest, where, 1e-5);
  // int(head_dim · factor), as transformers; the range is checked before the conversion.
  const int64_t d_rot = factor > 0.0 && factor <= 1.0 ? int64_t(double(hp.cfg.d_head) * factor) : 0;
  if (d_rot < 2 || d_rot % 2 != 0)
    throw Error(where + ": partial_rotary_factor " + std::to_string(factor) + " gives " + std::to_string(d_rot) +
                " rotated dimensions of " + std::to_string(hp.cfg.d_head) + "; it must give an even number ≥ 2");
  hp.rope.d_rot = d_rot;
  return hp;
}

DecoderHyper phi3_config(const io::GgufFile& f) {
  for (const char* t : {"rope_factors_long.weight", "rope_factors_short.weight"})
    if (f.has_tensor(t))
      throw Error(f.path() + ": tensor '" + t +
                  "' means LongRoPE scaling (the 128K Phi-3, Phi-3.5, Phi-4-mini), which headscope does not implement");
  return llama_config(f);  // half-split RoPE over rope.dimension_count, the window for all layers
}

namespace {

std::unique_ptr<Model> build(DecoderHyper hp, const LlamaLikeReaders& readers, std::unique_ptr<Tokenizer> tokenizer) {
  const TensorReader& in = readers.body;
  const ModelConfig& m = hp.cfg;
  const int64_t D = m.d_model, F = m.d_ff, H = m.n_head, Hkv = m.n_kv_head, Dh = m.d_head;
  DecoderWeights w;
  read_llama_like_globals(readers, hp, w);
  in.expect_layers(m.n_layer, {kLayerTensors[kAttnNorm], kLayerTensors[kQkv], kLayerTensors[kDown]});
  w.layers.reserve(size_t(m.n_layer));
  for (int l = 0; l < m.n_layer; ++l) {
    DecoderLayerWeights b;
    const auto get = [&](Role r, std::vector<int64_t> shape) { return in.get(kLayerTensors[r], l, shape); };
    const auto mat = [&](Role r, std::vector<int64_t> shape) { return in.matrix(kLayerTensors[r], l, shape); };
    b.attn_norm = get(kAttnNorm, {D});
    b.w_qkv = mat(kQkv, {(H + 2 * Hkv) * Dh, D});  // already Q | K | V
    b.w_o = mat(kO, {D, H * Dh});
    b.ffn_norm = get(kFfnNorm, {D});
    const QuantMatrix gate_up = mat(kGateUp, {2 * F, D});
    b.w_gate = gate_up.row_block(0, F);
    b.w_up = gate_up.row_block(F, F);
    b.w_down = mat(kDown, {D, F});
    b.window = hp.window[size_t(l)];
    w.layers.push_back(std::move(b));
  }
  DecoderArch arch;
  arch.norm = DecoderArch::Norm::kRms;
  arch.mlp = DecoderArch::Mlp::kSwiGlu;
  arch.rope = true;
  arch.rope_config = hp.rope;
  return std::make_unique<DecoderModel>(hp.cfg, arch, std::move(w), std::move(tokenizer));
}

}  // namespace

std::unique_ptr<Model> load_phi3(const std::string& dir, const nlohmann::json& config, WeightCheck& check) {
  DecoderHyper hp = phi3_config(config, dir + "/config.json");
  hp.cfg.name = std::filesystem::path(dir).filename().string();
  auto tokenizer = Tokenizer::from_model_dir(dir);
  auto src = safetensors_source(dir, check);
  const LlamaLikeReaders readers = llama_like_readers(*src, config, "", hp, check);
  return build(std::move(hp), readers, std::move(tokenizer));
}

std::unique_ptr<Model> load_phi3_gguf(std::shared_ptr<const io::GgufFile> file, const std::string& display_name,
                                      WeightCheck& check) {
  DecoderHyper hp = phi3_config(*file);
  hp.cfg.name = display_name;
  auto tokenizer = tokenizer::tokenizer_from_gguf(*file);
  auto src = gguf_source(file, check);
  return build(std::move(hp), llama_like_readers(*src), std::move(tokenizer));
}

}  // namespace headscope::models
