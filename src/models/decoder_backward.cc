// headscope — the shared causal decoder's reverse mode (decoder.h has the forward pass it undoes).
//
// gradients() runs one forward pass, reads the metric off the logits, and walks the layers back
// from the last, undoing each op with ops/backward.h. A short text's pass keeps every layer's
// activations (up to limits::kGradientTapeBytes; the forward capture is read from them); a longer
// one keeps the residual stream entering every layer (the capture's hidden states) and computes
// each layer's activations again from its input before undoing it (gradient checkpointing: one
// layer in memory, not n_layer; the price is a second forward pass, a third of the work):
//
//   x_l → h = Norm(x_l) → q|k|v = h W_qkvᵀ → [QK-norm] → RoPE → p_h = softmax(q_h k_gᵀ · scale) → o_h = p_h v_g
//       → a = concat(o_h) W_Oᵀ + b_O → [Norm] → x_mid = x_l + a → Norm → FFN → [Norm] → x_{l+1} = x_mid + f
//
// and backwards: ∂x_mid = ∂x_{l+1} + Norm'ᵀ(FFN'ᵀ ∂f);  ∂x_l = ∂x_mid + Norm'ᵀ(W_qkv-path'ᵀ ∂a).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <utility>

#include <omp.h>

#include "capture/capture.h"
#include "headscope/limits.h"
#include "models/decoder.h"
#include "ops/activations.h"
#include "ops/attention.h"
#include "ops/backward.h"
#include "ops/matmul.h"
#include "ops/norm.h"

namespace headscope::models {

// One layer at a time: forward(l, x) recomputes and keeps layer l's activations from its input,
// backward(l, dx) turns ∂/∂(its output) into ∂/∂(its input) and writes the layer's gradients.
class DecoderModel::Backward {
 public:
  // `texts`: 1, or 2 when a companion text of the same length runs in the same forward pass (its
  // rows after the first text's; only the first text is undone).
  // `kept`: layer_tape_bytes(texts · T) of arena for the layer's activations, `scratch`:
  // tape_scratch_bytes(texts · T) for the backward's buffers (shared by every layer: they undo
  // one at a time); null, the layer allocates both.
  Backward(const DecoderModel& m, int64_t T, const GradientOptions& o, Gradients& g, int64_t texts = 1,
           float* kept = nullptr, float* scratch = nullptr)
      : m_(m),
        c_(m.cfg_),
        o_(o),
        g_(g),
        R_(texts * T),
        T_(T),
        D_(c_.d_model),
        F_(c_.d_ff),
        H_(c_.n_head),
        Hkv_(c_.n_kv_head),
        Dh_(c_.d_head),
        Q_(H_ * Dh_),
        KV_(Hkv_ * Dh_),
        QKV_(Q_ + 2 * KV_) {
    if (kept == nullptr) {
      own_ = Tensor({int64_t((m.layer_tape_bytes(R_) + m.tape_scratch_bytes(R_)) / sizeof(float))},
                    Tensor::Uninitialized{});
      kept = own_.ptr();
      scratch = kept + m.layer_tape_bytes(R_) / sizeof(float);
    }
    const auto bind = [](float*& arena, std::initializer_list<Slice*> slices, int64_t n) {
      for (Slice* v : slices) v->bind(std::exchange(arena, arena + n), n);
    };
    bind(kept, {&x_in_, &h_attn_, &a_pre_, &x_mid_, &h_ffn_, &f_pre_, &f_out_, &x_out_}, R_ * D_);
    bind(kept, {&qkv_raw_, &qkv_}, R_ * QKV_);
    bind(kept, {&concat_}, R_ * Q_);
    bind(kept, {&gate_, &up_, &act_}, R_ * F_);
    bind(kept, {&probs_}, R_ * H_ * R_);  // texts · H · T² used (the bound counts (texts · T)²)
    std::fill_n(probs_.data(), texts * H_ * T * T, 0.0f);
    bind(scratch, {&d_mid_, &dh_}, R_ * D_);
    bind(scratch, {&dqkv_, &dqkv_post_rope_}, R_ * QKV_);
    bind(scratch, {&dconcat_}, R_ * Q_);
    bind(scratch, {&dgate_, &dup_}, R_ * F_);
    if (m.arch_.rope) rope_ = ops::rope_table(m.inv_freq_, 0, T);
    if (!m.local_inv_freq_.empty()) local_rope_ = ops::rope_table(m.local_inv_freq_, 0, T);
  }

  // Layer l from its input x [T, d_model]: every activation the backward reads is kept.
  void forward(int l, const float* x) {
    const DecoderLayerWeights& b = m_.w_.layers[size_t(l)];
    const DecoderArch& a = m_.arch_;
    const int64_t n = R_ * D_;
    std::copy_n(x, n, x_in_.data());
    norm_or_copy(b.attn_norm, b.attn_norm_bias, x_in_.data(), h_attn_.data());
    ops::quant_linear(h_attn_.data(), R_, b.w_qkv, b.b_qkv.empty() ? nullptr : b.b_qkv.ptr(), qkv_raw_.data());
    qkv_.copy_from(qkv_raw_);
    float *q = qkv_.data(), *k = q + Q_, *v = k + KV_;
    for (int64_t t = 0; a.qk_norm && t < R_; ++t) {
      if (a.qk_norm_whole) {
        ops::rms_norm(q + t * QKV_, 1, Q_, b.q_norm.ptr(), c_.norm_eps, q + t * QKV_);
        ops::rms_norm(k + t * QKV_, 1, KV_, b.k_norm.ptr(), c_.norm_eps, k + t * QKV_);
      } else {
        ops::rms_norm(q + t * QKV_, H_, Dh_, b.q_norm.ptr(), c_.norm_eps, q + t * QKV_);
        ops::rms_norm(k + t * QKV_, Hkv_, Dh_, b.k_norm.ptr(), c_.norm_eps, k + t * QKV_);
      }
    }
    // Each text's positions from 0 and its attention over its own keys.
    for (int64_t r0 = 0; r0 < R_; r0 += T_) {
      float *qt = q + r0 * QKV_, *kt = k + r0 * QKV_;
      if (a.rope) {
        ops::rope_apply(qt, QKV_, T_, H_, Dh_, table(b), rope(b).d_rot, rope(b).layout);
        ops::rope_apply(kt, QKV_, T_, Hkv_, Dh_, table(b), rope(b).d_rot, rope(b).layout);
      }
      const ops::AttentionDims dims{T_, T_, H_, Hkv_, Dh_, m_.attention_scale(l)};
      ops::attention(qt, QKV_, kt, QKV_, v + r0 * QKV_, QKV_, m_.kv_head_of_.data(), dims, m_.attention_mask(l), 0,
                     probs_.data() + (r0 / T_) * H_ * T_ * T_, concat_.data() + r0 * Q_, Q_);
    }
    ops::quant_linear(concat_.data(), R_, b.w_o, b.b_o.ptr(), a_pre_.data());  // concat · W_Oᵀ + b_O
    const float* attn = sandwich(b.post_attn_norm, a_pre_.data(), x_out_.data());
    for (int64_t i = 0; i < n; ++i) x_mid_[size_t(i)] = x_in_[size_t(i)] + attn[i];
    norm_or_copy(b.ffn_norm, b.ffn_norm_bias, x_mid_.data(), h_ffn_.data());
    if (a.mlp == DecoderArch::Mlp::kGeluTanh) {
      ops::quant_linear(h_ffn_.data(), R_, b.w_up, b.b_up.ptr(), up_.data());
      act_.copy_from(up_);
      ops::gelu_tanh(act_.data(), R_ * F_);
      ops::quant_linear(act_.data(), R_, b.w_down, b.b_down.ptr(), f_pre_.data());
    } else {
      ops::quant_linear(h_ffn_.data(), R_, b.w_gate, nullptr, gate_.data());
      ops::quant_linear(h_ffn_.data(), R_, b.w_up, nullptr, up_.data());
      act_.copy_from(gate_);
      if (a.mlp == DecoderArch::Mlp::kSwiGlu)
        ops::silu_mul(act_.data(), up_.data(), R_ * F_);
      else
        ops::gelu_tanh_mul(act_.data(), up_.data(), R_ * F_);
      ops::quant_linear(act_.data(), R_, b.w_down, nullptr, f_pre_.data());
    }
    const float* f = sandwich(b.post_ffn_norm, f_pre_.data(), dh_.data());
    std::copy_n(f, n, f_out_.data());
    for (int64_t i = 0; i < n; ++i) x_out_[size_t(i)] = x_mid_[size_t(i)] + f[i];
  }
  const float* output() const { return x_out_.data(); }  // x_{l+1} [T, d_model]

  // Layer l's slots of a capture, from the kept activations: what run() records there.
  // `text`: 0, or 1 for the companion's rows.
  void record(int l, Capture& c, int64_t text = 0) const {
    const int64_t n = T_ * D_, TT = T_ * T_, r0 = text * T_;
    if (!c.hidden_states.empty()) std::copy_n(x_in_.data() + r0 * D_, n, c.hidden_states.ptr() + l * n);
    if (!c.attention.empty()) std::copy_n(probs_.data() + text * H_ * TT, H_ * TT, c.attention.ptr() + l * H_ * TT);
    if (!c.attn_output.empty()) std::copy_n(a_pre_.data() + r0 * D_, n, c.attn_output.ptr() + l * n);
    if (!c.mlp_outputs.empty()) std::copy_n(f_out_.data() + r0 * D_, n, c.mlp_outputs.ptr() + l * n);
    const auto heads_of = [&](const float* src, int64_t ld, int64_t heads, Tensor& dst) {
      if (dst.empty()) return;
      float* out = dst.ptr() + int64_t(l) * heads * T_ * Dh_;
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t t = 0; t < T_; ++t) std::copy_n(src + t * ld + h * Dh_, Dh_, out + (h * T_ + t) * Dh_);
    };
    heads_of(concat_.data() + r0 * Q_, Q_, H_, c.head_outputs);
    heads_of(qkv_.data() + r0 * QKV_, QKV_, H_, c.queries);
    heads_of(qkv_.data() + r0 * QKV_ + Q_, QKV_, Hkv_, c.keys);
    heads_of(qkv_.data() + r0 * QKV_ + Q_ + KV_, QKV_, Hkv_, c.values);
  }

  // dx: in ∂/∂x_{l+1}, out ∂/∂x_l (both [T, d_model]).
  void backward(int l, float* dx) {
    const DecoderLayerWeights& b = m_.w_.layers[size_t(l)];
    const int64_t n = T_ * D_;
    // Feed-forward block: x_{l+1} = x_mid + [Norm](f_pre(Norm(x_mid))).
    std::copy_n(dx, n, g_.mlp_outputs.ptr() + l * n);  // ∂/∂ what the block adds
    std::copy_n(dx, n, d_mid_.data());
    float* df = sandwich_backward(b.post_ffn_norm, f_pre_.data(), dx, dh_.data());
    ops::quant_linear_backward(df, T_, b.w_down, act_.data(), /*accumulate=*/false);  // ∂act [T, F] (act_ reused)
    if (m_.arch_.mlp == DecoderArch::Mlp::kGeluTanh) {
      ops::gelu_tanh_backward(up_.data(), act_.data(), dup_.data(), T_ * F_);
      ops::quant_linear_backward(dup_.data(), T_, b.w_up, dh_.data(), false);
    } else {
      if (m_.arch_.mlp == DecoderArch::Mlp::kSwiGlu)
        ops::silu_mul_backward(gate_.data(), up_.data(), act_.data(), dgate_.data(), dup_.data(), T_ * F_);
      else
        ops::gelu_tanh_mul_backward(gate_.data(), up_.data(), act_.data(), dgate_.data(), dup_.data(), T_ * F_);
      ops::quant_linear_backward(dgate_.data(), T_, b.w_gate, dh_.data(), false);
      ops::quant_linear_backward(dup_.data(), T_, b.w_up, dh_.data(), true);
    }
    add_norm_backward(b.ffn_norm, x_mid_.data(), dh_.data(), d_mid_.data());
    // Attention block: x_mid = x_l + [Norm](concat(o_h) W_Oᵀ + b_O).
    float* da = sandwich_backward(b.post_attn_norm, a_pre_.data(), d_mid_.data(), dh_.data());
    std::copy_n(da, n, g_.attn_output.ptr() + l * n);
    ops::quant_linear_backward(da, T_, b.w_o, dconcat_.data(), false);  // ∂concat [T, H·Dh]
    heads_backward(l);
    if (o_.receivers) dqkv_post_rope_.copy_from(dqkv_);
    qk_backward(b);
    ops::quant_linear_backward(dqkv_.data(), T_, b.w_qkv, dh_.data(), false);  // ∂h [T, D]
    std::copy_n(d_mid_.data(), n, dx);
    add_norm_backward(b.attn_norm, x_in_.data(), dh_.data(), dx);
    if (o_.receivers) receivers(l, b);
  }

 private:
  const ops::RopeConfig& rope(const DecoderLayerWeights& b) const {
    return b.local_rope ? m_.arch_.local_rope_config : m_.arch_.rope_config;
  }
  const ops::RopeTable& table(const DecoderLayerWeights& b) const { return b.local_rope ? local_rope_ : rope_; }

  // out = Norm(in), or a copy without a pre-norm (OLMo 2)
  void norm_or_copy(const Tensor& g, const Tensor& bias, const float* in, float* out) const {
    if (!m_.arch_.pre_norm)
      std::copy_n(in, R_ * D_, out);
    else if (m_.arch_.norm == DecoderArch::Norm::kRms)
      ops::rms_norm(in, R_, D_, g.ptr(), c_.norm_eps, out);
    else
      ops::layer_norm(in, R_, D_, g.ptr(), bias.ptr(), c_.norm_eps, out);
  }
  // dx += Norm'(x)ᵀ dh (or dh itself without a pre-norm); dh is overwritten.
  // dh ← a pre-norm's Norm'ᵀ dh at its input x (in place; nothing without a pre-norm).
  void norm_backward(const Tensor& g, const float* x, float* dh) const {
    if (!m_.arch_.pre_norm) return;
    if (m_.arch_.norm == DecoderArch::Norm::kRms)
      ops::rms_norm_backward(x, T_, D_, g.ptr(), c_.norm_eps, dh, dh, nullptr);
    else
      ops::layer_norm_backward(x, T_, D_, g.ptr(), c_.norm_eps, dh, dh, nullptr, nullptr);
  }
  void add_norm_backward(const Tensor& g, const float* x, float* dh, float* dx) const {
    norm_backward(g, x, dh);
    for (int64_t i = 0, n = T_ * D_; i < n; ++i) dx[i] += dh[i];
  }
  // A sandwich norm's output (Gemma 2/3, OLMo 2) in `scratch`, or `in` itself.
  const float* sandwich(const Tensor& g, const float* in, float* scratch) const {
    if (!m_.arch_.sandwich_norm) return in;
    ops::rms_norm(in, R_, D_, g.ptr(), c_.norm_eps, scratch);
    return scratch;
  }
  float* sandwich_backward(const Tensor& g, const float* in, float* dy, float* scratch) const {
    if (!m_.arch_.sandwich_norm) return dy;
    ops::rms_norm_backward(in, T_, D_, g.ptr(), c_.norm_eps, dy, scratch, nullptr);
    return scratch;
  }

  // ∂concat → ∂p, ∂q, ∂k, ∂v of every head (after RoPE): one key/value group per thread, its query
  // heads in turn, so a group's ∂k and ∂v sum its heads without a race.
  void heads_backward(int l) {
    std::fill(dqkv_.begin(), dqkv_.end(), 0.0f);
    const int64_t group = H_ / Hkv_, T = T_, TT = T * T;
    const float cap = m_.arch_.attention_softcap, scale = m_.attention_scale(l);
#pragma omp parallel
    {
      std::vector<float> scratch(size_t(2 * TT));
#pragma omp for schedule(dynamic, 1)
      for (int64_t gk = 0; gk < Hkv_; ++gk) {
        const float* k = qkv_.data() + Q_ + gk * Dh_;
        const float* v = k + KV_;
        float* dk = dqkv_.data() + Q_ + gk * Dh_;
        float* dv = dk + KV_;
        for (int64_t h = gk * group; h < (gk + 1) * group; ++h) {
          float* dp = o_.attention ? g_.attention.ptr() + (int64_t(l) * H_ + h) * TT : nullptr;
          ops::attention_head_backward(qkv_.data() + h * Dh_, QKV_, k, v, QKV_, probs_.data() + h * TT,
                                       dconcat_.data() + h * Dh_, Q_, T, T, Dh_, scale, cap, dqkv_.data() + h * Dh_, dk,
                                       dv, dp, scratch.data());
        }
      }
    }
    // Per-head records [L, heads, T, Dh] from the row-major [T, heads·Dh] buffers.
    const auto heads_of = [&](const float* src, int64_t ld, int64_t heads, Tensor& dst) {
      float* out = dst.ptr() + int64_t(l) * heads * T * Dh_;
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t t = 0; t < T; ++t) std::copy_n(src + t * ld + h * Dh_, Dh_, out + (h * T + t) * Dh_);
    };
    heads_of(dconcat_.data(), Q_, H_, g_.head_outputs);
    if (o_.queries_keys_values) {
      heads_of(dqkv_.data(), QKV_, H_, g_.queries);
      heads_of(dqkv_.data() + Q_, QKV_, Hkv_, g_.keys);
      heads_of(dqkv_.data() + Q_ + KV_, QKV_, Hkv_, g_.values);
    }
  }

  // ∂q, ∂k after RoPE → before QK-norm (in dqkv_, in place): RoPE's transpose, then the norm's.
  void qk_backward(const DecoderLayerWeights& b) { qk_backward(b, dqkv_.data()); }
  void qk_backward(const DecoderLayerWeights& b, float* d) const {
    const DecoderArch& a = m_.arch_;
    if (a.rope) {
      ops::rope_backward(d, QKV_, T_, H_, Dh_, table(b), rope(b).d_rot, rope(b).layout);
      ops::rope_backward(d + Q_, QKV_, T_, Hkv_, Dh_, table(b), rope(b).d_rot, rope(b).layout);
    }
    if (!a.qk_norm) return;
    // The norm's input: the projection before QK-norm and RoPE (qkv_raw_).
    for (int64_t t = 0; t < T_; ++t) {
      const float* raw = qkv_raw_.data() + t * QKV_;
      float* row = d + t * QKV_;
      if (a.qk_norm_whole) {
        ops::rms_norm_backward(raw, 1, Q_, b.q_norm.ptr(), c_.norm_eps, row, row, nullptr);
        ops::rms_norm_backward(raw + Q_, 1, KV_, b.k_norm.ptr(), c_.norm_eps, row + Q_, row + Q_, nullptr);
      } else {
        ops::rms_norm_backward(raw, H_, Dh_, b.q_norm.ptr(), c_.norm_eps, row, row, nullptr);
        ops::rms_norm_backward(raw + Q_, Hkv_, Dh_, b.k_norm.ptr(), c_.norm_eps, row + Q_, row + Q_, nullptr);
      }
    }
  }

  // qk_backward for one query or key head's columns [T, Dh] (ld Dh) alone, starting at column
  // `col` of q|k|v; `norm` its per-head QK-norm weight.
  void head_qk_backward(const DecoderLayerWeights& b, const Tensor& norm, int64_t col, float* d) const {
    if (m_.arch_.rope) ops::rope_backward(d, Dh_, T_, 1, Dh_, table(b), rope(b).d_rot, rope(b).layout);
    if (!m_.arch_.qk_norm) return;
    for (int64_t t = 0; t < T_; ++t)
      ops::rms_norm_backward(qkv_raw_.data() + t * QKV_ + col, 1, Dh_, norm.ptr(), c_.norm_eps, d + t * Dh_,
                             d + t * Dh_, nullptr);
  }

  // Receivers (GradientOptions::receivers): ∂/∂x_l through one head's query, one key/value head's
  // key or value alone — its columns of ∂(q|k|v after RoPE) kept, the rest zeroed, taken back
  // through RoPE, QK-norm, W_qkv and the pre-norm. Recomputed from g_'s per-head gradients.
  void receivers(int l, const DecoderLayerWeights& b) {
    const int64_t slots = H_ + 2 * Hkv_, n = T_ * D_;
    // W_qkv in fp32 once for the layer (a GGUF's blocks dequantised), then one slot per thread.
    // (A Tensor: the next layer's call gets the same mapped buffer back, see tensor.h.)
    const Tensor w_f32 = b.w_qkv.to_f32();  // an fp32 matrix is shared, not copied
    const float* w = w_f32.ptr();
    // Under OLMo 2's whole-row QK-norm a query (key) slot reaches every query (key) column; else
    // it stays in its head's Dh columns, taken back through RoPE and the head's norm alone.
    const bool whole = m_.arch_.qk_norm && m_.arch_.qk_norm_whole;
    std::exception_ptr failure;  // an exception may not leave a parallel region: kept, rethrown after
#pragma omp parallel
    {
      std::vector<float> d(whole ? static_cast<size_t>(T_ * QKV_) : 0), rows, dh(static_cast<size_t>(n));
#pragma omp for schedule(dynamic, 1)
      for (int64_t s = 0; s < slots; ++s) try {
          const bool value = s >= H_ + Hkv_;
          const int64_t col = s < H_ ? s * Dh_ : !value ? Q_ + (s - H_) * Dh_ : Q_ + KV_ + (s - H_ - Hkv_) * Dh_;
          int64_t r0 = col, r1 = col + Dh_;  // the columns of ∂(q|k|v) the slot reaches
          if (!value && whole) {
            r0 = s < H_ ? 0 : Q_, r1 = s < H_ ? Q_ : Q_ + KV_;
            std::fill(d.begin(), d.end(), 0.0f);
            for (int64_t t = 0; t < T_; ++t)
              std::copy_n(dqkv_post_rope_.data() + t * QKV_ + col, Dh_, d.data() + t * QKV_ + col);
            qk_backward(b, d.data());
            rows.resize(size_t(T_ * (r1 - r0)));
            for (int64_t t = 0; t < T_; ++t)
              std::copy(d.data() + t * QKV_ + r0, d.data() + t * QKV_ + r1, rows.data() + t * (r1 - r0));
          } else {
            rows.resize(size_t(T_ * Dh_));
            for (int64_t t = 0; t < T_; ++t)
              std::copy_n(dqkv_post_rope_.data() + t * QKV_ + col, Dh_, rows.data() + t * Dh_);
            if (!value) head_qk_backward(b, s < H_ ? b.q_norm : b.k_norm, col, rows.data());
          }
          // ∂h = rows · W_qkv[r0 .. r1, :]  [T, D], then back through the pre-norm into the slot.
          ops::matmul(rows.data(), r1 - r0, w + r0 * D_, D_, dh.data(), D_, T_, D_, r1 - r0, /*trans_b=*/false);
          norm_backward(b.attn_norm, x_in_.data(), dh.data());
          std::copy_n(dh.data(), n, g_.receivers.ptr() + (int64_t(l) * slots + s) * n);
        } catch (...) {
#pragma omp critical
          if (!failure) failure = std::current_exception();
        }
    }
    if (failure) std::rethrow_exception(failure);
  }

  const DecoderModel& m_;
  const ModelConfig& c_;
  const GradientOptions& o_;
  Gradients& g_;
  const int64_t R_, T_, D_, F_, H_, Hkv_, Dh_, Q_, KV_, QKV_;  // R_: the forward's rows (T_ per text)
  // Layer l's activations (forward) and the backward's buffers.
  // A slice of the tape's arena (no copies: copy_from copies the numbers).
  class Slice {
   public:
    Slice() = default;
    Slice(const Slice&) = delete;
    Slice& operator=(const Slice&) = delete;
    void bind(float* p, int64_t n) { p_ = p, n_ = n; }
    float* data() const { return p_; }
    float* begin() const { return p_; }
    float* end() const { return p_ + n_; }
    float& operator[](size_t i) const { return p_[i]; }
    void copy_from(const Slice& other) { std::copy_n(other.p_, n_, p_); }

   private:
    float* p_ = nullptr;
    int64_t n_ = 0;
  };
  Tensor own_;  // the arena when gradients() gave none
  Slice x_in_, h_attn_, qkv_raw_, qkv_, probs_, concat_, a_pre_, x_mid_, h_ffn_, gate_, up_, act_, f_pre_, f_out_,
      x_out_;
  Slice d_mid_, dh_, dqkv_, dqkv_post_rope_, dconcat_, dgate_, dup_;
  ops::RopeTable rope_, local_rope_;
};

namespace {
Tensor zeros_if(bool on, std::vector<int64_t> shape) { return on ? Tensor(std::move(shape)) : Tensor(); }

// What the kept activations can give as a capture: what attribution patching and saliency read.
bool tape_can_capture(const CaptureOptions& o) {
  return !o.contributions && !o.value_norms && !o.attention_sink && !o.attention_head_sink && o.ablation == nullptr &&
         (o.patches == nullptr || o.patches->empty()) && (!o.logits || o.last_logits);
}
}  // namespace

// One layer's kept activations (Backward) for T rows; the backward's buffers, shared by every
// layer, in tape_scratch_bytes; each KV group's scratch 2·T² per thread comes on top.
uint64_t DecoderModel::layer_tape_bytes(int64_t T) const {
  const uint64_t t = uint64_t(T), D = uint64_t(cfg_.d_model), F = uint64_t(cfg_.d_ff), H = uint64_t(cfg_.n_head),
                 Dh = uint64_t(cfg_.d_head), QKV = (H + 2 * uint64_t(cfg_.n_kv_head)) * Dh;
  return (t * (8 * D + 2 * QKV + H * Dh + 3 * F) + H * t * t) * sizeof(float);
}
uint64_t DecoderModel::tape_scratch_bytes(int64_t T) const {
  const uint64_t t = uint64_t(T), D = uint64_t(cfg_.d_model), F = uint64_t(cfg_.d_ff), H = uint64_t(cfg_.n_head),
                 Dh = uint64_t(cfg_.d_head), QKV = (H + 2 * uint64_t(cfg_.n_kv_head)) * Dh;
  return t * (2 * D + 2 * QKV + H * Dh + 2 * F) * sizeof(float);
}

bool DecoderModel::keeps_every_layer(int64_t T, const GradientOptions& o) const {
  const int64_t rows = o.companion != nullptr ? 2 * T : T;  // (counts the companion's T² twice over: a bound)
  return tape_can_capture(o.forward) &&
         uint64_t(cfg_.n_layer) * layer_tape_bytes(rows) + tape_scratch_bytes(rows) <= limits::kGradientTapeBytes;
}

// What gradients() holds at once: the forward capture (run_bytes), or every layer's activations
// when they are kept; the gradients (embeddings twice, hidden states, head outputs, attention and
// feed-forward outputs, and those asked for); the receivers' buffers; each KV group's scratch; the
// seed's logits and their gradient [rows, vocab]; ∂h of the final norm.
uint64_t DecoderModel::gradient_bytes(int64_t T, const GradientOptions& o) const {
  CaptureOptions fwd = o.forward;
  fwd.hidden_states = true;
  const uint64_t t = uint64_t(T), L = uint64_t(cfg_.n_layer), D = uint64_t(cfg_.d_model), H = uint64_t(cfg_.n_head),
                 Hkv = uint64_t(cfg_.n_kv_head), Dh = uint64_t(cfg_.d_head), QKV = (H + 2 * Hkv) * Dh,
                 slots = H + 2 * Hkv;
  uint64_t floats = t * D * 2 + (L + 1) * t * D + L * H * t * Dh + 2 * L * t * D;
  if (o.attention) floats += L * H * t * t;
  if (o.queries_keys_values) floats += L * QKV * t;
  if (o.receivers) floats += L * slots * t * D + t * (QKV + D) * 2 + QKV * D;  // + W_qkv in fp32
  floats += uint64_t(std::max(1, omp_get_max_threads())) * 2 * t * t;
  floats += 2 * t * uint64_t(cfg_.vocab_size) + 2 * t * D;
  const bool keep = keeps_every_layer(T, o);
  const uint64_t texts = o.companion != nullptr ? 2 : 1;
  return texts * capture::capture_bytes(cfg_, T, T, fwd) + (keep ? 0 : run_bytes(T, fwd)) +
         (keep ? L * layer_tape_bytes(int64_t(texts) * T) + tape_scratch_bytes(int64_t(texts) * T)
               : layer_tape_bytes(T) + tape_scratch_bytes(T)) +
         floats * sizeof(float);
}

// The token embeddings E[id] (· √d_model for Gemma), or the caller's.
Tensor DecoderModel::token_embeddings(const std::vector<int32_t>& ids, const Tensor* given) const {
  const int64_t T = int64_t(ids.size()), D = cfg_.d_model;
  if (given != nullptr) {
    given->expect_shape({T, D}, "gradients: the token embeddings");
    return *given;
  }
  Tensor e({T, D});
  for (int64_t t = 0; t < T; ++t) {
    float* row = e.ptr() + t * D;
    w_.token_embedding.dequantize_rows(ids[size_t(t)], 1, row);
    if (arch_.embedding_scale != 0.0f)
      for (int64_t i = 0; i < D; ++i) row[i] *= arch_.embedding_scale;
  }
  return e;
}

Gradients DecoderModel::gradients(const Encoding& encoding, const GradientSeed& seed,
                                  const GradientOptions& options) const {
  const std::vector<int32_t> ids = encoding.ids();
  check_ids(ids, 0);
  if (!seed.metric) throw Error("gradients: no metric to differentiate");
  const int64_t T = int64_t(ids.size()), D = cfg_.d_model, L = cfg_.n_layer, H = cfg_.n_head, Hkv = cfg_.n_kv_head,
                Dh = cfg_.d_head, V = cfg_.vocab_size;
  check_gradient_memory(T, gradient_bytes(T, options), options);
  Gradients g;
  g.token_embeddings = token_embeddings(ids, options.embeddings);
  const bool keep = keeps_every_layer(T, options);
  const Encoding* companion = options.companion;
  if (companion != nullptr && int64_t(companion->size()) != T)
    throw Error("gradients: the companion text is " + std::to_string(companion->size()) + " tokens, not " +
                std::to_string(T));
  const int64_t texts = keep && companion != nullptr ? 2 : 1;
  // x_0 = e + P (GPT-2's learned positions), and the companion's after it when it shares the pass.
  Tensor x0({texts * T, D});
  std::copy_n(g.token_embeddings.ptr(), T * D, x0.ptr());
  if (texts == 2) {
    const std::vector<int32_t> other = companion->ids();
    check_ids(other, 0);
    const Tensor e = token_embeddings(other, nullptr);
    std::copy_n(e.ptr(), T * D, x0.ptr() + T * D);
  }
  if (!w_.position_embedding.empty())
    for (int64_t r = 0; r < texts * T; ++r)
      for (int64_t i = 0; i < D; ++i) x0.ptr()[r * D + i] += w_.position_embedding.ptr()[(r % T) * D + i];
  CaptureOptions fwd = options.forward;
  fwd.hidden_states = true;
  // The forward pass: every layer kept (its capture read from them), or run() keeping each
  // layer's input for the backward to start from.
  Tensor tape;  // before the layers that slice it
  std::vector<std::unique_ptr<Backward>> layers;
  if (companion != nullptr && texts == 1) g.companion = run(*companion, fwd);
  if (keep) {
    g.forward = capture::allocate(cfg_, T, T, fwd, kv_head_of_);
    if (texts == 2) g.companion = capture::allocate(cfg_, T, T, fwd, kv_head_of_);
    // One arena for every layer's activations and the shared backward buffers: a large buffer,
    // which the next pass of the same length finds mapped (tensor.h), where a layer's own
    // allocations would fault in fresh pages on every pass.
    const int64_t kept = int64_t(layer_tape_bytes(texts * T) / sizeof(float));
    tape = Tensor({L * kept + int64_t(tape_scratch_bytes(texts * T) / sizeof(float))}, Tensor::Uninitialized{});
    const float* x = x0.ptr();
    for (int64_t l = 0; l < L; ++l) {
      layers.push_back(
          std::make_unique<Backward>(*this, T, options, g, texts, tape.ptr() + l * kept, tape.ptr() + L * kept));
      layers.back()->forward(int(l), x);
      layers.back()->record(int(l), g.forward);
      if (texts == 2) layers.back()->record(int(l), g.companion, 1);
      x = layers.back()->output();
    }
  } else if (options.embeddings == nullptr) {
    g.forward = run(encoding, fwd);
  } else {
    Tensor prefix({L + 1, T, D});
    std::copy_n(x0.ptr(), T * D, prefix.ptr());
    g.forward = resume(encoding, 0, prefix, fwd);
  }
  g.embeddings = Tensor({T, D});
  g.hidden_states = Tensor({L + 1, T, D});
  g.head_outputs = Tensor({L, H, T, Dh});
  g.attn_output = Tensor({L, T, D});
  g.mlp_outputs = Tensor({L, T, D});
  g.attention = zeros_if(options.attention, {L, H, T, T});
  g.queries = zeros_if(options.queries_keys_values, {L, H, T, Dh});
  g.keys = zeros_if(options.queries_keys_values, {L, Hkv, T, Dh});
  g.values = zeros_if(options.queries_keys_values, {L, Hkv, T, Dh});
  // Every slot of every layer is written by Backward::receivers.
  if (options.receivers) g.receivers = Tensor({L, H + 2 * Hkv, T, D}, Tensor::Uninitialized{});
  if (!keep) {
    layers.push_back(std::make_unique<Backward>(*this, T, options, g));
    layers.back()->forward(int(L - 1), g.forward.hidden_states.ptr() + (L - 1) * T * D);  // x_L
  }
  const auto layer = [&](int64_t l) -> Backward& { return keep ? *layers[size_t(l)] : *layers.front(); };
  const float* x_last = layer(L - 1).output();
  // h = Norm_final(x_L): the capture's last slot; then the metric from the logits of its rows,
  // h · E_outᵀ [· soft-cap].
  float* h_final = g.forward.hidden_states.ptr() + L * T * D;
  if (keep) {
    for (int64_t t = 0; t < texts; ++t) {
      Capture& c = t == 0 ? g.forward : g.companion;
      float* h = c.hidden_states.ptr() + L * T * D;
      if (arch_.norm == DecoderArch::Norm::kRms)
        ops::rms_norm(x_last + t * T * D, T, D, w_.final_norm.ptr(), cfg_.norm_eps, h);
      else
        ops::layer_norm(x_last + t * T * D, T, D, w_.final_norm.ptr(), w_.final_norm_bias.ptr(), cfg_.norm_eps, h);
    }
    if (texts == 2 && !g.companion.logits.empty()) {  // the companion's last row (tape_can_capture: last_logits)
      ops::quant_linear(g.companion.hidden_states.ptr() + (L * T + T - 1) * D, 1, unembedding(), nullptr,
                        g.companion.logits.ptr());
      if (arch_.final_softcap > 0.0f) ops::soft_cap(g.companion.logits.ptr(), V, arch_.final_softcap);
    }
  }
  const int64_t rows = seed.all_rows ? T : 1, first = T - rows;
  std::vector<float> logits(size_t(rows * V)), dlogits(size_t(rows * V), 0.0f);
  ops::quant_linear(h_final + first * D, rows, unembedding(), nullptr, logits.data());
  if (arch_.final_softcap > 0.0f) ops::soft_cap(logits.data(), rows * V, arch_.final_softcap);
  if (keep && !g.forward.logits.empty()) std::copy_n(logits.data() + (rows - 1) * V, V, g.forward.logits.ptr());
  g.metric = seed.metric(logits.data(), rows, V, dlogits.data());
  if (arch_.final_softcap > 0.0f)
    ops::soft_cap_backward(logits.data(), dlogits.data(), dlogits.data(), rows * V, arch_.final_softcap);
  float* dh_final = g.hidden_states.ptr() + L * T * D;
  ops::quant_linear_backward(dlogits.data(), rows, unembedding(), dh_final + first * D, false);
  std::vector<float> dx(dh_final, dh_final + T * D);
  if (arch_.norm == DecoderArch::Norm::kRms)
    ops::rms_norm_backward(x_last, T, D, w_.final_norm.ptr(), cfg_.norm_eps, dx.data(), dx.data(), nullptr);
  else
    ops::layer_norm_backward(x_last, T, D, w_.final_norm.ptr(), cfg_.norm_eps, dx.data(), dx.data(), nullptr, nullptr);
  g.final_residual = Tensor({T, D});
  std::copy_n(dx.data(), T * D, g.final_residual.ptr());
  for (int64_t l = L - 1; l >= 0; --l) {
    if (!keep && l < L - 1) layer(l).forward(int(l), g.forward.hidden_states.ptr() + l * T * D);
    layer(l).backward(int(l), dx.data());
    std::copy_n(dx.data(), T * D, g.hidden_states.ptr() + l * T * D);
  }
  std::copy_n(dx.data(), T * D, g.embeddings.ptr());  // x_0 = e + P: ∂e = ∂x_0
  return g;
}

}  // namespace headscope::models
