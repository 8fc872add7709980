#include "capture/capture.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "headscope/error.h"
#include "ops/attention.h"
#include "ops/matmul.h"
#include "ops/quant_linear.h"
#include "tensor/tensor_ops.h"

namespace headscope::capture {

uint64_t capture_bytes(const ModelConfig& c, int64_t T, int64_t Tk, const CaptureOptions& o) {
  // limits.h bounds every factor, but L·H·T·Tk can still pass 2^64 (2^10 · 2^10 · 2^24 · 2^24):
  // the sum saturates instead of wrapping, so a huge T always reads as "too much".
  const uint64_t L = uint64_t(c.n_layer), H = uint64_t(c.n_head), Hkv = uint64_t(c.n_kv_head), D = uint64_t(c.d_model),
                 Dh = uint64_t(c.d_head), t = uint64_t(T), tk = uint64_t(Tk);
  uint64_t floats = 0;
  const auto add = [&floats](std::initializer_list<uint64_t> factors) {
    uint64_t p = 1;
    for (uint64_t f : factors)
      if (__builtin_mul_overflow(p, f, &p)) p = UINT64_MAX / 8;
    floats = std::min(UINT64_MAX / 8, floats + std::min(p, UINT64_MAX / 8));
  };
  if (o.attention) add({L, H, t, tk});
  if (o.head_outputs) add({L, H, t, Dh});
  if (o.contributions) add({L, H, t, D});
  if (o.contributions || o.head_outputs) add({L, t, D});
  if (o.hidden_states) add({L + 1, t, D});
  if (o.queries_keys) add({L, H + Hkv, t, Dh});
  if (o.values) add({L, Hkv, t, Dh});
  if (o.logits && c.causal) add({o.last_logits ? 1 : t, uint64_t(c.vocab_size)});
  if (o.value_norms) add({L, H, tk});
  if (o.mlp_outputs) add({L, t, D});
  return floats * sizeof(float);
}

Capture allocate(const ModelConfig& c, int64_t T, int64_t Tk, const CaptureOptions& o, std::vector<int> kv_head_of) {
  Capture cap;
  cap.n_layer = c.n_layer;
  cap.n_head = c.n_head;
  cap.n_kv_head = c.n_kv_head;
  cap.T = static_cast<int>(T);
  cap.d_head = c.d_head;
  cap.d_model = c.d_model;
  cap.kv_head_of = std::move(kv_head_of);
  const int64_t L = c.n_layer, H = c.n_head, Hkv = c.n_kv_head, D = c.d_model, Dh = c.d_head;
  const Tensor::Uninitialized fully_written;  // every element below is written by the run
  if (o.attention) cap.attention = Tensor({L, H, T, Tk}, fully_written);
  if (o.head_outputs) cap.head_outputs = Tensor({L, H, T, Dh}, fully_written);
  if (o.contributions) cap.contributions = Tensor({L, H, T, D}, fully_written);
  if (o.contributions || o.head_outputs) cap.attn_output = Tensor({L, T, D}, fully_written);
  if (o.hidden_states) cap.hidden_states = Tensor({L + 1, T, D}, fully_written);
  if (o.queries_keys) {
    cap.queries = Tensor({L, H, T, Dh}, fully_written);
    cap.keys = Tensor({L, Hkv, T, Dh}, fully_written);
  }
  if (o.values) cap.values = Tensor({L, Hkv, T, Dh}, fully_written);
  if (o.logits && c.causal) cap.logits = Tensor({o.last_logits ? 1 : T, int64_t(c.vocab_size)}, fully_written);
  if (o.value_norms) cap.value_norms = Tensor({L, H, Tk}, fully_written);
  if (o.mlp_outputs) cap.mlp_outputs = Tensor({L, T, D}, fully_written);
  return cap;
}

void check_resume(const ModelConfig& c, int64_t T, int first_layer, const Tensor& prefix, const CaptureOptions& o) {
  if (T == 0) throw Error("nothing to run: the encoding has no tokens");
  if (first_layer < 0 || first_layer >= c.n_layer)
    throw Error("resume: no layer " + std::to_string(first_layer) + " (the model has " + std::to_string(c.n_layer) +
                ")");
  prefix.expect_shape({c.n_layer + 1, T, c.d_model}, "resume: the prefix's hidden states");
  if (o.attention || o.contributions || o.value_norms || o.attention_sink)
    throw Error("resume: a resumed pass records no attention maps, contributions or value norms (turn them off)");
}

namespace {
bool streamed(const CaptureOptions& o) { return !o.attention && o.attention_sink; }
}  // namespace

uint64_t attention_scratch_bytes(const ModelConfig& c, int64_t T, int64_t Tk, const CaptureOptions& o) {
  if (o.attention) return 0;
  const int64_t rows = std::min(T, std::max<int64_t>(1, o.attention_block_rows));
  return uint64_t(c.n_head) * uint64_t(rows) * uint64_t(Tk) * sizeof(float);
}

void attention_from_qk(const Capture& cap, int layer, int head, int64_t q0, int64_t q1, int64_t k0, int64_t k1,
                       float scale, const ops::KeyMask& mask, float* probs) {
  if (cap.queries.empty() || cap.keys.empty())
    throw Error("attention from queries and keys: the run did not keep them (CaptureOptions::queries_keys)");
  const int64_t H = cap.n_head, Hkv = cap.n_kv_head, T = cap.T, Dh = cap.d_head, Tk = cap.keys.dim(2);
  if (layer < 0 || layer >= cap.n_layer)
    throw Error("attention from queries and keys: no layer " + std::to_string(layer));
  if (head < 0 || head >= H) throw Error("attention from queries and keys: no head " + std::to_string(head));
  if (q0 < 0 || q1 > T || q0 >= q1)
    throw Error("attention from queries and keys: rows " + std::to_string(q0) + ".." + std::to_string(q1) +
                " are not a non-empty range of the " + std::to_string(T) + " rows");
  if (k0 < 0 || k1 > Tk || k0 >= k1)
    throw Error("attention from queries and keys: keys " + std::to_string(k0) + ".." + std::to_string(k1) +
                " are not a non-empty range of the " + std::to_string(Tk) + " keys");
  // The pass's own blocks of rows (Recorder::attention with the default attention_block_rows),
  // each as wide as it was there, so that every GEMM has the pass's shape and the rows come out
  // as the pass computed them.
  const int64_t block = CaptureOptions{}.attention_block_rows, past = Tk - T;
  const int single_head[1] = {0};
  const float* Qh = cap.queries.ptr() + (layer * H + head) * T * Dh;                          // [T, Dh]
  const float* Kg = cap.keys.ptr() + (layer * Hkv + cap.kv_head_of[size_t(head)]) * Tk * Dh;  // [Tk, Dh]
  std::vector<float> rows;
  for (int64_t b0 = q0 / block * block; b0 < q1; b0 += block) {
    const int64_t b1 = std::min(T, b0 + block), width = mask.causal ? past + b1 : Tk;
    const int64_t kept = std::max<int64_t>(0, std::min(k1, width) - k0);  // asked keys the block computes
    if (kept > 0) {  // else every asked key is after the block's rows: masked
      rows.resize(size_t((b1 - b0) * width));
      const ops::AttentionDims dims{b1 - b0, width, 1, 1, Dh, scale};
      ops::attention(Qh + b0 * Dh, Dh, Kg, Dh, nullptr, Dh, single_head, dims, mask, past + b0, rows.data(), nullptr,
                     0);
    }
    for (int64_t q = std::max(q0, b0); q < std::min(q1, b1); ++q) {
      float* out = probs + (q - q0) * (k1 - k0);
      if (kept > 0) std::copy_n(rows.data() + (q - b0) * width + k0, kept, out);
      std::fill(out + kept, out + (k1 - k0), 0.0f);  // keys after the block's last row: masked
    }
  }
}

Recorder::Recorder(const ModelConfig& config, int64_t T, int64_t Tk, const CaptureOptions& options,
                   std::vector<int> kv_head_of)
    : cap_(allocate(config, T, Tk, options, std::move(kv_head_of))),
      Tk_(Tk),
      sink_(streamed(options) ? options.attention_sink : nullptr),
      head_sink_(streamed(options) && options.attention_head_parts > 0 ? options.attention_head_sink : nullptr),
      follow_{options.attention_head_parts, nullptr},
      ablation_(options.ablation != nullptr && !options.ablation->empty() ? options.ablation : nullptr),
      value_norm_sink_(options.value_norms ? options.value_norm_sink : nullptr),
      block_rows_(std::max<int64_t>(1, options.attention_block_rows)),
      last_only_(options.last_logits) {
  if (options.patches != nullptr && !options.patches->empty()) {
    check_patches(*options.patches, T, Tk);
    patches_.resize(size_t(config.n_layer));
    for (const Patch& p : *options.patches) patches_[size_t(p.layer)].push_back(&p);
  }
}

Recorder::Block Recorder::block(int layer, int64_t q0, bool causal) {
  const int64_t T = cap_.T, H = cap_.n_head, q1 = std::min(T, q0 + block_rows_), width = causal ? Tk_ - T + q1 : Tk_;
  if (!cap_.attention.empty())  // rows q0 .. q1 − 1 of layer `layer` of [L, H, T, Tk], in place
    return {q0, q1, width, {cap_.attention.ptr() + (layer * H * T + q0) * Tk_, T * Tk_, Tk_}};
  if (scratch_.empty()) scratch_ = Tensor({H, std::min(T, block_rows_), Tk_}, Tensor::Uninitialized{});
  Block b{q0, q1, width, {scratch_.ptr(), (q1 - q0) * width, width}};  // [H, q1 − q0, width]
  b.probs.group_scores = true;  // a GQA group's scores in one GEMM (ops/attention.h)
  if (head_sink_) {             // each head's rows to the sink as soon as ops::attention has written them
    follow_.run = [this, layer, b, past = Tk_ - T](int64_t h, int part) {
      head_sink_(layer, h, part, past + b.q0, past + b.q1, b.width, b.probs.data + h * b.probs.head_stride);
    };
    b.probs.then = &follow_;
  }
  return b;
}

void Recorder::hand_over(int layer, const Block& b) const {
  if (!cap_.attention.empty()) {
    if (b.width == Tk_) return;
    for (int64_t h = 0; h < cap_.n_head; ++h)  // keys no row of the block may see: exactly 0
      for (int64_t r = 0; r < b.q1 - b.q0; ++r) {
        float* row = b.probs.data + h * b.probs.head_stride + r * b.probs.ld;
        std::fill(row + b.width, row + Tk_, 0.0f);
      }
    return;
  }
  if (sink_) sink_(layer, Tk_ - cap_.T + b.q0, Tk_ - cap_.T + b.q1, b.width, b.probs.data);
}

void Recorder::record_qkv(int layer, const float* q, int64_t q_stride, const float* k, int64_t k_stride, const float* v,
                          int64_t v_stride) {
  const int64_t T = cap_.T, H = cap_.n_head, Hkv = cap_.n_kv_head, Dh = cap_.d_head;
  if (!cap_.values.empty())  // [T, Hkv·Dh] -> [Hkv, T, Dh]
    for (int64_t g = 0; g < Hkv; ++g)
      copy_rows(cap_.values.ptr() + (layer * Hkv + g) * T * Dh, Dh, v + g * Dh, v_stride, T, Dh);
  if (cap_.queries.empty()) return;
  // The capture is allocated without a zero-fill, so these copies are the first touch of its
  // pages, which the kernel clears as they fault in (at 8K tokens ~25 MB a layer, a few percent
  // of the run on one thread): on every thread, heads [0, H) the queries, [H, H + Hkv) the keys.
  constexpr int64_t kMinParallelValues = 1 << 18;
#pragma omp parallel for schedule(dynamic, 1) if ((H + Hkv) * T * Dh >= kMinParallelValues)
  for (int64_t i = 0; i < H + Hkv; ++i) {
    if (i < H)  // [T, H·Dh] -> [H, T, Dh]
      copy_rows(cap_.queries.ptr() + (layer * H + i) * T * Dh, Dh, q + i * Dh, q_stride, T, Dh);
    else  // [T, Hkv·Dh] -> [Hkv, T, Dh]
      copy_rows(cap_.keys.ptr() + (layer * Hkv + i - H) * T * Dh, Dh, k + (i - H) * Dh, k_stride, T, Dh);
  }
}

Recorder::HeadColumns Recorder::head_columns(OutputWeights W_O, int64_t h, std::vector<float>& scratch) const {
  const int64_t Dh = cap_.d_head, C = int64_t(cap_.n_head) * Dh;
  if (W_O.fp32 != nullptr) return {W_O.fp32 + h * Dh, C};
  scratch.resize(size_t(W_O.stored->rows() * Dh));
  W_O.stored->dequantize_cols(h * Dh, Dh, scratch.data(), Dh);
  return {scratch.data(), Dh};
}

void Recorder::check_output_weights(int layer, int64_t rows, int64_t cols) const {
  const int64_t D = cap_.d_model, C = int64_t(cap_.n_head) * cap_.d_head;
  if (rows != D || cols != C)
    throw Error("W_O of layer " + std::to_string(layer) + " is [" + std::to_string(rows) + ", " + std::to_string(cols) +
                "]; expected [" + std::to_string(D) + ", " + std::to_string(C) + "] (d_model, n_head · d_head)");
}

void Recorder::before_projection(int layer, float* concat, int64_t rows, int64_t cols) {
  check_output_weights(layer, rows, cols);
  if (ablation_ != nullptr) ablation_->apply(layer, Tk_ - cap_.T, cap_.T, cap_.n_head, cap_.d_head, concat);
  patch_heads(layer, concat);
}

void Recorder::after_projection(int layer, const float* concat, const QuantMatrix& W_O, float* attn_out) {
  patch_block(layer, Patch::Site::kAttention, attn_out);
  record_heads(layer, concat, attn_out, output_weights(W_O));
}

void Recorder::after_projection(int layer, const float* concat, const ops::PackedLinear& W_O, float* attn_out) {
  patch_block(layer, Patch::Site::kAttention, attn_out);
  record_heads(layer, concat, attn_out, {W_O.weights().ptr(), nullptr});
}

void Recorder::project_heads(int layer, float* concat, const QuantMatrix& W_O, const float* b_O, float* attn_out) {
  before_projection(layer, concat, W_O.rows(), W_O.cols());
  // The model's own path: ops::linear for fp32; for a stored W_O, dequantised panel by panel (the
  // GEMV at T ≤ kGemvMaxRows), the product dequantize-then-multiply gives.
  ops::quant_linear(concat, cap_.T, W_O, b_O, attn_out);
  after_projection(layer, concat, W_O, attn_out);
}

void Recorder::project_heads(int layer, float* concat, const ops::PackedLinear& W_O, float* attn_out) {
  before_projection(layer, concat, W_O.out(), W_O.in());
  W_O.forward(concat, cap_.T, attn_out);  // the model's own path: one GEMM, with b_O
  after_projection(layer, concat, W_O, attn_out);
}

void Recorder::record_heads(int layer, const float* concat, const float* attn_out, OutputWeights W_O) {
  const int64_t T = cap_.T, H = cap_.n_head, Dh = cap_.d_head, D = cap_.d_model, C = H * Dh;
  if (!cap_.attn_output.empty()) std::memcpy(cap_.attn_output.ptr() + layer * T * D, attn_out, sizeof(float) * T * D);
  if (!cap_.head_outputs.empty()) {
    for (int64_t h = 0; h < H; ++h)  // [T, H·Dh] -> [H, T, Dh]
      copy_rows(cap_.head_outputs.ptr() + (layer * H + h) * T * Dh, Dh, concat + h * Dh, C, T, Dh);
  }
  if (!cap_.contributions.empty()) {
    // Head h's share of the output: concat[:, h·Dh:(h+1)·Dh] · W_O[:, h·Dh:(h+1)·Dh]ᵀ — [T, D].
    // Σ_h of these plus b_O is attn_out (W_O is linear in the concatenation).
    float* dst = cap_.contributions.ptr() + layer * H * T * D;
    // Below this many values written (and, for a stored W_O, dequantised), a second thread costs
    // more than it saves.
    constexpr int64_t kMinParallelWork = 1 << 16;
    const int64_t work = H * T * D + (W_O.fp32 == nullptr ? D * C : 0);
#pragma omp parallel if (work >= kMinParallelWork)
    {
      std::vector<float> scratch;  // [D, Dh] of this thread, for a stored W_O
#pragma omp for schedule(static)
      for (int64_t h = 0; h < H; ++h) {
        const HeadColumns w = head_columns(W_O, h, scratch);
        ops::matmul(concat + h * Dh, C, w.data, w.ld, dst + h * T * D, D, T, D, Dh, /*trans_b=*/true);
      }
    }
  }
}

void Recorder::record_value_norms(int layer, const float* v, int64_t v_stride, const QuantMatrix& W_O) {
  if (cap_.value_norms.empty()) return;
  check_output_weights(layer, W_O.rows(), W_O.cols());
  value_norms(layer, v, v_stride, output_weights(W_O));
}

void Recorder::record_value_norms(int layer, const float* v, int64_t v_stride, const ops::PackedLinear& W_O) {
  if (cap_.value_norms.empty()) return;
  check_output_weights(layer, W_O.out(), W_O.in());
  value_norms(layer, v, v_stride, {W_O.weights().ptr(), nullptr});
}

void Recorder::value_norms(int layer, const float* v, int64_t v_stride, OutputWeights W_O) {
  const int64_t H = cap_.n_head, Dh = cap_.d_head, D = cap_.d_model;
  float* norms = cap_.value_norms.ptr() + layer * H * Tk_;  // [H, Tk]
  // f_h(x_k) = v_g(h),k · W_O[:, h·Dh:(h+1)·Dh]ᵀ for blocks of kRows keys, then each row's norm.
  // The GEMM is as large as the contributions' one; the block keeps its scratch small at any Tk.
  constexpr int64_t kRows = 256;
#pragma omp parallel
  {
    std::vector<float> f(size_t(std::min(Tk_, kRows) * D));  // [rows, D]
    std::vector<float> scratch;                              // [D, Dh], for a stored W_O
#pragma omp for schedule(static)
    for (int64_t h = 0; h < H; ++h) {
      const HeadColumns w = head_columns(W_O, h, scratch);
      const float* vg = v + int64_t(cap_.kv_head_of[size_t(h)]) * Dh;
      for (int64_t k0 = 0; k0 < Tk_; k0 += kRows) {
        const int64_t rows = std::min(kRows, Tk_ - k0);
        ops::matmul(vg + k0 * v_stride, v_stride, w.data, w.ld, f.data(), D, rows, D, Dh, /*trans_b=*/true);
        for (int64_t r = 0; r < rows; ++r) {
          const float* fr = f.data() + r * D;
          double sq = 0;  // in double lanes (a sum in any order, each term exact in double)
#pragma omp simd reduction(+ : sq)
          for (int64_t i = 0; i < D; ++i) sq += double(fr[i]) * double(fr[i]);
          norms[h * Tk_ + k0 + r] = float(std::sqrt(sq));
        }
      }
    }
  }
  if (value_norm_sink_) value_norm_sink_(layer, norms);
}

void Recorder::record_mlp(int layer, float* out) {
  patch_block(layer, Patch::Site::kMlp, out);
  if (cap_.mlp_outputs.empty()) return;
  const size_t n = size_t(cap_.T) * cap_.d_model;
  std::memcpy(cap_.mlp_outputs.ptr() + layer * n, out, sizeof(float) * n);
}

void Recorder::record_hidden(int index, const float* x) {
  if (cap_.hidden_states.empty()) return;
  const size_t n = size_t(cap_.T) * cap_.d_model;
  std::memcpy(cap_.hidden_states.ptr() + index * n, x, sizeof(float) * n);
}

}  // namespace headscope::capture
