// headscope — y = x · Wᵀ + b with W reordered once into a blocked layout.
//
// The linear layer runs as oneDNN's 1×1 convolution (x [T, in] is a 1 × T NHWC image with `in`
// channels, W the [out, in, 1, 1] filter): its AVX2 kernel (jit_1x1:avx2) reads weights blocked
// 8 × 8 and needs no repacking per call, where oneDNN 2.6's matmul on AVX2 is a plain sgemm that
// repacks the weights every time. Measured on the default model's 24 linear layers: 5–15 % less
// time than the matmul primitive on one thread and 8–18 % on two (T = 16, 128, 512), and the
// matmul primitive in turn ~35 % less than dnnl_sgemm on the nn.Linear layout at T = 16.
// Primitives depend on T, so they are created on first use for each T and cached, with the packed
// copy shared between all T that want the same layout (in practice one per matrix).
// Short inputs (kPanelMinRows ≤ T ≤ kPanelMaxRows) go to ops::panel_linear instead, which streams the weights
// once per call from a second packed copy (ops/panel_linear.h); each packed copy is made on
// first use, so a layer only ever run on short inputs holds just that one.
// The slow twin is ops::reference::matmul (tests/unit/ops_test.cc compares them).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "headscope/tensor.h"

namespace headscope::ops {

class PackedLinear {
 public:
  PackedLinear();
  // W: [out, in] (nn.Linear layout), bias: [out] or empty. Takes both over (they are kept to
  // repack from, should another T ask for another layout).
  PackedLinear(Tensor W, Tensor bias);
  PackedLinear(PackedLinear&&) noexcept;
  PackedLinear& operator=(PackedLinear&&) noexcept;
  ~PackedLinear();

  // Which kernel runs: by T (automatic), or one of them (benchmarks and tests).
  enum class Kernel { automatic, blocked, panels };
  // For kPanelMinRows ≤ T ≤ kPanelMaxRows, automatic picks the panel kernel (where the build has
  // it). It computes rows in blocks of 16, so fewer rows waste its work: on the default model's
  // 24 layers (bench/linear_bench --layers 6) it is 15–25 % faster than the blocked kernel at
  // T = 12–16, slower at T ≤ 10 (where the blocked kernel is already bound by memory bandwidth)
  // and at T ≥ 17 (a second block of rows).
  static constexpr int64_t kPanelMinRows = 11, kPanelMaxRows = 16;

  // y[T, out] = x[T, in] · Wᵀ + b. Thread-safe.
  void forward(const float* x, int64_t T, float* y, Kernel kernel = Kernel::automatic) const;
  const Tensor& weights() const;  // W as given: [out, in]
  const Tensor& bias() const;     // [out] or empty
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }

 private:
  struct Impl;
  int64_t in_ = 0, out_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace headscope::ops
