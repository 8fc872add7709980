// headscope — Q-, K- and V-composition scores between the heads of different layers, from the
// weights (include/headscope/circuits.h, "Composition scores"; docs/circuits.md, "Composition scores").
//
// Every score is a ratio of Frobenius norms of d_model × d_model products of rank ≤ d_head. None
// of them is formed: each head is reduced to d_head × d_head Gram matrices and factors, and the
// one product that needs d_model — what a receiver reads of what a sender writes — is a GEMM per
// pair of layers over all their heads at once. The slow twin (circuits/reference/composition.h)
// forms the dense matrices in double.
#include "circuits/composition.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <exception>
#include <initializer_list>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "headscope/error.h"
#include "ops/matmul.h"
#include "tensor/tensor_ops.h"

namespace headscope {

const char* composition_kind_name(CompositionKind kind) {
  switch (kind) {
    case CompositionKind::kQ:
      return "Q";
    case CompositionKind::kK:
      return "K";
    case CompositionKind::kV:
      return "V";
  }
  return "?";
}

const Tensor& CompositionScores::scores(CompositionKind kind) const {
  return kind == CompositionKind::kQ ? q : kind == CompositionKind::kK ? k : v;
}

const CompositionBaseline& CompositionScores::baseline(CompositionKind kind) const {
  return kind == CompositionKind::kQ ? q_random : kind == CompositionKind::kK ? k_random : v_random;
}

namespace circuits {
namespace {

// m[r, c] *= gain[c] for every row r.
void scale_columns(Tensor& m, const Tensor& gain) {
  const int64_t cols = m.dim(1);
  for (int64_t r = 0; r < m.dim(0); ++r)
    for (int64_t c = 0; c < cols; ++c) m.ptr()[r * cols + c] *= gain.ptr()[c];
}

// m[r, :] *= gain[r mod n] (n = gain's size: d_head for a gain every head shares, or every row's own).
void scale_rows(Tensor& m, const Tensor& gain) {
  const int64_t cols = m.dim(1), n = gain.numel();
  for (int64_t r = 0; r < m.dim(0); ++r)
    for (int64_t c = 0; c < cols; ++c) m.ptr()[r * cols + c] *= gain.ptr()[r % n];
}

// A gain must be absent or have one of the sizes given.
void expect_gain(const Tensor& gain, std::initializer_list<int64_t> sizes, const std::string& what) {
  if (gain.empty()) return;
  if (gain.rank() == 1 && std::find(sizes.begin(), sizes.end(), gain.dim(0)) != sizes.end()) return;
  throw Error(what + ": unexpected shape " + gain.shape_str());
}

}  // namespace

FoldedLayer fold_layer(const Model& model, int layer, bool fold_gains) {
  const ModelConfig& c = model.config();
  const int64_t D = c.d_model, Dh = c.d_head, H = c.n_head, Hkv = c.n_kv_head;
  const std::string where = c.name + " layer " + std::to_string(layer);
  AttentionWeights a = model.attention_weights(layer);
  a.w_q.expect_shape({H * Dh, D}, where + " W_Q");
  a.w_k.expect_shape({Hkv * Dh, D}, where + " W_K");
  a.w_v.expect_shape({Hkv * Dh, D}, where + " W_V");
  expect_gain(a.input_gain, {D}, where + " input norm γ");
  expect_gain(a.q_gain, {Dh, H * Dh}, where + " query norm γ");
  expect_gain(a.k_gain, {Dh, Hkv * Dh}, where + " key norm γ");
  expect_gain(a.output_gain, {D}, where + " output norm γ");
  const Tensor w_o = model.output_projection(layer);
  w_o.expect_shape({D, H * Dh}, where + " W_O");
  FoldedLayer f{std::move(a.w_q), std::move(a.w_k), std::move(a.w_v), transpose(w_o)};
  if (!fold_gains) return f;
  if (!a.input_gain.empty())
    for (Tensor* m : {&f.w_q, &f.w_k, &f.w_v}) scale_columns(*m, a.input_gain);
  if (!a.q_gain.empty()) scale_rows(f.w_q, a.q_gain);
  if (!a.k_gain.empty()) scale_rows(f.w_k, a.k_gain);
  if (!a.output_gain.empty()) scale_columns(f.w_o_t, a.output_gain);
  return f;
}

HeadMatrices head_matrices(const FoldedLayer& f, const ModelConfig& c, int head) {
  const int64_t D = c.d_model, Dh = c.d_head, g = head / (c.n_head / c.n_kv_head);
  const auto rows = [&](const Tensor& m, int64_t first) {  // rows first·d_head .. (first + 1)·d_head − 1
    Tensor t({Dh, D}, Tensor::Uninitialized{});
    copy_rows(t.ptr(), D, m.ptr() + first * Dh * D, D, Dh, D);
    return t;
  };
  return {rows(f.w_q, head), rows(f.w_k, g), rows(f.w_v, g), transpose(rows(f.w_o_t, head))};
}

}  // namespace circuits

namespace {

using circuits::FoldedLayer;
constexpr int kMaxDraws = 100000;

// G [n, n] = A Aᵀ for A [n, d] (row-major, contiguous), in double.
std::vector<double> gram(const float* A, int64_t n, int64_t d) {
  std::vector<float> g(static_cast<size_t>(n * n));
  ops::matmul(A, d, A, d, g.data(), n, n, n, d, /*trans_b=*/true);
  return {g.begin(), g.end()};
}

// ⟨A, B⟩ = Σ A ⊙ B over n values (tr(A B) for symmetric A or B).
template <class T>
double frobenius_dot(const double* a, const T* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * double(b[i]);
  return s;
}

double ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

// F [n, n] with F Fᵀ = G for a symmetric positive semi-definite G [n, n]: Cholesky with diagonal
// pivoting (Higham, "Accuracy and Stability of Numerical Algorithms", §10.3), stopped at G's
// numerical rank, so that a singular Gram matrix (a head of d_head > d_model, or a zero head) gets
// zero columns instead of a NaN. Step k moves the largest remaining diagonal entry to row and
// column k of G (whose columns < k then hold the factor, in pivoted order) and subtracts the new
// column's outer product from the rest; F's row p[i] is the factor's row i.
std::vector<double> psd_factor(std::vector<double> G, int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  double largest = 0;
  for (int64_t i = 0; i < n; ++i) largest = std::max(largest, G[size_t(i * n + i)]);
  const double tolerance = double(n) * std::numeric_limits<double>::epsilon() * largest;
  double* a = G.data();
  std::vector<double> column(static_cast<size_t>(n));
  int64_t rank = 0;
  for (int64_t k = 0; k < n; ++k, rank = k) {
    int64_t best = k;
    for (int64_t i = k + 1; i < n; ++i)
      if (a[i * n + i] > a[best * n + best]) best = i;
    if (!(a[best * n + best] > tolerance)) break;
    if (best != k) {  // the symmetric swap of rows and columns k and best
      std::swap(p[size_t(k)], p[size_t(best)]);
      std::swap_ranges(a + k * n, a + (k + 1) * n, a + best * n);
      for (int64_t i = 0; i < n; ++i) std::swap(a[i * n + k], a[i * n + best]);
    }
    const double root = std::sqrt(a[k * n + k]);
    a[k * n + k] = root;
    for (int64_t i = k + 1; i < n; ++i) column[size_t(i)] = a[i * n + k] /= root;
    for (int64_t i = k + 1; i < n; ++i) {  // G[k+1.., k+1..] −= c cᵀ
      double* row = a + i * n;
      const double ci = column[size_t(i)];
      for (int64_t j = k + 1; j < n; ++j) row[j] -= ci * column[size_t(j)];
    }
  }
  std::vector<double> F(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < std::min(rank, i + 1); ++k) F[size_t(p[size_t(i)] * n + k)] = a[i * n + k];
  return F;
}

// Fᵀ as fp32 [n, n], the left operand of the GEMMs below.
std::vector<float> transposed(const std::vector<double>& F, int64_t n) {
  std::vector<float> t(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) t[size_t(j * n + i)] = float(F[size_t(i * n + j)]);
  return t;
}

// One layer as the pair scores read it. Heads h = 0 .. H − 1 read through key/value group
// g(h) = h / (H / Hkv); G_X = W_X W_Xᵀ for the reading matrices, G_O^h = W_O^hᵀ W_O^h; F_X F_Xᵀ = G_X.
struct LayerFactors {
  int64_t H = 0, Hkv = 0, dh = 0, d = 0;
  // [(H + 2·Hkv)·dh, d]: F_K^{g(h)}ᵀ W_Q^h for every h, then W_K^g, then W_V^g (receivers only)
  Tensor read;
  Tensor write;                          // [H·dh, d]: F_V^{g(h)}ᵀ W_O^hᵀ = (W_O^h F_V^{g(h)})ᵀ (senders only)
  std::vector<double> gram_q, gram_o;    // [H, dh, dh] G_Q^h, G_O^h (receivers)
  std::vector<double> norm_qk, norm_ov;  // [H] ‖W_QK^h‖ (receivers), ‖W_OV^h‖
  int64_t group(int64_t h) const { return h / (H / Hkv); }
};

// A layer sends when a later layer reads it, receives when it reads an earlier one.
LayerFactors factor_layer(const FoldedLayer& f, int64_t H, int64_t Hkv, int64_t dh, bool sends, bool receives) {
  LayerFactors L;
  L.H = H, L.Hkv = Hkv, L.dh = dh, L.d = f.w_v.dim(1);
  const int64_t d = L.d, n = dh * dh;
  std::vector<std::vector<double>> gram_v(static_cast<size_t>(Hkv)), factor_v(static_cast<size_t>(Hkv));
  for (int64_t g = 0; g < Hkv; ++g) {
    gram_v[size_t(g)] = gram(f.w_v.ptr() + g * dh * d, dh, d);
    if (sends) factor_v[size_t(g)] = psd_factor(gram_v[size_t(g)], dh);
  }
  if (sends) L.write = Tensor({H * dh, d}, Tensor::Uninitialized{});
  L.gram_o.resize(size_t(H * n));
  L.norm_ov.resize(size_t(H));
  for (int64_t h = 0; h < H; ++h) {
    const float* w_o = f.w_o_t.ptr() + h * dh * d;
    const std::vector<double> g_o = gram(w_o, dh, d);
    std::copy(g_o.begin(), g_o.end(), L.gram_o.begin() + h * n);
    L.norm_ov[size_t(h)] = std::sqrt(frobenius_dot(g_o.data(), gram_v[size_t(L.group(h))].data(), n));
    if (!sends) continue;
    const std::vector<float> ft = transposed(factor_v[size_t(L.group(h))], dh);
    ops::matmul(ft.data(), dh, w_o, d, L.write.ptr() + h * dh * d, d, dh, d, dh, /*trans_b=*/false);
  }
  if (!receives) return L;
  L.read = Tensor({(H + 2 * Hkv) * dh, d}, Tensor::Uninitialized{});
  L.gram_q.resize(size_t(H * n));
  L.norm_qk.resize(size_t(H));
  std::vector<std::vector<double>> gram_k(static_cast<size_t>(Hkv));
  std::vector<std::vector<float>> factor_k_t(static_cast<size_t>(Hkv));
  for (int64_t g = 0; g < Hkv; ++g) {
    gram_k[size_t(g)] = gram(f.w_k.ptr() + g * dh * d, dh, d);
    factor_k_t[size_t(g)] = transposed(psd_factor(gram_k[size_t(g)], dh), dh);
  }
  for (int64_t h = 0; h < H; ++h) {
    const float* w_q = f.w_q.ptr() + h * dh * d;
    const std::vector<double> g_q = gram(w_q, dh, d);
    std::copy(g_q.begin(), g_q.end(), L.gram_q.begin() + h * n);
    L.norm_qk[size_t(h)] = std::sqrt(frobenius_dot(g_q.data(), gram_k[size_t(L.group(h))].data(), n));
    ops::matmul(factor_k_t[size_t(L.group(h))].data(), dh, w_q, d, L.read.ptr() + h * dh * d, d, dh, d, dh, false);
  }
  std::copy(f.w_k.data.begin(), f.w_k.data.end(), L.read.ptr() + H * dh * d);
  std::copy(f.w_v.data.begin(), f.w_v.data.end(), L.read.ptr() + (H + Hkv) * dh * d);
  return L;
}

// Every head h1 of sender layer `s` into every head h2 of receiver layer `r`: q, k, v [s.H, r.H].
// C = r.read · s.writeᵀ holds, for each pair of blocks,
//   Q rows:  F_Kᵀ W_Q^{h2} W_O^{h1} F_V   whose squared norm is Q²·(‖W_QK^{h2}‖ ‖W_OV^{h1}‖)²
//   K rows:  P = W_K^g W_O^{h1} F_V        with K² ∝ ⟨G_Q^{h2}, P Pᵀ⟩ for each h2 of group g
//   V rows:  P = W_V^g W_O^{h1} F_V        with V² ∝ ⟨G_O^{h2}, P Pᵀ⟩
// (circuits.h gives the identities). `C` and `ppt` (P Pᵀ) are scratch.
void score_layers(const LayerFactors& s, const LayerFactors& r, std::vector<float>& C, std::vector<float>& ppt,
                  double* q, double* k, double* v) {
  const int64_t dh = r.dh, n = dh * dh, rows = r.read.dim(0), cols = s.H * dh;
  C.resize(size_t(rows * cols));
  ppt.resize(size_t(n));
  ops::matmul(r.read.ptr(), r.d, s.write.ptr(), s.d, C.data(), cols, rows, cols, r.d, /*trans_b=*/true);
  for (int64_t h1 = 0; h1 < s.H; ++h1) {
    const double ov = s.norm_ov[size_t(h1)];
    for (int64_t h2 = 0; h2 < r.H; ++h2) {
      double sq = 0;
      for (int64_t i = 0; i < dh; ++i) {
        const float* row = C.data() + (h2 * dh + i) * cols + h1 * dh;
        for (int64_t j = 0; j < dh; ++j) sq += double(row[j]) * row[j];
      }
      q[h1 * r.H + h2] = ratio(std::sqrt(sq), r.norm_qk[size_t(h2)] * ov);
    }
    for (int64_t g = 0; g < r.Hkv; ++g)
      for (const bool key : {true, false}) {
        const int64_t block = r.H + (key ? 0 : r.Hkv) + g;
        const float* P = C.data() + block * dh * cols + h1 * dh;
        ops::matmul(P, cols, P, cols, ppt.data(), dh, dh, dh, dh, /*trans_b=*/true);
        for (int64_t h2 = 0; h2 < r.H; ++h2) {
          if (r.group(h2) != g) continue;
          const double* G = (key ? r.gram_q : r.gram_o).data() + h2 * n;
          const double num = std::sqrt(std::max(0.0, frobenius_dot(G, ppt.data(), n)));
          (key ? k : v)[h1 * r.H + h2] = ratio(num, (key ? r.norm_qk : r.norm_ov)[size_t(h2)] * ov);
        }
      }
  }
}

// Standard normal numbers, the same on every platform (std::normal_distribution's algorithm is each
// library's own): Marsaglia's polar method (one log per two numbers) over a splitmix64 stream
// (Steele et al. 2014).
class Gaussian {
 public:
  // Stream `index` of `seed`: the finaliser spreads neighbouring indices over the whole state space.
  Gaussian(uint64_t seed, uint64_t index) : state_(mix(seed + mix(index + 1))) {}
  void fill(Tensor& t) {
    for (float& x : t.data) x = float(next());
  }

 private:
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double uniform() {  // [−1, 1), 53 bits
    state_ += 0x9E3779B97F4A7C15ULL;
    return double(mix(state_) >> 11) * 0x1p-52 - 1.0;
  }
  double next() {
    if (spare_ready_) {
      spare_ready_ = false;
      return spare_;
    }
    double x, y, s;
    do {  // a point uniform in the unit disc (accepted with probability π/4)
      x = uniform(), y = uniform(), s = x * x + y * y;
    } while (s >= 1.0 || s == 0.0);
    const double f = std::sqrt(-2.0 * std::log(s) / s);
    spare_ = y * f;
    spare_ready_ = true;
    return x * f;
  }
  uint64_t state_;
  double spare_ = 0;
  bool spare_ready_ = false;
};

CompositionBaseline summarise(const std::vector<double>& x) {
  CompositionBaseline b;
  b.mean = std::accumulate(x.begin(), x.end(), 0.0) / double(x.size());
  double ss = 0;
  for (double v : x) ss += (v - b.mean) * (v - b.mean);
  b.std = x.size() > 1 ? std::sqrt(ss / double(x.size() - 1)) : 0.0;
  return b;
}

// One sender head and one receiver head, their matrices already checked.
CompositionTriple score_heads(const FoldedLayer& sender, const FoldedLayer& receiver, int64_t dh) {
  const LayerFactors s = factor_layer(sender, 1, 1, dh, /*sends=*/true, /*receives=*/false);
  const LayerFactors r = factor_layer(receiver, 1, 1, dh, /*sends=*/false, /*receives=*/true);
  std::vector<float> C, ppt;
  CompositionTriple t;
  score_layers(s, r, C, ppt, &t.q, &t.k, &t.v);
  return t;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// body(i, thread) for i = 0 .. n − 1 on the OpenMP threads (oneDNN's GEMMs inside then run on the
// calling thread); `thread` indexes per-thread scratch. The first exception is rethrown here.
template <class Body>
void parallel_for(int64_t n, Body body) {
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic)
  for (int64_t i = 0; i < n; ++i) {
    try {
      body(i, omp_get_thread_num());
    } catch (...) {
#pragma omp critical(headscope_composition_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

CompositionTriple composition_of(const HeadMatrices& sender, const HeadMatrices& receiver) {
  const int64_t dh = receiver.w_v.rank() == 2 ? receiver.w_v.dim(0) : 0;
  const int64_t d = receiver.w_v.rank() == 2 ? receiver.w_v.dim(1) : 0;
  if (dh < 1 || d < 1)
    throw Error("composition: the receiver's W_V must be [d_head, d_model], got " + receiver.w_v.shape_str());
  receiver.w_q.expect_shape({dh, d}, "composition: the receiver's W_Q");
  receiver.w_k.expect_shape({dh, d}, "composition: the receiver's W_K");
  receiver.w_o.expect_shape({d, dh}, "composition: the receiver's W_O");
  sender.w_v.expect_shape({dh, d}, "composition: the sender's W_V");
  sender.w_o.expect_shape({d, dh}, "composition: the sender's W_O");
  const FoldedLayer s{Tensor(), Tensor(), sender.w_v, transpose(sender.w_o)};
  const FoldedLayer r{receiver.w_q, receiver.w_k, receiver.w_v, transpose(receiver.w_o)};
  return score_heads(s, r, dh);
}

std::vector<CompositionBaseline> composition_baselines(int d_model, int d_head, int draws, uint64_t seed) {
  if (d_model < 1 || d_head < 1)
    throw Error("composition baseline: d_model and d_head must be positive, got " + std::to_string(d_model) + " and " +
                std::to_string(d_head));
  if (draws < 2 || draws > kMaxDraws)
    throw Error("composition baseline: draws must be in 2.." + std::to_string(kMaxDraws) + ", got " +
                std::to_string(draws));
  const int64_t D = d_model, Dh = d_head;
  std::vector<double> q(static_cast<size_t>(draws)), k(q.size()), v(q.size());
  // Draw i: the receiver's W_Q, W_K, W_V, W_Oᵀ, then the sender's W_V, W_Oᵀ, all [d_head, d_model]
  // (a Gaussian matrix's transpose is one too), from stream i of the seed.
  parallel_for(draws, [&](int64_t i, int) {
    Gaussian normal(seed, uint64_t(i));
    FoldedLayer r{Tensor({Dh, D}), Tensor({Dh, D}), Tensor({Dh, D}), Tensor({Dh, D})};
    FoldedLayer s{Tensor(), Tensor(), Tensor({Dh, D}), Tensor({Dh, D})};
    for (Tensor* m : {&r.w_q, &r.w_k, &r.w_v, &r.w_o_t, &s.w_v, &s.w_o_t}) normal.fill(*m);
    const CompositionTriple t = score_heads(s, r, Dh);
    q[size_t(i)] = t.q, k[size_t(i)] = t.k, v[size_t(i)] = t.v;
  });
  return {summarise(q), summarise(k), summarise(v)};
}

CompositionScores composition_scores(const Model& model, const CompositionOptions& options) {
  const ModelConfig& c = model.config();
  if (c.n_layer < 2)
    throw Error(c.name + ": composition needs at least two layers (a head composes with heads of later layers)");
  if (options.baseline_draws < 2 || options.baseline_draws > kMaxDraws)
    throw Error("composition: baseline draws must be in 2.." + std::to_string(kMaxDraws) + ", got " +
                std::to_string(options.baseline_draws));
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  const int64_t L = c.n_layer, H = c.n_head;
  // Each layer folded and reduced to its factors on a thread of its own: only the factors of every
  // layer are held at once (a few MiB a layer).
  std::vector<LayerFactors> layers(static_cast<size_t>(L));
  parallel_for(L, [&](int64_t l, int) {
    const FoldedLayer f = circuits::fold_layer(model, int(l), options.fold_gains);
    layers[size_t(l)] = factor_layer(f, H, c.n_kv_head, c.d_head, /*sends=*/l + 1 < L, /*receives=*/l > 0);
  });

  CompositionScores out;
  out.model = c;
  out.options = options;
  out.q = Tensor({L, H, L, H});
  out.k = Tensor({L, H, L, H});
  out.v = Tensor({L, H, L, H});
  std::vector<std::pair<int64_t, int64_t>> pairs;  // (l1, l2), l1 < l2
  for (int64_t l2 = 1; l2 < L; ++l2)
    for (int64_t l1 = 0; l1 < l2; ++l1) pairs.emplace_back(l1, l2);
  struct Scratch {
    std::vector<float> C, ppt;
    std::vector<double> q, k, v;  // [H, H]
  };
  std::vector<Scratch> scratch(static_cast<size_t>(omp_get_max_threads()));
  parallel_for(int64_t(pairs.size()), [&](int64_t i, int thread) {
    const auto [l1, l2] = pairs[size_t(i)];
    Scratch& t = scratch[size_t(thread)];
    t.q.resize(size_t(H * H)), t.k.resize(t.q.size()), t.v.resize(t.q.size());
    score_layers(layers[size_t(l1)], layers[size_t(l2)], t.C, t.ppt, t.q.data(), t.k.data(), t.v.data());
    for (int64_t h1 = 0; h1 < H; ++h1)
      for (int64_t h2 = 0; h2 < H; ++h2) {
        const int64_t at = ((l1 * H + h1) * L + l2) * H + h2;  // [l1, h1, l2, h2]
        out.q.ptr()[at] = float(t.q[size_t(h1 * H + h2)]);
        out.k.ptr()[at] = float(t.k[size_t(h1 * H + h2)]);
        out.v.ptr()[at] = float(t.v[size_t(h1 * H + h2)]);
      }
  });
  out.seconds = seconds_since(start);
  const auto baseline_start = std::chrono::steady_clock::now();
  const std::vector<CompositionBaseline> random =
      composition_baselines(c.d_model, c.d_head, options.baseline_draws, options.seed);
  out.q_random = random[0], out.k_random = random[1], out.v_random = random[2];
  out.baseline_seconds = seconds_since(baseline_start);
  out.cpu_seconds = double(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  return out;
}

std::vector<CompositionPair> top_composition_pairs(const CompositionScores& scores, CompositionKind kind, int n) {
  if (n < 1) throw Error("composition: the number of top pairs must be at least 1, got " + std::to_string(n));
  const Tensor& t = scores.scores(kind);
  const int64_t L = scores.model.n_layer, H = scores.model.n_head;
  t.expect_shape({L, H, L, H}, "composition scores");
  std::vector<CompositionPair> all;
  for (int l1 = 0; l1 < L; ++l1)
    for (int h1 = 0; h1 < H; ++h1)
      for (int l2 = l1 + 1; l2 < L; ++l2)
        for (int h2 = 0; h2 < H; ++h2) all.push_back({{l1, h1}, {l2, h2}, t.ptr()[((l1 * H + h1) * L + l2) * H + h2]});
  const size_t keep = std::min(all.size(), size_t(n));
  // stable: equal scores stay in (sender, receiver) order
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.score > b.score; });
  all.resize(keep);
  return all;
}

}  // namespace headscope
