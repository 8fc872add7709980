// headscope — y = x · Wᵀ + b with W reordered once into the layout oneDNN's matmul chooses.
//
// A oneDNN matmul primitive with weights in `format_tag::any` lets the library pick its layout
// (plain [in, out] on AVX2 machines, blocked where it has kernels for that); W is reordered into it
// on first use and kept. On the default model's 24 linear layers at T = 16, one thread, this runs
// in ~7.5 ms against ~11.5 ms for dnnl_sgemm on the nn.Linear layout (weights out of cache in both).
// Primitives depend on the number of rows T, so they are created on first use for each T and
// cached (with the packed copy for the layout each one wants — in practice one layout per matrix). With several OpenMP
// threads, W is cut into one column slice per thread, each with its own primitive and packed copy.
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

  // y[T, out] = x[T, in] · Wᵀ + b. Thread-safe.
  void forward(const float* x, int64_t T, float* y) const;
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
