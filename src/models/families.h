// headscope — the model families, one file each, and the loader that picks one.
// Model::load (load.cc) reads config.json's "model_type" (or a GGUF's general.architecture)
// and calls the family's loader below.
//
// Each family reads its hyper-parameters in a pure function (no weights, no files beyond the
// parsed config or the GGUF metadata), so that they can be tested and fuzzed on their own; every
// value is checked there (models/config_values.h) before the loader sizes anything from it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "headscope/error.h"
#include "headscope/model.h"
#include "ops/rope.h"
#include "tensor/quant_matrix.h"

namespace headscope::io {
class GgufFile;
}

namespace headscope::models {

// Checks every weight as it is loaded: a tensor with a zero dimension is refused (Error naming
// it); NaN or ±Inf values give one warning per tensor, or an Error when loading strictly.
class WeightCheck {
 public:
  explicit WeightCheck(bool strict) : strict_(strict) {}
  // `name` is the tensor, `file` where it was read from.
  void operator()(const Tensor& t, const std::string& name, const std::string& file);
  // The same for a matrix kept as stored: its values are dequantised panel by panel to be counted.
  void operator()(const QuantMatrix& m, const std::string& name, const std::string& file);
  // A warning about the checkpoint as a whole (kept under the same limit).
  void warn(const std::string& message);
  // The warnings so far (at most limits::kMaxLoadWarnings, then one line counting the rest).
  std::vector<std::string> warnings() const;

 private:
  void count_non_finite(size_t nan, size_t inf, int64_t numel, const std::string& name, const std::string& file);
  bool strict_;
  std::vector<std::string> warnings_;
  size_t more_ = 0;  // warnings beyond the limit
};

// Whether load_estimate counts a GGUF tensor at its stored bytes: what the decoder families read
// with TensorReader::matrix (linear layers, embeddings), of a type QuantMatrix keeps.
bool gguf_kept_as_stored(const std::string& name, io::GgmlType type);

// The hyper-parameters of a causal decoder family, as read from config.json or GGUF metadata.
struct DecoderHyper {
  ModelConfig cfg;                      // name left empty: the loader sets it
  ops::RopeConfig rope;                 // Llama family
  std::vector<int64_t> window;          // [n_layer] sliding window per layer (0 = none)
  bool tied = false;                    // Llama family: output head tied to the token embedding
  bool scale_by_inverse_layer = false;  // GPT-2's scale_attn_by_inverse_layer_idx
};

// RoBERTa / XLM-RoBERTa: BERT's hyper-parameters, with max_positions the usable length
// (max_position_embeddings − padding_idx − 1) and the position table's rows kept apart.
struct RobertaHyper {
  ModelConfig cfg;
  int padding_idx = 1;        // pad_token_id
  int64_t position_rows = 0;  // max_position_embeddings
};

// Pure readers of the hyper-parameters; `where` names the config file in messages.
ModelConfig bert_config(const nlohmann::json& config, const std::string& where);
ModelConfig bert_config(const io::GgufFile& file);  // "bert"; causal attention and non-WordPiece vocabularies refused
RobertaHyper roberta_config(const nlohmann::json& config, const std::string& where);
ModelConfig distilbert_config(const nlohmann::json& config, const std::string& where);
// Llama, Mistral, Qwen2/3 (and under Phi-3's and OLMo 2's configs, which default rms_norm_eps to
// 1e-5): llama_like_config's sizes, SiLU, RoPE (default or llama3) and the sliding window.
DecoderHyper llama_config(const nlohmann::json& config, const std::string& where, double default_rms_norm_eps = 1e-6);
DecoderHyper llama_config(const io::GgufFile& file);  // also needs the tensor list (tied head)
DecoderHyper gpt2_config(const nlohmann::json& config, const std::string& where);
DecoderHyper gpt2_config(const io::GgufFile& file);
// Phi-3: LongRoPE refused by name (config rope type; GGUF tensors rope_factors_long/short),
// rope.d_rot = int(d_head · partial_rotary_factor). OLMo 2: attention_bias refused.
DecoderHyper phi3_config(const nlohmann::json& config, const std::string& where);
DecoderHyper phi3_config(const io::GgufFile& file);
DecoderHyper olmo2_config(const nlohmann::json& config, const std::string& where);

// bert.cc — BERT / sentence-transformers encoders ("bert", also MiniLM checkpoints).
std::unique_ptr<Model> load_bert(const std::string& dir, const nlohmann::json& config, WeightCheck& check);
// roberta.cc — "roberta" and "xlm-roberta".
std::unique_ptr<Model> load_roberta(const std::string& dir, const nlohmann::json& config, WeightCheck& check);
// distilbert.cc — "distilbert".
std::unique_ptr<Model> load_distilbert(const std::string& dir, const nlohmann::json& config, WeightCheck& check);

// llama.cc — the Llama family: "llama", "mistral", "qwen2", "qwen3" (and SmolLM, which is "llama").
std::unique_ptr<Model> load_llama(const std::string& dir, const nlohmann::json& config, WeightCheck& check);
// gemma.cc — Gemma, Gemma 2, Gemma 3 ("gemma", "gemma2", "gemma3_text", and "gemma3"'s text_config).
std::unique_ptr<Model> load_gemma(const std::string& dir, const nlohmann::json& config, WeightCheck& check);
// gpt2.cc — GPT-2.
std::unique_ptr<Model> load_gpt2(const std::string& dir, const nlohmann::json& config, WeightCheck& check);
// phi3.cc — Phi-3 ("phi3"; fused QKV and gate/up, partial rotary; LongRoPE refused).
std::unique_ptr<Model> load_phi3(const std::string& dir, const nlohmann::json& config, WeightCheck& check);
// olmo2.cc — OLMo 2 ("olmo2"; output norms instead of pre-norms, QK-norm over whole projections).
std::unique_ptr<Model> load_olmo2(const std::string& dir, const nlohmann::json& config, WeightCheck& check);

// The same families from a GGUF file (general.architecture "llama", "qwen2", "gpt2", "bert", ...).
// display_name: the model's name as people see it (the folder or file it was loaded from; GGUF's
// general.name is often an internal training-run name).
std::unique_ptr<Model> load_llama_gguf(std::shared_ptr<const io::GgufFile> file, const std::string& display_name,
                                       WeightCheck& check);
std::unique_ptr<Model> load_gemma_gguf(std::shared_ptr<const io::GgufFile> file, const std::string& display_name,
                                       WeightCheck& check);  // "gemma", "gemma2", "gemma3"
std::unique_ptr<Model> load_phi3_gguf(std::shared_ptr<const io::GgufFile> file, const std::string& display_name,
                                      WeightCheck& check);  // "phi3"
std::unique_ptr<Model> load_olmo2_gguf(std::shared_ptr<const io::GgufFile> file, const std::string& display_name,
                                       WeightCheck& check);  // "olmo2"
std::unique_ptr<Model> load_gpt2_gguf(std::shared_ptr<const io::GgufFile> file, const std::string& display_name,
                                      WeightCheck& check);
std::unique_ptr<Model> load_bert_gguf(std::shared_ptr<const io::GgufFile> file, const std::string& display_name,
                                      WeightCheck& check);  // "bert" (WordPiece vocabulary)

// The families Model::load dispatches to, as one line each: the config.json model_types, then the
// GGUF architectures (load.cc's tables; the refusal of any other names them from there).
std::string supported_model_types();
std::string supported_gguf_architectures();

}  // namespace headscope::models
