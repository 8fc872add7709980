// headscope — RoBERTa (Liu et al. 2019) and XLM-RoBERTa (Conneau et al. 2020), as transformers'
// modeling_roberta.py / modeling_xlm_roberta.py: BERT's encoder with two differences in the
// embeddings — positions count from padding_idx + 1 (a padding token takes position padding_idx),
// and one token type. The forward pass is the shared encoder (encoder.h). XLM-R's Unigram
// vocabulary is read by the tokenizer layer; the model is the same as RoBERTa's.
#include "models/config_values.h"
#include "models/encoder.h"
#include "models/families.h"

namespace headscope::models {
namespace {

// The tensor names are BERT's behind a "roberta." prefix (RobertaFor* and XLMRobertaFor* both
// save "roberta."); RobertaModel / XLMRobertaModel save them bare.
constexpr EncoderTensors kRobertaTensors = {
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
        /* kEncPositionEmbedding */ {"embeddings.position_embeddings.weight", nullptr},    // [max_position_embeddings,
                                                                                           // d_model]
        /* kEncTypeEmbedding     */ {"embeddings.token_type_embeddings.weight", nullptr},  // [1, d_model]
        /* kEncEmbNormW          */ {"embeddings.LayerNorm.weight", nullptr},              // [d_model]
        /* kEncEmbNormB          */ {"embeddings.LayerNorm.bias", nullptr},                // [d_model]
    },
    "roberta.",
};

}  // namespace

RobertaHyper roberta_config(const nlohmann::json& c, const std::string& where) {
  RobertaHyper hp;
  hp.cfg = bert_config(c, where);
  const int64_t rows = hp.cfg.max_positions;  // max_position_embeddings: 514 for 512 tokens
  hp.padding_idx = int(json_int(c, "pad_token_id", where, 0, hp.cfg.vocab_size - 1, 1));
  if (hp.padding_idx + 1 >= rows)
    throw Error(where + ": pad_token_id " + std::to_string(hp.padding_idx) + " leaves no positions in the " +
                std::to_string(rows) + " of max_position_embeddings (RoBERTa's positions start at pad_token_id + 1)");
  hp.position_rows = rows;
  hp.cfg.max_positions = int(rows - hp.padding_idx - 1);
  return hp;
}

std::unique_ptr<Model> load_roberta(const std::string& dir, const nlohmann::json& config, WeightCheck& check) {
  RobertaHyper hp = roberta_config(config, dir + "/config.json");
  EncoderEmbedding embedding;
  embedding.padding_idx = hp.padding_idx;
  embedding.position_rows = hp.position_rows;
  return load_encoder(dir, std::move(hp.cfg), kRobertaTensors, embedding, check);
}

}  // namespace headscope::models
