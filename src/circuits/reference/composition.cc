// headscope — the composition scores from their definitions, in double (reference/composition.h).
#include "circuits/reference/composition.h"

#include <cmath>
#include <vector>

#include "circuits/composition.h"

namespace headscope::circuits::reference {
namespace {

// A dense row-major [n, n] matrix in double.
struct Dense {
  int64_t n = 0;
  std::vector<double> a;
  explicit Dense(int64_t size) : n(size), a(size_t(size * size), 0.0) {}
  double& operator()(int64_t i, int64_t j) { return a[size_t(i * n + j)]; }
  double operator()(int64_t i, int64_t j) const { return a[size_t(i * n + j)]; }
};

// Aᵀ B for A, B [r, n] (row-major fp32): [n, n].
Dense at_b(const Tensor& A, const Tensor& B) {
  const int64_t r = A.dim(0), n = A.dim(1);
  Dense out(n);
  for (int64_t t = 0; t < r; ++t)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) out(i, j) += double(A.ptr()[t * n + i]) * B.ptr()[t * n + j];
  return out;
}

// A B for A [n, r], B [r, n] (row-major fp32): [n, n].
Dense a_b(const Tensor& A, const Tensor& B) {
  const int64_t n = A.dim(0), r = A.dim(1);
  Dense out(n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t t = 0; t < r; ++t)
      for (int64_t j = 0; j < n; ++j) out(i, j) += double(A.ptr()[i * r + t]) * B.ptr()[t * n + j];
  return out;
}

// ‖op(X) Y‖_F, op(X) = Xᵀ when `transpose_x`.
double product_norm(const Dense& X, bool transpose_x, const Dense& Y) {
  const int64_t n = X.n;
  double sq = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t t = 0; t < n; ++t) s += (transpose_x ? X(t, i) : X(i, t)) * Y(t, j);
      sq += s * s;
    }
  return std::sqrt(sq);
}

double norm(const Dense& X) {
  double sq = 0;
  for (double x : X.a) sq += x * x;
  return std::sqrt(sq);
}

double ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

}  // namespace

CompositionTriple composition_of(const HeadMatrices& sender, const HeadMatrices& receiver) {
  const Dense qk = at_b(receiver.w_q, receiver.w_k);   // W_QK^r = W_Qᵀ W_K
  const Dense ov_r = a_b(receiver.w_o, receiver.w_v);  // W_OV^r = W_O W_V
  const Dense ov_s = a_b(sender.w_o, sender.w_v);      // W_OV^s
  const double n_qk = norm(qk), n_ov_r = norm(ov_r), n_ov_s = norm(ov_s);
  return {ratio(product_norm(qk, true, ov_s), n_qk * n_ov_s),   // ‖W_QK^rᵀ W_OV^s‖
          ratio(product_norm(qk, false, ov_s), n_qk * n_ov_s),  // ‖W_QK^r W_OV^s‖
          ratio(product_norm(ov_r, false, ov_s), n_ov_r * n_ov_s)};
}

CompositionScores composition_scores(const Model& model, bool fold_gains) {
  const ModelConfig& c = model.config();
  const int64_t L = c.n_layer, H = c.n_head;
  std::vector<std::vector<HeadMatrices>> heads(static_cast<size_t>(L));
  for (int l = 0; l < L; ++l) {
    const FoldedLayer f = fold_layer(model, l, fold_gains);
    for (int h = 0; h < H; ++h) heads[size_t(l)].push_back(head_matrices(f, c, h));
  }
  CompositionScores out;
  out.model = c;
  out.q = Tensor({L, H, L, H});
  out.k = Tensor({L, H, L, H});
  out.v = Tensor({L, H, L, H});
  for (int64_t l1 = 0; l1 < L; ++l1)
    for (int64_t h1 = 0; h1 < H; ++h1)
      for (int64_t l2 = l1 + 1; l2 < L; ++l2)
        for (int64_t h2 = 0; h2 < H; ++h2) {
          const CompositionTriple t =
              reference::composition_of(heads[size_t(l1)][size_t(h1)], heads[size_t(l2)][size_t(h2)]);
          const int64_t at = ((l1 * H + h1) * L + l2) * H + h2;
          out.q.ptr()[at] = float(t.q), out.k.ptr()[at] = float(t.k), out.v.ptr()[at] = float(t.v);
        }
  return out;
}

}  // namespace headscope::circuits::reference
