// The backward ops (ops/backward.h) and their slow twins (ops/reference/backward.h) against central
// finite differences of the forward formulas, written here in double: for a random upstream
// gradient w and L(x) = Σ w ⊙ f(x), each op's dx must equal (L(x + h e_j) − L(x − h e_j)) / 2h for
// every input j (and likewise for the parameters). The fast op and its twin must also agree.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "ops/backward.h"
#include "ops/reference/backward.h"

namespace headscope::ops {
namespace {

using Vec = std::vector<double>;
using Fn = std::function<Vec(const Vec&)>;

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Vec to_double(const std::vector<float>& v) { return Vec(v.begin(), v.end()); }

// d/dx_j of Σ_i w_i f(x)_i, by central differences in double.
Vec numeric_gradient(const Fn& f, const Vec& x, const std::vector<float>& w, double h = 1e-5) {
  Vec g(x.size());
  for (size_t j = 0; j < x.size(); ++j) {
    Vec a = x, b = x;
    a[j] += h, b[j] -= h;
    const Vec fa = f(a), fb = f(b);
    double s = 0;
    for (size_t i = 0; i < fa.size(); ++i) s += w[i] * (fa[i] - fb[i]);
    g[j] = s / (2 * h);
  }
  return g;
}

// Largest |got − want| over the largest |want|.
double relative_error(const std::vector<float>& got, const Vec& want) {
  double err = 0, scale = 1e-12;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(double(got[i]) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / scale;
}

constexpr double kTolerance = 1e-4;  // float outputs against double differences

TEST(OpsBackward, SoftmaxRows) {
  const int64_t rows = 3, cols = 7;
  const std::vector<float> s = random_floats(size_t(rows * cols), 1, 2.0f), w = random_floats(size_t(rows * cols), 2);
  const Fn softmax = [&](const Vec& x) {
    Vec y(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      double m = -1e300, z = 0;
      for (int64_t k = 0; k < cols; ++k) m = std::max(m, x[size_t(r * cols + k)]);
      for (int64_t k = 0; k < cols; ++k) z += std::exp(x[size_t(r * cols + k)] - m);
      for (int64_t k = 0; k < cols; ++k) y[size_t(r * cols + k)] = std::exp(x[size_t(r * cols + k)] - m) / z;
    }
    return y;
  };
  const Vec pd = softmax(to_double(s));
  const std::vector<float> p(pd.begin(), pd.end());
  std::vector<float> fast(p.size()), slow(p.size());
  softmax_backward(p.data(), w.data(), rows, cols, fast.data());
  reference::softmax_backward(p.data(), w.data(), rows, cols, slow.data());
  const Vec want = numeric_gradient(softmax, to_double(s), w);
  EXPECT_LE(relative_error(fast, want), kTolerance);
  EXPECT_LE(relative_error(slow, want), kTolerance);
}

TEST(OpsBackward, LayerNormAndRmsNormWithTheirGains) {
  const int64_t T = 3, d = 8;
  const float eps = 1e-5f;
  const std::vector<float> x = random_floats(size_t(T * d), 3), gamma = random_floats(size_t(d), 4),
                           beta = random_floats(size_t(d), 5), w = random_floats(size_t(T * d), 6);
  const auto layer = [&](const Vec& xs, const Vec& g, const Vec& b) {
    Vec y(xs.size());
    for (int64_t t = 0; t < T; ++t) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < d; ++i) mean += xs[size_t(t * d + i)] / d;
      for (int64_t i = 0; i < d; ++i) var += std::pow(xs[size_t(t * d + i)] - mean, 2) / d;
      for (int64_t i = 0; i < d; ++i)
        y[size_t(t * d + i)] = (xs[size_t(t * d + i)] - mean) / std::sqrt(var + eps) * g[size_t(i)] + b[size_t(i)];
    }
    return y;
  };
  const auto rms = [&](const Vec& xs, const Vec& g) {
    Vec y(xs.size());
    for (int64_t t = 0; t < T; ++t) {
      double ms = 0;
      for (int64_t i = 0; i < d; ++i) ms += xs[size_t(t * d + i)] * xs[size_t(t * d + i)] / d;
      for (int64_t i = 0; i < d; ++i) y[size_t(t * d + i)] = xs[size_t(t * d + i)] / std::sqrt(ms + eps) * g[size_t(i)];
    }
    return y;
  };
  const Vec xd = to_double(x), gd = to_double(gamma), bd = to_double(beta);
  for (bool twin : {false, true}) {
    std::vector<float> dx(x.size()), dg(size_t(d), 0.0f), db(size_t(d), 0.0f);
    (twin ? reference::layer_norm_backward : layer_norm_backward)(x.data(), T, d, gamma.data(), eps, w.data(),
                                                                  dx.data(), dg.data(), db.data());
    EXPECT_LE(relative_error(dx, numeric_gradient([&](const Vec& v) { return layer(v, gd, bd); }, xd, w)), kTolerance);
    EXPECT_LE(relative_error(dg, numeric_gradient([&](const Vec& v) { return layer(xd, v, bd); }, gd, w)), kTolerance);
    EXPECT_LE(relative_error(db, numeric_gradient([&](const Vec& v) { return layer(xd, gd, v); }, bd, w)), kTolerance);
    std::vector<float> rx(x.size()), rg(size_t(d), 0.0f);
    (twin ? reference::rms_norm_backward : rms_norm_backward)(x.data(), T, d, gamma.data(), eps, w.data(), rx.data(),
                                                              rg.data());
    EXPECT_LE(relative_error(rx, numeric_gradient([&](const Vec& v) { return rms(v, gd); }, xd, w)), kTolerance);
    EXPECT_LE(relative_error(rg, numeric_gradient([&](const Vec& v) { return rms(xd, v); }, gd, w)), kTolerance);
  }
}

TEST(OpsBackward, ActivationsAndSoftCap) {
  const int64_t n = 40;
  const std::vector<float> x = random_floats(size_t(n), 7, 2.0f), up = random_floats(size_t(n), 8),
                           w = random_floats(size_t(n), 9);
  const Vec xd = to_double(x), ud = to_double(up);
  const auto each = [](double (*f)(double)) {
    return [f](const Vec& v) {
      Vec y(v.size());
      for (size_t i = 0; i < v.size(); ++i) y[i] = f(v[i]);
      return y;
    };
  };
  const auto gelu_erf = [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); };
  const auto gelu_tanh = [](double v) {
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  };
  const auto silu = [](double v) { return v / (1 + std::exp(-v)); };
  std::vector<float> dx(static_cast<size_t>(n));
  gelu_erf_backward(x.data(), w.data(), dx.data(), n);
  EXPECT_LE(relative_error(dx, numeric_gradient(each(+gelu_erf), xd, w)), kTolerance);
  gelu_tanh_backward(x.data(), w.data(), dx.data(), n);
  EXPECT_LE(relative_error(dx, numeric_gradient(each(+gelu_tanh), xd, w)), kTolerance);
  // Gated: y = f(gate) ⊙ up, both inputs.
  std::vector<float> dg(static_cast<size_t>(n)), du(static_cast<size_t>(n));
  for (bool gelu : {false, true}) {
    (gelu ? gelu_tanh_mul_backward : silu_mul_backward)(x.data(), up.data(), w.data(), dg.data(), du.data(), n);
    const auto f = gelu ? +gelu_tanh : +silu;
    const auto gated = [&](const Vec& g, const Vec& u) {
      Vec y(g.size());
      for (size_t i = 0; i < g.size(); ++i) y[i] = f(g[i]) * u[i];
      return y;
    };
    EXPECT_LE(relative_error(dg, numeric_gradient([&](const Vec& v) { return gated(v, ud); }, xd, w)), kTolerance);
    EXPECT_LE(relative_error(du, numeric_gradient([&](const Vec& v) { return gated(xd, v); }, ud, w)), kTolerance);
  }
  // Soft-capping from its output.
  const float cap = 3.0f;
  std::vector<float> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[size_t(i)] = static_cast<float>(cap * std::tanh(x[size_t(i)] / cap));
  soft_cap_backward(y.data(), w.data(), dx.data(), n, cap);
  const Fn capped = [&](const Vec& v) {
    Vec out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = cap * std::tanh(v[i] / cap);
    return out;
  };
  EXPECT_LE(relative_error(dx, numeric_gradient(capped, xd, w)), kTolerance);
}

TEST(OpsBackward, LinearInputWeightAndBias) {
  const int64_t T = 5, in = 6, out = 4;
  const std::vector<float> x = random_floats(size_t(T * in), 10), W = random_floats(size_t(out * in), 11),
                           b = random_floats(size_t(out), 12), w = random_floats(size_t(T * out), 13);
  const auto f = [&](const Vec& xs, const Vec& Ws, const Vec& bs) {
    Vec y(size_t(T * out));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t o = 0; o < out; ++o) {
        double s = bs[size_t(o)];
        for (int64_t i = 0; i < in; ++i) s += xs[size_t(t * in + i)] * Ws[size_t(o * in + i)];
        y[size_t(t * out + o)] = s;
      }
    return y;
  };
  const Vec xd = to_double(x), Wd = to_double(W), bd = to_double(b);
  for (bool twin : {false, true}) {
    std::vector<float> dx(x.size()), dW(W.size(), 0.0f), db(b.size(), 0.0f);
    (twin ? reference::linear_backward : linear_backward)(x.data(), T, in, W.data(), out, w.data(), dx.data(),
                                                          dW.data(), db.data());
    EXPECT_LE(relative_error(dx, numeric_gradient([&](const Vec& v) { return f(v, Wd, bd); }, xd, w)), kTolerance);
    EXPECT_LE(relative_error(dW, numeric_gradient([&](const Vec& v) { return f(xd, v, bd); }, Wd, w)), kTolerance);
    EXPECT_LE(relative_error(db, numeric_gradient([&](const Vec& v) { return f(xd, Wd, v); }, bd, w)), kTolerance);
  }
}

TEST(OpsBackward, RopeBothLayouts) {
  const int64_t T = 4, H = 2, dh = 8, ld = H * dh;
  RopeConfig config;
  config.d_rot = dh;
  const RopeTable table = rope_table(rope_inverse_frequencies(config), 3, T);
  const std::vector<float> x = random_floats(size_t(T * ld), 14), w = random_floats(size_t(T * ld), 15);
  for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    const Fn rotate = [&](const Vec& v) {  // the forward in double from the same table
      Vec y = v;
      const int64_t half = dh / 2;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t i = 0; i < half; ++i) {
            const int64_t a = layout == RopeLayout::kHalfSplit ? i : 2 * i;
            const int64_t b = layout == RopeLayout::kHalfSplit ? i + half : 2 * i + 1;
            const double c = table.cos[size_t(t * half + i)], s = table.sin[size_t(t * half + i)];
            const double va = v[size_t(t * ld + h * dh + a)], vb = v[size_t(t * ld + h * dh + b)];
            y[size_t(t * ld + h * dh + a)] = va * c - vb * s;
            y[size_t(t * ld + h * dh + b)] = vb * c + va * s;
          }
      return y;
    };
    const Vec want = numeric_gradient(rotate, to_double(x), w);
    std::vector<float> fast = w, slow = w;
    rope_backward(fast.data(), ld, T, H, dh, table, dh, layout);
    reference::rope_backward(slow.data(), ld, T, H, dh, table, dh, layout);
    EXPECT_LE(relative_error(fast, want), kTolerance);
    EXPECT_LE(relative_error(slow, want), kTolerance);
  }
}

// One causal head, keys and values in wider rows (a KV head's slice), against differences of the
// whole attention formula in q, k and v; without and with soft-capping of the scores.
class AttentionHead : public ::testing::TestWithParam<float> {};

TEST_P(AttentionHead, CausalMatchesDifferences) {
  const int64_t T = 6, d = 4, ldq = 8, ldk = 12, ldo = 5;
  const float scale = 0.5f, softcap = GetParam();
  const std::vector<float> q = random_floats(size_t(T * ldq), 16), k = random_floats(size_t(T * ldk), 17),
                           v = random_floats(size_t(T * ldk), 18), w = random_floats(size_t(T * ldo), 19);
  const auto forward = [&](const Vec& qs, const Vec& ks, const Vec& vs, Vec* probs) {
    Vec o(size_t(T * ldo), 0.0);
    for (int64_t i = 0; i < T; ++i) {
      Vec s(size_t(i + 1));
      double m = -1e300, z = 0;
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += qs[size_t(i * ldq + c)] * ks[size_t(j * ldk + c)];
        s[size_t(j)] = softcap > 0 ? softcap * std::tanh(scale * dot / softcap) : scale * dot;
        m = std::max(m, s[size_t(j)]);
      }
      for (int64_t j = 0; j <= i; ++j) z += std::exp(s[size_t(j)] - m);
      for (int64_t j = 0; j <= i; ++j) {
        const double p = std::exp(s[size_t(j)] - m) / z;
        if (probs) (*probs)[size_t(i * T + j)] = p;
        for (int64_t c = 0; c < d; ++c) o[size_t(i * ldo + c)] += p * vs[size_t(j * ldk + c)];
      }
    }
    return o;
  };
  const Vec qd = to_double(q), kd = to_double(k), vd = to_double(v);
  Vec pd(size_t(T * T), 0.0);
  forward(qd, kd, vd, &pd);
  const std::vector<float> p(pd.begin(), pd.end());
  // Only the head's d columns carry a gradient; the rest of each row stays 0.
  std::vector<float> wd = w;
  for (int64_t i = 0; i < T; ++i)
    for (int64_t c = d; c < ldo; ++c) wd[size_t(i * ldo + c)] = 0;
  const Vec want_q = numeric_gradient([&](const Vec& x) { return forward(x, kd, vd, nullptr); }, qd, wd);
  const Vec want_k = numeric_gradient([&](const Vec& x) { return forward(qd, x, vd, nullptr); }, kd, wd);
  const Vec want_v = numeric_gradient([&](const Vec& x) { return forward(qd, kd, x, nullptr); }, vd, wd);
  // dp = do · vᵀ at every entry, masked ones included.
  std::vector<float> want_dp(size_t(T * T));
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) {
      double s = 0;
      for (int64_t c = 0; c < d; ++c) s += double(wd[size_t(i * ldo + c)]) * v[size_t(j * ldk + c)];
      want_dp[size_t(i * T + j)] = float(s);
    }
  for (bool twin : {false, true}) {
    std::vector<float> dq(q.size(), 0.0f), dk(k.size(), 0.0f), dv(v.size(), 0.0f), dp(size_t(T * T)),
        scratch(size_t(2 * T * T));
    if (twin)
      reference::attention_head_backward(q.data(), ldq, k.data(), v.data(), ldk, p.data(), wd.data(), ldo, T, T, d,
                                         scale, softcap, dq.data(), dk.data(), dv.data(), dp.data());
    else
      attention_head_backward(q.data(), ldq, k.data(), v.data(), ldk, p.data(), wd.data(), ldo, T, T, d, scale, softcap,
                              dq.data(), dk.data(), dv.data(), dp.data(), scratch.data());
    EXPECT_LE(relative_error(dq, want_q), kTolerance) << twin;
    EXPECT_LE(relative_error(dk, want_k), kTolerance) << twin;
    EXPECT_LE(relative_error(dv, want_v), kTolerance) << twin;
    EXPECT_LE(relative_error(dp, to_double(want_dp)), 1e-6) << twin;
  }
}
INSTANTIATE_TEST_SUITE_P(SoftCap, AttentionHead, ::testing::Values(0.0f, 1.5f));

// dy · W for a weight kept in stored blocks (F32 blocks here, so the values are exact), over
// several panels and a ragged last one, against the fp32 product and the twin.
TEST(OpsBackward, QuantLinearBackwardPanelsEqualTheWholeProduct) {
  const int64_t T = 3, out = 41, in = 65536;  // 16 rows of 64K columns per 4-MiB panel: 3 panels
  const std::vector<float> w = random_floats(size_t(out * in), 30), dy = random_floats(size_t(T * out), 31);
  const QuantMatrix stored =
      QuantMatrix::stored(io::GgmlType::F32, out, in, reinterpret_cast<const uint8_t*>(w.data()), nullptr);
  Tensor wt({out, in});
  std::copy(w.begin(), w.end(), wt.ptr());
  const QuantMatrix fp32(wt);
  std::vector<float> want(size_t(T * in), 0.0f);
  reference::quant_linear_backward(dy.data(), T, stored, want.data());
  for (const QuantMatrix* W : {&stored, &fp32}) {
    std::vector<float> dx(size_t(T * in), 1.0f);
    quant_linear_backward(dy.data(), T, *W, dx.data(), /*accumulate=*/false);
    EXPECT_LE(relative_error(dx, to_double(want)), 1e-6) << W->stored();
    quant_linear_backward(dy.data(), T, *W, dx.data(), /*accumulate=*/true);
    for (size_t i = 0; i < dx.size(); i += 997) EXPECT_NEAR(dx[i], 2 * want[i], 1e-4 * (1 + std::abs(want[i])));
  }
}

}  // namespace
}  // namespace headscope::ops
