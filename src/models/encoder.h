// headscope — the post-LayerNorm Transformer encoder that BERT, RoBERTa / XLM-RoBERTa and
// DistilBERT share (transformers' modeling_bert.py; modeling_roberta.py and modeling_distilbert.py
// differ only in tensor names and in how positions and token types enter the embeddings):
//   x   = LN(word_emb[id] + pos_emb[position(t)] + type_emb[0])      (no type_emb in DistilBERT)
//   a   = MHA(x) = Concat(head_1 … head_h) · W_Oᵀ + b_O
//   x   = LN(x + a)
//   x   = LN(x + W_2 · GELU(W_1 · x + b_1) + b_2)
// Each family file (bert.cc, roberta.cc, distilbert.cc) reads its config and gives its tensor
// table; the forward pass and the capture are written once, in encoder.cc.
#pragma once
#include <memory>
#include <string>

#include "headscope/model.h"
#include "models/tensor_table.h"

namespace headscope::models {

class WeightCheck;  // families.h

// The tensors of an encoder, by role.
enum EncoderRole {
  kEncQ,
  kEncQBias,
  kEncK,
  kEncKBias,
  kEncV,
  kEncVBias,
  kEncO,
  kEncOBias,
  kEncAttnNormW,
  kEncAttnNormB,
  kEncUp,
  kEncUpBias,
  kEncDown,
  kEncDownBias,
  kEncFfnNormW,
  kEncFfnNormB,
  kEncRoleCount
};
enum EncoderGlobal {
  kEncWordEmbedding,
  kEncPositionEmbedding,
  kEncTypeEmbedding,
  kEncEmbNormW,
  kEncEmbNormB,
  kEncGlobalCount
};

// A family's tensor table: the Hugging Face names after the checkpoint prefix that the task-head
// classes add ("bert.", "roberta.", "distilbert."); a checkpoint saved from the bare model class
// has none, and the loader accepts either.
struct EncoderTensors {
  TensorName layer[kEncRoleCount];  // "%d" is the layer
  TensorName global[kEncGlobalCount];
  const char* prefix;
};

// How positions and token types enter the embeddings.
struct EncoderEmbedding {
  // RoBERTa's padding index (modeling_roberta.py create_position_ids_from_input_ids): a token
  // that is not padding gets position padding_idx + (its count among non-padding tokens so far),
  // a padding token gets padding_idx. −1: positions are 0, 1, 2, … (BERT, DistilBERT).
  int padding_idx = -1;
  int64_t position_rows = 0;  // rows of the position table (max_position_embeddings)
  // RoBERTa from GGUF: llama.cpp's converter dropped the rows 0 .. padding_idx, so the table's row 0
  // is position padding_idx + 1; a padding token, whose row is gone, is refused.
  bool rows_past_padding = false;
  bool token_types = true;  // false: no token-type table (DistilBERT)
};

// Loads the encoder in `dir` whose hyper-parameters are `cfg` (its name set here).
std::unique_ptr<Model> load_encoder(const std::string& dir, ModelConfig cfg, const EncoderTensors& names,
                                    const EncoderEmbedding& embedding, WeightCheck& check);
// The same from any source: `in` reads the table by its GGUF or Hugging Face names, `cfg.name`
// is already set, and the tokenizer comes with it (a GGUF file carries its own vocabulary).
std::unique_ptr<Model> load_encoder(ModelConfig cfg, std::unique_ptr<Tokenizer> tokenizer, const TensorReader& in,
                                    const EncoderTensors& names, const EncoderEmbedding& embedding);

}  // namespace headscope::models
