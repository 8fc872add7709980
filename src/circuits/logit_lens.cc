// headscope — the logit lens: each layer's residual stream read through the final norm and the
// unembedding (see include/headscope/circuits.h).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "headscope/circuits.h"
#include "headscope/error.h"
#include "ops/matmul.h"

namespace headscope {
namespace {

// Norm_final(x) for one row of d_model values, as the decoder applies it: RMSNorm γ · x / rms(x),
// or LayerNorm γ · (x − mean) / std + β.
std::vector<float> final_norm(const float* x, int64_t D, const LogitReadout& r) {
  double mean = 0, sq = 0;
  if (!r.rms) {
    for (int64_t i = 0; i < D; ++i) mean += x[i];
    mean /= double(D);
  }
  for (int64_t i = 0; i < D; ++i) sq += (x[i] - mean) * (x[i] - mean);
  const double inv = 1.0 / std::sqrt(sq / double(D) + r.eps);
  const bool bias = !r.rms && r.norm_bias != nullptr && !r.norm_bias->empty();
  std::vector<float> y(static_cast<size_t>(D));
  for (int64_t i = 0; i < D; ++i)
    y[size_t(i)] = float((x[i] - mean) * inv * r.norm_weight->ptr()[i] + (bias ? r.norm_bias->ptr()[i] : 0.0f));
  return y;
}

}  // namespace

Tensor logit_lens(const Capture& cap, const LogitReadout& r, int position) {
  const int64_t L = cap.n_layer, T = cap.T, D = cap.d_model;
  if (cap.hidden_states.empty() || cap.hidden_states.dim(0) != L + 1)
    throw Error("logit lens: the run must keep the hidden states of every layer (a whole decoder run)");
  if (r.unembedding == nullptr || r.norm_weight == nullptr) throw Error("logit lens: the model has no readout");
  if (position < 0 || position >= T)
    throw Error("logit lens: position " + std::to_string(position) + " is not one of the " + std::to_string(T) +
                " tokens");
  const int64_t vocab = r.unembedding->dim(0);
  r.unembedding->expect_shape({vocab, D}, "the unembedding");
  // Rows to read [n_layer + 1, d_model]: layers 0..L−1 normalised here, layer L as recorded (normalised).
  std::vector<float> rows(static_cast<size_t>((L + 1) * D));
  for (int64_t l = 0; l <= L; ++l) {
    const float* x = cap.hidden_states.ptr() + (l * T + position) * D;
    if (l < L) {
      const std::vector<float> y = final_norm(x, D, r);
      std::copy(y.begin(), y.end(), rows.begin() + l * D);
    } else {
      std::copy(x, x + D, rows.begin() + l * D);
    }
  }
  Tensor out({L + 1, vocab});
  // out[L+1, vocab] = rows[L+1, D] · Uᵀ, U stored [vocab, D].
  ops::matmul(rows.data(), D, r.unembedding->ptr(), D, out.ptr(), vocab, L + 1, vocab, D, /*trans_b=*/true);
  if (r.final_softcap > 0.0f)
    for (int64_t i = 0; i < (L + 1) * vocab; ++i)
      out.ptr()[i] = r.final_softcap * std::tanh(out.ptr()[i] / r.final_softcap);
  return out;
}

namespace {

// log Σ exp over the row, in double.
double log_sum_exp(const float* logits, int64_t vocab) {
  const float m = *std::max_element(logits, logits + vocab);
  double s = 0;
  for (int64_t i = 0; i < vocab; ++i) s += std::exp(double(logits[i]) - m);
  return m + std::log(s);
}

LensToken describe(const float* logits, int64_t vocab, int32_t id, double lse) {
  LensToken t;
  t.id = id;
  t.logit = logits[id];
  t.probability = float(std::exp(double(t.logit) - lse));
  t.rank = std::count_if(logits, logits + vocab, [&](float v) { return v > t.logit; });
  return t;
}

}  // namespace

std::vector<LensToken> lens_top(const float* logits, int64_t vocab, int k) {
  if (k < 1) throw Error("logit lens: k must be at least 1");
  const int64_t n = std::min<int64_t>(k, vocab);
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [logits](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  const double lse = log_sum_exp(logits, vocab);
  std::vector<LensToken> top;
  for (int64_t i = 0; i < n; ++i) top.push_back(describe(logits, vocab, ids[size_t(i)], lse));
  return top;
}

LensToken lens_token(const float* logits, int64_t vocab, int32_t id) {
  if (id < 0 || id >= vocab)
    throw Error("logit lens: token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                std::to_string(vocab - 1) + ")");
  return describe(logits, vocab, id, log_sum_exp(logits, vocab));
}

}  // namespace headscope
