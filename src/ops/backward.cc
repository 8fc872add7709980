// The backward ops of ops/backward.h. Reductions accumulate in double; the products go through
// ops::matmul. ops/reference/backward.cc is the slow twin.
#include "ops/backward.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <vector>

#include "ops/elementwise.h"
#include "ops/matmul.h"
#include "ops/quant_linear.h"

namespace headscope::ops {
namespace {

constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

double gelu_tanh_value(double x) { return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x))); }

double gelu_tanh_derivative(double x) {
  const double u = kSqrt2OverPi * (x + 0.044715 * x * x * x), t = std::tanh(u);
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * 0.044715 * x * x);
}

}  // namespace

void softmax_backward(const float* p, const float* dp, int64_t rows, int64_t cols, float* ds) {
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
  for (int64_t r = 0; r < rows; ++r) {
    const float* pr = p + r * cols;
    const float* dr = dp + r * cols;
    double dot = 0;
    for (int64_t k = 0; k < cols; ++k) dot += double(pr[k]) * dr[k];
    float* out = ds + r * cols;
    for (int64_t k = 0; k < cols; ++k) out[k] = static_cast<float>(pr[k] * (double(dr[k]) - dot));
  }
}

void layer_norm_backward(const float* x, int64_t T, int64_t d, const float* gamma, float eps, const float* dy,
                         float* dx, float* dgamma, float* dbeta) {
  std::vector<double> xhat(static_cast<size_t>(d)), g(static_cast<size_t>(d));
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x + t * d;
    const float* dyr = dy + t * d;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += xr[i];
    mean /= double(d);
    for (int64_t i = 0; i < d; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= double(d);
    const double inv = 1.0 / std::sqrt(var + double(eps));
    double mean_g = 0, mean_gx = 0;
    for (int64_t i = 0; i < d; ++i) {
      xhat[size_t(i)] = (xr[i] - mean) * inv;
      g[size_t(i)] = double(dyr[i]) * gamma[i];
      mean_g += g[size_t(i)];
      mean_gx += g[size_t(i)] * xhat[size_t(i)];
      if (dgamma) dgamma[i] += static_cast<float>(double(dyr[i]) * xhat[size_t(i)]);
      if (dbeta) dbeta[i] += dyr[i];
    }
    mean_g /= double(d);
    mean_gx /= double(d);
    float* out = dx + t * d;
    for (int64_t i = 0; i < d; ++i)
      out[i] = static_cast<float>((g[size_t(i)] - mean_g - xhat[size_t(i)] * mean_gx) * inv);
  }
}

void rms_norm_backward(const float* x, int64_t T, int64_t d, const float* gamma, float eps, const float* dy, float* dx,
                       float* dgamma) {
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x + t * d;
    const float* dyr = dy + t * d;
    // The two sums in double, in vector lanes; the row's result in float from them. (Edge
    // attribution runs this some 450 times a pass over a prompt: loops kept free of branches and
    // divisions so that they vectorise.)
    double ms = 0, gx = 0;
#pragma omp simd reduction(+ : ms)
    for (int64_t i = 0; i < d; ++i) ms += double(xr[i]) * xr[i];
#pragma omp simd reduction(+ : gx)
    for (int64_t i = 0; i < d; ++i) gx += double(dyr[i]) * gamma[i] * xr[i];
    const double r = std::sqrt(ms / double(d) + double(eps)), inv_r = 1.0 / r;
    if (dgamma)
      for (int64_t i = 0; i < d; ++i) dgamma[i] += static_cast<float>(double(dyr[i]) * xr[i] * inv_r);
    float* out = dx + t * d;
    const float a = static_cast<float>(inv_r), k = static_cast<float>(gx / (double(d) * r * r * r));
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) out[i] = dyr[i] * gamma[i] * a - xr[i] * k;
  }
}

void gelu_erf_backward(const float* x, const float* dy, float* dx, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 14))
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    const double d = 0.5 * (1.0 + std::erf(v * kInvSqrt2)) + v * kInvSqrt2Pi * std::exp(-0.5 * v * v);
    dx[i] = static_cast<float>(dy[i] * d);
  }
}

void gelu_tanh_backward(const float* x, const float* dy, float* dx, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 14))
  for (int64_t i = 0; i < n; ++i) dx[i] = static_cast<float>(dy[i] * gelu_tanh_derivative(x[i]));
}

void silu_mul_backward(const float* gate, const float* up, const float* dy, float* dgate, float* dup, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 14))
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i], s = 1.0 / (1.0 + std::exp(-g)), dyi = dy[i], u = up[i];
    dgate[i] = static_cast<float>(dyi * u * s * (1.0 + g * (1.0 - s)));
    dup[i] = static_cast<float>(dyi * g * s);
  }
}

void gelu_tanh_mul_backward(const float* gate, const float* up, const float* dy, float* dgate, float* dup, int64_t n) {
#pragma omp parallel for schedule(static) if (n > (1 << 14))
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i], dyi = dy[i], u = up[i];
    dgate[i] = static_cast<float>(dyi * u * gelu_tanh_derivative(g));
    dup[i] = static_cast<float>(dyi * gelu_tanh_value(g));
  }
}

void soft_cap_backward(const float* y, const float* dy, float* dx, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) {
    const double r = double(y[i]) / cap;
    dx[i] = static_cast<float>(dy[i] * (1.0 - r * r));
  }
}

void linear_backward(const float* x, int64_t T, int64_t in, const float* W, int64_t out, const float* dy, float* dx,
                     float* dW, float* db) {
  if (dx) matmul(dy, out, W, in, dx, in, T, in, out, /*trans_b=*/false);  // [T, out] · [out, in]
  if (dW) {
    std::vector<float> dyt(size_t(out * T));  // dyᵀ [out, T]
    for (int64_t t = 0; t < T; ++t)
      for (int64_t o = 0; o < out; ++o) dyt[size_t(o * T + t)] = dy[t * out + o];
    matmul(dyt.data(), T, x, in, dW, in, out, in, T, /*trans_b=*/false, 1.0f, 1.0f);  // += [out, T] · [T, in]
  }
  if (db)
    for (int64_t o = 0; o < out; ++o) {
      double s = 0;
      for (int64_t t = 0; t < T; ++t) s += dy[t * out + o];
      db[o] += static_cast<float>(s);
    }
}

void rope_backward(float* dy, int64_t ld, int64_t T, int64_t n_heads, int64_t d_head, const RopeTable& table,
                   int64_t d_rot, RopeLayout layout) {
  // The transpose of a rotation is the rotation by the opposite angle: apply RoPE with −sin.
  RopeTable inverse = table;
  for (float& s : inverse.sin) s = -s;
  rope_apply(dy, ld, T, n_heads, d_head, inverse, d_rot, layout);
}

void attention_head_backward(const float* q, int64_t ldq, const float* k, const float* v, int64_t ldk, const float* p,
                             const float* d_out, int64_t ldo, int64_t Tq, int64_t Tk, int64_t d, float scale,
                             float softcap, float* dq, float* dk, float* dv, float* dp_out, float* scratch) {
  float* ds = scratch;            // [Tq, Tk]: dp, then ds in place
  float* pt = scratch + Tq * Tk;  // [Tk, Tq]: pᵀ, then dsᵀ
  // dp = do · vᵀ  [Tq, Tk]
  matmul(d_out, ldo, v, ldk, ds, Tk, Tq, Tk, d, /*trans_b=*/true);
  if (dp_out != nullptr) std::copy_n(ds, Tq * Tk, dp_out);
  // dv += pᵀ · do: [Tk, Tq] · [Tq, d]
  for (int64_t i = 0; i < Tq; ++i)
    for (int64_t j = 0; j < Tk; ++j) pt[j * Tq + i] = p[i * Tk + j];
  matmul(pt, Tq, d_out, ldo, dv, ldk, Tk, d, Tq, /*trans_b=*/false, 1.0f, 1.0f);
  softmax_backward(p, ds, Tq, Tk, ds);  // ds, in place
  if (softcap > 0.0f) {
    // The capped score's derivative, from the raw score s = scale · q·k (recomputed into pt).
    matmul(q, ldq, k, ldk, pt, Tk, Tq, Tk, d, /*trans_b=*/true, scale);
    for (int64_t i = 0; i < Tq * Tk; ++i) {
      const double t = std::tanh(double(pt[i]) / softcap);
      ds[i] = static_cast<float>(ds[i] * (1.0 - t * t));
    }
  }
  // dq += scale · ds · k: [Tq, Tk] · [Tk, d]
  matmul(ds, Tk, k, ldk, dq, ldq, Tq, d, Tk, /*trans_b=*/false, scale, 1.0f);
  // dk += scale · dsᵀ · q: [Tk, Tq] · [Tq, d]
  for (int64_t i = 0; i < Tq; ++i)
    for (int64_t j = 0; j < Tk; ++j) pt[j * Tq + i] = ds[i * Tk + j];
  matmul(pt, Tq, q, ldq, dk, ldk, Tk, d, Tq, /*trans_b=*/false, scale, 1.0f);
}

void quant_linear_backward(const float* dy, int64_t T, const QuantMatrix& W, float* dx, bool accumulate) {
  const int64_t out = W.rows(), in = W.cols();
  if (!W.stored()) {
    matmul(dy, out, W.fp32().ptr(), in, dx, in, T, in, out, /*trans_b=*/false, 1.0f, accumulate ? 1.0f : 0.0f);
    return;
  }
  if (!accumulate) std::fill(dx, dx + T * in, 0.0f);
  // Panels of output rows, dx += dy[:, r0 .. r0 + n) · W[r0 .. r0 + n, :]; panels where dy is all
  // zeros are skipped (a logit difference's gradient has two non-zero logits). At prompt lengths
  // the panels are shared between the threads, as in ops::quant_linear (each dequantises its own
  // and runs its products alone), every thread summing into its own [T, in] partial, added to dx
  // in thread order; a long input's products are large enough for sgemm's own threads.
  const int64_t threads =
      omp_in_parallel() || T > kBackwardSharedPanelsMaxRows ? 1 : std::max(1, omp_get_max_threads());
  const QuantPanels panels = quant_panels(out, in, threads, /*max_rows=*/out);
  const int64_t panel = panels.rows, n_panels = panels.count;
  const auto panel_product = [&](int64_t p, std::vector<float>& w, float* acc) {
    const int64_t r0 = p * panel, n = std::min(panel, out - r0);
    bool zero = true;
    for (int64_t t = 0; t < T && zero; ++t)
      for (int64_t r = r0; r < r0 + n && zero; ++r) zero = dy[t * out + r] == 0.0f;
    if (zero) return;
    // The scratch is kept per thread: zero-filling 4 MiB on every call cost more than the product
    // at prompt lengths.
    if (w.size() < size_t(n * in)) w.resize(size_t(n * in));
    W.dequantize_rows(r0, n, w.data());
    matmul(dy + r0, out, w.data(), in, acc, in, T, in, n, /*trans_b=*/false, 1.0f, 1.0f);
  };
  thread_local std::vector<float> w;
  if (threads == 1) {
    for (int64_t p = 0; p < n_panels; ++p) panel_product(p, w, dx);
    return;
  }
  std::vector<float> partial(size_t(threads * T * in), 0.0f);
  std::exception_ptr failure;  // an exception may not leave a parallel region: kept, rethrown after
#pragma omp parallel num_threads(int(threads))
  {
    float* acc = partial.data() + omp_get_thread_num() * T * in;
#pragma omp for schedule(static)
    for (int64_t p = 0; p < n_panels; ++p) try {
        panel_product(p, w, acc);
      } catch (...) {
#pragma omp critical
        if (!failure) failure = std::current_exception();
      }
  }
  if (failure) std::rethrow_exception(failure);
  for (int64_t k = 0; k < threads; ++k) add_inplace(dx, partial.data() + k * T * in, T * in);
}

}  // namespace headscope::ops
