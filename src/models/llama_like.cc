#include "models/llama_like.h"

#include "headscope/limits.h"
#include "models/config_values.h"

namespace headscope::models {
namespace {

// The tensors outside the layers, by their Hugging Face name (behind the body prefix; the head
// beside the body) and their GGUF name (llama.cpp).
constexpr TensorName kEmbedding = {"embed_tokens.weight", "token_embd.weight"};  // [vocab, d_model]
constexpr TensorName kFinalNorm = {"norm.weight", "output_norm.weight"};         // [d_model]
constexpr TensorName kLmHead = {"lm_head.weight", "output.weight"};              // [vocab, d_model]

// config.json's eos_token_id is an integer, a list (the first is taken), or absent/null.
int32_t eos_from_config(const nlohmann::json& c, const std::string& where) {
  if (!c.contains("eos_token_id") || c["eos_token_id"].is_null()) return -1;
  const nlohmann::json& e = c["eos_token_id"];
  if (e.is_array()) {
    if (e.empty()) return -1;
    return int32_t(json_int(nlohmann::json{{"eos_token_id", e[0]}}, "eos_token_id", where, 0, limits::kMaxVocabulary));
  }
  return int32_t(json_int(c, "eos_token_id", where, 0, limits::kMaxVocabulary));
}

bool is_causal_lm(const nlohmann::json& config) {
  if (!config.contains("architectures") || !config["architectures"].is_array()) return false;
  for (const auto& a : config["architectures"])
    if (a.is_string() && a.get<std::string>().ends_with("ForCausalLM")) return true;
  return false;
}

}  // namespace

DecoderHyper llama_like_config(const nlohmann::json& c, const std::string& where, const LlamaLikeDefaults& defaults) {
  DecoderHyper hp;
  ModelConfig& m = hp.cfg;
  m.architecture = json_string(c, "model_type", where, defaults.model_type);
  read_hf_sizes(c, where, m);
  m.n_kv_head = int(json_int(c, "num_key_value_heads", where, 1, m.n_head, m.n_head));
  m.norm_eps = norm_epsilon(json_number(c, "rms_norm_eps", where, defaults.rms_norm_eps), where + ": \"rms_norm_eps\"");
  m.causal = true;
  if (!c.contains("head_dim") || c["head_dim"].is_null()) {
    if (m.d_model % m.n_head != 0)
      throw Error(where + ": hidden_size " + std::to_string(m.d_model) + " is not a multiple of num_attention_heads " +
                  std::to_string(m.n_head) + " and there is no head_dim");
    m.d_head = m.d_model / m.n_head;
  } else {
    m.d_head = int(json_int(c, "head_dim", where, 1, limits::kMaxHeadWidth));
  }
  if (m.d_head % 2 != 0)
    throw Error(where + ": the head width " + std::to_string(m.d_head) + " is odd; RoPE rotates pairs");
  hp.tied = json_bool(c, "tie_word_embeddings", where, defaults.tie_word_embeddings);
  m.eos_token_id = eos_from_config(c, where);
  check_model_shape(m, where);
  return hp;
}

LlamaLikeReaders llama_like_readers(const WeightSource& gguf) {
  return {TensorReader(gguf, true), TensorReader(gguf, true)};
}

LlamaLikeReaders llama_like_readers(const WeightSource& folder, const nlohmann::json& config, const std::string& outer,
                                    DecoderHyper& hp, WeightCheck& check) {
  // Bare when the embedding is stored without "model." (and is there at all: otherwise the error
  // for the missing tensor names it as the usual checkpoints do).
  const bool bare = !folder.has(outer + "model." + kEmbedding.hf) && folder.has(outer + kEmbedding.hf);
  LlamaLikeReaders in{TensorReader(folder, false, bare ? outer : outer + "model."), TensorReader(folder, false, outer)};
  if (!in.head.has(kLmHead) && !is_causal_lm(config)) {
    // Attention and hidden states are the model's own; the logits that generation and logit
    // attribution need come from the token embedding.
    if (!hp.tied)
      check.warn(folder.describe() + ": no '" + in.head.name(kLmHead) +
                 "' (a checkpoint saved without its "
                 "language-model head); logits use the token embedding as the output head, which this model was not "
                 "trained with");
    hp.tied = true;
  }
  return in;
}

void read_llama_like_globals(const LlamaLikeReaders& in, const DecoderHyper& hp, DecoderWeights& w) {
  const int64_t V = hp.cfg.vocab_size, D = hp.cfg.d_model;
  w.token_embedding = in.body.matrix(kEmbedding, {V, D});
  w.final_norm = in.body.get(kFinalNorm, {D});
  if (hp.tied) return;
  if (!in.head.has(kLmHead))
    throw Error(in.head.source().describe() + ": no " + in.head.name(kLmHead) +
                " and tie_word_embeddings is false; the checkpoint is incomplete");
  w.lm_head = in.head.matrix(kLmHead, {V, D});
}

}  // namespace headscope::models
