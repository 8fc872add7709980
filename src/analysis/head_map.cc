// The head map (head_map.h): Jensen–Shannon distances between heads and their classical MDS.
#include "analysis/head_map.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "headscope/error.h"

namespace headscope::analysis {
namespace {

double plogp(double p) { return p > 0 ? p * std::log2(p) : 0.0; }

}  // namespace

HeadMapAccumulator::HeadMapAccumulator(int n_layer, int n_head) : n_layer_(n_layer), n_head_(n_head) {
  if (n_layer <= 0 || n_head <= 0) throw Error("head map: a model needs at least one layer and one head");
  const size_t N = size_t(n_layer) * size_t(n_head);
  jsd_sum_.assign(N * N, 0.0);
}

void HeadMapAccumulator::add(const Tensor& attention) {
  const int64_t N = int64_t(n_layer_) * n_head_;
  if (attention.rank() != 4 || attention.dim(0) != n_layer_ || attention.dim(1) != n_head_ ||
      attention.dim(2) != attention.dim(3))
    throw Error("head map: attention " + attention.shape_str() + " is not [" + std::to_string(n_layer_) + ", " +
                std::to_string(n_head_) + ", T, T]");
  const int64_t T = attention.dim(2);
  if (T == 0) return;
  // −H of every head's rows: Σ_k p log2 p, [N, T].
  std::vector<double> neg_entropy(size_t(N * T), 0.0);
  const float* a = attention.ptr();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N; ++i)
    for (int64_t q = 0; q < T; ++q) {
      const float* row = a + (i * T + q) * T;
      double s = 0;
      for (int64_t k = 0; k < T; ++k) s += plogp(row[k]);
      neg_entropy[size_t(i * T + q)] = s;
    }
    // JSD(p, q) = (Σ p log p + Σ q log q) / 2 − Σ m log m, m = (p + q) / 2; every pair i < j.
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t j = i + 1; j < N; ++j) {
      double sum = 0;
      for (int64_t q = 0; q < T; ++q) {
        const float* p = a + (i * T + q) * T;
        const float* r = a + (j * T + q) * T;
        double m_term = 0;
        for (int64_t k = 0; k < T; ++k) m_term += plogp(0.5 * (double(p[k]) + double(r[k])));
        const double jsd = 0.5 * (neg_entropy[size_t(i * T + q)] + neg_entropy[size_t(j * T + q)]) - m_term;
        sum += std::max(0.0, jsd);
      }
      jsd_sum_[size_t(i * N + j)] += sum;
    }
  }
  ++texts_;
  rows_ += T;
}

HeadMap HeadMapAccumulator::result() const {
  if (rows_ == 0) throw Error("head map: no text was added");
  const int N = n_layer_ * n_head_;
  HeadMap m;
  m.n_layer = n_layer_, m.n_head = n_head_, m.texts = texts_, m.rows = rows_;
  m.distance.assign(size_t(N) * N, 0.0);
  for (int i = 0; i < N; ++i)
    for (int j = i + 1; j < N; ++j) {
      const double d = std::sqrt(jsd_sum_[size_t(i) * N + j] / double(rows_));
      m.distance[size_t(i) * N + j] = m.distance[size_t(j) * N + i] = d;
    }
  classical_mds(m.distance, N, m.x, m.y, m.eigenvalues, m.explained);
  return m;
}

void symmetric_eigen(std::vector<double> a, int n, std::vector<double>& values, std::vector<double>& vectors) {
  if (n <= 0 || a.size() != size_t(n) * n) throw Error("symmetric_eigen: the matrix is not n x n");
  std::vector<double> v(size_t(n) * n, 0.0);
  for (int i = 0; i < n; ++i) v[size_t(i) * n + i] = 1.0;
  const auto at = [&](int i, int j) -> double& { return a[size_t(i) * n + j]; };
  double total = 0;
  for (double x : a) total += x * x;
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) off += at(i, j) * at(i, j);
    if (off <= 1e-22 * total || off == 0) break;
    for (int p = 0; p < n; ++p)
      for (int q = p + 1; q < n; ++q) {
        const double apq = at(p, q);
        if (std::abs(apq) < 1e-300) continue;
        // The rotation that zeroes a[p][q] (Golub & Van Loan, algorithm 8.4.1).
        const double theta = (at(q, q) - at(p, p)) / (2 * apq);
        const double t = (theta >= 0 ? 1.0 : -1.0) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int k = 0; k < n; ++k) {  // columns p and q
          const double akp = at(k, p), akq = at(k, q);
          at(k, p) = c * akp - s * akq;
          at(k, q) = s * akp + c * akq;
        }
        for (int k = 0; k < n; ++k) {  // rows p and q
          const double apk = at(p, k), aqk = at(q, k);
          at(p, k) = c * apk - s * aqk;
          at(q, k) = s * apk + c * aqk;
        }
        for (int k = 0; k < n; ++k) {
          const double vkp = v[size_t(k) * n + p], vkq = v[size_t(k) * n + q];
          v[size_t(k) * n + p] = c * vkp - s * vkq;
          v[size_t(k) * n + q] = s * vkp + c * vkq;
        }
      }
  }
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int i, int j) { return at(i, i) > at(j, j); });
  values.resize(size_t(n));
  vectors.assign(size_t(n) * n, 0.0);
  for (int c = 0; c < n; ++c) {
    const int src = order[size_t(c)];
    values[size_t(c)] = at(src, src);
    for (int k = 0; k < n; ++k) vectors[size_t(k) * n + c] = v[size_t(k) * n + src];
  }
}

void classical_mds(const std::vector<double>& d, int n, std::vector<double>& x, std::vector<double>& y,
                   std::vector<double>& eigenvalues, double& explained) {
  if (n <= 0 || d.size() != size_t(n) * n) throw Error("classical_mds: the distances are not n x n");
  // B = −½ J D∘D J: squared distances double-centred.
  std::vector<double> b(size_t(n) * n), row_mean(size_t(n), 0.0);
  double mean = 0;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      const double s = d[size_t(i) * n + j] * d[size_t(i) * n + j];
      b[size_t(i) * n + j] = s;
      row_mean[size_t(i)] += s / n;
      mean += s / (double(n) * n);
    }
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      b[size_t(i) * n + j] = -0.5 * (b[size_t(i) * n + j] - row_mean[size_t(i)] - row_mean[size_t(j)] + mean);
  std::vector<double> values, vectors;
  symmetric_eigen(std::move(b), n, values, vectors);
  double positive = 0;
  for (double v : values) positive += std::max(0.0, v);
  x.assign(size_t(n), 0.0);
  y.assign(size_t(n), 0.0);
  eigenvalues.assign(2, 0.0);
  for (int axis = 0; axis < 2 && axis < n; ++axis) {
    const double lambda = values[size_t(axis)];
    eigenvalues[size_t(axis)] = lambda;
    const double scale = std::sqrt(std::max(0.0, lambda));
    std::vector<double>& out = axis == 0 ? x : y;
    int largest = 0;
    for (int k = 0; k < n; ++k)
      if (std::abs(vectors[size_t(k) * n + axis]) > std::abs(vectors[size_t(largest) * n + axis])) largest = k;
    const double sign = vectors[size_t(largest) * n + axis] < 0 ? -1.0 : 1.0;
    for (int k = 0; k < n; ++k) out[size_t(k)] = sign * scale * vectors[size_t(k) * n + axis];
  }
  explained = positive > 0 ? (std::max(0.0, eigenvalues[0]) + std::max(0.0, eigenvalues[1])) / positive : 0.0;
}

}  // namespace headscope::analysis
