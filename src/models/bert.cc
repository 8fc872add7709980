// headscope — BERT-family encoders (Devlin et al. 2019), as in transformers' modeling_bert.py
// (BertEmbeddings, BertSelfAttention with eager attention, BertSelfOutput, BertIntermediate,
// BertOutput). Post-LayerNorm blocks:
//   x   = LN(word_emb[id] + pos_emb[t] + type_emb[0])
//   a   = MHA(x) = Concat(head_1 … head_h) · W_Oᵀ + b_O
//   x   = LN(x + a)
//   x   = LN(x + W_2 · GELU(W_1 · x + b_1) + b_2)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "capture/capture.h"
#include "headscope/limits.h"
#include "io/safetensors.h"
#include "models/config_values.h"
#include "models/decoder.h"  // concat_rows, shared with the decoder families
#include "models/families.h"
#include "ops/attention.h"
#include "ops/matmul.h"
#include "ops/norm.h"

namespace headscope::models {
namespace {

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
  uint64_t run_bytes(int64_t T, const CaptureOptions& options) const override;
  const Tensor& output_projection(int layer) const override { return layers_.at(size_t(layer)).o.weights(); }
  const Tensor& output_bias(int layer) const override { return layers_.at(size_t(layer)).o.bias(); }

 private:
  ModelConfig cfg_;
  std::unique_ptr<Tokenizer> tokenizer_;
  Tensor word_emb_, pos_emb_, type_emb_, ln_emb_g_, ln_emb_b_;  // [V, D], [P, D], [types, D], [D], [D]
  std::vector<BertLayer> layers_;
};

BertModel::BertModel(const std::string& dir, const nlohmann::json& c, WeightCheck& check) {
  cfg_ = bert_config(c, dir + "/config.json");
  cfg_.name = std::filesystem::path(dir).filename().string();

  tokenizer_ = Tokenizer::from_model_dir(dir);
  const io::WeightStore w = io::WeightStore::open_dir(dir);
  // Checkpoints saved from BertModel have bare names; from BertFor* heads they carry "bert.".
  const std::string p = w.has("embeddings.word_embeddings.weight") ? "" : "bert.";
  const int64_t D = cfg_.d_model, F = cfg_.d_ff;
  auto get = [&](const std::string& name, std::vector<int64_t> shape) {
    Tensor t = w.get(p + name, shape);
    check(t, p + name, w.raw(p + name).file);
    return t;
  };
  // Every layer's tensors must be there before per-layer storage is sized from the config.
  const std::string last = "encoder.layer." + std::to_string(cfg_.n_layer - 1) + ".output.LayerNorm.bias";
  if (!w.has(p + last))
    throw Error(dir + ": config.json declares " + std::to_string(cfg_.n_layer) + " layers but the weights have no '" +
                p + last + "'");
  word_emb_ = get("embeddings.word_embeddings.weight", {cfg_.vocab_size, D});
  pos_emb_ = get("embeddings.position_embeddings.weight", {cfg_.max_positions, D});
  type_emb_ = get("embeddings.token_type_embeddings.weight", {});
  type_emb_.expect_shape({-1, D}, p + "embeddings.token_type_embeddings.weight");
  ln_emb_g_ = get("embeddings.LayerNorm.weight", {D});
  ln_emb_b_ = get("embeddings.LayerNorm.bias", {D});
  layers_.reserve(size_t(cfg_.n_layer));
  for (int l = 0; l < cfg_.n_layer; ++l) {
    const std::string L = "encoder.layer." + std::to_string(l) + ".";
    BertLayer b;
    Tensor wq = get(L + "attention.self.query.weight", {D, D}), bq = get(L + "attention.self.query.bias", {D});
    Tensor wk = get(L + "attention.self.key.weight", {D, D}), bk = get(L + "attention.self.key.bias", {D});
    Tensor wv = get(L + "attention.self.value.weight", {D, D}), bv = get(L + "attention.self.value.bias", {D});
    b.qkv = ops::PackedLinear(concat_rows({&wq, &wk, &wv}), concat_rows({&bq, &bk, &bv}));
    b.o = ops::PackedLinear(get(L + "attention.output.dense.weight", {D, D}), get(L + "attention.output.dense.bias", {D}));
    b.ln_attn_g = get(L + "attention.output.LayerNorm.weight", {D});
    b.ln_attn_b = get(L + "attention.output.LayerNorm.bias", {D});
    b.up = ops::PackedLinear(get(L + "intermediate.dense.weight", {F, D}), get(L + "intermediate.dense.bias", {F}));
    b.down = ops::PackedLinear(get(L + "output.dense.weight", {D, F}), get(L + "output.dense.bias", {D}));
    b.ln_ffn_g = get(L + "output.LayerNorm.weight", {D});
    b.ln_ffn_b = get(L + "output.LayerNorm.bias", {D});
    layers_.push_back(std::move(b));
  }
}

// What run() allocates for T tokens: the capture (capture::capture_bytes), the activations of
// one layer — x, attention output, concat and down [T, d_model] each, qkv [T, 3·d_model],
// up [T, d_ff] — and, when attention is not captured, one layer's probabilities [n_head, T, T].
// The packed GEMMs' per-call buffers are small next to these and are not counted.
uint64_t BertModel::run_bytes(int64_t T, const CaptureOptions& options) const {
  const uint64_t t = uint64_t(T), D = uint64_t(cfg_.d_model), F = uint64_t(cfg_.d_ff), H = uint64_t(cfg_.n_head);
  uint64_t floats = t * (7 * D + F);
  if (!options.attention) floats += H * t * t;
  return capture::capture_bytes(cfg_, T, T, options) + floats * sizeof(float);
}

Capture BertModel::run(const Encoding& enc, const CaptureOptions& options) const {
  const int64_t T = static_cast<int64_t>(enc.size());
  const int64_t D = cfg_.d_model, F = cfg_.d_ff, H = cfg_.n_head, Dh = cfg_.d_head;
  if (T == 0) throw Error("nothing to run: the encoding has no tokens");
  if (T > cfg_.max_positions)
    throw Error("the text is " + std::to_string(T) + " tokens; the model allows at most " +
                std::to_string(cfg_.max_positions));
  check_run_memory(T, run_bytes(T, options), options);
  std::vector<int> kv_head_of(static_cast<size_t>(H));
  for (int h = 0; h < H; ++h) kv_head_of[size_t(h)] = h;
  Capture cap = capture::allocate(cfg_, static_cast<int>(T), options, kv_head_of);

  // Activations of one layer, reused across layers.
  std::vector<float> x(T * D), qkv(T * 3 * D), concat(T * D), attn(T * D), up(T * F), down(T * D), scratch;

  // Embeddings: word + position + token type 0, then LayerNorm.        x: [T, D]
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = enc.tokens[size_t(t)].id;
    if (id < 0 || id >= cfg_.vocab_size) throw Error("token id " + std::to_string(id) + " is outside the vocabulary");
    for (int64_t i = 0; i < D; ++i)
      x[t * D + i] = word_emb_.data[id * D + i] + pos_emb_.data[t * D + i] + type_emb_.data[i];
  }
  ops::layer_norm(x.data(), T, D, ln_emb_g_.ptr(), ln_emb_b_.ptr(), cfg_.norm_eps, x.data());
  capture::record_hidden(cap, 0, x.data());

  const ops::AttentionDims dims{T, T, H, H, Dh, 1.0f / std::sqrt(static_cast<float>(Dh))};
  for (int l = 0; l < cfg_.n_layer; ++l) {
    const BertLayer& b = layers_[size_t(l)];
    b.qkv.forward(x.data(), T, qkv.data());                                                 // [T, 3D]: Q | K | V
    float* probs = capture::attention_buffer(cap, l, scratch);                              // [H, T, T]
    ops::attention(qkv.data(), 3 * D, qkv.data() + D, 3 * D, qkv.data() + 2 * D, 3 * D, kv_head_of.data(), dims,
                   ops::KeyMask{}, 0, probs, concat.data(), D);                             // concat: [T, H·Dh]
    if (!cap.queries.empty())
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t) {
          std::memcpy(cap.queries.ptr() + ((l * H + h) * T + t) * Dh, qkv.data() + t * 3 * D + h * Dh, 4 * Dh);
          std::memcpy(cap.keys.ptr() + ((l * H + h) * T + t) * Dh, qkv.data() + t * 3 * D + D + h * Dh, 4 * Dh);
        }
    capture::project_heads(cap, l, concat.data(), b.o.weights(), b.o.bias().ptr(), attn.data(), &b.o);  // attn: [T, D]
    ops::add_inplace(attn.data(), x.data(), T * D);                                         // residual
    ops::layer_norm(attn.data(), T, D, b.ln_attn_g.ptr(), b.ln_attn_b.ptr(), cfg_.norm_eps, x.data());
    b.up.forward(x.data(), T, up.data());                                                   // [T, F]
    ops::gelu_erf(up.data(), T * F);
    b.down.forward(up.data(), T, down.data());                                              // [T, D]
    ops::add_inplace(down.data(), x.data(), T * D);                                         // residual
    ops::layer_norm(down.data(), T, D, b.ln_ffn_g.ptr(), b.ln_ffn_b.ptr(), cfg_.norm_eps, x.data());
    capture::record_hidden(cap, l + 1, x.data());
  }
  return cap;
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
