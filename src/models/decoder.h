// headscope — the pre-norm causal decoder that the Llama family (Llama, Mistral, Qwen2, Qwen3,
// SmolLM), Gemma 1/2/3, Phi-3, OLMo 2 and GPT-2 share. A family file (llama.cc, gemma.cc, phi3.cc,
// olmo2.cc, gpt2.cc) only reads its hyper-parameters and fills DecoderWeights from its tensor-name
// table; the forward pass lives here once (the bracketed steps are off unless the family's
// DecoderArch turns them on):
//
//   x = E[ids] [· √d_model] (+ P[positions])                     embeddings [Gemma]  [T, d_model]
//   for each layer:
//     h = Norm(x)  [h = x]                                       RMSNorm | LayerNorm  [no pre-norm: OLMo 2]
//     q, k, v = h W_qᵀ, h W_kᵀ, h W_vᵀ (+ biases)                 fused QKV GEMM
//     [q_h, k_h = RMSNorm(q_h), RMSNorm(k_h)]                    QK-norm over d_head [Qwen3, Gemma 3]
//     [q, k = RMSNorm(q), RMSNorm(k)]                            over all heads at once [OLMo 2]
//     q, k = RoPE(q), RoPE(k) over d_rot ≤ d_head dims of a head  base per layer [Gemma 3]; partial [Phi-3]
//     s_h = scale · q_h k_{g(h)}ᵀ, [s_h = c · tanh(s_h / c)]     soft-capping [Gemma 2]
//     o_h = softmax(s_h + causal/window mask) v_{g(h)}           g = kv_head_of (GQA)
//     a = concat(o_h) W_Oᵀ (+ b_O);  [a = RMSNorm(a)];  x = x + a      sandwich norm [Gemma 2/3, OLMo 2]
//     h = Norm(x)  [h = x]
//     f = W_down (silu(W_gate h) ⊙ W_up h)                       SwiGLU (Llama)
//       | W_down (GELU_tanh(W_gate h) ⊙ W_up h)                  GeGLU (Gemma)
//       | W_down GELU_tanh(W_up h + b_up) + b_down               GPT-2
//     [f = RMSNorm(f)];  x = x + f                               sandwich norm [Gemma 2/3, OLMo 2]
//   logits = Norm_final(x) · E_outᵀ  [logits = c · tanh(logits / c)]   E_out = E when tied
//
// The keys and values of every layer are kept (the KV cache), so a later call can add tokens
// without re-running the earlier ones: `headscope generate` runs the prompt once and then one
// row per new token. A whole run (run()) keeps only the layer being computed.
#pragma once
#include <memory>
#include <mutex>
#include <vector>

#include "headscope/model.h"
#include "ops/quant_linear.h"
#include "ops/rope.h"
#include "ops/softmax.h"

namespace headscope::models {

// The matrices of the linear layers and the token embedding are QuantMatrix: fp32, or GGUF
// blocks left in the mapped file and dequantised panel by panel inside each product
// (ops/quant_linear.h). W_O too: the capture reads a stored W_O a head's columns at a time
// (project_heads, value norms; QuantMatrix::dequantize_cols), and output_projection hands out an
// fp32 copy. Norms, biases and small vectors are fp32.
struct DecoderLayerWeights {
  Tensor attn_norm, attn_norm_bias;      // [d_model]; the bias only with LayerNorm
  QuantMatrix w_qkv;                     // [(n_head + 2·n_kv_head)·d_head, d_model]: Q | K | V
  Tensor b_qkv;                          // the same rows (or empty)
  QuantMatrix w_o;                       // [d_model, n_head·d_head]
  Tensor b_o;                            // [d_model] (zeros when the family has none)
  Tensor ffn_norm, ffn_norm_bias;        // [d_model]
  QuantMatrix w_gate;                    // [d_ff, d_model] (SwiGLU, GeGLU)
  QuantMatrix w_up;                      // [d_ff, d_model]
  Tensor b_up;                           // [d_ff] or empty
  QuantMatrix w_down;                    // [d_model, d_ff]
  Tensor b_down;                         // [d_model] or empty
  Tensor q_norm, k_norm;                 // [d_head] each, with DecoderArch::qk_norm; [n_head·d_head] and
                                         // [n_kv_head·d_head] with qk_norm_whole
  Tensor post_attn_norm, post_ffn_norm;  // [d_model] each, with DecoderArch::sandwich_norm
  int64_t window = 0;                    // sliding-window size of this layer (Mistral); 0 = full causal
  bool local_rope = false;               // RoPE with DecoderArch::local_rope_config (Gemma 3 sliding layers)
};

struct DecoderArch {
  enum class Norm { kRms, kLayer };
  enum class Mlp { kSwiGlu, kGeGlu, kGeluTanh };
  Norm norm = Norm::kRms;
  Mlp mlp = Mlp::kSwiGlu;
  bool rope = true;                     // false: learned absolute positions (GPT-2)
  ops::RopeConfig rope_config;          // d_rot, base, layout, scaling
  ops::RopeConfig local_rope_config;    // of layers with local_rope (Gemma 3: rope_local_base_freq)
  bool scale_by_inverse_layer = false;  // GPT-2's scale_attn_by_inverse_layer_idx
  bool qk_norm = false;                 // RMSNorm of each head's q and k before RoPE (Qwen3, Gemma 3)
  bool sandwich_norm = false;           // RMSNorm of the attention and feed-forward outputs (Gemma 2/3, OLMo 2)
  bool qk_norm_whole = false;           // with qk_norm: one RMSNorm over all heads' q, another over all k (OLMo 2)
  bool pre_norm = true;                 // false: attention and feed-forward read the stream x itself (OLMo 2)
  float embedding_scale = 0.0f;         // E[ids] times this (Gemma: √d_model rounded to fp32); 0 = none
  float attention_scale = 0.0f;         // score scale (Gemma: query_pre_attn_scalar^−½); 0 = 1/√d_head
  float attention_softcap = 0.0f;       // Gemma 2's attn_logit_softcapping; 0 = none
  float final_softcap = 0.0f;           // Gemma 2's final_logit_softcapping; 0 = none
};

struct DecoderWeights {
  QuantMatrix token_embedding;  // [vocab, d_model]: a row is dequantised per token
  Tensor position_embedding;    // [max_positions, d_model] (GPT-2) or empty
  std::vector<DecoderLayerWeights> layers;
  Tensor final_norm, final_norm_bias;  // [d_model]
  QuantMatrix lm_head;                 // [vocab, d_model]; empty when tied to token_embedding
};

class DecoderModel final : public Model {
 public:
  DecoderModel(ModelConfig config, DecoderArch arch, DecoderWeights weights, std::unique_ptr<Tokenizer> tokenizer);

  const ModelConfig& config() const override { return cfg_; }
  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  Capture run(const Encoding& encoding, const CaptureOptions& options) const override;
  Capture resume(const Encoding& encoding, int first_layer, const Tensor& prefix,
                 const CaptureOptions& options) const override;
  uint64_t run_bytes(int64_t T, const CaptureOptions& options) const override;  // one layer's keys and values kept
  uint64_t state_bytes(int64_t T) const override;
  void attention_from_qk(const Capture& capture, int layer, int head, int64_t q0, int64_t q1, int64_t k0, int64_t k1,
                         float* probs) const override;
  Tensor output_projection(int layer) const override { return w_.layers.at(size_t(layer)).w_o.to_f32(); }
  const Tensor& output_bias(int layer) const override { return w_.layers.at(size_t(layer)).b_o; }
  AttentionWeights attention_weights(int layer) const override;
  LogitReadout final_readout() const override;
  std::vector<const Tensor*> attention_output_gains() const override;
  std::unique_ptr<DecoderState> start() const override;
  Capture extend(DecoderState& state, const std::vector<int32_t>& ids, const CaptureOptions& options,
                 std::vector<float>* next_logits) const override;
  std::vector<Capture> run_batch(std::span<const Encoding> encodings,
                                 std::span<const CaptureOptions> options) const override;
  std::vector<Capture> resume_batch(std::span<const Encoding> encodings, int first_layer,
                                    std::span<const Tensor* const> prefixes,
                                    std::span<const CaptureOptions> options) const override;
  // Reverse mode (decoder_backward.cc).
  Gradients gradients(const Encoding& encoding, const GradientSeed& seed,
                      const GradientOptions& options) const override;
  uint64_t gradient_bytes(int64_t T, const GradientOptions& options) const override;
  // Whether gradients() keeps every layer's activations (limits::kGradientTapeBytes) instead of
  // computing each layer again in the backward; one layer's activations and buffers in bytes.
  bool keeps_every_layer(int64_t T, const GradientOptions& options) const;
  uint64_t layer_tape_bytes(int64_t T) const;
  uint64_t tape_scratch_bytes(int64_t T) const;

  // What extend() allocates to add T tokens after `past` ones to a cache of `capacity` rows that
  // keeps `cache_layers` layers (every layer for generation, one for a whole run).
  uint64_t extend_bytes(int64_t past, int64_t capacity, int64_t T, const CaptureOptions& options,
                        int cache_layers) const;
  // extend_bytes less the capture: the pass's activations, cache, RoPE tables and logits row.
  uint64_t working_bytes(int64_t past, int64_t capacity, int64_t T, int cache_layers) const;

 private:
  float attention_scale(int layer) const;        // 1/√d_head (÷ (layer + 1) with GPT-2's option)
  ops::KeyMask attention_mask(int layer) const;  // causal, with the layer's sliding window
  class Pass;                                    // decoder.cc: one call of extend(), block by block
  class Backward;                                // decoder_backward.cc: one layer's activations, then undone
  Tensor token_embeddings(const std::vector<int32_t>& ids, const Tensor* given) const;  // E[id] (· scale), or `given`
  void check_ids(const std::vector<int32_t>& ids, int64_t past) const;  // T > 0, fits, ids in the vocabulary
  uint64_t gathered_logit_bytes(const CaptureOptions& options, int64_t T) const;
  const QuantMatrix& unembedding() const { return w_.lm_head.empty() ? w_.token_embedding : w_.lm_head; }
  ModelConfig cfg_;
  DecoderArch arch_;
  DecoderWeights w_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<float> inv_freq_;        // [d_rot / 2] RoPE frequencies
  std::vector<float> local_inv_freq_;  // [d_rot / 2] of layers with local_rope (else empty)
  std::vector<int> kv_head_of_;        // [n_head]
  // The unembedding as fp32 for final_readout() when it is stored quantized: made on first use
  // (direct logit attribution only), then kept.
  mutable std::once_flag unembedding_once_;
  mutable Tensor unembedding_f32_;
};

}  // namespace headscope::models
