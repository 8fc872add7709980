#include "capture/capture.h"

#include <algorithm>
#include <cstring>

#include "ops/matmul.h"

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
  return floats * sizeof(float);
}

Capture allocate(const ModelConfig& c, int T, const CaptureOptions& o, std::vector<int> kv_head_of) {
  Capture cap;
  cap.n_layer = c.n_layer;
  cap.n_head = c.n_head;
  cap.n_kv_head = c.n_kv_head;
  cap.T = T;
  cap.d_head = c.d_head;
  cap.d_model = c.d_model;
  cap.kv_head_of = std::move(kv_head_of);
  const int64_t L = c.n_layer, H = c.n_head, D = c.d_model, Dh = c.d_head;
  const Tensor::Uninitialized fully_written;  // every element below is written by the run
  if (o.attention) cap.attention = Tensor({L, H, T, T}, fully_written);
  if (o.head_outputs) cap.head_outputs = Tensor({L, H, T, Dh}, fully_written);
  if (o.contributions) cap.contributions = Tensor({L, H, T, D}, fully_written);
  if (o.contributions || o.head_outputs) cap.attn_output = Tensor({L, T, D}, fully_written);
  if (o.hidden_states) cap.hidden_states = Tensor({L + 1, T, D}, fully_written);
  if (o.queries_keys) {
    cap.queries = Tensor({L, H, T, Dh});
    cap.keys = Tensor({L, static_cast<int64_t>(c.n_kv_head), T, Dh});
  }
  return cap;
}

float* attention_buffer(Capture& cap, int layer, std::vector<float>& scratch) {
  const size_t per_layer = size_t(cap.n_head) * cap.T * cap.T;
  if (!cap.attention.empty()) return cap.attention.ptr() + layer * per_layer;
  if (scratch.size() < per_layer) scratch.resize(per_layer);
  return scratch.data();
}

void project_heads(Capture& cap, int layer, const float* concat, const Tensor& W_O, const float* b_O, float* attn_out,
                   const ops::PackedLinear* packed) {
  const int64_t T = cap.T, H = cap.n_head, Dh = cap.d_head, D = cap.d_model, C = H * Dh;
  W_O.expect_shape({D, C}, "W_O of layer " + std::to_string(layer));
  if (packed != nullptr) packed->forward(concat, T, attn_out);  // the model's own path: one GEMM
  else ops::linear(concat, T, C, W_O.ptr(), b_O, D, attn_out);
  if (!cap.attn_output.empty()) std::memcpy(cap.attn_output.ptr() + layer * T * D, attn_out, sizeof(float) * T * D);
  if (!cap.head_outputs.empty()) {
    float* dst = cap.head_outputs.ptr() + layer * H * T * Dh;  // [H, T, Dh] from [T, H·Dh]
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) std::memcpy(dst + (h * T + t) * Dh, concat + t * C + h * Dh, sizeof(float) * Dh);
  }
  if (!cap.contributions.empty()) {
    // Head h's share of the output: concat[:, h·Dh:(h+1)·Dh] · W_O[:, h·Dh:(h+1)·Dh]ᵀ — [T, D].
    // Σ_h of these plus b_O is attn_out (W_O is linear in the concatenation).
    float* dst = cap.contributions.ptr() + layer * H * T * D;
    constexpr int64_t kMinParallelOutputs = 1 << 16;  // below, a second thread costs more than it saves
#pragma omp parallel for schedule(static) if (H * T * D >= kMinParallelOutputs)
    for (int64_t h = 0; h < H; ++h)
      ops::matmul(concat + h * Dh, C, W_O.ptr() + h * Dh, C, dst + h * T * D, D, T, D, Dh, /*trans_b=*/true);
  }
}

void record_hidden(Capture& cap, int index, const float* x) {
  if (cap.hidden_states.empty()) return;
  const size_t n = size_t(cap.T) * cap.d_model;
  std::memcpy(cap.hidden_states.ptr() + index * n, x, sizeof(float) * n);
}

}  // namespace headscope::capture
