// headscope — BERT (Devlin et al. 2019) and sentence-transformers checkpoints built on it
// (all-MiniLM-L6-v2), as transformers' modeling_bert.py. The forward pass is the shared encoder
// (encoder.h); this file reads the hyper-parameters and names the tensors.
#include <filesystem>

#include "models/config_values.h"
#include "models/encoder.h"
#include "models/families.h"

namespace headscope::models {
namespace {

// Every tensor, by role: its Hugging Face name after the "bert." prefix of BertFor* checkpoints
// (BertModel saves the names bare). BERT is not read from GGUF.
constexpr EncoderTensors kBertTensors = {
    {
        /* kEncQ         */ {"encoder.layer.%d.attention.self.query.weight", nullptr},
        /* kEncQBias     */ {"encoder.layer.%d.attention.self.query.bias", nullptr},
        /* kEncK         */ {"encoder.layer.%d.attention.self.key.weight", nullptr},
        /* kEncKBias     */ {"encoder.layer.%d.attention.self.key.bias", nullptr},
        /* kEncV         */ {"encoder.layer.%d.attention.self.value.weight", nullptr},
        /* kEncVBias     */ {"encoder.layer.%d.attention.self.value.bias", nullptr},
        /* kEncO         */ {"encoder.layer.%d.attention.output.dense.weight", nullptr},
        /* kEncOBias     */ {"encoder.layer.%d.attention.output.dense.bias", nullptr},
        /* kEncAttnNormW */ {"encoder.layer.%d.attention.output.LayerNorm.weight", nullptr},
        /* kEncAttnNormB */ {"encoder.layer.%d.attention.output.LayerNorm.bias", nullptr},
        /* kEncUp        */ {"encoder.layer.%d.intermediate.dense.weight", nullptr},
        /* kEncUpBias    */ {"encoder.layer.%d.intermediate.dense.bias", nullptr},
        /* kEncDown      */ {"encoder.layer.%d.output.dense.weight", nullptr},
        /* kEncDownBias  */ {"encoder.layer.%d.output.dense.bias", nullptr},
        /* kEncFfnNormW  */ {"encoder.layer.%d.output.LayerNorm.weight", nullptr},
        /* kEncFfnNormB  */ {"encoder.layer.%d.output.LayerNorm.bias", nullptr},
    },
    {
        /* kEncWordEmbedding     */ {"embeddings.word_embeddings.weight", nullptr},        // [vocab, d_model]
        /* kEncPositionEmbedding */ {"embeddings.position_embeddings.weight", nullptr},    // [max_positions, d_model]
        /* kEncTypeEmbedding     */ {"embeddings.token_type_embeddings.weight", nullptr},  // [type_vocab, d_model]
        /* kEncEmbNormW          */ {"embeddings.LayerNorm.weight", nullptr},              // [d_model]
        /* kEncEmbNormB          */ {"embeddings.LayerNorm.bias", nullptr},                // [d_model]
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
  // relative_key / relative_key_query add learned distance embeddings to the scores: not implemented.
  const std::string pos = json_string(c, "position_embedding_type", where, "absolute");
  if (pos != "absolute")
    throw Error(where + ": position_embedding_type \"" + pos + "\" is not supported (only \"absolute\")");
  check_encoder_options(c, where);
  check_model_shape(m, where);
  return m;
}

std::unique_ptr<Model> load_bert(const std::string& dir, const nlohmann::json& config, WeightCheck& check) {
  ModelConfig cfg = bert_config(config, dir + "/config.json");
  EncoderEmbedding embedding;
  embedding.position_rows = cfg.max_positions;
  return load_encoder(dir, std::move(cfg), kBertTensors, embedding, check);
}

}  // namespace headscope::models
