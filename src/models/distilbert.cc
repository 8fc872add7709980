// headscope — DistilBERT (Sanh et al. 2019), as transformers' modeling_distilbert.py: BERT's
// post-LayerNorm encoder with its own tensor names, its own config keys (dim, n_layers, n_heads,
// hidden_dim), no token types and a fixed LayerNorm epsilon of 1e-12. The forward pass is the
// shared encoder (encoder.h).
//
// sinusoidal_pos_embds = true: transformers writes the sinusoids into
// embeddings.position_embeddings.weight at initialisation and saves them with the weights, so the
// table in the file is used as it is, like a learned one.
#include "headscope/limits.h"
#include "models/config_values.h"
#include "models/encoder.h"
#include "models/families.h"

namespace headscope::models {
namespace {

// Every tensor, by role, after the "distilbert." prefix of DistilBertFor* checkpoints.
constexpr EncoderTensors kDistilbertTensors = {
    {
        /* kEncQ         */ {"transformer.layer.%d.attention.q_lin.weight", nullptr},
        /* kEncQBias     */ {"transformer.layer.%d.attention.q_lin.bias", nullptr},
        /* kEncK         */ {"transformer.layer.%d.attention.k_lin.weight", nullptr},
        /* kEncKBias     */ {"transformer.layer.%d.attention.k_lin.bias", nullptr},
        /* kEncV         */ {"transformer.layer.%d.attention.v_lin.weight", nullptr},
        /* kEncVBias     */ {"transformer.layer.%d.attention.v_lin.bias", nullptr},
        /* kEncO         */ {"transformer.layer.%d.attention.out_lin.weight", nullptr},
        /* kEncOBias     */ {"transformer.layer.%d.attention.out_lin.bias", nullptr},
        /* kEncAttnNormW */ {"transformer.layer.%d.sa_layer_norm.weight", nullptr},
        /* kEncAttnNormB */ {"transformer.layer.%d.sa_layer_norm.bias", nullptr},
        /* kEncUp        */ {"transformer.layer.%d.ffn.lin1.weight", nullptr},
        /* kEncUpBias    */ {"transformer.layer.%d.ffn.lin1.bias", nullptr},
        /* kEncDown      */ {"transformer.layer.%d.ffn.lin2.weight", nullptr},
        /* kEncDownBias  */ {"transformer.layer.%d.ffn.lin2.bias", nullptr},
        /* kEncFfnNormW  */ {"transformer.layer.%d.output_layer_norm.weight", nullptr},
        /* kEncFfnNormB  */ {"transformer.layer.%d.output_layer_norm.bias", nullptr},
    },
    {
        /* kEncWordEmbedding     */ {"embeddings.word_embeddings.weight", nullptr},      // [vocab, d_model]
        /* kEncPositionEmbedding */ {"embeddings.position_embeddings.weight", nullptr},  // [max_positions, d_model]
        /* kEncTypeEmbedding     */ {nullptr, nullptr},                                  // none
        /* kEncEmbNormW          */ {"embeddings.LayerNorm.weight", nullptr},            // [d_model]
        /* kEncEmbNormB          */ {"embeddings.LayerNorm.bias", nullptr},              // [d_model]
    },
    "distilbert.",
};

// modeling_distilbert.py builds every LayerNorm with eps=1e-12; the config has no key for it.
constexpr float kDistilbertNormEps = 1e-12f;

}  // namespace

ModelConfig distilbert_config(const nlohmann::json& c, const std::string& where) {
  using limits::kMaxLayers, limits::kMaxHeads, limits::kMaxModelWidth, limits::kMaxFeedForward, limits::kMaxVocabulary,
      limits::kMaxPositions;
  ModelConfig m;
  m.architecture = "distilbert";
  m.n_layer = int(json_int(c, "n_layers", where, 1, kMaxLayers));
  m.n_head = int(json_int(c, "n_heads", where, 1, kMaxHeads));
  m.n_kv_head = m.n_head;
  m.d_model = int(json_int(c, "dim", where, 1, kMaxModelWidth));
  m.d_ff = int(json_int(c, "hidden_dim", where, 1, kMaxFeedForward));
  m.vocab_size = int(json_int(c, "vocab_size", where, 1, kMaxVocabulary));
  m.max_positions = int(json_int(c, "max_position_embeddings", where, 1, kMaxPositions));
  m.norm_eps = kDistilbertNormEps;
  m.causal = false;
  if (m.d_model % m.n_head != 0)
    throw Error(where + ": dim " + std::to_string(m.d_model) + " is not a multiple of n_heads " +
                std::to_string(m.n_head));
  m.d_head = m.d_model / m.n_head;
  const std::string act = json_string(c, "activation", where, "gelu");
  if (act != "gelu") throw Error(where + ": activation \"" + act + "\" is not supported (only \"gelu\")");
  json_bool(c, "sinusoidal_pos_embds", where, false);  // either way the table is in the file (above)
  check_encoder_options(c, where);
  check_model_shape(m, where);
  return m;
}

std::unique_ptr<Model> load_distilbert(const std::string& dir, const nlohmann::json& config, WeightCheck& check) {
  ModelConfig cfg = distilbert_config(config, dir + "/config.json");
  EncoderEmbedding embedding;
  embedding.position_rows = cfg.max_positions;
  embedding.token_types = false;
  return load_encoder(dir, std::move(cfg), kDistilbertTensors, embedding, check);
}

}  // namespace headscope::models
