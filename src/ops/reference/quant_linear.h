// headscope — slow twin of ops/quant_linear.h: the whole of W dequantised to fp32, then one
// sgemm (ops::linear), which is what loading every weight as fp32 used to do.
#pragma once
#include <cstdint>

#include "ops/quant_linear.h"

namespace headscope::ops::reference {

// y[T, W.rows()] = x[T, W.cols()] · dequantize(W)ᵀ + bias (bias may be null).
void quant_linear(const float* x, int64_t T, const QuantMatrix& W, const float* bias, float* y);

}  // namespace headscope::ops::reference
