// Slow twin of ops/backward.cc: loops and doubles, from the formulas of ops/backward.h.
#include "ops/reference/backward.h"

#include <cmath>
#include <vector>

namespace headscope::ops::reference {

void softmax_backward(const float* p, const float* dp, int64_t rows, int64_t cols, float* ds) {
  for (int64_t r = 0; r < rows; ++r) {
    double dot = 0;
    for (int64_t k = 0; k < cols; ++k) dot += double(p[r * cols + k]) * dp[r * cols + k];
    std::vector<double> out(static_cast<size_t>(cols));
    for (int64_t k = 0; k < cols; ++k) out[size_t(k)] = p[r * cols + k] * (double(dp[r * cols + k]) - dot);
    for (int64_t k = 0; k < cols; ++k) ds[r * cols + k] = static_cast<float>(out[size_t(k)]);
  }
}

void layer_norm_backward(const float* x, int64_t T, int64_t d, const float* gamma, float eps, const float* dy,
                         float* dx, float* dgamma, float* dbeta) {
  // The Jacobian written out: ∂y_i/∂x_j = γ_i/σ (δ_ij − 1/d − x̂_i x̂_j / d).
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x + t * d;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += xr[i] / double(d);
    for (int64_t i = 0; i < d; ++i) var += (xr[i] - mean) * (xr[i] - mean) / double(d);
    const double sigma = std::sqrt(var + double(eps));
    for (int64_t j = 0; j < d; ++j) {
      double s = 0;
      for (int64_t i = 0; i < d; ++i) {
        const double xi = (xr[i] - mean) / sigma, xj = (xr[j] - mean) / sigma;
        s += double(dy[t * d + i]) * gamma[i] / sigma * ((i == j ? 1.0 : 0.0) - 1.0 / double(d) - xi * xj / double(d));
      }
      dx[t * d + j] = static_cast<float>(s);
    }
    for (int64_t i = 0; i < d; ++i) {
      if (dgamma) dgamma[i] += static_cast<float>(double(dy[t * d + i]) * (xr[i] - mean) / sigma);
      if (dbeta) dbeta[i] += dy[t * d + i];
    }
  }
}

void rms_norm_backward(const float* x, int64_t T, int64_t d, const float* gamma, float eps, const float* dy, float* dx,
                       float* dgamma) {
  // ∂y_i/∂x_j = γ_i (δ_ij / r − x_i x_j / (d r³)).
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x + t * d;
    double ms = 0;
    for (int64_t i = 0; i < d; ++i) ms += double(xr[i]) * xr[i] / double(d);
    const double r = std::sqrt(ms + double(eps));
    for (int64_t j = 0; j < d; ++j) {
      double s = 0;
      for (int64_t i = 0; i < d; ++i)
        s += double(dy[t * d + i]) * gamma[i] * ((i == j ? 1.0 / r : 0.0) - double(xr[i]) * xr[j] / (d * r * r * r));
      dx[t * d + j] = static_cast<float>(s);
    }
    for (int64_t i = 0; i < d; ++i)
      if (dgamma) dgamma[i] += static_cast<float>(double(dy[t * d + i]) * xr[i] / r);
  }
}

void linear_backward(const float* x, int64_t T, int64_t in, const float* W, int64_t out, const float* dy, float* dx,
                     float* dW, float* db) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < in; ++i) {
      double s = 0;
      for (int64_t o = 0; o < out; ++o) s += double(dy[t * out + o]) * W[o * in + i];
      if (dx) dx[t * in + i] = static_cast<float>(s);
    }
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      double s = 0;
      for (int64_t t = 0; t < T; ++t) s += double(dy[t * out + o]) * x[t * in + i];
      if (dW) dW[o * in + i] += static_cast<float>(s);
    }
    double b = 0;
    for (int64_t t = 0; t < T; ++t) b += dy[t * out + o];
    if (db) db[o] += static_cast<float>(b);
  }
}

void rope_backward(float* dy, int64_t ld, int64_t T, int64_t n_heads, int64_t d_head, const RopeTable& table,
                   int64_t d_rot, RopeLayout layout) {
  const int64_t half = d_rot / 2;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < n_heads; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = layout == RopeLayout::kHalfSplit ? i : 2 * i,
                      b = layout == RopeLayout::kHalfSplit ? i + half : 2 * i + 1;
        float* v = dy + t * ld + h * d_head;
        const double c = table.cos[size_t(t * half + i)], s = table.sin[size_t(t * half + i)];
        const double ga = v[a], gb = v[b];  // (x_a', x_b') = (a c − b s, b c + a s): the transpose
        v[a] = static_cast<float>(ga * c + gb * s);
        v[b] = static_cast<float>(-ga * s + gb * c);
      }
}

void attention_head_backward(const float* q, int64_t ldq, const float* k, const float* v, int64_t ldk, const float* p,
                             const float* d_out, int64_t ldo, int64_t Tq, int64_t Tk, int64_t d, float scale,
                             float softcap, float* dq, float* dk, float* dv, float* dp_out) {
  std::vector<double> dp(size_t(Tq * Tk)), ds(size_t(Tq * Tk));
  for (int64_t i = 0; i < Tq; ++i)
    for (int64_t j = 0; j < Tk; ++j) {
      double s = 0;
      for (int64_t c = 0; c < d; ++c) s += double(d_out[i * ldo + c]) * v[j * ldk + c];
      dp[size_t(i * Tk + j)] = s;
      if (dp_out) dp_out[i * Tk + j] = static_cast<float>(s);
    }
  for (int64_t i = 0; i < Tq; ++i) {
    double dot = 0;
    for (int64_t j = 0; j < Tk; ++j) dot += p[i * Tk + j] * dp[size_t(i * Tk + j)];
    for (int64_t j = 0; j < Tk; ++j) {
      double g = p[i * Tk + j] * (dp[size_t(i * Tk + j)] - dot);
      if (softcap > 0.0f) {  // through c · tanh(s / c), s = scale · q·k
        double s = 0;
        for (int64_t c = 0; c < d; ++c) s += double(q[i * ldq + c]) * k[j * ldk + c];
        const double t = std::tanh(scale * s / softcap);
        g *= 1.0 - t * t;
      }
      ds[size_t(i * Tk + j)] = g;
    }
  }
  for (int64_t j = 0; j < Tk; ++j)
    for (int64_t c = 0; c < d; ++c) {
      double sv = 0, sk = 0;
      for (int64_t i = 0; i < Tq; ++i) {
        sv += double(p[i * Tk + j]) * d_out[i * ldo + c];
        sk += ds[size_t(i * Tk + j)] * q[i * ldq + c];
      }
      dv[j * ldk + c] += static_cast<float>(sv);
      dk[j * ldk + c] += static_cast<float>(scale * sk);
    }
  for (int64_t i = 0; i < Tq; ++i)
    for (int64_t c = 0; c < d; ++c) {
      double s = 0;
      for (int64_t j = 0; j < Tk; ++j) s += ds[size_t(i * Tk + j)] * k[j * ldk + c];
      dq[i * ldq + c] += static_cast<float>(scale * s);
    }
}

void quant_linear_backward(const float* dy, int64_t T, const QuantMatrix& W, float* dx) {
  const Tensor w = W.to_f32();
  const int64_t out = W.rows(), in = W.cols();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < in; ++i) {
      double s = 0;
      for (int64_t o = 0; o < out; ++o) s += double(dy[t * out + o]) * w.ptr()[o * in + i];
      dx[t * in + i] = static_cast<float>(s);
    }
}

}  // namespace headscope::ops::reference
