// headscope — y = x · Wᵀ + b with W reordered once, at load time, into oneDNN's blocked layout.
//
// A plain sgemm packs the weight matrix on every call; with few tokens (T = 16) that packing
// costs more than the multiplication itself, and over a whole BERT forward it means reading and
// rewriting every weight once per call. A oneDNN matmul primitive with weights in `format_tag::any`
// lets the library choose its layout; we reorder W into it once and keep it. Primitives depend on
// the number of rows T, so they are created on first use for each T and cached (with the packed
// copy for the layout each one wants — in practice one layout per matrix). With several OpenMP
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
