// headscope — y = x · Wᵀ for a few rows of x (a generation step: T = 1) with W kept as the model
// file stores it: each weight is read from the file once per call, not once per row of x.
//
// For each output row o: its blocks are dequantised into a row buffer of the thread (cols floats,
// a few KiB: it stays in L1), then every row of x is multiplied by it with 8-wide FMA (AVX2),
// 16-wide (AVX-512F) or a scalar loop (portable), one float accumulator vector per x row; the
// common types have block kernels that skip the buffer (variants: gemv_kernels.h). The panel
// path (ops/quant_linear.h) writes 64 rows to an L2 scratch and calls sgemm per panel, which at T = 1 is
// dominated by the scratch traffic and the call overhead. The sum runs in a different order from
// sgemm's, so the two agree to rounding, not bit for bit (tests/unit/quant_linear_test.cc states
// the bound against the slow twin). Output rows are split across OpenMP threads in contiguous
// chunks; a product too small to pay for waking a second thread runs on the calling one.
#pragma once
#include <cstdint>

#include "tensor/quant_matrix.h"

namespace headscope::ops {

// Rows of x up to which quant_linear takes the GEMV: one accumulator register per row beside the
// weight vectors fits AVX2's 16 registers, and a generation step has T = 1. Past a few rows sgemm
// reuses each dequantised panel across the rows; the crossover between 4 and 8 was not measured.
constexpr int64_t kGemvMaxRows = 4;

// Weights (rows · cols) below which a GEMV runs on one thread: ~1 M weights is ~0.3 ms of work on
// one core, the scale at which a thread that must first be woken (or is descheduled on a shared
// machine) costs more than it saves.
constexpr int64_t kGemvMinParallelWeights = int64_t(1) << 20;

// y[T, W.rows()] = x[T, W.cols()] · Wᵀ + bias (bias may be null), 1 ≤ T ≤ kGemvMaxRows, W stored.
void quant_gemv(const float* x, int64_t T, const QuantMatrix& W, const float* bias, float* y);

}  // namespace headscope::ops
