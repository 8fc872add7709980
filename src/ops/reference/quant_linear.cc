#include "ops/reference/quant_linear.h"

#include "ops/matmul.h"

namespace headscope::ops::reference {

void quant_linear(const float* x, int64_t T, const QuantMatrix& W, const float* bias, float* y) {
  const Tensor w = W.to_f32();
  linear(x, T, W.cols(), w.ptr(), bias, W.rows(), y);
}

}  // namespace headscope::ops::reference
