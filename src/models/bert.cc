// headscope — BERT-family encoders (Devlin et al. 2019), as in transformers' modeling_bert.py
// (BertEmbeddings, BertSelfAttention with eager attention, BertSelfOutput, BertIntermediate,
// BertOutput). Post-LayerNorm blocks:
//   x   = LN(word_emb[id] + pos_emb[t] + type_emb[0])
//   a   = MHA(x) = Concat(head_1 … head_h) · W_Oᵀ + b_O
//   x   = LN(x + a)
//   x   = LN(x + W_2 · GELU(W_1 · x + b_1) + b_2)
#include <cmath>
#include <filesystem>

#include "capture/capture.h"
#include "models/config_values.h"
#include "models/families.h"
#include "models/tensor_table.h"
#include "ops/activations.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/norm.h"
#include "tensor/tensor_ops.h"

namespace headscope::models {
namespace {

// Every tensor of the family, by role: its Hugging Face name (after the optional "bert." prefix of
// checkpoints saved from a BertFor* head). BERT is not read from GGUF.
enum Role {
  kQ, kQBias, kK, kKBias, kV, kVBias, kO, kOBias, kAttnNormW, kAttnNormB,
  kUp, kUpBias, kDown, kDownBias, kFfnNormW, kFfnNormB, kRoleCount
};
constexpr TensorName kLayerTensors[kRoleCount] = {
    /* kQ        */ {"encoder.layer.%d.attention.self.query.weight", nullptr},
    /* kQBias    */ {"encoder.layer.%d.attention.self.query.bias", nullptr},
    /* kK        */ {"encoder.layer.%d.attention.self.key.weight", nullptr},
    /* kKBias    */ {"encoder.layer.%d.attention.self.key.bias", nullptr},
    /* kV        */ {"encoder.layer.%d.attention.self.value.weight", nullptr},
    /* kVBias    */ {"encoder.layer.%d.attention.self.value.bias", nullptr},
    /* kO        */ {"encoder.layer.%d.attention.output.dense.weight", nullptr},
    /* kOBias    */ {"encoder.layer.%d.attention.output.dense.bias", nullptr},
    /* kAttnNormW */ {"encoder.layer.%d.attention.output.LayerNorm.weight", nullptr},
    /* kAttnNormB */ {"encoder.layer.%d.attention.output.LayerNorm.bias", nullptr},
    /* kUp       */ {"encoder.layer.%d.intermediate.dense.weight", nullptr},
    /* kUpBias   */ {"encoder.layer.%d.intermediate.dense.bias", nullptr},
    /* kDown     */ {"encoder.layer.%d.output.dense.weight", nullptr},
    /* kDownBias */ {"encoder.layer.%d.output.dense.bias", nullptr},
    /* kFfnNormW */ {"encoder.layer.%d.output.LayerNorm.weight", nullptr},
    /* kFfnNormB */ {"encoder.layer.%d.output.LayerNorm.bias", nullptr},
};
enum Global { kWordEmbedding, kPositionEmbedding, kTypeEmbedding, kEmbNormW, kEmbNormB, kGlobalCount };
constexpr TensorName kGlobalTensors[kGlobalCount] = {
    /* kWordEmbedding     */ {"embeddings.word_embeddings.weight", nullptr},        // [vocab, d_model]
    /* kPositionEmbedding */ {"embeddings.position_embeddings.weight", nullptr},    // [max_positions, d_model]
    /* kTypeEmbedding     */ {"embeddings.token_type_embeddings.weight", nullptr},  // [type_vocab, d_model]
    /* kEmbNormW          */ {"embeddings.LayerNorm.weight", nullptr},              // [d_model]
    /* kEmbNormB          */ {"embeddings.LayerNorm.bias", nullptr},                // [d_model]
};

// The four GEMMs hold their weights (nn.Linear layout) and a prepacked copy (ops/packed_linear.h).
struct BertLayer {
  ops::PackedLinear qkv;        // W [3·d_model, d_model], b [3·d_model] — Q, K, V fused at load time
  ops::PackedLinear o;          // W_O [d_model, d_model], b_O [d_model]
  Tensor ln_attn_g, ln_attn_b;  // [d_model]
  ops::PackedLinear up;         // [d_ff, d_model], [d_ff]
  ops::PackedLinear down;       // [d_model, d_ff], [d_model]
  Tensor ln_ffn_g, ln_ffn_b;    // [d_model]
};

class BertModel final : public Model {
 public:
  BertModel(const std::string& dir, const nlohmann::json& config, WeightCheck& check);
  const ModelConfig& config() const override { return cfg_; }
  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  Capture run(const Encoding& encoding, const CaptureOptions& options) const override;
  Capture resume(const Encoding& encoding, int first_layer, const Tensor& prefix,
                 const CaptureOptions& options) const override;
  uint64_t run_bytes(int64_t T, const CaptureOptions& options) const override;
  void attention_from_qk(const Capture& capture, int layer, int head, int64_t q0, int64_t q1, int64_t k0, int64_t k1,
                         float* probs) const override {
    capture::attention_from_qk(capture, layer, head, q0, q1, k0, k1, attention_scale(), ops::KeyMask{}, probs);
  }
  const Tensor& output_projection(int layer) const override { return layers_.at(size_t(layer)).o.weights(); }
  const Tensor& output_bias(int layer) const override { return layers_.at(size_t(layer)).o.bias(); }

 private:
  float attention_scale() const { return 1.0f / std::sqrt(static_cast<float>(cfg_.d_head)); }
  void run_layers(int first, std::vector<float>& x, capture::Recorder& rec) const;
  ModelConfig cfg_;
  std::unique_ptr<Tokenizer> tokenizer_;
  Tensor word_emb_, pos_emb_, type_emb_, ln_emb_g_, ln_emb_b_;  // [V, D], [P, D], [types, D], [D], [D]
  std::vector<BertLayer> layers_;
  std::vector<int> kv_head_of_;  // [n_head], the identity: every head has its own keys
};

BertModel::BertModel(const std::string& dir, const nlohmann::json& c, WeightCheck& check) {
  cfg_ = bert_config(c, dir + "/config.json");
  cfg_.name = std::filesystem::path(dir).filename().string();
  tokenizer_ = Tokenizer::from_model_dir(dir);
  const auto src = safetensors_source(dir, check);
  // Checkpoints saved from BertModel have bare names; from BertFor* heads they carry "bert.".
  const TensorReader in(*src, false, src->has(kGlobalTensors[kWordEmbedding].hf) ? "" : "bert.");
  const int64_t D = cfg_.d_model, F = cfg_.d_ff;
  in.expect_layers(cfg_.n_layer, {kLayerTensors[kFfnNormB]});
  word_emb_ = in.get(kGlobalTensors[kWordEmbedding], {cfg_.vocab_size, D});
  pos_emb_ = in.get(kGlobalTensors[kPositionEmbedding], {cfg_.max_positions, D});
  type_emb_ = in.get(kGlobalTensors[kTypeEmbedding], {});
  type_emb_.expect_shape({-1, D}, in.name(kGlobalTensors[kTypeEmbedding]));
  ln_emb_g_ = in.get(kGlobalTensors[kEmbNormW], {D});
  ln_emb_b_ = in.get(kGlobalTensors[kEmbNormB], {D});
  layers_.reserve(size_t(cfg_.n_layer));
  for (int l = 0; l < cfg_.n_layer; ++l) {
    const auto get = [&](Role r, std::vector<int64_t> shape) { return in.get(kLayerTensors[r], l, shape); };
    const Tensor wq = get(kQ, {D, D}), wk = get(kK, {D, D}), wv = get(kV, {D, D});
    const Tensor bq = get(kQBias, {D}), bk = get(kKBias, {D}), bv = get(kVBias, {D});
    BertLayer b;
    b.qkv = ops::PackedLinear(concat_rows({&wq, &wk, &wv}), concat_rows({&bq, &bk, &bv}));
    b.o = ops::PackedLinear(get(kO, {D, D}), get(kOBias, {D}));
    b.ln_attn_g = get(kAttnNormW, {D});
    b.ln_attn_b = get(kAttnNormB, {D});
    b.up = ops::PackedLinear(get(kUp, {F, D}), get(kUpBias, {F}));
    b.down = ops::PackedLinear(get(kDown, {D, F}), get(kDownBias, {D}));
    b.ln_ffn_g = get(kFfnNormW, {D});
    b.ln_ffn_b = get(kFfnNormB, {D});
    layers_.push_back(std::move(b));
  }
  kv_head_of_.resize(size_t(cfg_.n_head));
  for (int h = 0; h < cfg_.n_head; ++h) kv_head_of_[size_t(h)] = h;
}

// What run() allocates for T tokens: the capture (capture::capture_bytes), the activations of
// one layer — x, attention output, concat and down [T, d_model] each, qkv [T, 3·d_model],
// up [T, d_ff] — and, when attention is not captured, one layer's probabilities [n_head, T, T]
// (a block of rows of it when streamed: capture::attention_scratch_bytes).
// The packed GEMMs' per-call buffers are small next to these and are not counted.
uint64_t BertModel::run_bytes(int64_t T, const CaptureOptions& options) const {
  const uint64_t t = uint64_t(T), D = uint64_t(cfg_.d_model), F = uint64_t(cfg_.d_ff);
  uint64_t floats = t * (7 * D + F);
  return capture::capture_bytes(cfg_, T, T, options) + capture::attention_scratch_bytes(cfg_, T, T, options) +
         floats * sizeof(float);
}

Capture BertModel::run(const Encoding& enc, const CaptureOptions& options) const {
  const int64_t T = static_cast<int64_t>(enc.size());
  const int64_t D = cfg_.d_model;
  if (T == 0) throw Error("nothing to run: the encoding has no tokens");
  if (T > cfg_.max_positions)
    throw Error("the text is " + std::to_string(T) + " tokens; the model allows at most " +
                std::to_string(cfg_.max_positions));
  for (const Token& token : enc.tokens)
    if (token.id < 0 || token.id >= cfg_.vocab_size)
      throw Error("token id " + std::to_string(token.id) + " is outside the vocabulary");
  check_run_memory(T, run_bytes(T, options), options);
  capture::Recorder rec(cfg_, T, T, options, kv_head_of_);

  // Embeddings: word + position + token type 0, then LayerNorm.        x: [T, D]
  std::vector<float> x(T * D);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t id = enc.tokens[size_t(t)].id;
    for (int64_t i = 0; i < D; ++i)
      x[t * D + i] = word_emb_.data[id * D + i] + pos_emb_.data[t * D + i] + type_emb_.data[i];
  }
  ops::layer_norm(x.data(), T, D, ln_emb_g_.ptr(), ln_emb_b_.ptr(), cfg_.norm_eps, x.data());
  rec.record_hidden(0, x.data());
  run_layers(0, x, rec);
  return rec.finish();
}

Capture BertModel::resume(const Encoding& enc, int first_layer, const Tensor& prefix,
                          const CaptureOptions& options) const {
  const int64_t T = static_cast<int64_t>(enc.size()), D = cfg_.d_model;
  capture::check_resume(cfg_, T, first_layer, prefix, options);
  check_run_memory(T, run_bytes(T, options), options);
  capture::Recorder rec(cfg_, T, T, options, kv_head_of_);
  for (int i = 0; i <= first_layer; ++i) rec.record_hidden(i, prefix.ptr() + i * T * D);
  std::vector<float> x(prefix.ptr() + first_layer * T * D, prefix.ptr() + (first_layer + 1) * T * D);
  run_layers(first_layer, x, rec);
  return rec.finish();
}

// Layers first .. n_layer − 1 on the residual stream x [T, d_model] (in: entering layer `first`;
// out: the last layer's output), each recorded through `rec`.
void BertModel::run_layers(int first, std::vector<float>& x, capture::Recorder& rec) const {
  const int64_t T = int64_t(x.size()) / cfg_.d_model;
  const int64_t D = cfg_.d_model, F = cfg_.d_ff, H = cfg_.n_head, Dh = cfg_.d_head;
  // Activations of one layer, reused across layers.
  std::vector<float> qkv(T * 3 * D), concat(T * D), attn(T * D), up(T * F), down(T * D);
  for (int l = first; l < cfg_.n_layer; ++l) {
    const BertLayer& b = layers_[size_t(l)];
    // Attention block, post-norm: x = LN(x + MHA(x)).
    b.qkv.forward(x.data(), T, qkv.data());                                                  // [T, 3D]: Q | K | V
    const float *q = qkv.data(), *k = q + D, *v = k + D;
    rec.record_qk(l, q, 3 * D, k, 3 * D);
    rec.record_value_norms(l, v, 3 * D, b.o.weights());
    rec.attention(l, /*causal=*/false, [&](int64_t q0, int64_t q1, int64_t width, ops::ProbsOut probs) {  // probs: [H, rows, T]
      const ops::AttentionDims dims{q1 - q0, width, H, H, Dh, attention_scale()};
      ops::attention(q + q0 * 3 * D, 3 * D, k, 3 * D, v, 3 * D, kv_head_of_.data(), dims, ops::KeyMask{}, q0, probs,
                     concat.data() + q0 * D, D);                                            // concat: [T, H·Dh]
    });
    rec.project_heads(l, concat.data(), b.o.weights(), b.o.bias().ptr(), attn.data(), &b.o);  // attn: [T, D]
    ops::add_inplace(attn.data(), x.data(), T * D);                                          // residual
    ops::layer_norm(attn.data(), T, D, b.ln_attn_g.ptr(), b.ln_attn_b.ptr(), cfg_.norm_eps, x.data());
    // Feed-forward block, post-norm: x = LN(x + W_2 · GELU(W_1 · x + b_1) + b_2).
    b.up.forward(x.data(), T, up.data());                                                    // [T, F]
    ops::gelu_erf(up.data(), T * F);
    b.down.forward(up.data(), T, down.data());                                               // [T, D]
    rec.record_mlp(l, down.data());
    ops::add_inplace(down.data(), x.data(), T * D);                                          // residual
    ops::layer_norm(down.data(), T, D, b.ln_ffn_g.ptr(), b.ln_ffn_b.ptr(), cfg_.norm_eps, x.data());
    rec.record_hidden(l + 1, x.data());
  }
}

}  // namespace

ModelConfig bert_config(const nlohmann::json& c, const std::string& where) {
  ModelConfig m;
  m.architecture = "bert";
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
  const std::string pos = json_string(c, "position_embedding_type", where, "absolute");
  if (pos != "absolute")
    throw Error(where + ": position_embedding_type \"" + pos + "\" is not supported (only \"absolute\")");
  check_model_shape(m, where);
  return m;
}

std::unique_ptr<Model> load_bert(const std::string& dir, const nlohmann::json& config, WeightCheck& check) {
  return std::make_unique<BertModel>(dir, config, check);
}

}  // namespace headscope::models
