// headscope analysis — norm-weighted attention, attention rollout, direct logit attribution
// (see attribution.h; formulas in docs/metrics.md).
#include "analysis/attribution.h"

#include <cmath>
#include <string>
#include <vector>

#include "headscope/error.h"
#include "headscope/limits.h"
#include "ops/matmul.h"
#include "ops/norm.h"

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

void check_run(const Capture& cap, int position, const char* what) {
  const int64_t L = cap.n_layer, T = cap.T;
  if (cap.contributions.empty() || cap.attn_output.empty() || cap.mlp_outputs.empty() || cap.hidden_states.empty())
    throw Error(std::string(what) + ": the run must keep contributions, attention and MLP outputs and hidden states");
  if (cap.contributions.dim(2) != T || cap.hidden_states.dim(0) != L + 1)
    throw Error(std::string(what) + ": needs a whole run (the capture of Model::run)");
  if (position < 0 || position >= T)
    throw Error(std::string(what) + ": position " + std::to_string(position) + " is not one of the " +
                std::to_string(T) + " tokens");
}

// The final readout and the sandwich norms linearised at one position of a run, each at the scale the
// model divided by there: a vector c that layer l's attention block adds (before its sandwich norm)
// reaches the final norm's input as γ_l ⊙ c / rms_l, and the final norm's output as γ ⊙ that / scale
// (centred first under LayerNorm). Every step is linear once the scales are fixed, so the parts add up
// to the final normalised stream exactly.
struct Linearised {
  int64_t D = 0;
  bool rms = true;
  std::vector<double> gain;       // [D] γ_i / scale of the final norm
  std::vector<double> block_rms;  // [n_layer] rms of the attention output at p under a sandwich norm, else 1
  const LogitReadout* readout = nullptr;

  // c as it reaches the final norm's input when added by layer l's attention block (l < 0: as is).
  void through_block(const float* c, int64_t l, double* out) const {
    const bool sandwich = l >= 0 && !readout->attention_gain.empty();
    for (int64_t i = 0; i < D; ++i)
      out[i] =
          sandwich ? double(c[i]) * readout->attention_gain[size_t(l)]->ptr()[i] / block_rms[size_t(l)] : double(c[i]);
  }
  // The final norm's output of c (already through its block): γ ⊙ (c − mean(c)?) / scale.
  void through_final(double* c) const {
    double mean = 0;
    if (!rms) {
      for (int64_t i = 0; i < D; ++i) mean += c[i];
      mean /= double(D);
    }
    for (int64_t i = 0; i < D; ++i) c[i] = (c[i] - mean) * gain[size_t(i)];
  }
};

Linearised linearise(const Capture& cap, const LogitReadout& r, int64_t p) {
  const int64_t L = cap.n_layer, T = cap.T, D = cap.d_model;
  Linearised lin;
  lin.D = D;
  lin.rms = r.rms;
  lin.readout = &r;
  if (!r.attention_gain.empty() && int64_t(r.attention_gain.size()) != L)
    throw Error("logit attribution: the readout has " + std::to_string(r.attention_gain.size()) +
                " attention-output norms for " + std::to_string(L) + " layers");
  // The final residual x at p, summed in the model's own order and precision (decoder.cc:
  // x += attention (through its sandwich norm); x += MLP), so that its scale is the one the model
  // normalised by. The MLP output is recorded after its sandwich norm already.
  const float* x0 = cap.hidden_states.ptr() + p * D;
  std::vector<float> x(x0, x0 + D), normed(static_cast<size_t>(D));
  lin.block_rms.assign(size_t(L), 1.0);
  for (int64_t l = 0; l < L; ++l) {
    const float* a = cap.attn_output.ptr() + (l * T + p) * D;
    if (!r.attention_gain.empty()) {
      double sq = 0;
      for (int64_t i = 0; i < D; ++i) sq += double(a[i]) * a[i];
      lin.block_rms[size_t(l)] = std::sqrt(sq / double(D) + r.eps);
      ops::rms_norm(a, 1, D, r.attention_gain[size_t(l)]->ptr(), r.eps, normed.data());
      a = normed.data();
    }
    for (int64_t i = 0; i < D; ++i) x[size_t(i)] += a[i];
    const float* m = cap.mlp_outputs.ptr() + (l * T + p) * D;
    for (int64_t i = 0; i < D; ++i) x[size_t(i)] += m[i];
  }
  double mean = 0, sq = 0;
  for (float v : x) mean += v;
  mean /= double(D);
  for (float v : x) sq += r.rms ? double(v) * v : (v - mean) * (v - mean);
  const double scale = std::sqrt(sq / double(D) + r.eps);  // rms(x), or std(x) for LayerNorm
  lin.gain.resize(size_t(D));
  for (int64_t i = 0; i < D; ++i) lin.gain[size_t(i)] = r.norm_weight->ptr()[i] / scale;
  return lin;
}

void check_token(int32_t id, int64_t vocab, bool may_be_none) {
  if ((id < 0 || id >= vocab) && !(may_be_none && id == -1))
    throw Error("logit attribution: token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                std::to_string(vocab - 1) + ")");
}

}  // namespace

LogitAttribution attribute_logit(const Capture& cap, const LogitReadout& r, int position, int32_t target,
                                 int32_t contrast) {
  check_run(cap, position, "logit attribution");
  const int64_t L = cap.n_layer, H = cap.n_head, T = cap.T, D = cap.d_model;
  const int64_t vocab = r.unembedding->dim(0);
  r.unembedding->expect_shape({vocab, D}, "the unembedding");
  check_token(target, vocab, false);
  check_token(contrast, vocab, true);
  const int64_t p = position;
  const Linearised lin = linearise(cap, r, p);
  // The readout direction u = U[target] (− U[contrast]); a part c adds Σ_i c'_i γ_i u_i / scale, c' the
  // part through its block's sandwich norm (if any) and centred under LayerNorm.
  std::vector<double> u(static_cast<size_t>(D));
  const float* U = r.unembedding->ptr();
  for (int64_t i = 0; i < D; ++i)
    u[size_t(i)] = double(U[int64_t(target) * D + i]) - (contrast >= 0 ? double(U[int64_t(contrast) * D + i]) : 0.0);
  std::vector<double> c(static_cast<size_t>(D));
  const auto part = [&](const float* v, int64_t block) {
    lin.through_block(v, block, c.data());
    lin.through_final(c.data());
    double s = 0;
    for (int64_t i = 0; i < D; ++i) s += c[size_t(i)] * u[size_t(i)];
    return s;
  };

  LogitAttribution a;
  a.position = position;
  a.target = target;
  a.contrast = contrast;
  a.logit = dot(cap.hidden_states.ptr() + (L * T + p) * D, u.data(), D);  // Norm_final(x) · u, as the model has it
  a.embeddings = part(cap.hidden_states.ptr() + p * D, -1);
  a.heads.resize(size_t(L * H));
  a.attention_bias.resize(size_t(L));
  a.mlp.resize(size_t(L));
  std::vector<float> bias(static_cast<size_t>(D));
  for (int64_t l = 0; l < L; ++l) {
    const float* out = cap.attn_output.ptr() + (l * T + p) * D;
    for (int64_t i = 0; i < D; ++i) bias[size_t(i)] = out[i];
    for (int64_t h = 0; h < H; ++h) {
      const float* ch = cap.contributions.ptr() + ((l * H + h) * T + p) * D;
      a.heads[size_t(l * H + h)] = part(ch, l);
      for (int64_t i = 0; i < D; ++i) bias[size_t(i)] -= ch[i];  // what the heads leave of the output: b_O
    }
    a.attention_bias[size_t(l)] = part(bias.data(), l);
    a.mlp[size_t(l)] = part(cap.mlp_outputs.ptr() + (l * T + p) * D, -1);
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

std::vector<double> head_logits(const Capture& cap, const LogitReadout& r, int layer, int head, int position) {
  check_run(cap, position, "head logit lens");
  const int64_t L = cap.n_layer, H = cap.n_head, T = cap.T, D = cap.d_model;
  if (layer < 0 || layer >= L || head < 0 || head >= H)
    throw Error("head logit lens: no head " + std::to_string(layer) + "." + std::to_string(head) + " (layers 0.." +
                std::to_string(L - 1) + ", heads 0.." + std::to_string(H - 1) + ")");
  const int64_t vocab = r.unembedding->dim(0);
  r.unembedding->expect_shape({vocab, D}, "the unembedding");
  const int64_t p = position;
  const Linearised lin = linearise(cap, r, p);
  std::vector<double> y(static_cast<size_t>(D));
  lin.through_block(cap.contributions.ptr() + ((layer * H + head) * T + p) * D, layer, y.data());
  lin.through_final(y.data());
  std::vector<double> logits(static_cast<size_t>(vocab));
  const float* U = r.unembedding->ptr();
#pragma omp parallel for schedule(static)
  for (int64_t v = 0; v < vocab; ++v) logits[size_t(v)] = dot(U + v * D, y.data(), D);
  return logits;
}

}  // namespace headscope::analysis
