// headscope pipeline — decompose(): one token of one layer through W_O (see headscope/pipeline.h).
#include <algorithm>
#include <cmath>
#include <string>

#include "headscope/error.h"
#include "headscope/pipeline.h"

namespace headscope {

Decomposition decompose(const Model& model, const Capture& cap, int layer, int token) {
  const ModelConfig& c = model.config();
  const int H = c.n_head, dh = c.d_head, D = c.d_model, T = cap.T, L = layer, t = token;
  if (L < 0 || L >= c.n_layer)
    throw Error("decompose: layer " + std::to_string(L) + " does not exist (0 to " + std::to_string(c.n_layer - 1) +
                ")");
  if (t < 0 || t >= T)
    throw Error("decompose: token " + std::to_string(t) + " does not exist (0 to " + std::to_string(T - 1) + ")");
  cap.head_outputs.expect_shape({c.n_layer, H, T, dh}, "captured head outputs");
  cap.contributions.expect_shape({c.n_layer, H, T, D}, "captured contributions");
  cap.attn_output.expect_shape({c.n_layer, T, D}, "captured attention output");
  cap.attention.expect_shape({c.n_layer, H, T, T}, "captured attention");
  const int concat_dim = H * dh;

  Decomposition d;
  d.layer = L, d.token = t, d.n_head = H, d.d_head = dh, d.d_model = D, d.T = T;
  // head_outputs [n_layer, n_head, T, d_head] → this token's [n_head, d_head], which laid side
  // by side is the concatenation [n_head · d_head] that enters W_O.
  d.concat.resize(static_cast<size_t>(concat_dim));
  for (int h = 0; h < H; ++h) {
    const float* src = cap.head_outputs.ptr() + ((static_cast<int64_t>(L) * H + h) * T + t) * dh;
    std::copy(src, src + dh, d.concat.begin() + static_cast<ptrdiff_t>(h) * dh);
  }
  // W_O [d_model, n_head · d_head] (nn.Linear: out × in) applied to the concatenation, in double
  // so that the check against the captured output measures the model, not this sum.
  const Tensor W = model.output_projection(L);
  W.expect_shape({D, concat_dim}, "output projection of layer " + std::to_string(L));
  const Tensor& bias = model.output_bias(L);
  d.bias.assign(static_cast<size_t>(D), 0.0f);
  if (!bias.empty()) {
    if (bias.numel() != D)
      throw Error("output bias of layer " + std::to_string(L) + " has " + std::to_string(bias.numel()) +
                  " values; d_model is " + std::to_string(D));
    std::copy(bias.data.begin(), bias.data.end(), d.bias.begin());
  }
  d.projection.resize(static_cast<size_t>(D));
  for (int o = 0; o < D; ++o) {
    double s = 0;
    const float* row = W.ptr() + static_cast<int64_t>(o) * concat_dim;
    for (int k = 0; k < concat_dim; ++k) s += static_cast<double>(row[k]) * d.concat[static_cast<size_t>(k)];
    d.projection[static_cast<size_t>(o)] = static_cast<float>(s);
  }
  // contributions [n_layer, n_head, T, d_model] → this token's [n_head, d_model] and their norms.
  d.contributions.resize(static_cast<size_t>(H) * D);
  d.contribution_norms.resize(static_cast<size_t>(H));
  d.head_output_norms.resize(static_cast<size_t>(H));
  for (int h = 0; h < H; ++h) {
    const float* src = cap.contributions.ptr() + ((static_cast<int64_t>(L) * H + h) * T + t) * D;
    std::copy(src, src + D, d.contributions.begin() + static_cast<ptrdiff_t>(h) * D);
    double n2 = 0, o2 = 0;
    for (int k = 0; k < D; ++k) n2 += static_cast<double>(src[k]) * src[k];
    for (int k = 0; k < dh; ++k) {
      const double x = d.concat[static_cast<size_t>(h * dh + k)];
      o2 += x * x;
    }
    d.contribution_norms[static_cast<size_t>(h)] = static_cast<float>(std::sqrt(n2));
    d.head_output_norms[static_cast<size_t>(h)] = static_cast<float>(std::sqrt(o2));
  }
  const float* out = cap.attn_output.ptr() + (static_cast<int64_t>(L) * T + t) * D;
  d.attn_output.assign(out, out + D);
  for (int k = 0; k < D; ++k) {
    const auto u = static_cast<size_t>(k);
    double s = d.bias[u];
    for (int h = 0; h < H; ++h) s += d.contributions[static_cast<size_t>(h) * D + u];
    d.sum_max_abs_error = std::max(d.sum_max_abs_error, std::abs(s - d.attn_output[u]));
    d.projection_max_abs_error = std::max(
        d.projection_max_abs_error, std::abs(static_cast<double>(d.projection[u]) + d.bias[u] - d.attn_output[u]));
  }
  // This token's attention row in every head of the layer: [n_head, T].
  d.attention_rows.resize(static_cast<size_t>(H) * T);
  for (int h = 0; h < H; ++h) {
    const float* src = cap.attention.ptr() + ((static_cast<int64_t>(L) * H + h) * T + t) * T;
    std::copy(src, src + T, d.attention_rows.begin() + static_cast<ptrdiff_t>(h) * T);
  }
  return d;
}

}  // namespace headscope
