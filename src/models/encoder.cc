// headscope — the shared post-LayerNorm encoder (encoder.h): one forward pass for BERT,
// RoBERTa / XLM-RoBERTa and DistilBERT, as transformers' modeling_bert.py (BertEmbeddings,
// BertSelfAttention with eager attention, BertSelfOutput, BertIntermediate, BertOutput).
#include <cmath>
#include <filesystem>

#include <omp.h>

#include "capture/capture.h"
#include "models/batch.h"
#include "models/encoder.h"
#include "models/families.h"
#include "models/tensor_table.h"
#include "ops/activations.h"
#include "ops/attention.h"
#include "ops/backward.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/norm.h"
#include "tensor/tensor_ops.h"

namespace headscope::models {
namespace {

// The four GEMMs hold their weights (nn.Linear layout) and a prepacked copy (ops/packed_linear.h).
struct EncoderLayer {
  ops::PackedLinear qkv;        // W [3·d_model, d_model], b [3·d_model] — Q, K, V fused at load time
  ops::PackedLinear o;          // W_O [d_model, d_model], b_O [d_model]
  Tensor ln_attn_g, ln_attn_b;  // [d_model]
  ops::PackedLinear up;         // [d_ff, d_model], [d_ff]
  ops::PackedLinear down;       // [d_model, d_ff], [d_model]
  Tensor ln_ffn_g, ln_ffn_b;    // [d_model]
};

class EncoderModel final : public Model {
 public:
  EncoderModel(ModelConfig cfg, std::unique_ptr<Tokenizer> tokenizer, const TensorReader& in,
               const EncoderTensors& names, const EncoderEmbedding& embedding);
  const ModelConfig& config() const override { return cfg_; }
  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  Capture run(const Encoding& encoding, const CaptureOptions& options) const override;
  Capture resume(const Encoding& encoding, int first_layer, const Tensor& prefix,
                 const CaptureOptions& options) const override;
  std::vector<Capture> run_batch(std::span<const Encoding> encodings,
                                 std::span<const CaptureOptions> options) const override;
  std::vector<Capture> resume_batch(std::span<const Encoding> encodings, int first_layer,
                                    std::span<const Tensor* const> prefixes,
                                    std::span<const CaptureOptions> options) const override;
  uint64_t run_bytes(int64_t T, const CaptureOptions& options) const override;
  Gradients gradients(const Encoding& encoding, const GradientSeed& seed,
                      const GradientOptions& options) const override;
  uint64_t gradient_bytes(int64_t T, const GradientOptions& options) const override;
  void attention_from_qk(const Capture& capture, int layer, int head, int64_t q0, int64_t q1, int64_t k0, int64_t k1,
                         float* probs) const override {
    capture::attention_from_qk(capture, layer, head, q0, q1, k0, k1, attention_scale(), ops::KeyMask{}, probs);
  }
  Tensor output_projection(int layer) const override { return layers_.at(size_t(layer)).o.weights(); }
  const Tensor& output_bias(int layer) const override { return layers_.at(size_t(layer)).o.bias(); }
  // Q, K, V: the three row blocks of the fused weight. No gain: the heads read the stream itself,
  // and the LayerNorms after each block rescale all of it, not the heads' input or output alone.
  AttentionWeights attention_weights(int layer) const override {
    if (layer < 0 || layer >= cfg_.n_layer)
      throw Error(cfg_.name + ": no layer " + std::to_string(layer) + " (0.." + std::to_string(cfg_.n_layer - 1) + ")");
    const Tensor& w = layers_[size_t(layer)].qkv.weights();  // [3·d_model, d_model]: Q | K | V
    const int64_t D = cfg_.d_model;
    const auto block = [&](int64_t i) {  // rows i·D .. (i + 1)·D − 1
      Tensor t({D, D}, Tensor::Uninitialized{});
      copy_rows(t.ptr(), D, w.ptr() + i * D * D, D, D, D);
      return t;
    };
    AttentionWeights a;
    a.w_q = block(0), a.w_k = block(1), a.w_v = block(2);
    return a;
  }

 private:
  float attention_scale() const { return 1.0f / std::sqrt(static_cast<float>(cfg_.d_head)); }
  void check_encoding(const Encoding& encoding) const;
  void embed(const Encoding& encoding, float* x) const;  // x [T, d_model], before the LayerNorm
  uint64_t activation_bytes(int64_t rows) const;
  // `packed`: a run_batch pass, whose GEMMs take the blocked kernel at every row count, so that a
  // text's numbers do not depend on its companions.
  void run_layers(int first, std::vector<float>& x, std::span<const PackedText> texts, bool packed = false) const;
  class Backward;  // below: one layer recomputed, then undone
  ModelConfig cfg_;
  std::unique_ptr<Tokenizer> tokenizer_;
  EncoderEmbedding embedding_;
  Tensor word_emb_, pos_emb_, type_emb_, ln_emb_g_, ln_emb_b_;  // [V, D], [P, D], [types, D] (or empty), [D], [D]
  std::vector<EncoderLayer> layers_;
  std::vector<int> kv_head_of_;  // [n_head], the identity: every head has its own keys
};

EncoderModel::EncoderModel(ModelConfig cfg, std::unique_ptr<Tokenizer> tokenizer, const TensorReader& in,
                           const EncoderTensors& names, const EncoderEmbedding& embedding)
    : cfg_(std::move(cfg)), tokenizer_(std::move(tokenizer)), embedding_(embedding) {
  const int64_t D = cfg_.d_model, F = cfg_.d_ff;
  in.expect_layers(cfg_.n_layer, {names.layer[kEncFfnNormB]});
  word_emb_ = in.get(names.global[kEncWordEmbedding], {cfg_.vocab_size, D});
  pos_emb_ = in.get(names.global[kEncPositionEmbedding], {embedding_.position_rows, D});
  if (embedding_.token_types) {
    type_emb_ = in.get(names.global[kEncTypeEmbedding], {});
    type_emb_.expect_shape({-1, D}, in.name(names.global[kEncTypeEmbedding]));
  }
  ln_emb_g_ = in.get(names.global[kEncEmbNormW], {D});
  ln_emb_b_ = in.get(names.global[kEncEmbNormB], {D});
  layers_.reserve(size_t(cfg_.n_layer));
  for (int l = 0; l < cfg_.n_layer; ++l) {
    const auto get = [&](EncoderRole r, std::vector<int64_t> shape) { return in.get(names.layer[r], l, shape); };
    const Tensor wq = get(kEncQ, {D, D}), wk = get(kEncK, {D, D}), wv = get(kEncV, {D, D});
    const Tensor bq = get(kEncQBias, {D}), bk = get(kEncKBias, {D}), bv = get(kEncVBias, {D});
    EncoderLayer b;
    b.qkv = ops::PackedLinear(concat_rows({&wq, &wk, &wv}), concat_rows({&bq, &bk, &bv}));
    b.o = ops::PackedLinear(get(kEncO, {D, D}), get(kEncOBias, {D}));
    b.ln_attn_g = get(kEncAttnNormW, {D});
    b.ln_attn_b = get(kEncAttnNormB, {D});
    b.up = ops::PackedLinear(get(kEncUp, {F, D}), get(kEncUpBias, {F}));
    b.down = ops::PackedLinear(get(kEncDown, {D, F}), get(kEncDownBias, {D}));
    b.ln_ffn_g = get(kEncFfnNormW, {D});
    b.ln_ffn_b = get(kEncFfnNormB, {D});
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
uint64_t EncoderModel::run_bytes(int64_t T, const CaptureOptions& options) const {
  return capture::capture_bytes(cfg_, T, T, options) + capture::attention_scratch_bytes(cfg_, T, T, options) +
         activation_bytes(T);
}

uint64_t EncoderModel::activation_bytes(int64_t rows) const {
  const uint64_t t = uint64_t(rows), D = uint64_t(cfg_.d_model), F = uint64_t(cfg_.d_ff);
  return t * (7 * D + F) * sizeof(float);
}

void EncoderModel::check_encoding(const Encoding& enc) const {
  const int64_t T = static_cast<int64_t>(enc.size());
  if (T == 0) throw Error("nothing to run: the encoding has no tokens");
  if (T > cfg_.max_positions)
    throw Error("the text is " + std::to_string(T) + " tokens; the model allows at most " +
                std::to_string(cfg_.max_positions));
  for (const Token& token : enc.tokens)
    if (token.id < 0 || token.id >= cfg_.vocab_size)
      throw Error("token id " + std::to_string(token.id) + " is outside the vocabulary");
}

// Word + position (+ token type 0) embeddings of one text, positions from 0:   x [T, D]
void EncoderModel::embed(const Encoding& enc, float* x) const {
  const int64_t T = static_cast<int64_t>(enc.size()), D = cfg_.d_model;
  const int64_t pad = embedding_.padding_idx;
  int64_t seen = 0;  // RoBERTa: the tokens so far that are not padding
  for (int64_t t = 0; t < T; ++t) {
    const int64_t id = enc.tokens[size_t(t)].id;
    if (id == pad && embedding_.rows_past_padding)
      throw Error("token " + std::to_string(t) + " is the padding token (id " + std::to_string(pad) +
                  "), whose position row llama.cpp's converter removed from this GGUF file; remove it from the "
                  "input or load the model's Hugging Face folder");
    const int64_t pos = pad < 0 ? t : id == pad ? pad : pad + ++seen - (embedding_.rows_past_padding ? pad + 1 : 0);
    for (int64_t i = 0; i < D; ++i)
      x[t * D + i] =
          word_emb_.data[id * D + i] + pos_emb_.data[pos * D + i] + (type_emb_.empty() ? 0.0f : type_emb_.data[i]);
  }
}

Capture EncoderModel::run(const Encoding& enc, const CaptureOptions& options) const {
  check_encoding(enc);
  const int64_t T = static_cast<int64_t>(enc.size());
  check_run_memory(T, run_bytes(T, options), options);
  capture::Recorder rec(cfg_, T, T, options, kv_head_of_);
  // Embeddings, then LayerNorm.                                           x: [T, D]
  std::vector<float> x(T * cfg_.d_model);
  embed(enc, x.data());
  ops::layer_norm(x.data(), T, cfg_.d_model, ln_emb_g_.ptr(), ln_emb_b_.ptr(), cfg_.norm_eps, x.data());
  rec.record_hidden(0, x.data());
  const PackedText whole{0, T, &rec};
  run_layers(0, x, {&whole, 1});
  return rec.finish();
}

Capture EncoderModel::resume(const Encoding& enc, int first_layer, const Tensor& prefix,
                             const CaptureOptions& options) const {
  const int64_t T = static_cast<int64_t>(enc.size()), D = cfg_.d_model;
  capture::check_resume(cfg_, T, first_layer, prefix, options);
  check_run_memory(T, run_bytes(T, options), options);
  capture::Recorder rec(cfg_, T, T, options, kv_head_of_);
  for (int i = 0; i <= first_layer; ++i) rec.record_hidden(i, prefix.ptr() + i * T * D);
  rec.resumed_at(first_layer);
  std::vector<float> x(prefix.ptr() + first_layer * T * D, prefix.ptr() + (first_layer + 1) * T * D);
  const PackedText whole{0, T, &rec};
  run_layers(first_layer, x, {&whole, 1});
  return rec.finish();
}

// Packed (model.h): the texts' rows one after another in x [Σ T, D]; each text's embeddings count
// positions from 0, and its attention reads its own rows only (run_layers).
std::vector<Capture> EncoderModel::run_batch(std::span<const Encoding> encodings,
                                             std::span<const CaptureOptions> options) const {
  check_batch_options(encodings.size(), options.size());
  uint64_t bytes = 0;
  for (size_t i = 0; i < encodings.size(); ++i) {
    check_encoding(encodings[i]);
    const int64_t T = int64_t(encodings[i].size());
    bytes += capture::capture_bytes(cfg_, T, T, options_of(options, i)) +
             capture::attention_scratch_bytes(cfg_, T, T, options_of(options, i));
  }
  PackedBatch batch = pack(cfg_, encodings, options, kv_head_of_);
  if (batch.texts.empty()) return {};
  check_batch_memory(*this, batch.texts.size(), batch.rows, bytes + activation_bytes(batch.rows));
  const int64_t D = cfg_.d_model;
  std::vector<float> x(batch.rows * D);
  for (size_t i = 0; i < encodings.size(); ++i) embed(encodings[i], x.data() + batch.texts[i].row0 * D);
  ops::layer_norm(x.data(), batch.rows, D, ln_emb_g_.ptr(), ln_emb_b_.ptr(), cfg_.norm_eps, x.data());
  for (const PackedText& t : batch.texts) t.rec->record_hidden(0, x.data() + t.row0 * D);
  run_layers(0, x, batch.texts, /*packed=*/true);
  return batch.finish();
}

std::vector<Capture> EncoderModel::resume_batch(std::span<const Encoding> encodings, int first_layer,
                                                std::span<const Tensor* const> prefixes,
                                                std::span<const CaptureOptions> options) const {
  check_batch_options(encodings.size(), options.size());
  if (prefixes.size() != encodings.size())
    throw Error("resume_batch: " + std::to_string(prefixes.size()) + " prefixes for " +
                std::to_string(encodings.size()) + " texts");
  uint64_t bytes = 0;
  for (size_t i = 0; i < encodings.size(); ++i) {
    const int64_t T = int64_t(encodings[i].size());
    capture::check_resume(cfg_, T, first_layer, *prefixes[i], options_of(options, i));
    bytes += capture::capture_bytes(cfg_, T, T, options_of(options, i));
  }
  PackedBatch batch = pack(cfg_, encodings, options, kv_head_of_);
  if (batch.texts.empty()) return {};
  check_batch_memory(*this, batch.texts.size(), batch.rows, bytes + activation_bytes(batch.rows));
  const int64_t D = cfg_.d_model;
  std::vector<float> x(batch.rows * D);
  for (size_t i = 0; i < batch.texts.size(); ++i) {
    const PackedText& t = batch.texts[i];
    const float* prefix = prefixes[i]->ptr();
    for (int s = 0; s <= first_layer; ++s) t.rec->record_hidden(s, prefix + s * t.T * D);
    t.rec->resumed_at(first_layer);
    std::copy_n(prefix + first_layer * t.T * D, t.T * D, x.data() + t.row0 * D);
  }
  run_layers(first_layer, x, batch.texts, /*packed=*/true);
  return batch.finish();
}

// Layers first .. n_layer − 1 on the residual stream x [rows, d_model] (in: entering layer `first`;
// out: the last layer's output). `texts` lay out the rows (one text for run(), several packed for
// run_batch()): the linear layers run over every row at once, and each text's attention, over its
// own rows only, and its records go through its own Recorder.
void EncoderModel::run_layers(int first, std::vector<float>& x, std::span<const PackedText> texts, bool packed) const {
  const int64_t T = int64_t(x.size()) / cfg_.d_model;  // every row of the pass
  const auto kernel = packed ? ops::PackedLinear::Kernel::blocked : ops::PackedLinear::Kernel::automatic;
  const int64_t D = cfg_.d_model, F = cfg_.d_ff, H = cfg_.n_head, Dh = cfg_.d_head;
  // Activations of one layer, reused across layers.
  std::vector<float> qkv(T * 3 * D), concat(T * D), attn(T * D), up(T * F), down(T * D);
  for (int l = first; l < cfg_.n_layer; ++l) {
    const EncoderLayer& b = layers_[size_t(l)];
    // Attention block, post-norm: x = LN(x + MHA(x)).
    for (const PackedText& t : texts) t.rec->patch_residual(l, x.data() + t.row0 * D);
    b.qkv.forward(x.data(), T, qkv.data(), kernel);  // [T, 3D]: Q | K | V
    for_each_text(texts, [&](const PackedText& t) {  // each text's rows: its own keys only
      float *q = qkv.data() + t.row0 * 3 * D, *k = q + D, *v = k + D;
      float* o = concat.data() + t.row0 * D;  // [t.T, H·Dh]
      capture::Recorder& rec = *t.rec;
      rec.patch_qkv(l, q, 3 * D, k, 3 * D, v, 3 * D);
      rec.record_qkv(l, q, 3 * D, k, 3 * D, v, 3 * D);
      rec.record_value_norms(l, v, 3 * D, b.o);
      rec.attention(l, /*causal=*/false,
                    [&](int64_t q0, int64_t q1, int64_t width, ops::ProbsOut probs) {  // probs: [H, rows, t.T]
                      const ops::AttentionDims dims{q1 - q0, width, H, H, Dh, attention_scale()};
                      ops::attention(q + q0 * 3 * D, 3 * D, k, 3 * D, v, 3 * D, kv_head_of_.data(), dims,
                                     ops::KeyMask{}, q0, probs, o + q0 * D, D);
                    });
      rec.patch_pattern(l, v, 3 * D, o);
      rec.before_projection(l, o, b.o.out(), b.o.in());
    });
    b.o.forward(concat.data(), T, attn.data(), kernel);  // [T, D]: concat · W_Oᵀ + b_O
    for (const PackedText& t : texts)
      t.rec->after_projection(l, concat.data() + t.row0 * D, b.o, attn.data() + t.row0 * D);
    ops::add_inplace(attn.data(), x.data(), T * D);  // residual
    ops::layer_norm(attn.data(), T, D, b.ln_attn_g.ptr(), b.ln_attn_b.ptr(), cfg_.norm_eps, x.data());
    // Feed-forward block, post-norm: x = LN(x + W_2 · GELU(W_1 · x + b_1) + b_2).
    b.up.forward(x.data(), T, up.data(), kernel);  // [T, F]
    ops::gelu_erf(up.data(), T * F);
    b.down.forward(up.data(), T, down.data(), kernel);  // [T, D]
    for (const PackedText& t : texts) t.rec->record_mlp(l, down.data() + t.row0 * D);
    ops::add_inplace(down.data(), x.data(), T * D);  // residual
    ops::layer_norm(down.data(), T, D, b.ln_ffn_g.ptr(), b.ln_ffn_b.ptr(), cfg_.norm_eps, x.data());
    for (const PackedText& t : texts) t.rec->record_hidden(l + 1, x.data() + t.row0 * D);
  }
}

// ---- Reverse mode ----
//
// gradients(): one forward pass keeping the residual stream entering every layer (hidden states),
// the metric read off the last hidden state, then the layers back from the last, each one's
// activations computed again from its input (gradient checkpointing, as the decoder's) and undone:
//   x_l → q|k|v = x_l W_qkvᵀ + b → p_h = softmax(q_h k_hᵀ · scale) → o_h = p_h v_h → a = concat W_Oᵀ + b_O
//       → x_mid = LN(x_l + a) → f = W_2 GELU(W_1 x_mid + b_1) + b_2 → x_{l+1} = LN(x_mid + f)
class EncoderModel::Backward {
 public:
  Backward(const EncoderModel& m, int64_t T, const GradientOptions& o, Gradients& g)
      : m_(m), o_(o), g_(g), T_(T), D_(m.cfg_.d_model), F_(m.cfg_.d_ff), H_(m.cfg_.n_head), Dh_(m.cfg_.d_head) {
    for (auto* v : {&x_in_, &s1_, &x_mid_, &s2_, &x_out_, &ds_, &dx_mid_}) v->resize(size_t(T * D_));
    for (auto* v : {&qkv_, &dqkv_}) v->resize(size_t(T * 3 * D_));
    for (auto* v : {&concat_, &dconcat_}) v->resize(size_t(T * D_));
    for (auto* v : {&up_, &act_}) v->resize(size_t(T * F_));
    probs_.resize(size_t(H_ * T * T));
  }

  void forward(int l, const float* x) {
    const EncoderLayer& b = m_.layers_[size_t(l)];
    const int64_t n = T_ * D_, D = D_;
    const float eps = m_.cfg_.norm_eps;
    std::copy_n(x, n, x_in_.data());
    b.qkv.forward(x_in_.data(), T_, qkv_.data());
    const ops::AttentionDims dims{T_, T_, H_, H_, Dh_, m_.attention_scale()};
    const float* q = qkv_.data();
    ops::attention(q, 3 * D, q + D, 3 * D, q + 2 * D, 3 * D, m_.kv_head_of_.data(), dims, ops::KeyMask{}, 0,
                   probs_.data(), concat_.data(), D);
    b.o.forward(concat_.data(), T_, s1_.data());
    ops::add_inplace(s1_.data(), x_in_.data(), n);
    ops::layer_norm(s1_.data(), T_, D, b.ln_attn_g.ptr(), b.ln_attn_b.ptr(), eps, x_mid_.data());
    b.up.forward(x_mid_.data(), T_, up_.data());
    act_ = up_;
    ops::gelu_erf(act_.data(), T_ * F_);
    b.down.forward(act_.data(), T_, s2_.data());
    ops::add_inplace(s2_.data(), x_mid_.data(), n);
    ops::layer_norm(s2_.data(), T_, D, b.ln_ffn_g.ptr(), b.ln_ffn_b.ptr(), eps, x_out_.data());
  }

  // dx: in ∂/∂x_{l+1}, out ∂/∂x_l.
  void backward(int l, float* dx) {
    const EncoderLayer& b = m_.layers_[size_t(l)];
    const int64_t n = T_ * D_, D = D_, TT = T_ * T_;
    const float eps = m_.cfg_.norm_eps;
    // x_{l+1} = LN(x_mid + f): ∂f = ∂s2 = LN'ᵀ ∂x_{l+1}; ∂x_mid = ∂s2 + W_1ᵀ-path of ∂f.
    ops::layer_norm_backward(s2_.data(), T_, D, b.ln_ffn_g.ptr(), eps, dx, ds_.data(), nullptr, nullptr);
    std::copy_n(ds_.data(), n, g_.mlp_outputs.ptr() + l * n);
    ops::linear_backward(nullptr, T_, F_, b.down.weights().ptr(), D, ds_.data(), act_.data(), nullptr, nullptr);
    ops::gelu_erf_backward(up_.data(), act_.data(), act_.data(), T_ * F_);
    ops::linear_backward(nullptr, T_, D, b.up.weights().ptr(), F_, act_.data(), dx_mid_.data(), nullptr, nullptr);
    ops::add_inplace(dx_mid_.data(), ds_.data(), n);
    // x_mid = LN(x_l + a): ∂a = ∂s1; ∂x_l = ∂s1 + W_qkvᵀ-path of ∂a.
    ops::layer_norm_backward(s1_.data(), T_, D, b.ln_attn_g.ptr(), eps, dx_mid_.data(), ds_.data(), nullptr, nullptr);
    std::copy_n(ds_.data(), n, g_.attn_output.ptr() + l * n);
    ops::linear_backward(nullptr, T_, D, b.o.weights().ptr(), D, ds_.data(), dconcat_.data(), nullptr, nullptr);
    std::fill(dqkv_.begin(), dqkv_.end(), 0.0f);
    const float scale = m_.attention_scale();
#pragma omp parallel
    {
      std::vector<float> scratch(size_t(2 * TT));
#pragma omp for schedule(dynamic, 1)
      for (int64_t h = 0; h < H_; ++h) {
        float* dp = o_.attention ? g_.attention.ptr() + (int64_t(l) * H_ + h) * TT : nullptr;
        const float* q = qkv_.data() + h * Dh_;
        float* dq = dqkv_.data() + h * Dh_;
        ops::attention_head_backward(q, 3 * D, q + D, q + 2 * D, 3 * D, probs_.data() + h * TT,
                                     dconcat_.data() + h * Dh_, D, T_, T_, Dh_, scale, 0.0f, dq, dq + D, dq + 2 * D, dp,
                                     scratch.data());
      }
    }
    per_head(l);
    ops::linear_backward(nullptr, T_, D, b.qkv.weights().ptr(), 3 * D, dqkv_.data(), dx, nullptr, nullptr);
    ops::add_inplace(dx, ds_.data(), n);
    if (o_.receivers) receivers(l, b);
  }
  const float* output() const { return x_out_.data(); }

 private:
  // [L, H, T, Dh] records from the [T, 3·D] and [T, D] buffers.
  void per_head(int l) {
    const auto heads_of = [&](const float* src, int64_t ld, Tensor& dst) {
      float* out = dst.ptr() + int64_t(l) * H_ * T_ * Dh_;
      for (int64_t h = 0; h < H_; ++h)
        for (int64_t t = 0; t < T_; ++t) std::copy_n(src + t * ld + h * Dh_, Dh_, out + (h * T_ + t) * Dh_);
    };
    heads_of(dconcat_.data(), D_, g_.head_outputs);
    if (!o_.queries_keys_values) return;
    heads_of(dqkv_.data(), 3 * D_, g_.queries);
    heads_of(dqkv_.data() + D_, 3 * D_, g_.keys);
    heads_of(dqkv_.data() + 2 * D_, 3 * D_, g_.values);
  }
  // Slot s of the 3·H (queries, keys, values of each head): its columns of ∂(q|k|v) through their
  // rows of W_qkv alone (the heads read the stream itself: no norm in between).
  void receivers(int l, const EncoderLayer& b) {
    const int64_t slots = 3 * H_, n = T_ * D_;
    std::vector<float> dy(static_cast<size_t>(T_ * Dh_));
    for (int64_t s = 0; s < slots; ++s) {
      const int64_t col = (s / H_) * D_ + (s % H_) * Dh_;
      for (int64_t t = 0; t < T_; ++t) std::copy_n(dqkv_.data() + t * 3 * D_ + col, Dh_, dy.data() + t * Dh_);
      ops::linear_backward(nullptr, T_, D_, b.qkv.weights().ptr() + col * D_, Dh_, dy.data(),
                           g_.receivers.ptr() + (int64_t(l) * slots + s) * n, nullptr, nullptr);
    }
  }

  const EncoderModel& m_;
  const GradientOptions& o_;
  Gradients& g_;
  const int64_t T_, D_, F_, H_, Dh_;
  std::vector<float> x_in_, qkv_, probs_, concat_, s1_, x_mid_, up_, act_, s2_, x_out_;
  std::vector<float> ds_, dx_mid_, dqkv_, dconcat_;
};

uint64_t EncoderModel::gradient_bytes(int64_t T, const GradientOptions& o) const {
  CaptureOptions fwd = o.forward;
  fwd.hidden_states = true;
  const uint64_t t = uint64_t(T), L = uint64_t(cfg_.n_layer), D = uint64_t(cfg_.d_model), F = uint64_t(cfg_.d_ff),
                 H = uint64_t(cfg_.n_head);
  uint64_t floats = 3 * t * D + (L + 1) * t * D + L * t * D + 2 * L * t * D;  // embeddings, hidden, heads, blocks
  if (o.attention) floats += L * H * t * t;
  if (o.queries_keys_values) floats += 3 * L * t * D;
  if (o.receivers) floats += 3 * L * H * t * D;
  floats += t * (15 * D + 2 * F) + H * t * t + uint64_t(std::max(1, omp_get_max_threads())) * 2 * t * t;
  return run_bytes(T, fwd) + floats * sizeof(float);
}

// The seed reads the last hidden state [T, d_model] (the output of the last layer's LayerNorm).
Gradients EncoderModel::gradients(const Encoding& enc, const GradientSeed& seed, const GradientOptions& options) const {
  check_encoding(enc);
  if (!seed.metric) throw Error("gradients: no metric to differentiate");
  const int64_t T = int64_t(enc.size()), D = cfg_.d_model, L = cfg_.n_layer, H = cfg_.n_head, Dh = cfg_.d_head;
  check_gradient_memory(T, gradient_bytes(T, options), options);
  Gradients g;
  // raw = word + position + type embeddings; x_0 = LN(raw). The token embeddings are the word rows.
  std::vector<float> raw(size_t(T * D));
  embed(enc, raw.data());
  g.token_embeddings = Tensor({T, D});
  for (int64_t t = 0; t < T; ++t)
    std::copy_n(word_emb_.ptr() + int64_t(enc.tokens[size_t(t)].id) * D, D, g.token_embeddings.ptr() + t * D);
  if (options.embeddings != nullptr) {
    options.embeddings->expect_shape({T, D}, "gradients: the token embeddings");
    for (int64_t i = 0; i < T * D; ++i) raw[size_t(i)] += options.embeddings->ptr()[i] - g.token_embeddings.ptr()[i];
    g.token_embeddings = *options.embeddings;
  }
  CaptureOptions fwd = options.forward;
  fwd.hidden_states = true;
  Tensor prefix({L + 1, T, D});
  ops::layer_norm(raw.data(), T, D, ln_emb_g_.ptr(), ln_emb_b_.ptr(), cfg_.norm_eps, prefix.ptr());
  g.forward = options.embeddings == nullptr ? run(enc, fwd) : resume(enc, 0, prefix, fwd);
  if (options.companion != nullptr) g.companion = run(*options.companion, fwd);
  g.embeddings = Tensor({T, D});
  g.hidden_states = Tensor({L + 1, T, D});
  g.head_outputs = Tensor({L, H, T, Dh});
  g.attn_output = Tensor({L, T, D});
  g.mlp_outputs = Tensor({L, T, D});
  if (options.attention) g.attention = Tensor({L, H, T, T});
  if (options.queries_keys_values) g.queries = Tensor({L, H, T, Dh}), g.keys = g.queries, g.values = g.queries;
  if (options.receivers) g.receivers = Tensor({L, 3 * H, T, D});
  const float* hidden = g.forward.hidden_states.ptr();
  std::vector<float> out(hidden + L * T * D, hidden + (L + 1) * T * D), dx(size_t(T * D), 0.0f);
  g.metric = seed.metric(out.data(), T, D, dx.data());
  std::copy_n(dx.data(), T * D, g.hidden_states.ptr() + L * T * D);
  g.final_residual = Tensor({T, D});
  std::copy_n(dx.data(), T * D, g.final_residual.ptr());
  Backward pass(*this, T, options, g);
  for (int64_t l = L - 1; l >= 0; --l) {
    pass.forward(int(l), hidden + l * T * D);
    pass.backward(int(l), dx.data());
    std::copy_n(dx.data(), T * D, g.hidden_states.ptr() + l * T * D);
  }
  ops::layer_norm_backward(raw.data(), T, D, ln_emb_g_.ptr(), cfg_.norm_eps, dx.data(), g.embeddings.ptr(), nullptr,
                           nullptr);
  return g;
}

}  // namespace

std::unique_ptr<Model> load_encoder(const std::string& dir, ModelConfig cfg, const EncoderTensors& names,
                                    const EncoderEmbedding& embedding, WeightCheck& check) {
  cfg.name = std::filesystem::path(dir).filename().string();
  auto tokenizer = Tokenizer::from_model_dir(dir);
  const auto src = safetensors_source(dir, check);
  // Checkpoints saved from the bare model class have bare names; from a task head they carry the
  // family's prefix, and the head's own tensors (lm_head, cls, classifier, …) are not read.
  const TensorReader in(*src, false, checkpoint_prefix(*src, names.global[kEncWordEmbedding], names.prefix));
  return load_encoder(std::move(cfg), std::move(tokenizer), in, names, embedding);
}

std::unique_ptr<Model> load_encoder(ModelConfig cfg, std::unique_ptr<Tokenizer> tokenizer, const TensorReader& in,
                                    const EncoderTensors& names, const EncoderEmbedding& embedding) {
  return std::make_unique<EncoderModel>(std::move(cfg), std::move(tokenizer), in, names, embedding);
}

}  // namespace headscope::models
