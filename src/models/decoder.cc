// headscope — the shared causal decoder (see decoder.h for the forward pass it implements).
#include "models/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <omp.h>

#include "capture/capture.h"
#include "models/batch.h"
#include "models/families.h"
#include "ops/activations.h"
#include "ops/attention.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/norm.h"
#include "ops/quant_gemv.h"
#include "tensor/tensor_ops.h"

namespace headscope {

// Encoders have no incremental mode (Model's defaults; decoders override both).
std::unique_ptr<DecoderState> Model::start() const {
  throw Error(config().name + " is not a causal model: incremental decoding needs a decoder (Llama, GPT-2, ...)");
}
Capture Model::extend(DecoderState&, const std::vector<int32_t>&, const CaptureOptions&, std::vector<float>*) const {
  throw Error(config().name + " is not a causal model: incremental decoding needs a decoder (Llama, GPT-2, ...)");
}

LogitReadout Model::final_readout() const {
  throw Error(config().name + " is not a causal model: reading the residual stream as logits needs a decoder");
}

// Families that cannot recompute attention from queries and keys say so.
void Model::attention_from_qk(const Capture&, int, int, int64_t, int64_t, int64_t, int64_t, float*) const {
  throw Error(config().name + ": this model cannot recompute attention from queries and keys");
}

// Families without a resumable pass say so.
Capture Model::resume(const Encoding&, int, const Tensor&, const CaptureOptions&) const {
  throw Error(config().name + ": this model cannot resume a pass from a layer");
}

AttentionWeights Model::attention_weights(int) const {
  throw Error(config().name + ": this model does not give its attention weights");
}

namespace models {

namespace {

// The KV cache: for every layer, keys and values of all tokens so far, rows of n_kv_head·d_head
// (keys after RoPE). Grows by doubling. A cache made for one whole run (DecoderModel::run) keeps
// one layer only: each layer's keys and values are needed by that layer's attention alone, and
// nothing extends the run afterwards (at 8,192 tokens of SmolLM2 that is 6 MiB instead of 377 MiB).
class Cache final : public DecoderState {
 public:
  enum class Keep { kEveryLayer, kOneLayer };
  Cache(int n_layer, int64_t width, Keep keep = Keep::kEveryLayer)
      : width(width), k(keep == Keep::kOneLayer ? 1 : size_t(n_layer)), v(k.size()) {}
  int64_t length() const override { return n; }
  int layers() const { return int(k.size()); }
  void reserve(int64_t rows) {
    if (rows <= capacity) return;
    capacity = std::max(rows, 2 * capacity);
    for (auto& x : k) x.resize(size_t(capacity * width));
    for (auto& x : v) x.resize(size_t(capacity * width));
  }
  // Stores layer `layer`'s keys and values of rows first .. first + T − 1 (room reserved):
  // k, v [T, width] with row stride `stride` (slices of the fused QKV projection).
  void store(int layer, int64_t first, const float* keys_in, const float* values_in, int64_t T, int64_t stride) {
    copy_rows(k[slot(layer)].data() + first * width, width, keys_in, stride, T, width);
    copy_rows(v[slot(layer)].data() + first * width, width, values_in, stride, T, width);
  }
  const float* keys(int layer) const { return k[slot(layer)].data(); }    // [n, width]
  const float* values(int layer) const { return v[slot(layer)].data(); }  // [n, width]
  int64_t width = 0;
  int64_t n = 0, capacity = 0;

 private:
  size_t slot(int layer) const { return k.size() == 1 ? 0 : size_t(layer); }
  std::vector<std::vector<float>> k, v;  // [layers kept][capacity · width]
};
// The cache of a whole pass (run(), resume()): nothing extends it afterwards.
Cache one_layer_cache(const ModelConfig& c) {
  return Cache(c.n_layer, int64_t(c.n_kv_head) * c.d_head, Cache::Keep::kOneLayer);
}

}  // namespace

DecoderModel::DecoderModel(ModelConfig config, DecoderArch arch, DecoderWeights weights,
                           std::unique_ptr<Tokenizer> tokenizer)
    : cfg_(std::move(config)), arch_(std::move(arch)), w_(std::move(weights)), tokenizer_(std::move(tokenizer)) {
  const int64_t H = cfg_.n_head, Hkv = cfg_.n_kv_head;
  if (H <= 0 || Hkv <= 0 || H % Hkv != 0) {
    throw Error(cfg_.name + ": " + std::to_string(H) + " query heads cannot share " + std::to_string(Hkv) +
                " key/value heads evenly");
  }
  // Query head h reads key/value head h / (n_head / n_kv_head), as repeat_kv in transformers and
  // llama.cpp's GQA broadcast: consecutive query heads form a group.
  kv_head_of_.resize(size_t(H));
  for (int64_t h = 0; h < H; ++h) kv_head_of_[size_t(h)] = static_cast<int>(h / (H / Hkv));
  if (arch_.rope) inv_freq_ = ops::rope_inverse_frequencies(arch_.rope_config);
  if (arch_.rope && std::any_of(w_.layers.begin(), w_.layers.end(), [](const auto& l) { return l.local_rope; }))
    local_inv_freq_ = ops::rope_inverse_frequencies(arch_.local_rope_config);
  cfg_.window.clear();
  for (auto& layer : w_.layers) {
    if (layer.b_o.empty()) layer.b_o = Tensor({cfg_.d_model});  // the API always offers a bias
    cfg_.window.push_back(layer.window);
  }
}

LogitReadout DecoderModel::final_readout() const {
  LogitReadout r;
  r.final_softcap = arch_.final_softcap;
  r.norm_weight = &w_.final_norm;
  r.norm_bias = &w_.final_norm_bias;
  r.rms = arch_.norm == DecoderArch::Norm::kRms;
  r.eps = cfg_.norm_eps;
  r.attention_gain = attention_output_gains();
  const QuantMatrix& U = unembedding();
  if (U.stored()) {
    std::call_once(unembedding_once_, [&] { unembedding_f32_ = U.to_f32(); });
    r.unembedding = &unembedding_f32_;
  } else {
    r.unembedding = &U.fp32();
  }
  return r;
}

std::vector<const Tensor*> DecoderModel::attention_output_gains() const {
  std::vector<const Tensor*> gains;
  if (arch_.sandwich_norm)
    for (const DecoderLayerWeights& b : w_.layers) gains.push_back(&b.post_attn_norm);
  return gains;
}

AttentionWeights DecoderModel::attention_weights(int layer) const {
  if (layer < 0 || layer >= cfg_.n_layer)
    throw Error(cfg_.name + ": no layer " + std::to_string(layer) + " (0.." + std::to_string(cfg_.n_layer - 1) + ")");
  const DecoderLayerWeights& b = w_.layers[size_t(layer)];
  const int64_t D = cfg_.d_model, q_rows = int64_t(cfg_.n_head) * cfg_.d_head,
                kv_rows = int64_t(cfg_.n_kv_head) * cfg_.d_head;
  const auto rows = [&](int64_t r0, int64_t n) {  // rows r0 .. r0 + n − 1 of the fused Q | K | V
    Tensor t({n, D}, Tensor::Uninitialized{});
    b.w_qkv.dequantize_rows(r0, n, t.ptr());
    return t;
  };
  AttentionWeights a;
  a.w_q = rows(0, q_rows), a.w_k = rows(q_rows, kv_rows), a.w_v = rows(q_rows + kv_rows, kv_rows);
  if (arch_.pre_norm) a.input_gain = b.attn_norm;
  if (arch_.qk_norm) a.q_gain = b.q_norm, a.k_gain = b.k_norm;
  if (arch_.sandwich_norm) a.output_gain = b.post_attn_norm;
  return a;
}

std::unique_ptr<DecoderState> DecoderModel::start() const {
  return std::make_unique<Cache>(cfg_.n_layer, int64_t(cfg_.n_kv_head) * cfg_.d_head);  // every layer, for extend()
}

// What extend() allocates, in fp32 values:
//   capture          capture::capture_bytes(T rows over Tk = past + T keys)
//   activations      x, h, attention output [T, d_model] each; qkv [T, (n_head + 2·n_kv_head)·d_head];
//                    concat [T, n_head·d_head]; up and gate [T, d_ff]
//   probabilities    [n_head, T, Tk] scratch when attention is not captured
//   KV cache         when Tk exceeds `capacity`, keys and values of every layer kept (all, or one
//                    for a whole run) are reallocated to
//                    max(Tk, 2·capacity) rows of n_kv_head·d_head (the old rows are kept while
//                    they are copied, so both count)
//   RoPE table       cos and sin [T, d_head/2]
//   logits           [vocab]
uint64_t DecoderModel::extend_bytes(int64_t past, int64_t capacity, int64_t T, const CaptureOptions& options,
                                    int cache_layers) const {
  return capture::capture_bytes(cfg_, T, past + T, options) +
         capture::attention_scratch_bytes(cfg_, T, past + T, options) + working_bytes(past, capacity, T, cache_layers);
}

uint64_t DecoderModel::working_bytes(int64_t past, int64_t capacity, int64_t T, int cache_layers) const {
  const uint64_t t = uint64_t(T), tk = uint64_t(past + T), L = uint64_t(cache_layers), D = uint64_t(cfg_.d_model),
                 F = uint64_t(cfg_.d_ff), H = uint64_t(cfg_.n_head), Dh = uint64_t(cfg_.d_head),
                 KV = uint64_t(cfg_.n_kv_head) * Dh;
  uint64_t floats = t * (3 * D + (H + 2 * uint64_t(cfg_.n_kv_head)) * Dh + H * Dh + 2 * F);
  if (int64_t(tk) > capacity) floats += 2 * L * KV * (std::max(tk, 2 * uint64_t(capacity)) + uint64_t(capacity));
  if (arch_.rope) floats += t * Dh * (local_inv_freq_.empty() ? 1 : 2);
  floats += uint64_t(cfg_.vocab_size);
  return floats * sizeof(float);
}

Capture DecoderModel::run(const Encoding& encoding, const CaptureOptions& options) const {
  Cache cache = one_layer_cache(cfg_);
  return extend(cache, encoding.ids(), options, nullptr);
}

uint64_t DecoderModel::run_bytes(int64_t T, const CaptureOptions& options) const {
  return extend_bytes(0, 0, T, options, /*cache_layers=*/1);
}

uint64_t DecoderModel::state_bytes(int64_t T) const {
  // A cache grown to T rows by doubling: at most 2·T rows, with the old half copied over.
  return uint64_t{2} * sizeof(float) * uint64_t(cfg_.n_layer) * uint64_t(cfg_.n_kv_head) * uint64_t(cfg_.d_head) *
         uint64_t(3 * T);
}

// One call of extend(), or one packed pass of several texts (run_batch): T rows after the `past`
// tokens in the cache. It holds one layer's activations (reused by every layer) and runs the
// blocks of decoder.h; the KV cache and the Recorders keep their bookkeeping out of the maths.
// `texts` lay out the rows: one text for extend() (any past), several packed for run_batch()
// (past 0, each text's positions from 0). The linear layers run over every row at once; each
// text's RoPE, attention (over its own keys only) and records are its own.
class DecoderModel::Pass {
 public:
  // `packed`: a run_batch pass, whose linear layers use the same kernel at every row count, so a
  // text's numbers do not depend on its companions (ops::quant_linear's gemv_for_few_rows).
  Pass(const DecoderModel& model, Cache& cache, std::span<const PackedText> texts, int64_t T, bool packed = false)
      : m_(model),
        packed_(packed),
        c_(model.cfg_),
        cache_(cache),
        texts_(texts),
        T_(T),
        past_(cache.n),
        D_(c_.d_model),
        Q_(int64_t(c_.n_head) * c_.d_head),
        KV_(int64_t(c_.n_kv_head) * c_.d_head),
        QKV_(Q_ + 2 * KV_),
        x_(size_t(T * D_)),
        h_(size_t(T * D_)),
        out_(size_t(T * D_)),
        qkv_(size_t(T * QKV_)),
        concat_(size_t(T * Q_)),
        up_(size_t(T * c_.d_ff)),
        gate_(size_t(T * c_.d_ff)) {
    int64_t longest = 0;  // positions past .. past + longest − 1 cover every text
    for (const PackedText& t : texts_) longest = std::max(longest, t.T);
    if (m_.arch_.rope) rope_ = ops::rope_table(m_.inv_freq_, past_, longest);
    if (!m_.local_inv_freq_.empty()) local_rope_ = ops::rope_table(m_.local_inv_freq_, past_, longest);
  }

  float* x() { return x_.data(); }  // the residual stream [T, d_model]
  float* h() { return h_.data(); }  // the normalised stream [T, d_model]

  // Rows row0 .. row0 + n − 1: x = E[ids] (+ P[past + t], t from 0 in the text)   [n, d_model]
  void embed(const int32_t* ids, int64_t row0, int64_t n) {
    const QuantMatrix& E = m_.w_.token_embedding;
    const Tensor& P = m_.w_.position_embedding;
    for (int64_t t = 0; t < n; ++t) {
      float* row = x_.data() + (row0 + t) * D_;
      E.dequantize_rows(ids[t], 1, row);
      if (m_.arch_.embedding_scale != 0.0f)
        for (int64_t i = 0; i < D_; ++i) row[i] *= m_.arch_.embedding_scale;
      if (!P.empty()) {
        const float* p = P.ptr() + (past_ + t) * D_;
        for (int64_t i = 0; i < D_; ++i) row[i] += p[i];
      }
    }
  }

  // concat(softmax(q_h k_g(h)ᵀ / √d_head + mask) v_g(h)) W_Oᵀ + b_O of h = Norm(x)   [T, d_model]
  const float* attention_block(int l) {
    const DecoderLayerWeights& b = m_.w_.layers[size_t(l)];
    const int64_t H = c_.n_head, Hkv = c_.n_kv_head, Dh = c_.d_head;
    const float* in = pre_norm(b.attn_norm, b.attn_norm_bias);
    linear(in, T_, b.w_qkv, b.b_qkv.empty() ? nullptr : b.b_qkv.ptr(), qkv_.data());  // [T, Q|K|V]
    float* q = qkv_.data();
    float* k = q + Q_;
    float* v = k + KV_;
    if (m_.arch_.qk_norm && m_.arch_.qk_norm_whole) {  // one RMSNorm over each row's q [H·Dh], one over its k [Hkv·Dh]
      for (int64_t t = 0; t < T_; ++t) {
        ops::rms_norm(q + t * QKV_, 1, Q_, b.q_norm.ptr(), c_.norm_eps, q + t * QKV_);
        ops::rms_norm(k + t * QKV_, 1, KV_, b.k_norm.ptr(), c_.norm_eps, k + t * QKV_);
      }
    } else if (m_.arch_.qk_norm) {  // RMSNorm over d_head, each head of each row: [H, Dh] and [Hkv, Dh]
      for (int64_t t = 0; t < T_; ++t) {
        ops::rms_norm(q + t * QKV_, H, Dh, b.q_norm.ptr(), c_.norm_eps, q + t * QKV_);
        ops::rms_norm(k + t * QKV_, Hkv, Dh, b.k_norm.ptr(), c_.norm_eps, k + t * QKV_);
      }
    }
    for (const PackedText& t : texts_) {  // each text's positions from its first row
      float* qt = q + t.row0 * QKV_;
      float* kt = k + t.row0 * QKV_;
      if (m_.arch_.rope) {
        const ops::RopeConfig& r = b.local_rope ? m_.arch_.local_rope_config : m_.arch_.rope_config;
        const ops::RopeTable& table = b.local_rope ? local_rope_ : rope_;
        ops::rope_apply(qt, QKV_, t.T, H, Dh, table, r.d_rot, r.layout);
        ops::rope_apply(kt, QKV_, t.T, Hkv, Dh, table, r.d_rot, r.layout);
      }
      t.rec->patch_qkv(l, qt, QKV_, kt, QKV_, v + t.row0 * QKV_, QKV_);
    }
    cache_.store(l, past_, k, v, T_, QKV_);  // keys after RoPE
    for_each_text(texts_, [&](const PackedText& t) {
      capture::Recorder& rec = *t.rec;
      const float* qt = q + t.row0 * QKV_;
      rec.record_qkv(l, qt, QKV_, k + t.row0 * QKV_, QKV_, v + t.row0 * QKV_, QKV_);
      // This text's keys and values so far: [past + t.T, KV] (past > 0 for one text only)
      const float *K = cache_.keys(l) + t.row0 * KV_, *V = cache_.values(l) + t.row0 * KV_;
      float* o = concat_.data() + t.row0 * Q_;  // [t.T, H·Dh]
      rec.record_value_norms(l, V, KV_, b.w_o);
      rec.attention(l, /*causal=*/true,
                    [&](int64_t q0, int64_t q1, int64_t width, ops::ProbsOut probs) {  // [H, rows, width]
                      const ops::AttentionDims dims{q1 - q0, width, H, Hkv, Dh, m_.attention_scale(l)};
                      ops::attention(qt + q0 * QKV_, QKV_, K, KV_, V, KV_, m_.kv_head_of_.data(), dims,
                                     m_.attention_mask(l), past_ + q0, probs, o + q0 * Q_, Q_);
                    });
      rec.patch_pattern(l, V, KV_, o);
      rec.before_projection(l, o, b.w_o.rows(), b.w_o.cols());
    });
    linear(concat_.data(), T_, b.w_o, b.b_o.ptr(), out_.data());  // concat · W_Oᵀ + b_O
    for (const PackedText& t : texts_)
      t.rec->after_projection(l, concat_.data() + t.row0 * Q_, b.w_o, out_.data() + t.row0 * D_);
    if (m_.arch_.sandwich_norm) ops::rms_norm(out_.data(), T_, D_, b.post_attn_norm.ptr(), c_.norm_eps, out_.data());
    return out_.data();
  }

  // W_down (silu(W_gate h) ⊙ W_up h)  or  W_down GELU_tanh(W_up h + b_up) + b_down,  h = Norm(x)   [T, d_model]
  const float* feed_forward_block(int l) {
    const DecoderLayerWeights& b = m_.w_.layers[size_t(l)];
    const int64_t F = c_.d_ff;
    const float* in = pre_norm(b.ffn_norm, b.ffn_norm_bias);
    if (m_.arch_.mlp == DecoderArch::Mlp::kSwiGlu) {
      linear(in, T_, b.w_gate, nullptr, gate_.data());  // [T, F]
      linear(in, T_, b.w_up, nullptr, up_.data());      // [T, F]
      ops::silu_mul(gate_.data(), up_.data(), T_ * F);
      linear(gate_.data(), T_, b.w_down, nullptr, out_.data());
    } else if (m_.arch_.mlp == DecoderArch::Mlp::kGeGlu) {
      linear(in, T_, b.w_gate, nullptr, gate_.data());  // [T, F]
      linear(in, T_, b.w_up, nullptr, up_.data());      // [T, F]
      ops::gelu_tanh_mul(gate_.data(), up_.data(), T_ * F);
      linear(gate_.data(), T_, b.w_down, nullptr, out_.data());
    } else {
      linear(in, T_, b.w_up, b.b_up.ptr(), up_.data());
      ops::gelu_tanh(up_.data(), T_ * F);
      linear(up_.data(), T_, b.w_down, b.b_down.ptr(), out_.data());
    }
    if (m_.arch_.sandwich_norm) ops::rms_norm(out_.data(), T_, D_, b.post_ffn_norm.ptr(), c_.norm_eps, out_.data());
    for (const PackedText& t : texts_) t.rec->record_mlp(l, out_.data() + t.row0 * D_);
    return out_.data();
  }

  // Layers first .. n_layer − 1 on the stream x entering layer `first`, then the final norm
  // (h = Norm_final(x)) and, when a capture asks for them, the logits of its rows.
  void layers(int first) {
    const int L = c_.n_layer;
    const int64_t n = T_ * D_;
    for (int l = first; l < L; ++l) {
      for (const PackedText& t : texts_) t.rec->patch_residual(l, x() + t.row0 * D_);
      ops::add_inplace(x(), attention_block(l), n);     // x += Attention(Norm(x))
      ops::add_inplace(x(), feed_forward_block(l), n);  // x += FFN(Norm(x))
      // As transformers reports them: the output of every layer but the last, and then the final
      // normalised stream in the last slot (LlamaModel / GPT2Model append it after the final norm).
      if (l + 1 < L)
        for (const PackedText& t : texts_) t.rec->record_hidden(l + 1, x() + t.row0 * D_);
    }
    final_norm();
    for (const PackedText& t : texts_) t.rec->record_hidden(L, h() + t.row0 * D_);
    logits();
  }

  // h = Norm_final(x)
  void final_norm() { norm(m_.w_.final_norm, m_.w_.final_norm_bias, x_.data(), h_.data()); }

  // The logits after the last row: Norm_final(x)[T − 1] · E_outᵀ   [vocab]
  void next_logits(std::vector<float>& logits) const {
    logits.assign(size_t(c_.vocab_size), 0.0f);
    ops::quant_linear(h_.data() + (T_ - 1) * D_, 1, m_.unembedding(), nullptr, logits.data());
    if (m_.arch_.final_softcap > 0.0f) ops::soft_cap(logits.data(), c_.vocab_size, m_.arch_.final_softcap);
  }

 private:
  // Norm_final(x) · E_outᵀ of the rows each capture asks for: every row [T, vocab], or its last
  // row's [1, vocab]. Packed texts' rows are gathered first, so the unembedding runs once.
  void logits() {
    struct Rows {
      float* out;
      int64_t from, n;  // rows from .. from + n − 1 of the pass
    };
    std::vector<Rows> wanted;
    int64_t total = 0;
    for (const PackedText& t : texts_)
      if (float* out = t.rec->logits()) {
        const int64_t n = t.rec->last_logits() ? 1 : t.T;
        wanted.push_back({out, t.row0 + t.T - n, n});
        total += n;
      }
    if (wanted.empty()) return;
    const int64_t V = c_.vocab_size;
    if (wanted.size() == 1) {
      linear(h_.data() + wanted[0].from * D_, wanted[0].n, m_.unembedding(), nullptr, wanted[0].out);
    } else {
      // Tensors: large buffers come back from the storage's cache, mapped, pass after pass.
      Tensor in({total, D_}, Tensor::Uninitialized{}), out({total, V}, Tensor::Uninitialized{});
      int64_t r = 0;  // row of the gathered block
      for (const Rows& w : wanted) {
        std::copy_n(h_.data() + w.from * D_, w.n * D_, in.ptr() + r * D_);
        r += w.n;
      }
      linear(in.ptr(), total, m_.unembedding(), nullptr, out.ptr());
      r = 0;
      for (const Rows& w : wanted) {
        std::copy_n(out.ptr() + r * V, w.n * V, w.out);
        r += w.n;
      }
    }
    if (m_.arch_.final_softcap > 0.0f)
      for (const Rows& w : wanted) ops::soft_cap(w.out, w.n * V, m_.arch_.final_softcap);
  }
  // What a block reads: h = Norm(x), or x itself when the family has no pre-norm (OLMo 2)   [T, d_model]
  const float* pre_norm(const Tensor& g, const Tensor& b) {
    if (!m_.arch_.pre_norm) return x_.data();
    norm(g, b, x_.data(), h_.data());
    return h_.data();
  }
  void norm(const Tensor& g, const Tensor& b, const float* in, float* out) const {
    if (m_.arch_.norm == DecoderArch::Norm::kRms)
      ops::rms_norm(in, T_, D_, g.ptr(), c_.norm_eps, out);
    else
      ops::layer_norm(in, T_, D_, g.ptr(), b.ptr(), c_.norm_eps, out);
  }

  // y = x · Wᵀ + b over rows of the pass
  void linear(const float* x, int64_t rows, const QuantMatrix& W, const float* b, float* y) const {
    ops::quant_linear(x, rows, W, b, y, /*gemv_for_few_rows=*/!packed_);
  }

  const DecoderModel& m_;
  const bool packed_;
  const ModelConfig& c_;
  Cache& cache_;
  std::span<const PackedText> texts_;
  const int64_t T_, past_, D_, Q_, KV_, QKV_;  // Q = n_head·d_head, KV = n_kv_head·d_head
  std::vector<float> x_, h_, out_, qkv_, concat_, up_, gate_;
  ops::RopeTable rope_;        // cos and sin of positions past .. past + (longest text) − 1
  ops::RopeTable local_rope_;  // the same with the local base (layers with local_rope), or empty
};

float DecoderModel::attention_scale(int layer) const {
  float scale =
      arch_.attention_scale > 0.0f ? arch_.attention_scale : 1.0f / std::sqrt(static_cast<float>(cfg_.d_head));
  if (arch_.scale_by_inverse_layer) scale /= static_cast<float>(layer + 1);  // GPT-2's option
  return scale;
}

ops::KeyMask DecoderModel::attention_mask(int layer) const {
  ops::KeyMask mask;
  mask.causal = true;
  mask.window = w_.layers.at(size_t(layer)).window;
  mask.softcap = arch_.attention_softcap;
  return mask;
}

void DecoderModel::attention_from_qk(const Capture& capture, int layer, int head, int64_t q0, int64_t q1, int64_t k0,
                                     int64_t k1, float* probs) const {
  if (layer < 0 || layer >= cfg_.n_layer)
    throw Error("attention from queries and keys: no layer " + std::to_string(layer));
  capture::attention_from_qk(capture, layer, head, q0, q1, k0, k1, attention_scale(layer), attention_mask(layer),
                             probs);
}

void DecoderModel::check_ids(const std::vector<int32_t>& ids, int64_t past) const {
  const int64_t T = static_cast<int64_t>(ids.size()), Tk = past + T;
  if (T == 0) throw Error("nothing to run: no tokens");
  if (Tk > cfg_.max_positions) {
    throw Error("the sequence would be " + std::to_string(Tk) + " tokens; " + cfg_.name + " allows at most " +
                std::to_string(cfg_.max_positions));
  }
  for (int32_t id : ids) {
    if (id < 0 || id >= cfg_.vocab_size)
      throw Error("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                  std::to_string(cfg_.vocab_size - 1) + ")");
  }
}

namespace {
// A generation step (T ≤ kGemvMaxRows) is dozens of short parallel regions per layer: waking a
// second thread for each cost more than it saved on a shared machine (docs/performance.md,
// "Generation step"), so the layers run on the calling thread; the count is restored for the
// output head, one large GEMV (49,152 × 576 weights for SmolLM2, 262,144 × 640 for Gemma 3)
// whose rows split across the threads.
struct OneThreadForShortWork {
  int saved = omp_get_max_threads();
  explicit OneThreadForShortWork(bool on) {
    if (!on)
      saved = 0;
    else
      omp_set_num_threads(1);
  }
  ~OneThreadForShortWork() { restore(); }
  void restore() {
    if (saved > 0) omp_set_num_threads(saved);
    saved = 0;
  }
};
}  // namespace

Capture DecoderModel::extend(DecoderState& state, const std::vector<int32_t>& ids, const CaptureOptions& options,
                             std::vector<float>* next_logits) const {
  Cache* cache = dynamic_cast<Cache*>(&state);
  if (cache == nullptr) throw Error("extend: the state was not made by this model's start()");
  check_ids(ids, cache->n);
  const int64_t T = static_cast<int64_t>(ids.size());  // new rows
  const int64_t past = cache->n, Tk = past + T;        // keys after this call
  check_run_memory(Tk, extend_bytes(past, cache->capacity, T, options, cache->layers()), options);
  cache->reserve(Tk);
  OneThreadForShortWork one_thread(T <= ops::kGemvMaxRows);
  capture::Recorder rec(cfg_, T, Tk, options, kv_head_of_);  // T query rows over Tk keys (model.h)
  const PackedText whole{0, T, &rec};
  Pass pass(*this, *cache, {&whole, 1}, T);
  pass.embed(ids.data(), 0, T);
  rec.record_hidden(0, pass.x());
  pass.layers(0);
  cache->n = Tk;
  one_thread.restore();
  if (next_logits != nullptr) pass.next_logits(*next_logits);
  return rec.finish();
}

Capture DecoderModel::resume(const Encoding& encoding, int first_layer, const Tensor& prefix,
                             const CaptureOptions& options) const {
  const int64_t T = static_cast<int64_t>(encoding.size()), D = cfg_.d_model;
  capture::check_resume(cfg_, T, first_layer, prefix, options);
  Cache cache = one_layer_cache(cfg_);  // as run()
  check_run_memory(T, extend_bytes(0, 0, T, options, cache.layers()), options);
  cache.reserve(T);
  capture::Recorder rec(cfg_, T, T, options, kv_head_of_);
  for (int i = 0; i <= first_layer; ++i) rec.record_hidden(i, prefix.ptr() + i * T * D);
  rec.resumed_at(first_layer);
  const PackedText whole{0, T, &rec};
  Pass pass(*this, cache, {&whole, 1}, T);
  std::copy_n(prefix.ptr() + first_layer * T * D, T * D, pass.x());
  pass.layers(first_layer);
  return rec.finish();
}

// A packed pass gathers the rows whose logits are asked for (Pass::logits): their logits twice.
uint64_t DecoderModel::gathered_logit_bytes(const CaptureOptions& o, int64_t T) const {
  return o.logits ? uint64_t(o.last_logits ? 1 : T) * uint64_t(cfg_.vocab_size) * sizeof(float) : 0;
}

// Packed (model.h): the texts' rows one after another, each text's positions from 0 and its
// attention over its own keys (Pass). The cache holds one layer of every row, as run()'s does.
std::vector<Capture> DecoderModel::run_batch(std::span<const Encoding> encodings,
                                             std::span<const CaptureOptions> options) const {
  check_batch_options(encodings.size(), options.size());
  std::vector<std::vector<int32_t>> ids;
  ids.reserve(encodings.size());
  uint64_t bytes = 0;
  for (size_t i = 0; i < encodings.size(); ++i) {
    ids.push_back(encodings[i].ids());
    check_ids(ids.back(), 0);
    const int64_t T = int64_t(ids.back().size());
    bytes += capture::capture_bytes(cfg_, T, T, options_of(options, i)) +
             capture::attention_scratch_bytes(cfg_, T, T, options_of(options, i)) +
             gathered_logit_bytes(options_of(options, i), T);
  }
  PackedBatch batch = pack(cfg_, encodings, options, kv_head_of_);
  if (batch.texts.empty()) return {};
  Cache cache = one_layer_cache(cfg_);
  check_batch_memory(*this, batch.texts.size(), batch.rows, bytes + working_bytes(0, 0, batch.rows, cache.layers()));
  cache.reserve(batch.rows);
  Pass pass(*this, cache, batch.texts, batch.rows, /*packed=*/true);
  for (size_t i = 0; i < ids.size(); ++i) {
    const PackedText& t = batch.texts[i];
    pass.embed(ids[i].data(), t.row0, t.T);
    t.rec->record_hidden(0, pass.x() + t.row0 * cfg_.d_model);
  }
  pass.layers(0);
  return batch.finish();
}

std::vector<Capture> DecoderModel::resume_batch(std::span<const Encoding> encodings, int first_layer,
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
    bytes +=
        capture::capture_bytes(cfg_, T, T, options_of(options, i)) + gathered_logit_bytes(options_of(options, i), T);
  }
  PackedBatch batch = pack(cfg_, encodings, options, kv_head_of_);
  if (batch.texts.empty()) return {};
  Cache cache = one_layer_cache(cfg_);
  check_batch_memory(*this, batch.texts.size(), batch.rows, bytes + working_bytes(0, 0, batch.rows, cache.layers()));
  cache.reserve(batch.rows);
  Pass pass(*this, cache, batch.texts, batch.rows, /*packed=*/true);
  const int64_t D = cfg_.d_model;
  for (size_t i = 0; i < batch.texts.size(); ++i) {
    const PackedText& t = batch.texts[i];
    const float* prefix = prefixes[i]->ptr();
    for (int s = 0; s <= first_layer; ++s) t.rec->record_hidden(s, prefix + s * t.T * D);
    t.rec->resumed_at(first_layer);
    std::copy_n(prefix + first_layer * t.T * D, t.T * D, pass.x() + t.row0 * D);
  }
  pass.layers(first_layer);
  return batch.finish();
}

}  // namespace models
}  // namespace headscope
