// headscope analysis — norm-weighted attention, attention rollout, direct logit attribution
// (see attribution.h; formulas in docs/metrics.md).
#include "analysis/attribution.h"

#include <cmath>
#include <string>
#include <vector>

#include "headscope/error.h"
#include "headscope/limits.h"
#include "ops/matmul.h"

namespace headscope::analysis {

void norm_weight_rows(const float* attention, const float* norms, int64_t T, int64_t Tk, float* out) {
  for (int64_t q = 0; q < T; ++q)
    for (int64_t k = 0; k < Tk; ++k) out[q * Tk + k] = attention[q * Tk + k] * norms[k];  // α_qk · ‖f_h(x_k)‖
}

Tensor norm_weighted_attention(const Tensor& attention, const Tensor& value_norms) {
  if (attention.rank() != 4) throw Error("norm-weighted attention: the run kept no attention maps (dense maps needed)");
  const int64_t L = attention.dim(0), H = attention.dim(1), T = attention.dim(2), Tk = attention.dim(3);
  if (value_norms.shape != std::vector<int64_t>{L, H, Tk})
    throw Error(
        "norm-weighted attention: value norms [L, H, Tk] do not match the attention maps (capture them with "
        "CaptureOptions::value_norms)");
  const uint64_t bytes = uint64_t(L * H) * uint64_t(T) * uint64_t(Tk) * sizeof(float);
  if (bytes > limits::kMaxNormWeightedBytes)
    throw ResourceError("norm-weighted attention: " + std::to_string(bytes >> 20) +
                        " MiB of maps is over the limit of " + std::to_string(limits::kMaxNormWeightedBytes >> 20) +
                        " MiB; multiply each head's attention by its value norms (value_norms.npy) instead");
  Tensor out({L, H, T, Tk}, Tensor::Uninitialized{});
  for (int64_t lh = 0; lh < L * H; ++lh)
    norm_weight_rows(attention.ptr() + lh * T * Tk, value_norms.ptr() + lh * Tk, T, Tk, out.ptr() + lh * T * Tk);
  return out;
}

Tensor attention_rollout(const Tensor& attention) {
  if (attention.rank() != 4 || attention.dim(2) != attention.dim(3))
    throw Error("attention rollout: needs a whole run's square attention maps [L, H, T, T] (dense maps)");
  const int64_t L = attention.dim(0), H = attention.dim(1), T = attention.dim(2);
  if (T > limits::kMaxRolloutTokens)
    throw ResourceError("attention rollout: " + std::to_string(T) + " tokens is over the limit of " +
                        std::to_string(limits::kMaxRolloutTokens) +
                        " (it costs n_layer · T³); roll out a shorter text");
  Tensor rollout({L, T, T}, Tensor::Uninitialized{});
  std::vector<float> mixed(size_t(T * T));  // Â_l [T, T]
  for (int64_t l = 0; l < L; ++l) {
    // Â_l = 0.5 · mean_h A + 0.5 · I, rows renormalised (a row of A sums to 1 already; the
    // renormalisation is the paper's and keeps a fully masked row from going astray).
    for (int64_t q = 0; q < T; ++q) {
      float* row = mixed.data() + q * T;
      double total = 0;
      for (int64_t k = 0; k < T; ++k) {
        double mean = 0;
        for (int64_t h = 0; h < H; ++h) mean += attention.ptr()[((l * H + h) * T + q) * T + k];
        row[k] = float(0.5 * mean / double(H) + (k == q ? 0.5 : 0.0));
        total += row[k];
      }
      for (int64_t k = 0; k < T; ++k) row[k] = float(row[k] / total);
    }
    float* R = rollout.ptr() + l * T * T;
    if (l == 0)
      std::copy(mixed.begin(), mixed.end(), R);
    else
      ops::matmul(mixed.data(), T, R - T * T, T, R, T, T, T, T, /*trans_b=*/false);  // R_l = Â_l · R_{l−1}
  }
  return rollout;
}

namespace {

double dot(const float* a, const double* w, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(a[i]) * w[i];
  return s;
}

}  // namespace

LogitAttribution attribute_logit(const Capture& cap, const LogitReadout& r, int position, int32_t target,
                                 int32_t contrast) {
  const int64_t L = cap.n_layer, H = cap.n_head, T = cap.T, D = cap.d_model;
  if (cap.contributions.empty() || cap.attn_output.empty() || cap.mlp_outputs.empty() || cap.hidden_states.empty())
    throw Error("logit attribution: the run must keep contributions, attention and MLP outputs and hidden states");
  if (cap.contributions.dim(2) != T || cap.hidden_states.dim(0) != L + 1)
    throw Error("logit attribution: needs a whole run (the capture of Model::run)");
  if (position < 0 || position >= T)
    throw Error("logit attribution: position " + std::to_string(position) + " is not one of the " + std::to_string(T) +
                " tokens");
  const int64_t vocab = r.unembedding->dim(0);
  r.unembedding->expect_shape({vocab, D}, "the unembedding");
  const auto outside = [vocab](int32_t id) { return id < 0 || id >= vocab; };
  for (int32_t id : {target, contrast})
    if (outside(id) && !(id == contrast && id == -1))
      throw Error("logit attribution: token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                  std::to_string(vocab - 1) + ")");
  const int64_t p = position;
  // The final residual x at p, summed in the model's own order and precision (decoder.cc:
  // x += attention; x += MLP), so that its scale is the one the model normalised by.
  const float* x0 = cap.hidden_states.ptr() + p * D;
  std::vector<float> x(x0, x0 + D);
  for (int64_t l = 0; l < L; ++l)
    for (const Tensor* part : {&cap.attn_output, &cap.mlp_outputs})
      for (int64_t i = 0; i < D; ++i) x[size_t(i)] += part->ptr()[(l * T + p) * D + i];
  double mean = 0, sq = 0;
  for (float v : x) mean += v;
  mean /= double(D);
  for (float v : x) sq += r.rms ? double(v) * v : (v - mean) * (v - mean);
  const double scale = std::sqrt(sq / double(D) + r.eps);  // rms(x), or std(x) for LayerNorm
  // The readout direction u = U[target] (− U[contrast]); a part c adds Σ_i c_i γ_i u_i / scale
  // (minus mean(c) · Σ_i γ_i u_i / scale under LayerNorm, which centres before scaling).
  std::vector<double> u(static_cast<size_t>(D)), w(static_cast<size_t>(D));
  double w_sum = 0;
  const float* U = r.unembedding->ptr();
  for (int64_t i = 0; i < D; ++i) {
    u[size_t(i)] = double(U[int64_t(target) * D + i]) - (contrast >= 0 ? double(U[int64_t(contrast) * D + i]) : 0.0);
    w[size_t(i)] = r.norm_weight->ptr()[i] * u[size_t(i)] / scale;
    w_sum += w[size_t(i)];
  }
  const auto part = [&](const float* c) {
    if (r.rms) return dot(c, w.data(), D);
    double m = 0;
    for (int64_t i = 0; i < D; ++i) m += c[i];
    return dot(c, w.data(), D) - m / double(D) * w_sum;
  };

  LogitAttribution a;
  a.position = position;
  a.target = target;
  a.contrast = contrast;
  a.logit = dot(cap.hidden_states.ptr() + (L * T + p) * D, u.data(), D);  // Norm_final(x) · u, as the model has it
  a.embeddings = part(cap.hidden_states.ptr() + p * D);
  a.heads.resize(size_t(L * H));
  a.attention_bias.resize(size_t(L));
  a.mlp.resize(size_t(L));
  std::vector<float> bias(static_cast<size_t>(D));
  for (int64_t l = 0; l < L; ++l) {
    const float* out = cap.attn_output.ptr() + (l * T + p) * D;
    for (int64_t i = 0; i < D; ++i) bias[size_t(i)] = out[i];
    for (int64_t h = 0; h < H; ++h) {
      const float* c = cap.contributions.ptr() + ((l * H + h) * T + p) * D;
      a.heads[size_t(l * H + h)] = part(c);
      for (int64_t i = 0; i < D; ++i) bias[size_t(i)] -= c[i];  // what the heads leave of the output: b_O
    }
    a.attention_bias[size_t(l)] = part(bias.data());
    a.mlp[size_t(l)] = part(cap.mlp_outputs.ptr() + (l * T + p) * D);
  }
  if (!r.rms && r.norm_bias != nullptr && !r.norm_bias->empty())
    for (int64_t i = 0; i < D; ++i) a.final_norm_bias += double(r.norm_bias->ptr()[i]) * u[size_t(i)];
  double sum = a.embeddings + a.final_norm_bias;
  for (double v : a.heads) sum += v;
  for (double v : a.attention_bias) sum += v;
  for (double v : a.mlp) sum += v;
  a.rest = a.logit - sum;
  return a;
}

}  // namespace headscope::analysis
