// headscope — what the Llama-style decoder families share: Llama (and Mistral, Qwen2, Qwen3),
// Gemma, Phi-3 and OLMo 2 name their sizes alike in config.json and keep their token embedding,
// final norm and output head under the same names. Each family file reads what is its own
// (RoPE, window, norms, layer tensors) and calls these for the rest.
//
// Checkpoint layouts of a Hugging Face folder, all accepted:
//   *ForCausalLM                 "model." + body,  "lm_head.weight" beside it (absent when tied)
//   *ForSequenceClassification   "model." + body,  "score.weight" (not read), no lm_head
//   bare *Model                  body names with no prefix, no lm_head
// A checkpoint with no lm_head that is not a *ForCausalLM computes its logits with the token
// embedding as the head (one warning unless the config ties them); a *ForCausalLM without one,
// untied, is refused as incomplete.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "models/decoder.h"
#include "models/families.h"
#include "models/tensor_table.h"

namespace headscope::models {

// What a family's config class defaults differently (transformers' *Config __init__ defaults).
struct LlamaLikeDefaults {
  const char* model_type = "llama";
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
};

// The sizes (read_hf_sizes), num_key_value_heads, head_dim (else hidden_size / heads; even, as
// RoPE rotates pairs), rms_norm_eps, eos_token_id (an integer, or a list: the first),
// tie_word_embeddings and model_type of a Llama-style config.json, checked (check_model_shape).
// RoPE and the sliding window are left to the family; hp.window is empty.
DecoderHyper llama_like_config(const nlohmann::json& c, const std::string& where, const LlamaLikeDefaults& defaults);

// Where a Llama-style family reads its tensors: `body` for the layers, embedding and final norm
// (table names without "model."), `head` for lm_head. A GGUF reads both by llama.cpp's names.
struct LlamaLikeReaders {
  TensorReader body, head;
};
LlamaLikeReaders llama_like_readers(const WeightSource& gguf);
// A Hugging Face folder, with `outer` in front of every name (a multimodal wrapper's
// "language_model.", else ""). Sets hp.tied when the checkpoint has no head of its own and is not
// a *ForCausalLM (config "architectures"), with a warning through `check` unless it was tied.
LlamaLikeReaders llama_like_readers(const WeightSource& folder, const nlohmann::json& config, const std::string& outer,
                                    DecoderHyper& hp, WeightCheck& check);

// w.token_embedding [vocab, d_model], w.final_norm [d_model] and, unless hp.tied,
// w.lm_head [vocab, d_model] (an Error naming it when it is missing).
void read_llama_like_globals(const LlamaLikeReaders& in, const DecoderHyper& hp, DecoderWeights& w);

}  // namespace headscope::models
