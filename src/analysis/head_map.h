// headscope analysis — a map of all heads: every head of a model as a point, placed by how alike
// its attention is to every other head's over a corpus.
//
// As Clark et al. (2019, section 6) compare BERT's heads: two heads are compared query row by
// query row on the same texts with the Jensen–Shannon divergence of their attention rows,
//   JSD(p, q) = H((p + q) / 2) − (H(p) + H(q)) / 2   (bits, in [0, 1]),
// averaged over every row of every text; the distance of two heads is √(mean JSD), a metric
// (Endres & Schindelin 2003). The points are the classical multidimensional scaling of these
// distances (Torgerson): the two leading eigenvectors of B = −½ J D∘D J, scaled by the square roots
// of their eigenvalues, so that Euclidean distances on the map approximate the heads' distances as
// well as two dimensions can. `explained` says how well: the two eigenvalues' share of the positive
// eigenvalue mass.
//
// Shapes: attention [n_layer, n_head, T, T] per text (masked keys exactly 0, as captures hold
// them); head i = layer · n_head + head; distance [N, N] row-major, N = n_layer · n_head.
#pragma once
#include <cstdint>
#include <vector>

#include "headscope/analysis.h"
#include "headscope/tensor.h"

namespace headscope::analysis {

// HeadMap (the result) is public: headscope/analysis.h.

class HeadMapAccumulator {
 public:
  HeadMapAccumulator(int n_layer, int n_head);
  // One text's attention [n_layer, n_head, T, T]: every query row of every pair of heads.
  void add(const Tensor& attention);
  HeadMap result() const;

 private:
  int n_layer_ = 0, n_head_ = 0;
  int64_t texts_ = 0, rows_ = 0;
  std::vector<double> jsd_sum_;  // [N, N] upper triangle used
};

// Classical MDS of the symmetric distances d [n, n] into two dimensions (x, y), with the two
// leading eigenvalues of B and their share of the positive eigenvalue mass. The eigenvectors come
// from cyclic Jacobi rotations (symmetric_eigen); each axis's sign is fixed so that its largest
// coordinate in absolute value is positive.
void classical_mds(const std::vector<double>& d, int n, std::vector<double>& x, std::vector<double>& y,
                   std::vector<double>& eigenvalues, double& explained);

// All eigenvalues (descending) and eigenvectors (columns of `vectors`, [n, n] row-major) of the
// symmetric matrix a [n, n], by cyclic Jacobi rotations until the off-diagonal mass is below
// 1e-22 of the total. For the n ≤ a few thousand of a model's heads.
void symmetric_eigen(std::vector<double> a, int n, std::vector<double>& values, std::vector<double>& vectors);

}  // namespace headscope::analysis
