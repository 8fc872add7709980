// headscope — BERT (Devlin et al. 2019) and sentence-transformers checkpoints built on it
// (all-MiniLM-L6-v2), as transformers' modeling_bert.py. The forward pass is the shared encoder
// (encoder.h); this file reads the hyper-parameters and names the tensors.
#include <algorithm>
#include <filesystem>

#include "headscope/limits.h"
#include "io/gguf.h"
#include "models/config_values.h"
#include "models/encoder.h"
#include "models/families.h"
#include "tokenizer/gguf_vocab.h"

namespace headscope::models {
namespace {

// Every tensor, by role: its Hugging Face name after the "bert." prefix of BertFor* checkpoints
// (BertModel saves the names bare), and its GGUF name (llama.cpp's LLM_ARCH_BERT; the converter
// drops the pooler and the task heads).
constexpr EncoderTensors kBertTensors = {
    {
        /* kEncQ         */ {"encoder.layer.%d.attention.self.query.weight", "blk.%d.attn_q.weight"},
        /* kEncQBias     */ {"encoder.layer.%d.attention.self.query.bias", "blk.%d.attn_q.bias"},
        /* kEncK         */ {"encoder.layer.%d.attention.self.key.weight", "blk.%d.attn_k.weight"},
        /* kEncKBias     */ {"encoder.layer.%d.attention.self.key.bias", "blk.%d.attn_k.bias"},
        /* kEncV         */ {"encoder.layer.%d.attention.self.value.weight", "blk.%d.attn_v.weight"},
        /* kEncVBias     */ {"encoder.layer.%d.attention.self.value.bias", "blk.%d.attn_v.bias"},
        /* kEncO         */ {"encoder.layer.%d.attention.output.dense.weight", "blk.%d.attn_output.weight"},
        /* kEncOBias     */ {"encoder.layer.%d.attention.output.dense.bias", "blk.%d.attn_output.bias"},
        /* kEncAttnNormW */ {"encoder.layer.%d.attention.output.LayerNorm.weight", "blk.%d.attn_output_norm.weight"},
        /* kEncAttnNormB */ {"encoder.layer.%d.attention.output.LayerNorm.bias", "blk.%d.attn_output_norm.bias"},
        /* kEncUp        */ {"encoder.layer.%d.intermediate.dense.weight", "blk.%d.ffn_up.weight"},
        /* kEncUpBias    */ {"encoder.layer.%d.intermediate.dense.bias", "blk.%d.ffn_up.bias"},
        /* kEncDown      */ {"encoder.layer.%d.output.dense.weight", "blk.%d.ffn_down.weight"},
        /* kEncDownBias  */ {"encoder.layer.%d.output.dense.bias", "blk.%d.ffn_down.bias"},
        /* kEncFfnNormW  */ {"encoder.layer.%d.output.LayerNorm.weight", "blk.%d.layer_output_norm.weight"},
        /* kEncFfnNormB  */ {"encoder.layer.%d.output.LayerNorm.bias", "blk.%d.layer_output_norm.bias"},
    },
    {
        /* kEncWordEmbedding     */ {"embeddings.word_embeddings.weight", "token_embd.weight"},  // [vocab, d_model]
        /* kEncPositionEmbedding */
        {"embeddings.position_embeddings.weight", "position_embd.weight"},  // [max_positions,
                                                                            // d_model]
        /* kEncTypeEmbedding     */ {"embeddings.token_type_embeddings.weight", "token_types.weight"},  // [type_vocab,
                                                                                                        // d_model]
        /* kEncEmbNormW          */ {"embeddings.LayerNorm.weight", "token_embd_norm.weight"},          // [d_model]
        /* kEncEmbNormB          */ {"embeddings.LayerNorm.bias", "token_embd_norm.bias"},              // [d_model]
    },
    "bert.",
};

}  // namespace

// BertConfig's keys; RoBERTa and XLM-RoBERTa configs are BertConfigs too (roberta.cc).
ModelConfig bert_config(const nlohmann::json& c, const std::string& where) {
  ModelConfig m;
  m.architecture = json_string(c, "model_type", where, "bert");
  read_hf_sizes(c, where, m);
  m.n_kv_head = m.n_head;
  m.norm_eps = norm_epsilon(json_number(c, "layer_norm_eps", where, 1e-12), where + ": \"layer_norm_eps\"");
  m.causal = false;
  if (m.d_model % m.n_head != 0)
    throw Error(where + ": hidden_size " + std::to_string(m.d_model) + " is not a multiple of num_attention_heads " +
                std::to_string(m.n_head));
  m.d_head = m.d_model / m.n_head;
  const std::string act = json_string(c, "hidden_act", where, "gelu");
  if (act != "gelu") throw Error(where + ": hidden_act \"" + act + "\" is not supported (only \"gelu\")");
  // relative_key / relative_key_query (learned distance embeddings added to the scores) are refused by name.
  const std::string pos = json_string(c, "position_embedding_type", where, "absolute");
  if (pos != "absolute")
    throw Error(where + ": position_embedding_type \"" + pos + "\" is not supported (only \"absolute\")");
  check_encoder_options(c, where);
  check_model_shape(m, where);
  return m;
}

// The same hyper-parameters from a GGUF file of general.architecture "bert", as llama.cpp's
// converter writes them (BertModel.set_gguf_parameters). Pooling (bert.pooling_type) is for
// sentence embeddings and is not used here; a causal mask (bert.attention.causal = true) is not
// BERT and is refused. RoBERTa is converted as "bert" too (RobertaModel), told apart by its
// byte-level BPE vocabulary (tokenizer.ggml.model "gpt2"); its position table is cut past the
// padding index and bert.context_length already counts the rows left. XLM-RoBERTa
// (XLMRobertaModel) is converted the same way with a SentencePiece Unigram vocabulary
// (tokenizer.ggml.model "t5", see gguf_vocab.cc) and runs as RoBERTa does. DistilBERT is "bert"
// with no token-type table (see load_bert_gguf).
ModelConfig bert_config(const io::GgufFile& f) {
  using limits::kMaxLayers, limits::kMaxHeads, limits::kMaxModelWidth, limits::kMaxFeedForward, limits::kMaxVocabulary,
      limits::kMaxPositions;
  const std::string& where = f.path();
  ModelConfig m;
  m.architecture = "bert";
  const std::string p = "bert.";
  if (f.get_bool(p + "attention.causal", false))
    throw Error(where + ": metadata '" + p +
                "attention.causal' is true: a causal mask is not BERT's (bidirectional "
                "attention); headscope does not run this file as a BERT encoder");
  const std::string vocab = f.get_string("tokenizer.ggml.model", "");
  if (vocab == "gpt2") {
    m.architecture = "roberta";
  } else if (vocab == "t5") {
    m.architecture = "xlm-roberta";
  } else if (vocab != "bert") {
    throw Error(where + ": a 'bert' GGUF with tokenizer.ggml.model '" + vocab +
                "' is not supported (BERT's 'bert', "
                "RoBERTa's 'gpt2' and XLM-RoBERTa's 't5' are); load the model's Hugging Face folder instead");
  }
  m.n_layer = int(gguf_int(f, p + "block_count", 1, kMaxLayers));
  m.n_head = int(gguf_int(f, p + "attention.head_count", 1, kMaxHeads));
  m.n_kv_head = m.n_head;
  m.d_model = int(gguf_int(f, p + "embedding_length", 1, kMaxModelWidth));
  m.d_ff = int(gguf_int(f, p + "feed_forward_length", 1, kMaxFeedForward));
  m.max_positions = int(gguf_int(f, p + "context_length", 1, kMaxPositions));
  m.norm_eps = norm_epsilon(gguf_number(f, p + "attention.layer_norm_epsilon", 1e-12),
                            where + ": metadata '" + p + "attention.layer_norm_epsilon'");
  m.causal = false;
  if (m.d_model % m.n_head != 0)
    throw Error(where + ": " + p + "embedding_length " + std::to_string(m.d_model) + " is not a multiple of " + p +
                "attention.head_count " + std::to_string(m.n_head));
  m.d_head = m.d_model / m.n_head;
  const int64_t n_tokens = f.has("tokenizer.ggml.tokens") ? int64_t(f.value("tokenizer.ggml.tokens").count) : 0;
  m.vocab_size = int(gguf_int(f, p + "vocab_size", 1, kMaxVocabulary, std::min(n_tokens, kMaxVocabulary + 1)));
  check_model_shape(m, where);
  return m;
}

std::unique_ptr<Model> load_bert(const std::string& dir, const nlohmann::json& config, WeightCheck& check) {
  ModelConfig cfg = bert_config(config, dir + "/config.json");
  EncoderEmbedding embedding;
  embedding.position_rows = cfg.max_positions;
  return load_encoder(dir, std::move(cfg), kBertTensors, embedding, check);
}

std::unique_ptr<Model> load_bert_gguf(std::shared_ptr<const io::GgufFile> file, const std::string& display_name,
                                      WeightCheck& check) {
  ModelConfig cfg = bert_config(*file);
  cfg.name = display_name;
  auto tokenizer = tokenizer::tokenizer_from_gguf(*file);
  const auto src = gguf_source(file, check);
  EncoderEmbedding embedding;
  embedding.position_rows = cfg.max_positions;
  if (!file->has_tensor("token_types.weight")) {
    // DistilBERT as llama.cpp converts it (DistilBertModel): "bert" with no token-type table, and
    // tokenizer.ggml.token_type_count 1 since DistilBertConfig has no type_vocab_size. A BERT or
    // RoBERTa file from the converter always holds the table (of token_type_count rows), so a
    // missing table with any other count is a damaged file, refused.
    const int64_t types =
        file->has("tokenizer.ggml.token_type_count") ? file->get_int("tokenizer.ggml.token_type_count") : -1;
    if (cfg.architecture != "bert" || types != 1)
      throw Error(file->path() + ": tensor 'token_types.weight' is missing and tokenizer.ggml.token_type_count is " +
                  (types < 0 ? std::string("absent") : std::to_string(types)) +
                  "; only DistilBERT (a WordPiece "
                  "vocabulary and token_type_count 1) has no token-type table, so this file looks damaged");
    cfg.architecture = "distilbert";
    embedding.token_types = false;
  }
  const bool roberta = cfg.architecture == "roberta" || cfg.architecture == "xlm-roberta";
  if (roberta && file->has("tokenizer.ggml.padding_token_id")) {
    // RoBERTa and XLM-RoBERTa count positions past the padding token; the converter kept only those rows.
    const int64_t pad = file->get_int("tokenizer.ggml.padding_token_id");
    if (pad < 0 || pad >= cfg.vocab_size)
      throw Error(file->path() + ": tokenizer.ggml.padding_token_id " + std::to_string(pad) + " is outside the " +
                  std::to_string(cfg.vocab_size) + " tokens");
    embedding.padding_idx = int(pad);
    embedding.rows_past_padding = true;
  }
  return load_encoder(std::move(cfg), std::move(tokenizer), TensorReader(*src, true), kBertTensors, embedding);
}

}  // namespace headscope::models
